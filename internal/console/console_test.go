package console

import (
	"crypto/tls"
	"encoding/json"
	"html"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/params"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// fixture is a console on a rolled-back database, with a wallet "main", a
// key of each kind and rows in every lane.
type fixture struct {
	t       *testing.T
	st      *store.Store
	clock   *clock.Fake
	f       *testfactory.Factory
	e       *echo.Echo
	wallet  keystore.Wallet
	sender  string
	keys    map[string]string // admin, read, wallet (wallet:main only)
	batches []string
	waiting store.Task
	started store.Task
	ep      store.WebhookEndpoint
	given   string // a given-up delivery
	bundle  store.Bundle
}

func setup(t *testing.T, cfg Config) *fixture {
	t.Helper()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	fx := &fixture{t: t, st: st, clock: clk, f: testfactory.New(t, st, clk), keys: map[string]string{}}
	signer := testfactory.NewSigner(t)
	fx.wallet = keystore.Wallet{ID: "main", ChainID: testfactory.WalletChainID, Signer: signer}
	fx.sender = strings.ToLower(signer.Address().Hex())
	reg, err := keystore.NewRegistry(fx.wallet)
	require.NoError(t, err)
	for name, scopes := range map[string][]store.Scope{
		"admin": {store.ScopeAdmin}, "read": {store.ScopeRead}, "wallet": {store.WalletScope("main")},
	} {
		_, token, err := st.APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: clk.Now(), Name: name + "-key", Scopes: scopes})
		require.NoError(t, err)
		fx.keys[name] = token
	}
	cfg.BuilderChainID = testfactory.PoolChainID
	if cfg.Chains == nil {
		cfg.Chains = func() []evmnodes.ChainStatus { return testChains(clk.Now()) }
	}
	c, err := New(cfg, Deps{Store: st, Wallets: reg, Clock: clk})
	require.NoError(t, err)
	fx.e = echo.New()
	c.Mount(fx.e)

	fx.batches = fx.f.PostBatches("svc-1", 3)
	// The started task was named by a call (a send-tx with a function).
	transfer := &store.TaskCall{Function: "transfer(address,uint256)", Args: json.RawMessage(`["0x00000000000000000000000000000000000b0B01","1000"]`)}
	tasks := fx.f.PostTasks(
		testfactory.Task{Sender: fx.sender, Request: store.TaskRequest{Data: []byte{0xa9, 0x05, 0x9c, 0xbb}, Call: transfer}},
		testfactory.Task{Sender: fx.sender},
	)
	fx.started, fx.waiting = tasks[0], tasks[1]
	fx.f.StartTask(fx.started)
	fx.ep = fx.f.CreateWebhookEndpoint(testfactory.WebhookEndpoint{})
	_, err = st.WebhookEmit(t.Context(), clk.Now(), store.TaskWebhookEvent(store.WebhookSubmitted, fx.started, "0x01", nil))
	require.NoError(t, err)
	require.NoError(t, st.DB().QueryRow(t.Context(),
		`UPDATE ledgerq.webhook_deliveries SET gave_up_at = $1, attempts = 8, last_attempt_at = $1, last_status = 500, last_error = 'receiver answered 500'
		 WHERE endpoint_id = $2 RETURNING id`, clk.Now(), fx.ep.ID).Scan(&fx.given))
	fx.f.AddPoolTxs(testfactory.PoolTx(1, 0, 20, 10), testfactory.PoolTx(1, 1, 20, 10))
	fx.bundle = fx.f.CutBundles(store.BundleCutParams{Size: 10})[0]
	return fx
}

// browser is a client with a cookie jar of its own.
type browser struct {
	fx      *fixture
	cookies map[string]*http.Cookie
	tls     bool
}

func (fx *fixture) browser() *browser { return &browser{fx: fx, cookies: map[string]*http.Cookie{}} }

// loggedIn is a new browser logged in with the key of kind.
func (fx *fixture) loggedIn(kind string) *browser {
	fx.t.Helper()
	b := fx.browser()
	b.login(kind)
	return b
}

