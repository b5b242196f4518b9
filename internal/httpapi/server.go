// Package httpapi is ledgerq's HTTP API (echo). Errors are JSON,
// {"success":false,"message":…}, with the status DESIGN.md §4 lists; bodies are
// size-limited and unknown fields are refused.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Config configures the API.
type Config struct {
	// MaxBodyBytes limits request bodies (413 beyond it).
	MaxBodyBytes int64
	// MaxBatchesPerRequest limits the array of POST /v1/batches.
	MaxBatchesPerRequest int
	// MaxPayloadBytes limits one batch's decoded payload.
	MaxPayloadBytes int
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{MaxBodyBytes: 8 << 20, MaxBatchesPerRequest: 100, MaxPayloadBytes: 1 << 20}
}

// Readiness reports whether the database is reachable and migrated.
type Readiness interface {
	Ready(ctx context.Context) error
}

// Deps is what the API is built with besides its configuration.
type Deps struct {
	Store *store.Store
	// Ready answers /readyz; nil means always ready.
	Ready   Readiness
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	store   *store.Store
	ready   Readiness
	clock   clock.Clock
	logger  *slog.Logger
	metrics *metrics.Metrics
	echo    *echo.Echo
}

// New builds the API's handler.
func New(cfg Config, deps Deps) *Server {
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, store: deps.Store, ready: deps.Ready, clock: deps.Clock, logger: logger, metrics: deps.Metrics}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true, LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
		logger.Error("httpapi: panic", "error", err, "stack", string(stack))
		return err
	}}))
	e.Use(s.observe)
	e.Use(middleware.BodyLimit(fmt.Sprintf("%dB", cfg.MaxBodyBytes)))
	e.Use(middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogURI: true, LogMethod: true, LogLatency: true, LogError: true, HandleError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelDebug
			if v.Status >= 500 {
				level = slog.LevelWarn
			}
			attrs := []any{"method", v.Method, "uri", v.URI, "status", v.Status, "latency", v.Latency}
			if v.Error != nil {
				attrs = append(attrs, "error", v.Error)
			}
			logger.Log(c.Request().Context(), level, "httpapi: request", attrs...)
			return nil
		},
	}))

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if reg := s.metrics.Registry(); reg != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	}
	e.POST("/v1/batches", s.postBatches)
	e.GET("/v1/batches", s.listBatches)
	e.GET("/v1/batches/:id", s.getBatch)
	s.echo = e
	return s
}

// Handler returns the http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Error is an API error with a status and a message for the client.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

type errorBody struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, msg := http.StatusInternalServerError, "internal error"
	var apiErr *Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &apiErr):
		status, msg = apiErr.Status, apiErr.Message
	case errors.As(err, &he):
		status = he.Code
		msg = strings.ToLower(http.StatusText(status))
		if m, ok := he.Message.(string); ok && m != "" {
			msg = m
		}
		if status == http.StatusRequestEntityTooLarge {
			msg = fmt.Sprintf("request body is larger than %d bytes", s.cfg.MaxBodyBytes)
		}
	case store.IsUnavailable(err):
		status, msg = http.StatusServiceUnavailable, "database unavailable"
		s.logger.Warn("httpapi: database unavailable", "error", err, "uri", c.Request().RequestURI)
	default:
		s.logger.Error("httpapi: request failed", "error", err, "uri", c.Request().RequestURI)
	}
	if err := c.JSON(status, errorBody{Success: false, Message: msg}); err != nil {
		s.logger.Debug("httpapi: writing error response", "error", err)
	}
}

// decodeJSON decodes the body strictly: unknown fields and trailing data are
// refused, and a body over the limit is 413.
func decodeJSON(c echo.Context, v any) error {
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errorf(http.StatusBadRequest, "request body must hold one JSON value")
	}
	return nil
}

func jsonError(err error) error {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return errorf(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", maxErr.Limit)
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, "request body is empty")
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "malformed JSON: %v", err)
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return errorf(http.StatusBadRequest, "field %s: must be %s, got %s", field, jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for unknown fields.
		return errorf(http.StatusBadRequest, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return errorf(http.StatusBadRequest, "invalid JSON body: %v", err)
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "a number"
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"success": true, "status": "up"})
}

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	if s.ready == nil {
		return c.JSON(http.StatusOK, map[string]any{"success": true, "status": "ready"})
	}
	if err := s.ready.Ready(ctx); err != nil {
		return c.JSON(http.StatusServiceUnavailable, errorBody{Success: false, Message: "not ready: " + err.Error()})
	}
	return c.JSON(http.StatusOK, map[string]any{"success": true, "status": "ready"})
}

// observe counts every request by route pattern and status code.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		began := time.Now()
		err := next(c)
		if err != nil {
			// Let the error handler write the response now, so its status is
			// the one counted.
			c.Error(err)
			err = nil
		}
		s.metrics.HTTPRequest(c.Path(), c.Request().Method, c.Response().Status, time.Since(began))
		return err
	}
}
