package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers/awskms"
	"github.com/ledgerq/ledgerq/internal/signers/awskms/localkmstest"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// TestMain stops the PostgreSQL the keys tests start (testdb).
func TestMain(m *testing.M) { testdb.Main(m) }

func keys(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = keysCommand(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// The key is printed once, alone on stdout; list shows it without the key;
// revoke makes it open nothing.
func TestKeys_CreatePrintsTheKeyOnceListShowsItAndRevokeEndsIt(t *testing.T) {
	db := testdb.New(t)
	out, notes, err := keys(t, "create", "--database-url", db.URL, "--name", "ci bot", "--wallet", "main", "--wallet", "hot,main", "--scope", "read,service:orders")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(out)
	if !regexp.MustCompile(`^lq_[A-Za-z0-9_-]{43}$`).MatchString(token) {
		t.Fatalf("stdout %q is not the key alone", out)
	}
	key, err := db.Store.APIKeyLookup(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	if store.JoinScopes(key.Scopes, ",") != "read,service:orders,wallet:hot,wallet:main" || key.Name != "ci bot" || !strings.Contains(notes, key.ID) {
		t.Fatalf("key %+v, notes %q", key, notes)
	}

	t.Setenv("DATABASE_URL", db.URL)
	list, _, err := keys(t, "list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list, key.ID) || !strings.Contains(list, "read,service:orders,wallet:hot,wallet:main") || strings.Contains(list, token[3:]) {
		t.Fatalf("list %q", list)
	}

	revoked, _, err := keys(t, "revoke", key.ID)
	if err != nil || !strings.Contains(revoked, "revoked key "+key.ID) {
		t.Fatalf("revoke: %q, %v", revoked, err)
	}
	if _, err := db.Store.APIKeyLookup(context.Background(), token); err == nil {
		t.Fatal("a revoked key still opens the API")
	}
	again, _, err := keys(t, "revoke", key.ID)
	if err != nil || !strings.Contains(again, "already revoked") {
		t.Fatalf("revoke again: %q, %v", again, err)
	}
	if list, _, _ := keys(t, "list"); strings.Contains(list, key.ID) {
		t.Fatalf("list holds a revoked key without --all: %q", list)
	}
	if list, _, _ := keys(t, "list", "--all"); !strings.Contains(list, key.ID) {
		t.Fatalf("list --all lacks the revoked key: %q", list)
	}
	if _, _, err := keys(t, "revoke", "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b"); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Fatalf("revoking a missing key: %v", err)
	}
}

// serve's LEDGERQ_WALLET (the old name of LEDGERQ_WALLET_KEYSTORE) lists
// keystores (NAME=FILE); keys create's
// --wallet is a wallet name and must not read it.
func TestKeys_CreateReadsOnlyTheDatabaseFromTheEnvironment(t *testing.T) {
	db := testdb.New(t)
	t.Setenv("DATABASE_URL", db.URL)
	t.Setenv("LEDGERQ_WALLET", "main=/keys/main.json")
	t.Setenv("LEDGERQ_NAME", "from the environment")
	out, _, err := keys(t, "create", "--json", "--name", "n", "--wallet", "main")
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		ID, Name, Key string
		Scopes        []string
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if created.Name != "n" || len(created.Scopes) != 1 || created.Scopes[0] != "wallet:main" {
		t.Fatalf("created %+v", created)
	}
	if _, err := db.Store.APIKeyLookup(context.Background(), created.Key); err != nil {
		t.Fatal(err)
	}
	// Neither a name nor wallets come from the environment.
	if _, _, err := keys(t, "create", "--wallet", "main"); err == nil || !strings.Contains(err.Error(), "--name is required") {
		t.Fatalf("without --name: %v", err)
	}
	if _, _, err := keys(t, "create", "--name", "n"); err == nil || !strings.Contains(err.Error(), "--scope (or --wallet) is required") {
		t.Fatalf("without --wallet: %v", err)
	}
}

func TestKeys_CreateRefusesAKeyWithoutNameOrWalletsOrWithABadWalletName(t *testing.T) {
	// Refused before the database is asked: its URL goes nowhere.
	for msg, args := range map[string][]string{
		"--name is required":                {"create", "--wallet", "main"},
		"--scope (or --wallet) is required": {"create", "--name", "n"},
		`--wallet "a b"`:                    {"create", "--name", "n", "--wallet", "a b"},
		`unexpected argument`:               {"create", "--name", "n", "--wallet", "main", "extra"},
		"--name must be at most":            {"create", "--name", "a\x00b", "--wallet", "main"},
	} {
		args = append(args[:1], append([]string{"--database-url", "postgres://unused.invalid/db"}, args[1:]...)...)
		if _, _, err := keys(t, args...); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want %q", args, err, msg)
		}
	}
}

// ledgerq wallet new writes a keystore the wallet lane loads, with the
// scrypt parameters asked for, and prints its address and file.
func TestWalletNew_WritesAKeystoreFileTheWalletLaneLoads(t *testing.T) {
	dir := t.TempDir()
	passFile := filepath.Join(dir, "pass")
	if err := os.WriteFile(passFile, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := walletCommand(context.Background(), []string{"new", "--keystore-dir", filepath.Join(dir, "ks"), "--light-kdf", "--passphrase-file", passFile, "--name", "hot"},
		&out, &errOut, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^address:  (0x[0-9a-fA-F]{40})\nkeystore: (.+)$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("stdout %q", out.String())
	}
	signer, err := keystore.OpenKeystore(m[2], "pw")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(signer.Address().Hex(), m[1]) {
		t.Fatalf("file holds %s, printed %s", signer.Address().Hex(), m[1])
	}
	data, _ := os.ReadFile(m[2])
	if !strings.Contains(string(data), `"n":4096`) {
		t.Errorf("--light-kdf: keystore %s", data)
	}
	if !strings.Contains(errOut.String(), "--wallet-keystore hot="+m[2]) || strings.Contains(out.String()+errOut.String(), "pw\n") {
		t.Errorf("notes %q", errOut.String())
	}

	// The passphrase never comes from the command line: without a file or
	// a variable there is none.
	err = walletCommand(context.Background(), []string{"new", "--keystore-dir", dir}, &out, &errOut, func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "no passphrase") {
		t.Fatalf("no passphrase: %v", err)
	}
	env := func(n string) (string, bool) { return "from-env", n == "LEDGERQ_WALLET_PASSPHRASE" }
	out.Reset()
	if err := walletCommand(context.Background(), []string{"new", "--keystore-dir", dir, "--light-kdf"}, &out, &errOut, env); err != nil {
		t.Fatal(err)
	}
	path := regexp.MustCompile(`keystore: (.+)`).FindStringSubmatch(out.String())[1]
	if _, err := keystore.OpenKeystore(path, "from-env"); err != nil {
		t.Fatal(err)
	}
}

// A scope is one of the model's, checked before anything is stored; a key
// needs at least one.
func TestKeys_CreateRefusesAScopeOutsideTheModel(t *testing.T) {
	db := testdb.New(t)
	for _, args := range [][]string{
		{"--name", "x"},
		{"--name", "x", "--scope", "superuser"},
		{"--name", "x", "--scope", "wallet:../x"},
		{"--name", "x", "--scope", "service:"},
		{"--name", "x", "--scope", "pool:read"},
	} {
		_, _, err := keys(t, append([]string{"create", "--database-url", db.URL}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "scope") {
			t.Errorf("%v: %v, want a scope error", args, err)
		}
	}
	if list, _, _ := keys(t, "list", "--database-url", db.URL, "--all"); strings.Count(list, "\n") != 1 {
		t.Fatalf("a refused key was stored: %q", list)
	}
}

// walletNew runs ledgerq wallet new with args, the environment variables
// of env (for the PIN and the passphrase) and none else.
func walletNew(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = walletCommand(context.Background(), append([]string{"new"}, args...), &out, &errOut, func(n string) (string, bool) {
		v, ok := env[n]
		return v, ok
	})
	return out.String(), errOut.String(), err
}

func TestWalletNew_AnUnknownBackendOrAFlagOfAnotherBackendIsRefusedNamingIt(t *testing.T) {
	for want, args := range map[string][]string{
		`--backend "vault": want keystore, pkcs11 or awskms`:                      {"--backend", "vault"},
		"--label is a flag of --backend pkcs11, not of --backend keystore":        {"--keystore-dir", t.TempDir(), "--label", "k"},
		"--keystore-dir is a flag of --backend keystore, not of --backend awskms": {"--backend", "awskms", "--kms-region", "eu-west-2", "--keystore-dir", "x"},
		"--kms-region is a flag of --backend awskms, not of --backend pkcs11":     {"--backend", "pkcs11", "--kms-region", "eu-west-2"},
		"--kms-region is required with --backend awskms":                          {"--backend", "awskms", "--alias", "a"},
	} {
		_, _, err := walletNew(t, nil, args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", args, err, want)
		}
	}
}

// kmsCredentials points the AWS SDK's default chain at local-kms's dummy
// credentials (the environment comes first in the chain) and at no file or
// instance role.
func kmsCredentials(t *testing.T) {
	t.Helper()
	creds, err := localkmstest.Credentials().Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// ledgerq wallet new --backend awskms creates a KMS key, with the AWS
// SDK's own credentials, and prints the declaration that names it; the key
// signs for the printed address.
func TestWalletNew_AWSKMSCreatesAKeyThatSignsForThePrintedAddressAndPrintsItsDeclaration(t *testing.T) {
	srv := localkmstest.Start(t)
	kmsCredentials(t)
	out, notes, err := walletNew(t, nil, "--backend", "awskms", "--kms-region", localkmstest.Region, "--kms-endpoint", srv.URL,
		"--alias", "hot", "--description", "ledgerq hot wallet", "--name", "hot")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^address:  (0x[0-9a-fA-F]{40})\nawskms:   ([0-9a-f-]{36})\nalias:    alias/hot\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("stdout %q", out)
	}
	addr, keyID := common.HexToAddress(m[1]), m[2]
	if addr.Hex() != m[1] {
		t.Errorf("the address %s is not in its checksummed form", m[1])
	}
	for _, want := range []string{
		"\n  ledgerq serve --wallet-kms-region " + localkmstest.Region + " --wallet-kms-endpoint " + srv.URL + " --wallet-signer name=hot,chain=CHAIN,backend=awskms,key=" + keyID + ",address=" + addr.Hex() + "\n",
		`-d '{"name":"hot","chain":"CHAIN","backend":"awskms","key":"` + keyID + `","address":"` + addr.Hex() + `"}'` + "\n",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("stderr lacks %q:\n%s", want, notes)
		}
	}
	for _, ref := range []string{keyID, "alias/hot"} {
		s, err := awskms.Open(context.Background(), awskms.Config{KeyID: ref, Region: localkmstest.Region, Endpoint: srv.URL})
		if err != nil {
			t.Fatalf("Open %s: %v", ref, err)
		}
		cid := big.NewInt(1337)
		signed, err := s.SignTx(context.Background(), types.NewTx(&types.DynamicFeeTx{ChainID: cid, Gas: 21000, To: &addr, GasFeeCap: big.NewInt(1e9)}), cid)
		if err != nil {
			t.Fatal(err)
		}
		if from, err := types.Sender(types.LatestSignerForChainID(cid), signed); err != nil || from != addr {
			t.Fatalf("%s: the transaction recovers to %s (%v), want the printed %s", ref, from.Hex(), err, addr.Hex())
		}
	}
}