// cancelAsAdmin is a console with an admin's browser logged in, and the
// path of the cancel action of its waiting task.
func cancelAsAdmin(t *testing.T) (*fixture, *browser, string) {
	t.Helper()
	fx := setup(t, Config{})
	return fx, fx.loggedIn("admin"), "/ui/wallets/main/tasks/" + fx.waiting.ID + "/cancel"
}

func (b *browser) do(method, target string, form url.Values, header ...string) *httptest.ResponseRecorder {
	b.fx.t.Helper()
	var req *http.Request
	if form != nil {
		req = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if b.tls {
		req.TLS = &tls.ConnectionState{}
	}
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	b.fx.e.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return rec
}

func (b *browser) get(target string) *httptest.ResponseRecorder {
	return b.do(http.MethodGet, target, nil)
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf is the CSRF token of the page's forms.
func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfInput.FindStringSubmatch(body)
	require.NotNil(t, m, "the page has a form with a CSRF token")
	return m[1]
}

// login logs the browser in with the key of kind and checks it worked.
func (b *browser) login(kind string) {
	t := b.fx.t
	t.Helper()
	page := b.get("/ui/login?next=/ui/wallets")
	require.Equal(t, http.StatusOK, page.Code)
	rec := b.do(http.MethodPost, "/ui/login", url.Values{"key": {b.fx.keys[kind]}, "csrf": {csrfOf(t, page.Body.String())}, "next": {"/ui/wallets"}})
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Equal(t, "/ui/wallets", rec.Header().Get("Location"))
	require.Contains(t, b.cookies, sessionCookie)
}

// post submits the form of the page at pageURL to action, with its token.
func (b *browser) post(pageURL, action string) *httptest.ResponseRecorder {
	t := b.fx.t
	t.Helper()
	page := b.get(pageURL)
	require.Equal(t, http.StatusOK, page.Code, page.Body.String())
	return b.do(http.MethodPost, action, url.Values{"csrf": {csrfOf(t, page.Body.String())}})
}

// pages are every GET page of the console, with a text each shows.
func (fx *fixture) pages() map[string]string {
	task := "/ui/wallets/main/tasks/" + fx.waiting.ID
	hook := "/ui/wallets/main/webhooks/" + fx.ep.ID
	return map[string]string{
		"/ui/":                         "Batch lane",
		"/ui/batches":                  "Service id",
		"/ui/batches?service=svc-1":    fx.batches[0][:10],
		"/ui/batches/" + fx.batches[0]: "svc-1",
		"/ui/wallets":                  fx.wallet.Address().Hex(),
		"/ui/wallets/main":             fx.started.ID[:10],
		task:                           `<span class="state st-waiting">Waiting</span>`,
		"/ui/wallets/main/tasks/" + fx.started.ID: `<code class="wrap">transfer(address,uint256)</code> with <code class="wrap">[&#34;0x00000000000000000000000000000000000b0B01&#34;,&#34;1000&#34;]</code>`,
		"/ui/wallets/main/webhooks":               fx.ep.ID,
		hook:                                      "receiver answered 500",
		"/ui/pool/" + testfactory.PoolSender(1):   `in <a href="/ui/bundles/`,
		"/ui/bundles":                             "queued",
		"/ui/chains":                              "https://infura.example/",
		"/ui/bundles/" + itoa(testfactory.PoolChainID) + "/" + itoa(int64(fx.bundle.Number)): "Versions",
		"/ui/audit":                                 "No action yet",
		task + "/cancel":                            "Cancel task " + fx.waiting.ID,
		"/ui/wallets/main/hold":                     "Pause wallet main?",
		"/ui/wallets/main/release":                  "Resume wallet main?",
		hook + "/deliveries/" + fx.given + "/retry": "Send delivery " + fx.given + " again?",
	}
}

// Without a session every page is 401: a page load shows the login form,
// which comes back to the page after it; anything else is a JSON 401.
func TestConsole_WithoutASessionEveryPageIs401WithTheLoginFormAndOtherRequestsAre401(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.browser()
	for path := range fx.pages() {
		rec := b.get(path)
		require.Equal(t, http.StatusUnauthorized, rec.Code, path)
		require.Contains(t, rec.Body.String(), `name="next" value="`+html.EscapeString(path)+`"`, path)
		require.Contains(t, rec.Body.String(), `name="key"`, path)
	}
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/ui/overview.json"},
		{http.MethodPost, "/ui/wallets/main/tasks/" + fx.waiting.ID + "/cancel"},
		{http.MethodPost, "/ui/wallets/main/hold"},
	} {
		rec := b.do(req.method, req.path, url.Values{}, "Accept", "application/json")
		require.Equal(t, http.StatusUnauthorized, rec.Code, req.path)
		require.Contains(t, rec.Body.String(), "log in at /ui/login")
	}
	require.Equal(t, store.TaskWaiting, fx.taskStatus(fx.waiting.ID), "nothing was done")
}

