package httpapi

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/keystore"
)

// The wallet routes' access rules (access.go has the whole model):
//   - every operation the document marks with a security requirement needs
//     a valid API key, as Authorization: Bearer <key> or X-API-Key: <key>
//     (the Hathor headless wallet's clients send the latter); both may be
//     given if they hold the same key. Anything else is 401, before any
//     other check of the request;
//   - a key opens the wallets it is scoped to. A wallet that is not
//     configured, one the key is not scoped to, a missing task and another
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

// walletFor returns the configured wallet name if the request's key is
// scoped to it, else errNotFound.
func (s *Server) walletFor(c echo.Context, name, param string) (keystore.Wallet, error) {
	if problem := textProblem(name); problem != "" {
		return keystore.Wallet{}, errorf(http.StatusBadRequest, "%s: %s", param, problem)
	}
	if !principalOf(c.Request().Context()).wallet(name) || s.wallets == nil {
		return keystore.Wallet{}, errNotFound
	}
	w, ok := s.wallets.ByID(name)
	if !ok {
		return keystore.Wallet{}, errNotFound
	}
	return w, nil
}
