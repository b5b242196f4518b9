package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// t0 is the fake clock's start.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type apiFixture struct {
	t       *testing.T
	db      *testdb.DB
	url     string
	metrics *metrics.Metrics
	// key, when set, is sent with every request that carries no key of its
	// own: an admin key, so that tests of a lane's rules pass its access
	// checks (access_test.go tests those).
	key string
}

// keyWith stores a key named test with scopes in st and returns its token.
func keyWith(t testing.TB, st *store.Store, scopes ...store.Scope) string {
	t.Helper()
	_, token, err := st.APIKeyCreate(context.Background(), store.APIKeyCreateParams{Now: t0, Name: "test", Scopes: scopes})
	require.NoError(t, err)
	return token
}

// adminKey stores an admin API key in st and returns its token.
func adminKey(t testing.TB, st *store.Store) string {
	t.Helper()
	return keyWith(t, st, store.ScopeAdmin)
}

// authorize adds the fixture's key to req unless it carries one.
func (f *apiFixture) authorize(req *http.Request) {
	if f.key != "" && req.Header.Get("Authorization") == "" && req.Header.Get("X-API-Key") == "" {
		req.Header.Set("Authorization", "Bearer "+f.key)
	}
}

// setup serves the API over a fresh database, with small limits the tests
// can reach (5 batches per request, 4096-byte payloads) and metrics on.
func setup(t *testing.T, mutate ...func(*httpapi.Config)) *apiFixture {
	t.Helper()
	db := testdb.New(t)
	small := func(cfg *httpapi.Config) {
		cfg.MaxBatchesPerRequest = 5
		cfg.MaxPayloadBytes = 4096
	}
	return serveOn(t, db, db.Store, append([]func(*httpapi.Config){small}, mutate...)...)
}

func (f *apiFixture) count() int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	require.NoError(f.t, f.db.Store.Conns().QueryRow(ctx, `SELECT count(*) FROM ledgerq.batches`).Scan(&n))
	return n
}

type httpResult struct {
	StatusCode int
	Header     http.Header
	Body       string
}

// post and get send a request and check that the document the server
// serves describes the answer: its status for that operation, and its body
// against that status's schema. So every answer a test sees is one the
// document promises.
func (f *apiFixture) post(path string, body []byte) httpResult {
	f.t.Helper()
	return do(f.t, f.postRequest(path, body))
}

func (f *apiFixture) get(path string) httpResult {
	f.t.Helper()
	return do(f.t, f.getRequest(path))
}

// getRequest and postRequest are the authorized requests get and post send.
func (f *apiFixture) getRequest(path string) *http.Request {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.url+path, nil)
	require.NoError(f.t, err)
	f.authorize(req)
	return req
}

func (f *apiFixture) postRequest(path string, body []byte) *http.Request {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+path, bytes.NewReader(body))
	require.NoError(f.t, err)
	req.Header.Set("Content-Type", "application/json")
	f.authorize(req)
	return req
}

// postNewBatch posts a new signed batch of service svc and requires a 201;
// it returns the batch's id and payload and the body posted.
func (f *apiFixture) postNewBatch() (id string, payload, body []byte) {
	f.t.Helper()
	id, payload = signedBatch(f.t)
	body = batchBody(f.t, id, "svc", payload, "")
	require.Equal(f.t, http.StatusCreated, f.post("/v1/batches", body).StatusCode)
	return id, payload, body
}

// requireGets400 requires the GET of each path to answer 400 with its
// message in the body.
func (f *apiFixture) requireGets400(messages map[string]string) {
	f.t.Helper()
	for path, msg := range messages {
		resp := f.get(path)
		require.Equal(f.t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, resp.Body)
		require.Contains(f.t, resp.Body, msg, path)
	}
}

func do(t *testing.T, req *http.Request) httpResult {
	t.Helper()
	resp, body := roundTrip(t, req)
	requireDescribed(t, req, resp, body)
	return httpResult{StatusCode: resp.StatusCode, Header: resp.Header, Body: string(body)}
}

// roundTrip sends req and reads its answer's body whole.
func roundTrip(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// specRouter finds operations in the embedded document (the one GET
// /openapi.json serves).
var specRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := apigen.GetSpec()
	if err != nil {
		return nil, err
	}
	return legacy.NewRouter(doc)
})

func requireDescribed(t *testing.T, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	router, err := specRouter()
	require.NoError(t, err)
	route, pathParams, err := router.FindRoute(req)
	require.NoError(t, err, "%s %s is not in the document", req.Method, req.URL.Path)
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: pathParams, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	})
	require.NoError(t, err, "%s %s answered %d %s, which the document does not describe", req.Method, req.URL, resp.StatusCode, body)
}

// testLogger logs through tb, at warn level and above.
func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(string(bytes.TrimRight(p, "\n")))
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

func batchBody(t *testing.T, id, service string, payload []byte, extra string) []byte {
	t.Helper()
	return []byte(fmt.Sprintf(`{"id":%q,"service_id":%q,"payload":%q%s}`, id, service, base64.StdEncoding.EncodeToString(payload), extra))
}

// metricLine returns the line of the Prometheus text that holds name with
// every one of labels, or "".
func metricLine(text, name string, labels ...string) string {
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(line, l)
		}
		if all {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
