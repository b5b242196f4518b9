package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/ratelimit"
)

// consoleGet asks for a console page as a browser (accept: HTML) or a
// script would, without following redirects.
func consoleGet(t *testing.T, f *apiFixture, path, accept string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", accept)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp
}

// The API serves the console at /ui under its access configuration: a
// session (from a key) unless opened.
func TestAccess_TheConsoleNeedsASessionUnlessTheAPIIsOpen(t *testing.T) {
	t.Parallel()
	secured := accessFixture(t, httpapi.AccessConfig{})
	require.Equal(t, http.StatusUnauthorized, consoleGet(t, secured, "/ui/", "text/html").StatusCode, "a page load is 401, with the login form")
	require.Equal(t, http.StatusUnauthorized, consoleGet(t, secured, "/ui/", "").StatusCode)
	require.Equal(t, http.StatusUnauthorized, consoleGet(t, secured, "/ui/overview.json", "application/json").StatusCode)
	require.Equal(t, http.StatusOK, consoleGet(t, secured, "/ui/login", "text/html").StatusCode)

	open := accessFixture(t, httpapi.AccessConfig{Open: true})
	require.Equal(t, http.StatusOK, consoleGet(t, open, "/ui/", "text/html").StatusCode)
	require.Equal(t, http.StatusOK, consoleGet(t, open, "/ui/overview.json", "application/json").StatusCode)
}

// A login is limited by client address as the routes without a key are:
// keys cannot be tried at speed.
func TestAccess_ConsoleLoginsAreRateLimitedByAddress(t *testing.T) {
	t.Parallel()
	f := accessFixture(t, httpapi.AccessConfig{RateLimits: httpapi.RateLimits{
		Anonymous: ratelimit.Rate{Count: 1, Period: time.Hour, Burst: 1},
	}})
	try := func() *http.Response {
		resp, err := http.Post(f.url+"/ui/login", "application/x-www-form-urlencoded", strings.NewReader(url.Values{"key": {"lq_x"}}.Encode()))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp
	}
	require.Equal(t, http.StatusForbidden, try().StatusCode, "the first try is refused for its form, not its rate")
	resp := try()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
}