func TestConsole_LoginStartsASessionInAStrictHttpOnlyCookieAndLogoutEndsIt(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("read")
	ck := b.cookies[sessionCookie]
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.False(t, ck.Secure, "plain HTTP: no Secure attribute")
	require.Equal(t, "/ui", ck.Path)

	home := b.get("/ui/")
	require.Equal(t, http.StatusOK, home.Code)
	require.Contains(t, home.Body.String(), "read-key")
	rec := b.do(http.MethodPost, "/ui/logout", url.Values{"csrf": {csrfOf(t, home.Body.String())}})
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.NotContains(t, b.cookies, sessionCookie)

	// The old cookie no longer opens anything.
	b.cookies[sessionCookie] = ck
	require.Equal(t, http.StatusUnauthorized, b.get("/ui/").Code)
}

func TestConsole_CookieIsSecureOverTLS(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.browser()
	b.tls = true
	b.login("read")
	require.True(t, b.cookies[sessionCookie].Secure)
	require.True(t, b.cookies[formCookie].Secure)
}

func TestConsole_LoginRefusesAnUnknownKeyAKeyWithoutReadAndAFormWithoutItsToken(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.browser()
	page := b.get("/ui/login")
	token := csrfOf(t, page.Body.String())

	rec := b.do(http.MethodPost, "/ui/login", url.Values{"key": {"lq_" + strings.Repeat("x", 43)}, "csrf": {token}})
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Contains(t, rec.Body.String(), "unknown or revoked")

	rec = b.do(http.MethodPost, "/ui/login", url.Values{"key": {fx.keys["wallet"]}, "csrf": {token}})
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Contains(t, rec.Body.String(), "wallet:main")

	rec = b.do(http.MethodPost, "/ui/login", url.Values{"key": {fx.keys["admin"]}, "csrf": {"forged"}})
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Contains(t, rec.Body.String(), "expired or came from another site")
	require.NotContains(t, b.cookies, sessionCookie)
}

func TestConsole_LoginGoesBackOnlyToAConsolePage(t *testing.T) {
	t.Parallel()
	for next, want := range map[string]string{
		"/ui/wallets/main": "/ui/wallets/main", "https://evil.test/": "/ui/", "//evil.test/ui/": "/ui/",
		"/ui/login": "/ui/", "/v1/batches": "/ui/", "": "/ui/",
	} {
		require.Equal(t, want, localNext(next), next)
	}
}

func TestConsole_RevokingTheKeyEndsItsSessions(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("admin")
	require.Equal(t, http.StatusOK, b.get("/ui/").Code)
	key, err := fx.st.APIKeyLookup(t.Context(), fx.keys["admin"])
	require.NoError(t, err)
	_, _, err = fx.st.APIKeyRevoke(t.Context(), store.APIKeyRevokeParams{Now: fx.clock.Now(), ID: key.ID})
	require.NoError(t, err)
	rec := b.get("/ui/")
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Contains(t, rec.Body.String(), `action="/ui/login"`)
}

func TestConsole_SessionExpires(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{SessionTTL: time.Hour})
	b := fx.loggedIn("read")
	fx.clock.Advance(time.Hour + time.Second)
	require.Equal(t, http.StatusUnauthorized, b.get("/ui/").Code)
}

