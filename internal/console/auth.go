package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/store"
)

// The cookies: the session's token, and before a session (the login form,
// and an open console) a random value that the CSRF token of a form is
// derived from.
const (
	sessionCookie = "ledgerq_session"
	formCookie    = "ledgerq_form"
	csrfField     = "csrf"
)

// need is what a route needs of the session's key: the API's scopes
// (store.APIKey.Has), read for the pages, admin for the actions, as
// httpapi's access model says.
type need struct {
	scope store.Scope
	what  string
}

var (
	needRead  = need{store.ScopeRead, "read (or admin) to open the console's pages"}
	needAdmin = need{store.ScopeAdmin, "admin for the console's actions"}
)

// session is who a console request acts as.
type session struct {
	key       store.APIKey
	anonymous bool
	// token is the secret the session's CSRF tokens derive from: the
	// session cookie's value, or the form cookie's when anonymous.
	token string
}

func (s session) who() string {
	if s.anonymous {
		return "anonymous (--api-insecure-open)"
	}
	return s.key.Name
}

func (s session) may(n need) bool { return s.anonymous || s.key.Has(n.scope) }

// csrf is the token the session's forms carry.
func (s session) csrf() string { return csrfToken(s.token) }

// audit is the session's audit entry: an anonymous session's key is the
// zero key, which the store records as anonymous.
func (s session) audit() *store.AuditEntry {
	return &store.AuditEntry{KeyID: s.key.ID, KeyName: s.key.Name, Via: "console"}
}

const sessionKey = "console.session"

func sessionOf(ec echo.Context) (session, bool) {
	s, ok := ec.Get(sessionKey).(session)
	return s, ok
}

// csrfToken derives a form's token from a secret the browser holds in an
// HttpOnly cookie (the session's token, or the form cookie's value): a
// page of another site can neither read the cookie nor compute the token.
// Derived, not stored, so every process of a deployment checks it alike.
func csrfToken(secret string) string {
	h := sha256.Sum256([]byte("ledgerq console csrf\x00" + secret))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// checkForm refuses a POST whose CSRF token does not match secret, or
// that a browser says came from another origin.
func checkForm(ec echo.Context, secret string) bool {
	r := ec.Request()
	if origin := r.Header.Get("Origin"); origin != "" && origin != "null" {
		// The host the browser used: the request's, or the one a proxy that
		// rewrites Host says it forwarded (a client forging it gains nothing:
		// the token below is still needed).
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host && u.Host != r.Header.Get("X-Forwarded-Host") {
			return false
		}
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" {
		return false
	}
	got := ec.FormValue(csrfField)
	return secret != "" && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(csrfToken(secret))) == 1
}

// secure reports whether cookies get the Secure attribute: the request
// came over TLS (to this server, or to a proxy that says so).
func secure(ec echo.Context) bool { return ec.IsTLS() || ec.Scheme() == "https" }

func (c *Console) setCookie(ec echo.Context, name, value string, maxAge int) {
	ec.SetCookie(&http.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(ec)})
}

// formSecret returns the form cookie's value, setting a new one when the
// browser has none.
func (c *Console) formSecret(ec echo.Context) string {
	if ck, err := ec.Cookie(formCookie); err == nil && len(ck.Value) >= 32 {
		return ck.Value
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	v := base64.RawURLEncoding.EncodeToString(raw[:])
	c.setCookie(ec, formCookie, v, 0)
	return v
}

// requireSession lets a request through with a session whose key has n:
// without one a page load goes to the login page and anything else is 401;
// a key without n is 403. A POST must carry the session's CSRF token.
func (c *Console) requireSession(n need) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(ec echo.Context) error {
			var s session
			if c.cfg.Open {
				s = session{anonymous: true, token: c.formSecret(ec)}
			} else {
				ck, err := ec.Cookie(sessionCookie)
				if err != nil || ck.Value == "" {
					return c.toLogin(ec)
				}
				ctx, cancel := c.dbContext(ec)
				key, err := c.store.ConsoleSessionKey(ctx, ck.Value, c.clock.Now())
				cancel()
				switch {
				case errors.Is(err, store.ErrNotFound):
					// Expired, logged out, or its key revoked.
					c.setCookie(ec, sessionCookie, "", -1)
					return c.toLogin(ec)
				case err != nil:
					return c.storeFail(ec, "your session", err)
				}
				s = session{key: key, token: ck.Value}
			}
			ec.Set(sessionKey, s)
			if err := c.limit(ec, s.key, s.anonymous); err != nil {
				return err
			}
			if !s.may(n) {
				return c.fail(ec, http.StatusForbidden, fmt.Sprintf("Key %q has the scopes %s; this needs %s. Log in with another key, or ask for one with ledgerq keys create --scope.",
					s.key.Name, store.JoinScopes(s.key.Scopes, ", "), n.what))
			}
			if ec.Request().Method == http.MethodPost && !checkForm(ec, s.token) {
				return c.fail(ec, http.StatusForbidden, "The form's security token did not match your session: it may be from an old page, or from another site. Nothing was done. Reload the page and try again.")
			}
			return next(ec)
		}
	}
}

