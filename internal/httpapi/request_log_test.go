package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testlog"
)

// The request log bounds what a client sends: a long request URI or method is
// cut, so a request's log line is small whatever the request.
func TestRequestLog_LongURIAndMethodAreCut(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	logs := &testlog.Recorder{}
	api := httpapi.New(httpapi.DefaultConfig(), httpapi.Deps{
		Store: db.Store, Clock: clock.NewFake(t0), Logger: slog.New(logs), Metrics: metrics.New(),
	})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	long := strings.Repeat("a", 64<<10)
	send(t, http.MethodGet, srv.URL+"/healthz?"+long, nil)
	send(t, "X"+strings.Repeat("Y", 4096), srv.URL+"/"+long, nil)

	records := logs.Records()
	require.NotEmpty(t, records)
	for _, r := range records {
		r.Attrs(func(a slog.Attr) bool {
			require.LessOrEqual(t, len(a.Value.String()), 1100, "attribute %s of %q: %.300s", a.Key, r.Message, a.Value.String())
			return true
		})
	}
}
