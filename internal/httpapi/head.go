package httpapi

import "github.com/labstack/echo/v4"

// HeadHealthz answers HEAD /healthz as GET would, without the body (net/http
// drops the body of an answer to HEAD).
func (s *Server) HeadHealthz(c echo.Context) error { return s.Healthz(c) }

// HeadReadyz answers HEAD /readyz as GET would, without the body.
func (s *Server) HeadReadyz(c echo.Context) error { return s.Readyz(c) }
