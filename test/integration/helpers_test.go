package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/audit"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

type batchJSON struct {
	ID        string     `json:"id"`
	ServiceID string     `json:"service_id"`
	Payload   string     `json:"payload"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
}

// signedBatchJSON returns a batch's id and its POST /v1/batches body.
func signedBatchJSON(t testing.TB, service string) (string, []byte) {
	t.Helper()
	id, payload := testfactory.SignedBatch(t)
	body, err := json.Marshal(batchJSON{ID: id, ServiceID: service, Payload: base64.StdEncoding.EncodeToString(payload)})
	require.NoError(t, err)
	return id, body
}

type httpResult struct {
	StatusCode int
	Body       string
}

// postJSON, post and getJSON send a request; key, when given, is sent as
// the API key.
func postJSON(t testing.TB, url string, body []byte, key ...string) httpResult {
	t.Helper()
	return post(t, url, "application/json", body, key...)
}

// post POSTs body as contentType and returns the answer.
func post(t testing.TB, url, contentType string, body []byte, key ...string) httpResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	return send(t, req, key)
}

func getJSON(t testing.TB, url string, key ...string) httpResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	return send(t, req, key)
}

func send(t testing.TB, req *http.Request, key []string) httpResult {
	t.Helper()
	if len(key) > 0 && key[0] != "" {
		req.Header.Set("Authorization", "Bearer "+key[0])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return readResult(t, resp)
}

// createKey creates an API key with scopes on the database at dbURL with
// `ledgerq keys create`, as an operator does, and returns it.
func createKey(t *testing.T, dbURL string, scopes ...string) string {
	t.Helper()
	args := []string{"keys", "create", "--name", t.Name()}
	for _, s := range scopes {
		args = append(args, "--scope", s)
	}
	p := testproc.Start(t, t.TempDir(), []string{"DATABASE_URL=" + dbURL}, args...)
	require.Equal(t, 0, p.Wait(t, time.Minute), "keys create: %s", p.Stderr)
	return strings.TrimSpace(p.Stdout.String())
}

func readResult(t testing.TB, resp *http.Response) httpResult {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return httpResult{StatusCode: resp.StatusCode, Body: string(b)}
}

// newKeystoreWallet writes a geth keystore file for a new key under
// dir/keystore (light scrypt) and a passphrase file for it under dir, and
// returns the key's address and both files.
func newKeystoreWallet(t testing.TB, dir, pass string) (addr ledger.Address, keystoreFile, passFile string) {
	t.Helper()
	addr, keystoreFile, err := keystore.NewKeystore(filepath.Join(dir, "keystore"), pass, keystore.LightScrypt)
	require.NoError(t, err)
	passFile = filepath.Join(dir, "passphrase")
	require.NoError(t, os.WriteFile(passFile, []byte(pass+"\n"), 0o600))
	return addr, keystoreFile, passFile
}

// auditWallet runs `ledgerq wallet audit --json` on the wallet at addr,
// whose chain is the node at nodeURL, from block 0: the repository's
// chain-side verdict, by the command an operator runs. An exception (exit
// status 3) or a failed audit fails t with what it printed.
func auditWallet(t *testing.T, dbURL, nodeURL string, addr common.Address) audit.Report {
	t.Helper()
	rep, failure := auditWalletReport(t, dbURL, nodeURL, addr)
	require.Empty(t, failure)
	return rep
}

// auditWalletReport is auditWallet that returns what fails instead of
// failing t: "" when the audit found no exception, else the command's exit
// and its output.
func auditWalletReport(t *testing.T, dbURL, nodeURL string, addr common.Address) (audit.Report, string) {
	t.Helper()
	cmd := exec.Command(testproc.Binary(t), "wallet", "audit", "--wallet", addr.Hex(), "--wallet-ledger-url", nodeURL, "--from-block", "0", "--json")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "DATABASE_URL=" + dbURL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var rep audit.Report
	if err := cmd.Run(); err != nil {
		return rep, fmt.Sprintf("ledgerq wallet audit of %s: %v:\n%s%s", addr.Hex(), err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return rep, fmt.Sprintf("ledgerq wallet audit of %s printed no report (%v):\n%s", addr.Hex(), err, stdout.String())
	}
	if !rep.OK() {
		return rep, fmt.Sprintf("ledgerq wallet audit of %s exited 0 with exceptions: %s", addr.Hex(), stdout.String())
	}
	t.Log(rep.Summary())
	return rep, ""
}