func TestConsole_EveryPageRendersForAReadKey(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("admin")
	for path, want := range fx.pages() {
		rec := b.get(path)
		require.Equal(t, http.StatusOK, rec.Code, "%s: %s", path, rec.Body.String())
		require.Contains(t, rec.Body.String(), want, path)
		require.Equal(t, "DENY", rec.Header().Get("X-Frame-Options"))
		require.Contains(t, rec.Header().Get("Content-Security-Policy"), "script-src 'self'")
	}
	r := fx.loggedIn("read")
	for path, want := range fx.pages() {
		if strings.HasSuffix(path, "/cancel") || strings.HasSuffix(path, "/hold") || strings.HasSuffix(path, "/release") || strings.HasSuffix(path, "/retry") {
			continue
		}
		rec := r.get(path)
		require.Equal(t, http.StatusOK, rec.Code, path)
		require.Contains(t, rec.Body.String(), want, path)
		require.NotContains(t, rec.Body.String(), `id="cancel-task"`, "%s: no action for a read key", path)
	}
}

func TestConsole_PagesSayWhatIsMissing(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("read")
	for path, want := range map[string]string{
		"/ui/batches/nope":  "Batch nope was not found",
		"/ui/wallets/other": "not one this server sends for",
		"/ui/wallets/main/tasks/" + "0190a0b0-0000-7000-8000-000000000000": "was not found",
		"/ui/wallets/main/webhooks/nope":                                   "was not found",
		"/ui/bundles/" + itoa(testfactory.PoolChainID) + "/999":            "was not found",
		"/ui/search?q=nothing-at-all":                                      "Nothing matches",
		"/ui/pool/nope":                                                    "A sender is an address",
	} {
		rec := b.get(path)
		require.GreaterOrEqual(t, rec.Code, 400, path)
		require.Contains(t, rec.Body.String(), want, path)
	}
}

func TestConsole_SearchFindsABatchATaskAWalletASenderAndAService(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("read")
	for q, want := range map[string]string{
		fx.batches[1]:             "/ui/batches/" + url.PathEscape(fx.batches[1]),
		fx.waiting.ID:             "/ui/wallets/main/tasks/" + fx.waiting.ID,
		"main":                    "/ui/wallets/main",
		fx.wallet.Address().Hex(): "/ui/wallets/main",
		testfactory.PoolSender(1): "/ui/pool/" + testfactory.PoolSender(1),
		"svc-1":                   "/ui/batches?service=svc-1",
	} {
		rec := b.get("/ui/search?q=" + url.QueryEscape(q))
		require.Equal(t, http.StatusSeeOther, rec.Code, q)
		require.Equal(t, want, rec.Header().Get("Location"), q)
	}
}

func TestConsole_ServiceBatchesPageByKeyset(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{PageSize: 2})
	b := fx.loggedIn("read")
	first := b.get("/ui/batches?service=svc-1").Body.String()
	require.Contains(t, first, short(fx.batches[0]))
	require.Contains(t, first, short(fx.batches[1]))
	require.NotContains(t, first, short(fx.batches[2]))
	m := regexp.MustCompile(`href="/ui/batches(\?service=svc-1&amp;after_created_at=[^"]+)" rel="next"`).FindStringSubmatch(first)
	require.NotNil(t, m, "a next page link")
	second := b.get("/ui/batches" + strings.ReplaceAll(m[1], "&amp;", "&")).Body.String()
	require.Contains(t, second, short(fx.batches[2]))
	require.NotContains(t, second, short(fx.batches[0]))
	require.NotContains(t, second, `rel="next"`)
}

func short(id string) string { return shortID(id)[:10] }

func TestConsole_OverviewJSONCountsEveryLane(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("read")
	rec := b.do(http.MethodGet, "/ui/overview.json", nil, "Accept", "application/json")
	require.Equal(t, http.StatusOK, rec.Code)
	var got counts
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	require.Equal(t, int64(3), got.Counts["batch.new"]+got.Counts["batch.queued"], "three batches wait")
	require.Equal(t, int64(1), got.Counts["task.Waiting"])
	require.Equal(t, int64(1), got.Counts["task.Executing"])
	require.Equal(t, int64(1), got.Counts["bundle.queued"])
	require.Contains(t, got.Oldest, "task")

	fx.f.PostTask(testfactory.Task{Sender: fx.sender})
	rec = b.do(http.MethodGet, "/ui/overview.json", nil, "Accept", "application/json")
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	require.Equal(t, int64(2), got.Counts["task.Waiting"], "the count follows the work")
}

