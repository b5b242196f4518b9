package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/metrics"
)

// Sawtooth's GET /batch_statuses?wait=N long-polls: its context must not end
// at RequestTimeout (it bounds each database call itself), while every other
// route's does.
func TestServer_RequestDeadlineSkipsLongPollRoutes(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.RequestTimeout = 300 * time.Millisecond
	s := New(cfg, Deps{Metrics: metrics.New()})
	deadlines := map[string]time.Duration{}
	record := func(c echo.Context) error {
		if d, ok := c.Request().Context().Deadline(); ok {
			deadlines[c.Path()] = time.Until(d)
		} else {
			deadlines[c.Path()] = -1
		}
		return c.NoContent(http.StatusNoContent)
	}
	s.echo.GET("/batch_statuses", record)
	s.echo.GET("/v1/other/:id", record)
	for _, path := range []string{"/batch_statuses?wait=30", "/v1/other/1"} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(t, http.StatusNoContent, rec.Code, path)
	}
	require.Equal(t, time.Duration(-1), deadlines["/batch_statuses"], "the long-poll route got a deadline")
	require.Positive(t, deadlines["/v1/other/:id"])
	require.LessOrEqual(t, deadlines["/v1/other/:id"], 300*time.Millisecond)
}
