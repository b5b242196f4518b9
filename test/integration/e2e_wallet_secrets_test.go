//go:build cgo

package integration

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	gethkeystore "github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers/clef/cleftest"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// TestE2E_NoSecretOfAnySignerReachesALogAnErrorAMetricOrAnAnswer runs serve
// at --log-level debug with a wallet in every signer backend — a keystore
// file whose passphrase is in the environment, a SoftHSM2 key behind a PIN
// of its own, a local-kms key reached with an AWS secret key of its own,
// and clef — sends tasks through each, and provokes the failures whose
// errors are likeliest to carry a secret: a wallet added at run time on a
// process with a wrong PIN (422), one whose keystore file's passphrase is
// wrong (422), and local-kms stopped while tasks wait. Then it scans
// everything ledgerq wrote — both processes' stdout and stderr, every API
// answer (the wallets, their tasks, /metrics, /readyz), the console's pages
// and every row of every table of the ledgerq schema (the audit log and
// ledgerq.wallets among them) — for the PINs, the passphrases, the AWS
// secret, clef's passwords and the keystore files' private keys, and fails
// naming where one appeared.
func TestE2E_NoSecretOfAnySignerReachesALogAnErrorAMetricOrAnAnswer(t *testing.T) {
	s := setupSigners(t)
	secrets := map[string]string{
		"the PKCS#11 PIN":            "pin-Qx7dL2vR",
		"the wrong PKCS#11 PIN":      "pin-Wz4kN8sT",
		"the AWS secret access key":  "awsSecret-Hm3pV9yJc6",
		"the keystore passphrase":    "kspass-Tb5rG1wXe",
		"the wrong passphrase":       "kspass-Yc8uF3nQa",
		"clef's master password":     cleftest.MasterPassword,
		"clef's account password":    cleftest.AccountPassword,
		"the keystore file's key":    "",
		"the refused keystore's key": "",
	}
	s.tok.SetPIN(t, secrets["the PKCS#11 PIN"])
	s.awsSecretKey = secrets["the AWS secret access key"]

	s.passphrase = secrets["the keystore passphrase"]
	c := s.chainRun(t)
	// The keystore wallet's passphrase comes from the environment (no
	// createKey, which would name chainRun's passphrase file).
	secrets["the keystore file's key"] = privateKeyHex(t, s.keyfile, s.passphrase)
	// Wallets added at run time name files here; the one added is locked
	// by another passphrase than its variable's.
	runtimeDir := filepath.Join(c.dir, "runtime-keystore")
	_, refused, err := keystore.NewKeystore(runtimeDir, "kspass-the-right-one", keystore.LightScrypt)
	require.NoError(t, err)
	secrets["the refused keystore's key"] = privateKeyHex(t, refused, "kspass-the-right-one")
	c.args = append(c.args, "--log-level", "debug", "--wallet-keystore-dir", runtimeDir)
	c.env = append(c.env, "LEDGERQ_WALLET_PASSPHRASE_KEYFILE="+secrets["the keystore passphrase"],
		"LEDGERQ_WALLET_PASSPHRASE_KBAD="+secrets["the wrong passphrase"])
	c.token = createKey(t, c.db, "admin")

	var answers []written
	get := func(u string) string {
		t.Helper()
		res := getJSON(t, u, c.token)
		answers = append(answers, written{"GET " + strings.TrimPrefix(u, c.apis[0]) + " answered", res.Body})
		return res.Body
	}
	postAnswer := func(where, u, body string, want int) {
		t.Helper()
		res := postJSON(t, u, []byte(body), c.token)
		require.Equal(t, want, res.StatusCode, res.Body)
		t.Logf("%s %d: %s", where, res.StatusCode, res.Body)
		answers = append(answers, written{where, res.Body})
	}

	c.startServes(1)
	api := c.apis[0]
	c.postEach(3)

	// A process whose PIN file holds a wrong PIN, without the HSM's wallet
	// (it could not start): adding that wallet there is refused.
	wrongPIN := filepath.Join(c.dir, "wrong-pin")
	require.NoError(t, os.WriteFile(wrongPIN, []byte(secrets["the wrong PKCS#11 PIN"]+"\n"), 0o600))
	var argsB []string
	for j := 0; j < len(c.args); j++ {
		switch {
		case c.args[j] == "--wallet-signer" && strings.HasPrefix(c.args[j+1], "name=hsm,"):
			j++
		case c.args[j] == "--wallet-pkcs11-pin-file":
			argsB = append(argsB, c.args[j], wrongPIN)
			j++
		default:
			argsB = append(argsB, c.args[j])
		}
	}
	b, apiB := testproc.StartReady(t, c.dir, append([]string{"DATABASE_URL=" + c.db}, c.env...), argsB...)
	postAnswer("POST /v1/wallets with a wrong PIN answered", apiB+"/v1/wallets",
		fmt.Sprintf(`{"name":"hsm-again","backend":"pkcs11","key":%q}`, s.hsmLabel), http.StatusUnprocessableEntity)
	// A keystore file whose passphrase is wrong.
	postAnswer("POST /v1/wallets with a wrong passphrase answered", api+"/v1/wallets",
		fmt.Sprintf(`{"name":"kbad","backend":"keystore","key":%q}`, filepath.Base(refused)), http.StatusUnprocessableEntity)
	b.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, b.Wait(t, 30*time.Second))

	// local-kms stops while the KMS wallet has tasks: serve logs its
	// signer unavailable, then sends them.
	kmsWallet := slices.Index(c.names, "kms")
	unavailableBefore := strings.Count(c.serves[0].Stderr.String(), "run again soon")
	s.kms.Kill()
	c.postVia(kmsWallet, 0)
	eventually(t, 30*time.Second, "serve to log the KMS unavailable", func() bool {
		return strings.Count(c.serves[0].Stderr.String(), "run again soon") > unavailableBefore
	})
	s.kms.Restart(t)
	c.postEach(1)
	c.awaitEnded(2 * time.Minute)

	// Every answer a client or an operator reads.
	get(api + "/v1/wallets")
	for _, w := range c.names {
		get(api + "/v1/wallets/" + w)
		get(api + "/v1/wallets/" + w + "/tasks")
		for _, id := range c.ids[slices.Index(c.names, w)] {
			get(api + "/v1/wallets/" + w + "/tasks/" + id)
		}
	}
	metrics := get(api + "/metrics")
	require.Contains(t, metrics, "awskms", "the metrics name the backends")
	get(api + "/readyz")
	answers = append(answers, consolePages(t, api, c.token, c.names, c.ids)...)
	c.stopServes()

	var scanned []written
	for i, p := range append(slices.Clone(c.serves), b) {
		scanned = append(scanned, written{fmt.Sprintf("serve process %d's stdout", i), p.Stdout.String()},
			written{fmt.Sprintf("serve process %d's stderr", i), p.Stderr.String()})
	}
	require.Contains(t, c.serves[0].Stderr.String(), `"level":"DEBUG"`, "serve logged at debug")
	scanned = append(scanned, answers...)
	scanned = append(scanned, databaseRows(t, c.db)...)
	leaks := findSecrets(secrets, scanned)
	require.Empty(t, leaks, "secrets in what ledgerq wrote")
	t.Logf("scanned %d outputs (%d bytes) for %d secrets: none found", len(scanned), totalLen(scanned), len(secrets))
}