func TestConsole_ActionsNeedAdmin(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("read")
	home := b.get("/ui/")
	token := csrfOf(t, home.Body.String())
	for _, path := range []string{
		"/ui/wallets/main/tasks/" + fx.waiting.ID + "/cancel", "/ui/wallets/main/hold", "/ui/wallets/main/release",
		"/ui/wallets/main/webhooks/" + fx.ep.ID + "/deliveries/" + fx.given + "/retry",
	} {
		rec := b.get(path)
		require.Equal(t, http.StatusForbidden, rec.Code, path)
		require.Contains(t, rec.Body.String(), "admin for the console")
		rec = b.do(http.MethodPost, path, url.Values{"csrf": {token}})
		require.Equal(t, http.StatusForbidden, rec.Code, path)
	}
	fx.requireNothingDone()
}

func TestConsole_ActionsRefuseAFormWithoutTheSessionsToken(t *testing.T) {
	t.Parallel()
	fx, b, cancel := cancelAsAdmin(t)
	other := fx.loggedIn("admin")
	otherToken := csrfOf(t, other.get("/ui/").Body.String())
	for name, form := range map[string]url.Values{
		"none": {}, "forged": {"csrf": {"forged"}}, "another session's": {"csrf": {otherToken}},
	} {
		rec := b.do(http.MethodPost, cancel, form)
		require.Equal(t, http.StatusForbidden, rec.Code, name)
		require.Contains(t, rec.Body.String(), "Nothing was done", name)
	}
	token := csrfOf(t, b.get(cancel).Body.String())
	rec := b.do(http.MethodPost, cancel, url.Values{"csrf": {token}}, "Origin", "https://evil.test")
	require.Equal(t, http.StatusForbidden, rec.Code, "another origin")
	fx.requireNothingDone()
}

func TestConsole_CancelAWaitingTaskThroughTheStoreAndTheAudit(t *testing.T) {
	t.Parallel()
	fx, b, cancel := cancelAsAdmin(t)
	rec := b.post(cancel, cancel)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Equal(t, "/ui/wallets/main/tasks/"+fx.waiting.ID+"?done=cancelled", rec.Header().Get("Location"))
	require.Equal(t, store.TaskError, fx.taskStatus(fx.waiting.ID))
	page := b.get(rec.Header().Get("Location")).Body.String()
	require.Contains(t, page, "The task was cancelled")

	rows := fx.auditRows()
	require.Len(t, rows, 1)
	require.Equal(t, "task.cancel", rows[0].Action)
	require.Equal(t, "admin-key", rows[0].KeyName)
	require.Equal(t, "wallet/main/task/"+fx.waiting.ID, rows[0].Target)
	require.JSONEq(t, `{"via":"console","priority":0}`, string(rows[0].Detail))
	audit := b.get("/ui/audit").Body.String()
	require.Contains(t, audit, "task.cancel")
	require.Contains(t, audit, `<a href="/ui/wallets/main/tasks/`+fx.waiting.ID+`">`)

	// A task whose transaction is out is asked to be cancelled: its
	// confirmation page says the chain decides, and a POST records the
	// request for the wallet's worker (audited); the task goes on.
	confirm := b.get("/ui/wallets/main/tasks/" + fx.started.ID + "/cancel")
	require.Equal(t, http.StatusOK, confirm.Code)
	require.Contains(t, confirm.Body.String(), "sends a no-op")
	token := csrfOf(t, b.get("/ui/").Body.String())
	rec = b.do(http.MethodPost, "/ui/wallets/main/tasks/"+fx.started.ID+"/cancel", url.Values{"csrf": {token}})
	require.Equal(t, "/ui/wallets/main/tasks/"+fx.started.ID+"?done=cancel-requested", rec.Header().Get("Location"))
	require.Equal(t, store.TaskExecuting, fx.taskStatus(fx.started.ID))
	require.Contains(t, b.get(rec.Header().Get("Location")).Body.String(), "A cancel was asked at")
	require.Len(t, fx.auditRows(), 2)

	// An ended task is not cancelled: its confirmation page says why, and a
	// POST changes nothing.
	require.Equal(t, http.StatusConflict, b.get("/ui/wallets/main/tasks/"+fx.waiting.ID+"/cancel").Code)
	rec = b.do(http.MethodPost, "/ui/wallets/main/tasks/"+fx.waiting.ID+"/cancel", url.Values{"csrf": {token}})
	require.Equal(t, "/ui/wallets/main/tasks/"+fx.waiting.ID+"?done=cancelled", rec.Header().Get("Location"), "a cancelled task's retry answers as cancelled")
	require.Len(t, fx.auditRows(), 2)
}

