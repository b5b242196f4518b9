package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
)

func TestAPI_OpenAPIJSONIsAValidOpenAPI3Document(t *testing.T) {
	t.Parallel()
	f := setup(t)
	resp := f.get("/openapi.json")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"), resp.Header.Get("Content-Type"))
	require.True(t, json.Valid([]byte(resp.Body)), "not JSON")

	doc, err := openapi3.NewLoader().LoadFromData([]byte(resp.Body))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."), "openapi: %q", doc.OpenAPI)
	require.NoError(t, doc.Validate(context.Background()))
	// Every operation has an id (the generated handlers are named after
	// them) and describes its answers.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			require.NotEmpty(t, op.OperationID, "%s %s", method, path)
			require.NotZero(t, op.Responses.Len(), "%s %s", method, path)
		}
	}
}

func TestAPI_QueryParametersTheOperationDoesNotDeclareAreRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id, payload := signedBatch(t)
	for _, tc := range []struct {
		method, path, message string
	}{
		{http.MethodGet, "/healthz?verbose=1", "unknown query parameter verbose"},
		{http.MethodGet, "/openapi.json?format=yaml", "unknown query parameter format"},
		{http.MethodGet, "/v1/batches/" + id + "?fields=id", "unknown query parameter fields"},
		{http.MethodPost, "/v1/batches?dry_run=true", "unknown query parameter dry_run"},
		{http.MethodGet, "/v1/batches?limit=2&limit=3", "query parameter limit: given more than once"},
		{http.MethodGet, "/v1/batches?status=valid&status=invalid", "query parameter status: given more than once"},
		{http.MethodGet, "/v1/batches?limit=1.5", "query parameter limit: must be a whole number from 1 to 1000"},
		{http.MethodGet, "/v1/batches?limit=1001", "query parameter limit: must be a whole number from 1 to 1000"},
		{http.MethodGet, "/v1/batches?status=", ""},
	} {
		var resp httpResult
		if tc.method == http.MethodPost {
			resp = f.post(tc.path, batchBody(t, id, "svc", payload, ""))
		} else {
			resp = f.get(tc.path)
		}
		if tc.message == "" {
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", tc.path, resp.Body)
			continue
		}
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", tc.path, resp.Body)
		require.JSONEq(t, `{"success":false,"message":"`+tc.message+`"}`, resp.Body, tc.path)
	}
	require.Equal(t, 0, f.count(), "nothing stored")
}

func TestAPI_ErrorBodyIsSuccessFalseAndAMessage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	resp := f.get("/v1/batches?limit=x")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, `{"success":false,"message":"query parameter limit: must be a whole number from 1 to 1000"}`+"\n", resp.Body)
}

func TestAPI_HealthzAndReadyz(t *testing.T) {
	t.Parallel()
	f := setup(t)
	resp := f.get("/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"success":true,"status":"up"}`, resp.Body)
	resp = f.get("/readyz")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"success":true,"status":"ready"}`, resp.Body)

	ready := readiness(func(context.Context) error { return errors.New("database is at migration 3, want 4") })
	api := httpapi.New(httpapi.DefaultConfig(), httpapi.Deps{Store: f.db.Store, Ready: ready, Clock: clock.NewFake(t0), Logger: testLogger(t)})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	notReady := (&apiFixture{t: t, url: srv.URL}).get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, notReady.StatusCode)
	require.JSONEq(t, `{"success":false,"message":"not ready: database is at migration 3, want 4"}`, notReady.Body)
}

type readiness func(context.Context) error

func (r readiness) Ready(ctx context.Context) error { return r(ctx) }

func TestAPI_MetricsCountRequestsByRoutePattern(t *testing.T) {
	t.Parallel()
	f := setup(t)
	require.Equal(t, http.StatusNotFound, f.get("/v1/batches/one").StatusCode)
	require.Equal(t, http.StatusNotFound, f.get("/v1/batches/two").StatusCode)
	require.Equal(t, http.StatusBadRequest, f.get("/v1/batches?colour=red").StatusCode)

	resp := f.get("/metrics")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"), resp.Header.Get("Content-Type"))
	require.Equal(t, `ledgerq_http_requests_total{code="404",method="GET",route="/v1/batches/:id"} 2`,
		metricLine(resp.Body, "ledgerq_http_requests_total", `route="/v1/batches/:id"`, `code="404"`), resp.Body)
	require.Equal(t, `ledgerq_http_requests_total{code="400",method="GET",route="/v1/batches"} 1`,
		metricLine(resp.Body, "ledgerq_http_requests_total", `route="/v1/batches"`, `code="400"`), resp.Body)
}

func TestAPI_MetricsIs404WithoutMetrics(t *testing.T) {
	t.Parallel()
	db := setup(t).db
	api := httpapi.New(httpapi.DefaultConfig(), httpapi.Deps{Store: db.Store, Clock: clock.NewFake(t0), Logger: testLogger(t)})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	resp := (&apiFixture{t: t, url: srv.URL, key: adminKey(t, db.Store)}).get("/metrics")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, `"success":false`)
}
