package keystore_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	gethkeystore "github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ledgerq/ledgerq/internal/keystore"
)

// keystoreFixture is a keystore file written by geth's own code, with light
// scrypt parameters, and the key it holds.
type keystoreFixture struct {
	dir, path, passphrase string
	key                   *gethkeystore.Key
}

func newKeystoreFile(t *testing.T, passphrase string) keystoreFixture {
	t.Helper()
	dir := t.TempDir()
	_, path, err := keystore.NewKeystore(dir, passphrase, keystore.LightScrypt)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	key, err := gethkeystore.DecryptKey(data, passphrase)
	if err != nil {
		t.Fatal(err)
	}
	return keystoreFixture{dir: dir, path: path, passphrase: passphrase, key: key}
}

// load loads the fixture's file as the one wallet name on chain chainID,
// its passphrase from the environment vars.
func (f keystoreFixture) load(chainID int64, name string, vars map[string]string) (*keystore.Registry, error) {
	return keystore.LoadKeystores(keystore.KeystoreConfig{
		ChainID: chainID, Wallets: []keystore.KeystoreSpec{{Name: name, Path: f.path}}, LookupEnv: env(vars),
	})
}

// env is a fake environment for KeystoreConfig.LookupEnv.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKeystore_AWalletIsUnlockedFromItsKeystoreFileAndSignsForItsAddress(t *testing.T) {
	t.Parallel()
	ks := newKeystoreFile(t, "correct horse")
	reg, err := ks.load(1337, "main", map[string]string{"LEDGERQ_WALLET_PASSPHRASE_MAIN": "correct horse"})
	if err != nil {
		t.Fatal(err)
	}
	w, ok := reg.ByID("main")
	if !ok {
		t.Fatal("wallet main not in the registry")
	}
	if common.Address(w.Address()) != ks.key.Address || w.ChainID != 1337 {
		t.Fatalf("wallet %s on %d, want %s on 1337", w.Address().Hex(), w.ChainID, ks.key.Address.Hex())
	}
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(1337), Nonce: 0, Gas: 21000, GasFeeCap: big.NewInt(1), GasTipCap: big.NewInt(1)})
	signed, err := w.Signer.SignTx(t.Context(), tx, big.NewInt(1337))
	if err != nil {
		t.Fatal(err)
	}
	from, err := types.Sender(types.LatestSignerForChainID(big.NewInt(1337)), signed)
	if err != nil || from != ks.key.Address {
		t.Fatalf("signed by %s (%v), want %s", from.Hex(), err, ks.key.Address.Hex())
	}
}