func TestConsole_PauseAndResumeAWalletAreAudited(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("admin")
	rec := b.post("/ui/wallets/main/hold", "/ui/wallets/main/hold")
	require.Equal(t, "/ui/wallets/main?done=held", rec.Header().Get("Location"))
	h, err := fx.st.WalletHealthGet(t.Context(), fx.wallet.ChainID, fx.sender)
	require.NoError(t, err)
	require.NotNil(t, h.HeldAt)
	page := b.get("/ui/wallets/main").Body.String()
	require.Contains(t, page, "Paused</span> by admin-key")
	require.Contains(t, b.get("/ui/").Body.String(), `<a href="/ui/wallets/main">main</a>: paused by admin-key`)

	rec = b.post("/ui/wallets/main/release", "/ui/wallets/main/release")
	require.Equal(t, "/ui/wallets/main?done=released", rec.Header().Get("Location"))
	rec = b.post("/ui/wallets/main/release", "/ui/wallets/main/release")
	require.Equal(t, "/ui/wallets/main?done=not-held", rec.Header().Get("Location"))

	rows := fx.auditRows()
	require.Len(t, rows, 2)
	require.Equal(t, "wallet.release", rows[0].Action)
	require.Equal(t, "wallet.hold", rows[1].Action)
}

// The wallet's signer state shows on its page, in the wallets list and, when
// unavailable, among the overview's stopped wallets: no signature yet, ok,
// then unavailable with its error and since when (the wallet no longer said
// to be sending), and ok again.
func TestConsole_TheWalletPagesShowTheSignersState(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("read")
	set := func(state store.SignerState, msg string) {
		t.Helper()
		_, err := fx.st.WalletHealthSetSigner(t.Context(), store.WalletSignerParams{
			Now: fx.clock.Now(), ChainID: fx.wallet.ChainID, Sender: fx.sender, Backend: "keystore", State: state, Error: msg,
		})
		require.NoError(t, err)
	}
	page, list := b.get("/ui/wallets/main").Body.String(), b.get("/ui/wallets").Body.String()
	require.Contains(t, page, `<dd id="signer">keystore: <span class="muted small">no signature yet</span>`)
	require.Contains(t, list, `<td data-signer="main">keystore <span class="muted small">no signature yet</span>`)

	set(store.SignerOK, "")
	page, list = b.get("/ui/wallets/main").Body.String(), b.get("/ui/wallets").Body.String()
	require.Contains(t, page, `<dd id="signer">keystore: <span class="pill ok">ok</span>`)
	require.Contains(t, page, `<span class="pill ok">Sending</span>`)
	require.NotContains(t, page, `id="signer-unavailable"`)
	require.Contains(t, list, `<td data-status="main"><span class="pill ok">yes</span>`)

	fx.clock.Advance(time.Minute)
	set(store.SignerUnavailable, "the keystore signer is unavailable: connection refused")
	page, list = b.get("/ui/wallets/main").Body.String(), b.get("/ui/wallets").Body.String()
	require.Contains(t, page, `<dd id="signer">keystore: <span class="pill bad">unavailable</span>`)
	require.Contains(t, page, `<p id="signer-unavailable"><span class="pill bad">Signer unavailable</span> since `)
	require.Contains(t, page, `: the keystore signer is unavailable: connection refused. The wallet's tasks wait`)
	require.NotContains(t, page, `<span class="pill ok">Sending</span>`)
	require.Contains(t, list, `<td data-signer="main">keystore <span class="pill bad" title="the keystore signer is unavailable: connection refused">unavailable</span>`)
	require.Contains(t, list, `<td data-status="main"><span class="pill bad">signer unavailable</span>`)
	require.Contains(t, b.get("/ui/").Body.String(),
		`<a href="/ui/wallets/main">main</a>: signer unavailable (keystore) `)

	set(store.SignerOK, "")
	page = b.get("/ui/wallets/main").Body.String()
	require.NotContains(t, page, `id="signer-unavailable"`)
	require.Contains(t, page, `<span class="pill ok">Sending</span>`)
	require.Contains(t, b.get("/ui/").Body.String(), "None: every wallet sends.")
}