// toLogin answers a request without a session with 401: a page load gets
// the login form (which comes back to the page after it), anything else a
// JSON error. The status is 401 either way, so a client or a check that
// does not follow the form sees that the console needs a key.
func (c *Console) toLogin(ec echo.Context) error {
	r := ec.Request()
	if r.Method == http.MethodGet && wantsHTML(r) {
		return c.loginFail(ec, http.StatusUnauthorized, c.formSecret(ec), localNext(r.URL.RequestURI()), "")
	}
	ec.Response().Header().Set(echo.HeaderWWWAuthenticate, `Cookie realm="ledgerq console"`)
	return ec.JSON(http.StatusUnauthorized, map[string]any{"success": false, "message": "no console session: log in at " + Prefix + "/login"})
}

// localNext is where to go after the login: a console path, else the
// overview (never another site).
func localNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") ||
		strings.HasPrefix(next, Prefix+"/login") {
		return Prefix + "/"
	}
	return next
}

type loginData struct {
	Next string
}

func (c *Console) loginPage(ec echo.Context) error {
	if c.cfg.Open {
		return ec.Redirect(http.StatusSeeOther, Prefix+"/")
	}
	next := localNext(ec.QueryParam("next"))
	secret := c.formSecret(ec)
	return c.render(ec, http.StatusOK, "login.html", page{Title: "Log in", CSRF: csrfToken(secret), Data: loginData{Next: next}})
}

func (c *Console) loginFail(ec echo.Context, status int, secret, next, msg string) error {
	return c.render(ec, status, "login.html", page{Title: "Log in", CSRF: csrfToken(secret), Error: msg, Data: loginData{Next: next}})
}

// login starts a session for a valid key that may open the console.
func (c *Console) login(ec echo.Context) error {
	if c.cfg.Open {
		return ec.Redirect(http.StatusSeeOther, Prefix+"/")
	}
	next := localNext(ec.FormValue("next"))
	// A login tries a key: limited by client address, as the routes that
	// need no key are, so that keys cannot be guessed at speed.
	if err := c.limit(ec, store.APIKey{}, true); err != nil {
		return err
	}
	ck, err := ec.Cookie(formCookie)
	if err != nil || !checkForm(ec, ck.Value) {
		secret := c.formSecret(ec)
		return c.loginFail(ec, http.StatusForbidden, secret, next, "The login form had expired or came from another site. Nothing was done; enter your key again.")
	}
	token := strings.TrimSpace(ec.FormValue("key"))
	if token == "" {
		return c.loginFail(ec, http.StatusUnauthorized, ck.Value, next, "Enter an API key (it starts with lq_).")
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	key, err := c.store.APIKeyLookup(ctx, token)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return c.loginFail(ec, http.StatusUnauthorized, ck.Value, next, "That key is unknown or revoked. Check that you pasted all of it, or create one with ledgerq keys create --scope read.")
	case err != nil:
		return c.storeFail(ec, "the key", err)
	case !key.Has(store.ScopeRead):
		return c.loginFail(ec, http.StatusForbidden, ck.Value, next, fmt.Sprintf("Key %q has the scopes %s; the console needs read (pages) or admin (pages and actions).", key.Name, store.JoinScopes(key.Scopes, ", ")))
	}
	sess, err := c.store.ConsoleSessionCreate(ctx, key.ID, c.clock.Now(), c.cfg.SessionTTL)
	if err != nil {
		return c.storeFail(ec, "a new session", err)
	}
	c.logger.Info("console: logged in", "key_id", key.ID, "key_name", key.Name)
	c.setCookie(ec, sessionCookie, sess, int(c.cfg.SessionTTL.Seconds()))
	return ec.Redirect(http.StatusSeeOther, next)
}

// logout ends the session.
func (c *Console) logout(ec echo.Context) error {
	ck, err := ec.Cookie(sessionCookie)
	if c.cfg.Open || err != nil || ck.Value == "" {
		return ec.Redirect(http.StatusSeeOther, Prefix+"/login")
	}
	if !checkForm(ec, ck.Value) {
		return c.fail(ec, http.StatusForbidden, "The form's security token did not match your session. You are still logged in; reload the page and try again.")
	}
	ctx, cancel := c.dbContext(ec)
	defer cancel()
	if err := c.store.ConsoleSessionEnd(ctx, ck.Value, c.clock.Now()); err != nil {
		return c.storeFail(ec, "your session", err)
	}
	c.setCookie(ec, sessionCookie, "", -1)
	return ec.Redirect(http.StatusSeeOther, Prefix+"/login?done=logged-out")
}