func TestKeystore_AWrongPassphraseNamesTheWalletTheFileAndTheSourceButNotThePassphrase(t *testing.T) {
	t.Parallel()
	ks := newKeystoreFile(t, "right passphrase")
	_, err := ks.load(1, "hot-1", map[string]string{"LEDGERQ_WALLET_PASSPHRASE_HOT_1": "WRONG-passphrase-42"})
	if !errors.Is(err, keystore.ErrWrongPassphrase) {
		t.Fatalf("error %v, want ErrWrongPassphrase", err)
	}
	msg := err.Error()
	for _, want := range []string{`"hot-1"`, ks.path, "LEDGERQ_WALLET_PASSPHRASE_HOT_1", "wrong passphrase"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	for _, secret := range []string{"WRONG-passphrase-42", "right passphrase"} {
		if strings.Contains(msg, secret) {
			t.Errorf("error %q holds a passphrase", msg)
		}
	}
}

// A wallet's passphrase comes from the most specific source: its own file,
// its own variable, the file of every wallet, the variable of every wallet.
func TestKeystore_PassphraseComesFromTheMostSpecificSource(t *testing.T) {
	t.Parallel()
	ks := newKeystoreFile(t, "the one")
	dir := t.TempDir()
	own := writeFile(t, dir, "own", "the one\r\nsecond line ignored\n")
	all := writeFile(t, dir, "all", "the one\n")
	wrongFile := writeFile(t, dir, "wrong", "not it\n")
	for _, tc := range []struct {
		name  string
		files keystore.PassphraseFiles
		vars  map[string]string
		from  string // "" when the load must fail
	}{
		{"own file beats everything", keystore.PassphraseFiles{All: wrongFile, ByName: map[string]string{"w": own}},
			map[string]string{"LEDGERQ_WALLET_PASSPHRASE_W": "not it", "LEDGERQ_WALLET_PASSPHRASE": "not it"}, "file " + own},
		{"own variable beats the common file", keystore.PassphraseFiles{All: wrongFile},
			map[string]string{"LEDGERQ_WALLET_PASSPHRASE_W": "the one", "LEDGERQ_WALLET_PASSPHRASE": "not it"}, "variable LEDGERQ_WALLET_PASSPHRASE_W"},
		{"common file beats the common variable", keystore.PassphraseFiles{All: all, ByName: map[string]string{"other": wrongFile}},
			map[string]string{"LEDGERQ_WALLET_PASSPHRASE": "not it", "LEDGERQ_WALLET_PASSPHRASE_OTHER": "not it"}, "file " + all},
		{"common variable last", keystore.PassphraseFiles{}, map[string]string{"LEDGERQ_WALLET_PASSPHRASE": "the one"}, "variable LEDGERQ_WALLET_PASSPHRASE"},
		{"an empty variable is unset", keystore.PassphraseFiles{}, map[string]string{"LEDGERQ_WALLET_PASSPHRASE_W": "", "LEDGERQ_WALLET_PASSPHRASE": "the one"}, "variable LEDGERQ_WALLET_PASSPHRASE"},
		{"none", keystore.PassphraseFiles{}, map[string]string{}, ""},
	} {
		var logs bytes.Buffer
		_, err := keystore.LoadKeystores(keystore.KeystoreConfig{
			ChainID: 1, Wallets: []keystore.KeystoreSpec{{Name: "w", Path: ks.path}},
			PassphraseFiles: tc.files, LookupEnv: env(tc.vars),
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		switch {
		case tc.from == "" && err == nil:
			t.Errorf("%s: loaded without a passphrase", tc.name)
		case tc.from == "" && !strings.Contains(err.Error(), "no passphrase"):
			t.Errorf("%s: error %v", tc.name, err)
		case tc.from != "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.from != "" && !strings.Contains(logs.String(), tc.from):
			t.Errorf("%s: log %q does not say the passphrase came from %s", tc.name, logs.String(), tc.from)
		}
	}
}

// A file that is not an encrypted keystore (a private key saved in plain
// hex, say) is refused with a message that does not quote it.
func TestKeystore_AFileThatIsNotAKeystoreIsRefusedWithoutQuotingIt(t *testing.T) {
	t.Parallel()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	plain := hex.EncodeToString(crypto.FromECDSA(key))
	dir := t.TempDir()
	for name, content := range map[string]string{
		"hex":       plain,
		"0xhex":     "0x" + plain,
		"plainjson": `{"address":"00","privatekey":"` + plain + `","id":"x","version":3}`,
		"array":     `["` + plain + `"]`,
	} {
		path := writeFile(t, dir, name, content)
		_, err := keystore.OpenKeystore(path, "pass")
		if err == nil {
			t.Fatalf("%s: opened", name)
		}
		if strings.Contains(err.Error(), plain[:8]) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %q quotes the file or does not name it", name, err)
		}
	}
}

func TestKeystore_AFileWhoseKeyIsNotOfTheAddressItNamesIsRefused(t *testing.T) {
	t.Parallel()
	ks := newKeystoreFile(t, "p")
	data, err := os.ReadFile(ks.path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["address"] = strings.Repeat("ab", 20)
	forged, _ := json.Marshal(m)
	path := writeFile(t, t.TempDir(), "forged.json", string(forged))
	if _, err := keystore.OpenKeystore(path, "p"); err == nil || !strings.Contains(err.Error(), "not of the address") {
		t.Fatalf("error %v", err)
	}
}

// No private key is ever written to a log: the wallet is loaded with
// logging at debug, and neither the key (in hex or decimal) nor the
// passphrase appears in the log, in an error, or in any formatting of the
// package's exported values.
func TestKeystore_NeitherKeyNorPassphraseIsLoggedOrPrinted(t *testing.T) {
	t.Parallel()
	const passphrase = "s3cret-Passphrase-Never-Printed"
	ks := newKeystoreFile(t, passphrase)
	passFile := writeFile(t, t.TempDir(), "pass", passphrase+"\n")
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	specs := keystore.KeystoreSpecs{}
	if err := specs.Set("main=" + ks.path); err != nil {
		t.Fatal(err)
	}
	files := keystore.PassphraseFiles{}
	if err := files.Set("main=" + passFile); err != nil {
		t.Fatal(err)
	}
	cfg := keystore.KeystoreConfig{ChainID: 1337, Wallets: specs, PassphraseFiles: files, Logger: logger,
		LookupEnv: env(map[string]string{"LEDGERQ_WALLET_PASSPHRASE": passphrase})}
	reg, err := keystore.LoadKeystores(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A failed load logs and errs too.
	_, failErr := keystore.LoadKeystores(keystore.KeystoreConfig{ChainID: 1, Wallets: specs, Logger: logger,
		LookupEnv: env(map[string]string{"LEDGERQ_WALLET_PASSPHRASE": passphrase + "x"})})
	if failErr == nil {
		t.Fatal("a wrong passphrase loaded")
	}
	if !strings.Contains(logs.String(), `"msg":"wallet: loaded"`) {
		t.Fatalf("nothing logged at debug: %s", logs.String())
	}

	w, _ := reg.ByID("main")
	signer, err := keystore.OpenKeystore(ks.path, passphrase)
	if err != nil {
		t.Fatal(err)
	}
	dw, err := keystore.EnsureDevWallet(t.TempDir(), "dev")
	if err != nil {
		t.Fatal(err)
	}
	printed := logs.String() + failErr.Error()
	for _, v := range []any{reg, w, w.Signer, signer, *signer, specs, &specs, files, &files, cfg, dw, reg.All()} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d"} {
			printed += fmt.Sprintf(verb, v) + "\n"
		}
	}
	// The scalar from its 32 bytes: ecdsa.PrivateKey.D is deprecated.
	d := new(big.Int).SetBytes(crypto.FromECDSA(ks.key.PrivateKey))
	for name, secret := range map[string]string{
		"the passphrase":      passphrase,
		"the key in hex":      hex.EncodeToString(crypto.FromECDSA(ks.key.PrivateKey)),
		"the key in HEX":      strings.ToUpper(hex.EncodeToString(crypto.FromECDSA(ks.key.PrivateKey))),
		"the key in decimal":  d.String(),
		"the key's hex words": fmt.Sprintf("%x", d.Bits()[0]),
	} {
		if strings.Contains(printed, secret) {
			t.Errorf("%s appears in the logs or the printed values", name)
		}
	}
	// The dev wallet's passphrase file is not printed either.
	devPass, err := keystore.ReadPassphraseFile(dw.PassphraseFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(printed, devPass) {
		t.Error("the dev wallet's passphrase appears in the printed values")
	}
}

// setAll sets each value on the flag f, as the flag given once per value
// would.
func setAll(t *testing.T, f flag.Value, values ...string) {
	t.Helper()
	for _, v := range values {
		if err := f.Set(v); err != nil {
			t.Fatal(err)
		}
	}
}

func TestKeystoreSpecs_FlagTakesNameEqualsFileRepeatedOrCommaSeparated(t *testing.T) {
	t.Parallel()
	var specs keystore.KeystoreSpecs
	setAll(t, &specs, "a=/k/a.json, b.2=/k/b.json", "c-3=rel/c.json")
	want := keystore.KeystoreSpecs{{Name: "a", Path: "/k/a.json"}, {Name: "b.2", Path: "/k/b.json"}, {Name: "c-3", Path: "rel/c.json"}}
	if fmt.Sprint(specs) != fmt.Sprint(want) || specs.String() != "a=/k/a.json,b.2=/k/b.json,c-3=rel/c.json" {
		t.Fatalf("specs %v", specs)
	}
	for _, bad := range []string{"nofile", "=x.json", "a=", "-a=x.json", "a b=x.json", "file=x.json", "FILE=x.json"} {
		var s keystore.KeystoreSpecs
		if err := s.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPassphraseFiles_FlagTakesAFileForEveryWalletOrNameEqualsFile(t *testing.T) {
	t.Parallel()
	var p keystore.PassphraseFiles
	setAll(t, &p, "./odd=name", "hot=/run/secrets/hot, cold=/run/secrets/cold")
	if p.All != "./odd=name" || p.ByName["hot"] != "/run/secrets/hot" || p.ByName["cold"] != "/run/secrets/cold" || len(p.ByName) != 2 {
		t.Fatalf("%+v", p)
	}
	// Two files for every wallet would leave one unused.
	if err := p.Set("/run/secrets/all"); err == nil {
		t.Fatal("a second file for every wallet accepted")
	}
}

func TestKeystore_TwoWalletsWhosePassphraseVariablesCoincideAreRefused(t *testing.T) {
	t.Parallel()
	a, b := newKeystoreFile(t, "p"), newKeystoreFile(t, "p")
	_, err := keystore.LoadKeystores(keystore.KeystoreConfig{ChainID: 1,
		Wallets:   []keystore.KeystoreSpec{{Name: "a-b", Path: a.path}, {Name: "a_b", Path: b.path}},
		LookupEnv: env(map[string]string{"LEDGERQ_WALLET_PASSPHRASE": "p"})})
	if err == nil || !strings.Contains(err.Error(), "LEDGERQ_WALLET_PASSPHRASE_A_B") {
		t.Fatalf("error %v", err)
	}
}

// NewKeystore writes what geth writes: a file geth's keystore reads, named
// UTC--<time>--<address>, readable by its owner only, with the scrypt
// parameters asked for.
func TestNewKeystore_WritesAGethKeystoreFileOnlyItsOwnerCanRead(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	addr, path, err := keystore.NewKeystore(dir, "pw", keystore.LightScrypt)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^UTC--\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d+Z--` + hex.EncodeToString(addr[:]) + `$`).MatchString(filepath.Base(path)) {
		t.Errorf("file name %s", filepath.Base(path))
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if dst, err := os.Stat(dir); err != nil || dst.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v (%v), want 0700", dst.Mode().Perm(), err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Crypto struct {
			KDFParams struct{ N, P int } `json:"kdfparams"`
		} `json:"crypto"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if file.Crypto.KDFParams.N != keystore.LightScrypt.N || file.Crypto.KDFParams.P != keystore.LightScrypt.P {
		t.Errorf("scrypt n=%d p=%d, want %+v", file.Crypto.KDFParams.N, file.Crypto.KDFParams.P, keystore.LightScrypt)
	}
	key, err := gethkeystore.DecryptKey(data, "pw")
	if err != nil || key.Address != common.Address(addr) {
		t.Fatalf("geth reads %v (%v), want %s", key, err, addr.Hex())
	}
	if keystore.StandardScrypt.N != gethkeystore.StandardScryptN || keystore.StandardScrypt.N <= keystore.LightScrypt.N {
		t.Errorf("standard scrypt %+v", keystore.StandardScrypt)
	}
}

// ledgerq dev keeps its wallet between runs: the second call finds the
// files the first made.
func TestEnsureDevWallet_CreatesTheWalletOnceAndThenReusesIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := keystore.EnsureDevWallet(dir, "dev")
	if err != nil {
		t.Fatal(err)
	}
	second, err := keystore.EnsureDevWallet(dir, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || second.Created || first.Address != second.Address {
		t.Fatalf("first %+v, second %+v", first, second)
	}
	reg, err := keystore.LoadKeystores(keystore.KeystoreConfig{ChainID: 1337, Wallets: []keystore.KeystoreSpec{second.Spec},
		PassphraseFiles: keystore.PassphraseFiles{ByName: map[string]string{"dev": second.PassphraseFile}}, LookupEnv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := reg.ByID("dev"); w.Address() != first.Address {
		t.Fatalf("loaded %s, want %s", w.Address().Hex(), first.Address.Hex())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want the keystore and the passphrase file", len(entries))
	}
}

func TestParseKeystoreSpec_AWalletMayNameItsChain(t *testing.T) {
	s, err := keystore.ParseKeystoreSpec("hot@base=keys/hot.json")
	if err != nil || s.Name != "hot" || s.Chain != "base" || s.Path != "keys/hot.json" || s.String() != "hot@base=keys/hot.json" {
		t.Fatalf("ParseKeystoreSpec = %+v, %v", s, err)
	}
	if _, err := keystore.ParseKeystoreSpec("hot@=keys/hot.json"); err == nil {
		t.Fatal("an empty chain name was taken")
	}
}
