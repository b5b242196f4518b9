package httpapi

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/store"
)

// The wallet routes' access rules (access.go has the whole model):
//   - every operation the document marks with a security requirement needs
//     a valid API key, as Authorization: Bearer <key> or X-API-Key: <key>
//     (the Hathor headless wallet's clients send the latter); both may be
//     given if they hold the same key. Anything else is 401, before any
//     other check of the request;
//   - a key opens the wallets it is scoped to (wallet:NAME, admin); a key
//     with read reads every wallet and changes none (403). A wallet that is
//     not configured, one the key may not see, a missing task and another
//     wallet's task all get the same 404 (errNotFound), so a key learns
//     nothing about what it may not see.

// errNotFound is the one answer to every wallet or task a key may not see.
var errNotFound = &Error{Status: http.StatusNotFound, Message: "not found: no such wallet or task for this API key"}

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

// walletFor returns the configured wallet name for a route that changes
// it (a send, a cancel, a pause, a webhook) if the request's key is scoped
// to it; a key with read, which sees every wallet, gets 403 naming what the
// route needs; any other key errNotFound.
func (s *Server) walletFor(c echo.Context, name, param string) (keystore.Wallet, error) {
	p := principalOf(c.Request().Context())
	w, err := s.wallet(name, param, p.wallet(name) || p.reads())
	if err == nil && !p.wallet(name) {
		return keystore.Wallet{}, errorf(http.StatusForbidden, "forbidden: key %q has scopes %s; changing wallet %q needs wallet:%s or admin",
			p.name(), store.JoinScopes(p.key.Scopes, ","), name, name)
	}
	return w, err
}

// walletToRead returns the configured wallet name for a read route if the
// request's key is scoped to it or holds read (every lane's reads), else
// errNotFound.
func (s *Server) walletToRead(c echo.Context, name, param string) (keystore.Wallet, error) {
	p := principalOf(c.Request().Context())
	return s.wallet(name, param, p.wallet(name) || p.reads())
}

// wallet returns the configured wallet name if the key may see it.
func (s *Server) wallet(name, param string, sees bool) (keystore.Wallet, error) {
	if problem := textProblem(name); problem != "" {
		return keystore.Wallet{}, errorf(http.StatusBadRequest, "%s: %s", param, problem)
	}
	if !sees || s.wallets == nil {
		return keystore.Wallet{}, errNotFound
	}
	w, ok := s.wallets.ByID(name)
	if !ok {
		return keystore.Wallet{}, errNotFound
	}
	return w, nil
}
