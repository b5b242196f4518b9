package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// The request log bounds what a client sends: a long request URI or method is
// cut, so a request's log line is small whatever the request.
func TestRequestLog_LongURIAndMethodAreCut(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	logs := &recordedLogs{}
	api := httpapi.New(httpapi.DefaultConfig(), httpapi.Deps{
		Store: db.Store, Clock: clock.NewFake(t0), Logger: slog.New(logs), Metrics: metrics.New(),
	})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	long := strings.Repeat("a", 64<<10)
	send(t, http.MethodGet, srv.URL+"/healthz?"+long, nil)
	send(t, "X"+strings.Repeat("Y", 4096), srv.URL+"/"+long, nil)

	records := logs.all()
	require.NotEmpty(t, records)
	for _, r := range records {
		r.Attrs(func(a slog.Attr) bool {
			require.LessOrEqual(t, len(a.Value.String()), 1100, "attribute %s of %q: %.300s", a.Key, r.Message, a.Value.String())
			return true
		})
	}
}

// recordedLogs is a slog.Handler that keeps every record, at every level.
type recordedLogs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordedLogs) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordedLogs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

func (h *recordedLogs) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordedLogs) WithGroup(string) slog.Handler      { return h }

func (h *recordedLogs) all() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.records)
}
