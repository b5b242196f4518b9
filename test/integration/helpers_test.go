package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