// written is something ledgerq wrote and where.
type written struct{ where, text string }

func totalLen(ws []written) int {
	n := 0
	for _, w := range ws {
		n += len(w.text)
	}
	return n
}

// findSecrets lists, for each secret found in ws, what it is and where,
// with the text around it (the secret itself masked).
func findSecrets(secrets map[string]string, ws []written) []string {
	var out []string
	for what, secret := range secrets {
		if secret == "" {
			continue
		}
		forms := []string{secret}
		if hexKey := strings.TrimPrefix(secret, "0x"); len(hexKey) == 64 {
			forms = []string{hexKey, strings.ToUpper(hexKey)}
		}
		for _, w := range ws {
			for _, form := range forms {
				if i := strings.Index(w.text, form); i >= 0 {
					around := w.text[max(0, i-80):min(len(w.text), i+len(form)+80)]
					out = append(out, fmt.Sprintf("%s appears in %s: …%s…", what, w.where, strings.ReplaceAll(around, form, "<"+what+">")))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// privateKeyHex decrypts the keystore file with pass and returns its
// private key in hex.
func privateKeyHex(t *testing.T, file, pass string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	key, err := gethkeystore.DecryptKey(raw, pass)
	require.NoError(t, err)
	return hex.EncodeToString(crypto.FromECDSA(key.PrivateKey))
}

// databaseRows is every row of every table of the ledgerq schema, as JSON.
func databaseRows(t *testing.T, db string) []written {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenPool(ctxT(t, 10*time.Second), db, 0)
	require.NoError(t, err)
	defer st.Close()
	rows, err := st.Conns().Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'ledgerq' AND table_type = 'BASE TABLE' ORDER BY 1`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, tables, "audit_log")
	require.Contains(t, tables, "wallets")
	var out []written
	for _, table := range tables {
		var text string
		require.NoError(t, st.Conns().QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(string_agg(row_to_json(t)::text, E'\n'), '') FROM ledgerq.%q t`, table)).Scan(&text))
		out = append(out, written{"table ledgerq." + table, text})
	}
	return out
}

// consolePages logs in to the console with the admin key, as a browser's
// form does, and returns its pages: the overview, the wallets, each
// wallet's page and its first task's, the chains and the audit.
func consolePages(t *testing.T, api, key string, wallets []string, ids [][]string) []written {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	page := func(u string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, api+u, nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "text/html")
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "console %s: %s", u, b)
		return string(b)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page("/ui/login"))
	require.NotNil(t, csrf, "the login form has its token")
	resp, err := client.PostForm(api+"/ui/login", url.Values{"csrf": {csrf[1]}, "key": {key}, "next": {"/ui/"}})
	require.NoError(t, err)
	overview, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the login: %s", overview)
	out := []written{{"the console's overview", string(overview)}}
	paths := []string{"/ui/wallets", "/ui/chains", "/ui/audit"}
	for i, w := range wallets {
		paths = append(paths, "/ui/wallets/"+w)
		if len(ids[i]) > 0 {
			paths = append(paths, "/ui/wallets/"+w+"/tasks/"+ids[i][0])
		}
	}
	for _, p := range paths {
		out = append(out, written{"the console's " + p, page(p)})
	}
	return out
}
