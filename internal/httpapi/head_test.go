package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/metrics"
)

func (f *apiFixture) head(path string) httpResult {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodHead, f.url+path, nil)
	require.NoError(f.t, err)
	f.authorize(req)
	return do(f.t, req)
}

func TestAPI_HeadOnTheProbesAnswersAsGetWithoutABody(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp := f.head(path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Empty(t, resp.Body, path)
		require.Equal(t, f.get(path).Header.Get("Content-Type"), resp.Header.Get("Content-Type"), path)
	}
	require.Equal(t, http.StatusBadRequest, f.head("/healthz?colour=blue").StatusCode)
}

type notReady struct{}

func (notReady) Ready(context.Context) error { return errors.New("database is at migration 3, want 4") }

func TestAPI_HeadReadyzIs503WhenNotReady(t *testing.T) {
	t.Parallel()
	api := httpapi.New(httpapi.DefaultConfig(), httpapi.Deps{Ready: notReady{}, Clock: clock.NewFake(t0), Logger: testLogger(t), Metrics: metrics.New()})
	f := &apiFixture{t: t, url: serve(t, api)}
	require.Equal(t, http.StatusServiceUnavailable, f.head("/readyz").StatusCode)
	require.Equal(t, http.StatusOK, f.head("/healthz").StatusCode)
}

// serve serves api and returns its base URL.
func serve(t *testing.T, api *httpapi.Server) string {
	t.Helper()
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}
