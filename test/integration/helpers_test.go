package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/testfactory"
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

func postJSON(t testing.TB, url string, body []byte) httpResult {
	t.Helper()
	return post(t, url, "application/json", body)
}

// post POSTs body as contentType and returns the answer.
func post(t testing.TB, url, contentType string, body []byte) httpResult {
	t.Helper()
	resp, err := http.Post(url, contentType, bytes.NewReader(body))
	require.NoError(t, err)
	return readResult(t, resp)
}

func getJSON(t testing.TB, url string) httpResult {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	return readResult(t, resp)
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
