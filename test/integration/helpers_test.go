package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
)

// testLogger logs through t, at warn level and above.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

var testSigner = func() *sawtooth.Signer {
	s, err := sawtooth.GenerateSigner()
	if err != nil {
		panic(err)
	}
	return s
}()

// signedBatch returns a real signed Sawtooth batch: its id and payload.
func signedBatch(t testing.TB) (string, []byte) {
	t.Helper()
	id, payload, err := testSigner.NewBatch([]byte("payload"))
	require.NoError(t, err)
	return id, payload
}

type batchJSON struct {
	ID        string     `json:"id"`
	ServiceID string     `json:"service_id"`
	Payload   string     `json:"payload"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
}

// signedBatchJSON returns a batch's id and its POST /v1/batches body.
func signedBatchJSON(t testing.TB, service string) (string, []byte) {
	t.Helper()
	id, payload := signedBatch(t)
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
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return httpResult{StatusCode: resp.StatusCode, Body: string(b)}
}

func getJSON(t testing.TB, url string) httpResult {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return httpResult{StatusCode: resp.StatusCode, Body: string(b)}
}