func TestConsole_RetryAGivenUpDeliveryIsAudited(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("admin")
	retry := "/ui/wallets/main/webhooks/" + fx.ep.ID + "/deliveries/" + fx.given + "/retry"
	rec := b.post(retry, retry)
	require.Equal(t, "/ui/wallets/main/webhooks/"+fx.ep.ID+"?done=retried", rec.Header().Get("Location"))
	d, err := fx.st.WebhookDeliveryGet(t.Context(), fx.given)
	require.NoError(t, err)
	require.Nil(t, d.GaveUpAt)
	require.Equal(t, http.StatusConflict, b.get(retry).Code, "no longer given up")
	rows := fx.auditRows()
	require.Len(t, rows, 1)
	require.Equal(t, "webhook_delivery.retry", rows[0].Action)
}

func TestConsole_OpenServesWithoutAKeyAndAuditsAnonymous(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{Open: true})
	b := fx.browser()
	require.Equal(t, http.StatusSeeOther, b.get("/ui/login").Code)
	require.Equal(t, http.StatusOK, b.get("/ui/").Code)
	cancel := "/ui/wallets/main/tasks/" + fx.waiting.ID + "/cancel"
	require.Equal(t, http.StatusForbidden, b.do(http.MethodPost, cancel, url.Values{}).Code, "CSRF still applies")
	rec := b.post(cancel, cancel)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	rows := fx.auditRows()
	require.Len(t, rows, 1)
	require.Equal(t, "anonymous", rows[0].KeyName)
}

func TestConsole_StaticAssetsAreEmbedded(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.browser()
	for _, p := range []string{"/ui/static/console.css", "/ui/static/console.js", "/ui/static/favicon.svg"} {
		rec := b.get(p)
		require.Equal(t, http.StatusOK, rec.Code, p)
		require.NotEmpty(t, rec.Body.String(), p)
	}
}

func (fx *fixture) taskStatus(id string) store.TaskStatus {
	fx.t.Helper()
	task, err := fx.st.TaskGet(fx.t.Context(), "main", id)
	require.NoError(fx.t, err)
	return task.Status
}

// requireNothingDone requires the waiting task to be waiting still and the
// audit log to be empty: no action took effect.
func (fx *fixture) requireNothingDone() {
	fx.t.Helper()
	require.Equal(fx.t, store.TaskWaiting, fx.taskStatus(fx.waiting.ID))
	require.Empty(fx.t, fx.auditRows())
}

func (fx *fixture) auditRows() []store.AuditRecord {
	fx.t.Helper()
	rows, err := fx.st.AuditList(fx.t.Context(), 0, 100)
	require.NoError(fx.t, err)
	return rows
}

func TestConsole_AFormFromTheForwardedHostIsAccepted(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("admin")
	hold := "/ui/wallets/main/hold"
	token := csrfOf(t, b.get(hold).Body.String())
	rec := b.do(http.MethodPost, hold, url.Values{"csrf": {token}}, "Origin", "https://console.example", "X-Forwarded-Host", "console.example")
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Equal(t, "/ui/wallets/main?done=held", rec.Header().Get("Location"))
}

