package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
)

// Healthz answers GET /healthz: the process is up.
func (s *Server) Healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, apigen.Health{Success: true, Status: apigen.HealthStatusUp})
}

// Readyz answers GET /readyz: the database answers and is migrated. A
// chain none of whose nodes answers well is named in the answer
// (unavailable_chains) but does not make the process unready: the API
// still takes and answers tasks, which are sent once a node is back, and
// every process of a deployment reads the same providers, so taking this
// one out of service would serve no request better (docs/operations.md,
// "Chains and their nodes").
func (s *Server) Readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	if s.ready != nil {
		if err := s.ready.Ready(ctx); err != nil {
			return c.JSON(http.StatusServiceUnavailable, apigen.Error{Success: false, Message: "not ready: " + err.Error()})
		}
	}
	out := apigen.Health{Success: true, Status: apigen.HealthStatusReady}
	if down := s.unavailableChains(); len(down) > 0 {
		out.UnavailableChains = &down
	}
	return c.JSON(http.StatusOK, out)
}

// Metrics answers GET /metrics with the Prometheus registry, or 404 when the
// process runs without metrics.
func (s *Server) Metrics(c echo.Context) error {
	if s.promHandler == nil {
		return echo.ErrNotFound
	}
	s.promHandler.ServeHTTP(c.Response(), c.Request())
	return nil
}

// HeadHealthz answers HEAD /healthz as GET would, without the body (net/http
// drops the body of an answer to HEAD).
func (s *Server) HeadHealthz(c echo.Context) error { return s.Healthz(c) }

// HeadReadyz answers HEAD /readyz as GET would, without the body.
func (s *Server) HeadReadyz(c echo.Context) error { return s.Readyz(c) }
