package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/store"
)

// The wallet routes' access rules:
//   - every operation the document marks with a security requirement needs
//     a valid API key, as Authorization: Bearer <key> or X-API-Key: <key>
//     (the Hathor headless wallet's clients send the latter); both may be
//     given if they hold the same key. Anything else is 401, before any
//     other check of the request;
//   - a key opens the wallets it is scoped to. A wallet that is not
//     configured, one the key is not scoped to, a missing task and another
//     wallet's task all get the same 404 (errNotFound), so a key learns
//     nothing about what it may not see.

// apiKeyContextKey is where requireAPIKey leaves the request's key.
const apiKeyContextKey = "httpapi.apikey"

// errNotFound is the one answer to every wallet or task a key may not see.
var errNotFound = &Error{Status: http.StatusNotFound, Message: "not found: no such wallet or task for this API key"}

// withAPIKeys returns the operations' middlewares, with requireAPIKey first
// on the secured ones. rules is shared by every Server: it is copied, not
// changed.
func (s *Server) withAPIKeys(rules specRules) map[string][]echo.MiddlewareFunc {
	out := make(map[string][]echo.MiddlewareFunc, len(rules.guards))
	for op, mws := range rules.guards {
		if rules.secured[op] {
			mws = append([]echo.MiddlewareFunc{s.requireAPIKey}, mws...)
		}
		out[op] = mws
	}
	return out
}

// requireAPIKey answers 401 unless the request carries a valid API key, and
// leaves the key in the context for walletFor.
func (s *Server) requireAPIKey(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token, problem := apiKeyToken(c.Request().Header)
		if problem != "" {
			return unauthorized(c, problem, token != "")
		}
		if s.store == nil {
			return errorf(http.StatusServiceUnavailable, "database unavailable")
		}
		ctx, cancel := s.dbContext(c.Request().Context())
		key, err := s.store.APIKeyLookup(ctx, token)
		cancel()
		switch {
		case errors.Is(err, store.ErrNotFound):
			return unauthorized(c, "invalid API key: unknown or revoked", true)
		case err != nil:
			return err
		}
		c.Set(apiKeyContextKey, key)
		return next(c)
	}
}

// unauthorized is the 401, with the WWW-Authenticate header RFC 9110 asks
// for (RFC 6750's invalid_token when a key was given).
func unauthorized(c echo.Context, message string, given bool) error {
	challenge := `Bearer realm="ledgerq"`
	if given {
		challenge += `, error="invalid_token"`
	}
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, challenge)
	return &Error{Status: http.StatusUnauthorized, Message: message}
}

// apiKeyToken returns the key a request carries, or why it carries none
// that can be used. The messages never quote the key.
func apiKeyToken(h http.Header) (token, problem string) {
	auth, xkey := h.Values(echo.HeaderAuthorization), h.Values("X-API-Key")
	if len(auth) > 1 || len(xkey) > 1 {
		return "", "more than one API key header: send one key, as Authorization: Bearer <key> or X-API-Key: <key>"
	}
	var bearer, other string
	if len(auth) == 1 {
		scheme, rest, _ := strings.Cut(strings.TrimSpace(auth[0]), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return "", "Authorization: want Bearer <key>"
		}
		bearer = strings.TrimSpace(rest)
	}
	if len(xkey) == 1 {
		other = strings.TrimSpace(xkey[0])
	}
	switch {
	case bearer != "" && other != "" && bearer != other:
		return bearer, "Authorization and X-API-Key hold different keys"
	case bearer != "":
		return bearer, ""
	case other != "":
		return other, ""
	}
	return "", "missing API key: send Authorization: Bearer <key> (or X-API-Key: <key>)"
}

// walletFor returns the configured wallet name if the request's key is
// scoped to it, else errNotFound.
func (s *Server) walletFor(c echo.Context, name, param string) (keystore.Wallet, error) {
	if problem := textProblem(name); problem != "" {
		return keystore.Wallet{}, errorf(http.StatusBadRequest, "%s: %s", param, problem)
	}
	key, _ := c.Get(apiKeyContextKey).(store.APIKey)
	if !key.Allows(name) || s.wallets == nil {
		return keystore.Wallet{}, errNotFound
	}
	w, ok := s.wallets.ByID(name)
	if !ok {
		return keystore.Wallet{}, errNotFound
	}
	return w, nil
}