// The speed-up form of an executing task's page: offered to an admin once
// the task's transaction is out, filled with the least fees that replace it
// (10% above its own); fees it refuses re-render the page with the problem
// and what was typed, and record nothing; accepted fees are recorded on the
// task for the wallet's worker through the store, audited, and the form
// gives way to a line saying what was asked.
func TestConsole_SpeedUpASentTaskThroughTheStoreAndTheAudit(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{MaxFeePerGas: big.NewInt(100 * params.GWei)})
	b := fx.loggedIn("admin")
	path := "/ui/wallets/main/tasks/" + fx.started.ID
	action := path + "/speed-up"
	require.NotContains(t, b.get(path).Body.String(), `id="speed-up"`, "its transaction is signed, not out yet")

	v, err := fx.st.TaskView(t.Context(), "main", fx.started.ID)
	require.NoError(t, err)
	require.Len(t, v.Attempts, 1)
	_, err = fx.st.AttemptMarkSent(t.Context(), store.AttemptMarkSentParams{Now: fx.clock.Now(), ChainID: v.Attempts[0].ChainID, TxHashes: []string{v.Attempts[0].TxHash}})
	require.NoError(t, err)

	page := b.get(path).Body.String()
	require.Contains(t, page, `id="speed-up"`)
	require.Contains(t, page, `name="max_fee" inputmode="decimal" value="2.2"`, "the transaction's 2 gwei raised by 10%")
	require.Contains(t, page, `name="tip" inputmode="decimal" value="1.1"`)
	token := csrfOf(t, page)
	require.NotContains(t, fx.loggedIn("read").get(path).Body.String(), `id="speed-up"`, "only an admin is offered the form")
	rec := fx.loggedIn("read").do(http.MethodPost, action, url.Values{"csrf": {token}, "max_fee": {"3"}, "tip": {"1.5"}})
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Equal(t, http.StatusForbidden, b.do(http.MethodPost, action, url.Values{"max_fee": {"3"}, "tip": {"1.5"}}).Code, "CSRF applies")

	for _, c := range []struct {
		maxFee, tip string
		code        int
		says        string
	}{
		{"3", "1.05", http.StatusConflict, "at least 2.2 gwei and the tip at least 1.1 gwei"},
		{"2.1", "1.5", http.StatusConflict, "at least 2.2 gwei"},
		{"three", "1.5", http.StatusBadRequest, "Max fee: give a number of gwei"},
		{"3", "1.0000000001", http.StatusBadRequest, "Tip: give a number of gwei"},
		{"3", "4", http.StatusBadRequest, "The tip must not be above the max fee"},
		{"101", "2", http.StatusBadRequest, "above this server&#39;s ceiling of 100 gwei"},
	} {
		rec := b.do(http.MethodPost, action, url.Values{"csrf": {token}, "max_fee": {c.maxFee}, "tip": {c.tip}})
		require.Equal(t, c.code, rec.Code, "%+v: %s", c, rec.Body.String())
		require.Contains(t, rec.Body.String(), c.says)
		require.Contains(t, rec.Body.String(), `name="max_fee" inputmode="decimal" value="`+c.maxFee+`"`, "what was typed is kept")
		require.Contains(t, rec.Body.String(), `name="tip" inputmode="decimal" value="`+c.tip+`"`)
	}
	task, err := fx.st.TaskGet(t.Context(), "main", fx.started.ID)
	require.NoError(t, err)
	require.Nil(t, task.SpeedUp, "a refused form records nothing")
	require.Empty(t, fx.auditRows())

	rec = b.do(http.MethodPost, action, url.Values{"csrf": {token}, "max_fee": {"3"}, "tip": {"1.5"}})
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Equal(t, path+"?done=speed-up-requested", rec.Header().Get("Location"))
	task, err = fx.st.TaskGet(t.Context(), "main", fx.started.ID)
	require.NoError(t, err)
	require.Equal(t, store.TaskExecuting, task.Status)
	require.NotNil(t, task.SpeedUp)
	require.Equal(t, big.NewInt(3*params.GWei), task.SpeedUp.FeeCap)
	require.Equal(t, big.NewInt(1_500_000_000), task.SpeedUp.TipCap)
	rows := fx.auditRows()
	require.Len(t, rows, 1)
	require.Equal(t, "task.speed_up", rows[0].Action)
	require.Equal(t, "admin-key", rows[0].KeyName)
	require.Equal(t, "wallet/main/task/"+fx.started.ID, rows[0].Target)
	require.Contains(t, string(rows[0].Detail), `"max_fee_per_gas": "3000000000"`)
	require.Contains(t, string(rows[0].Detail), `"via": "console"`)

	page = b.get(rec.Header().Get("Location")).Body.String()
	require.Contains(t, page, "The speed-up is recorded")
	require.Contains(t, page, "A speed-up to max 3 gwei, tip 1.5 gwei was asked")
	require.NotContains(t, page, `id="speed-up"`, "one speed-up at a time")
}
