package console

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Prefix is where the console is mounted.
const Prefix = "/ui"

// Config configures the console.
type Config struct {
	// Open serves the console without a key, as an anonymous admin
	// (httpapi.AccessConfig.Open, --api-insecure-open).
	Open bool
	// SessionTTL is how long a login lasts.
	SessionTTL time.Duration
	// PageSize is how many rows a list shows per page.
	PageSize int
	// BuilderChainID is the chain the builder lane serves (the bundle
	// pages' default); zero when the lane is off.
	BuilderChainID int64
	// DBTimeout bounds each database call of a request.
	DBTimeout time.Duration
	// Chains gives the wallet lane's chains and their nodes as the node
	// layer sees them now (httpapi.Config.Chains), for the Chains page;
	// nil when the process serves no chain.
	Chains func() []evmnodes.ChainStatus
	// MaxFeePerGas is the highest fee a speed-up may ask for, in wei (the
	// API's ceiling, httpapi.Config.MaxFeePerGas); nil: no ceiling.
	MaxFeePerGas *big.Int
}

// Defaults for Config.
const (
	DefaultSessionTTL = 12 * time.Hour
	DefaultPageSize   = 50
	DefaultDBTimeout  = 5 * time.Second
)

// Deps is what the console is built with.
type Deps struct {
	Store *store.Store
	// Wallets are the wallets this process serves; nil when the wallet lane
	// is off (the wallet pages then say so).
	Wallets *keystore.Registry
	Clock   clock.Clock
	Logger  *slog.Logger
	// Allow, when set, applies the API's rate limits to a request acting
	// as key (anonymous: by client address, as before a login or with
	// Open); an error is the request's 429, with Retry-After set.
	Allow func(ec echo.Context, key store.APIKey, anonymous bool) error
}

// Console serves the pages under Prefix.
type Console struct {
	cfg     Config
	store   *store.Store
	wallets *keystore.Registry
	clock   clock.Clock
	logger  *slog.Logger
	pages   map[string]*template.Template
	static  http.Handler
	allow   func(ec echo.Context, key store.APIKey, anonymous bool) error
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New builds the console.
func New(cfg Config, deps Deps) (*Console, error) {
	cfg.SessionTTL = cmp.Or(cfg.SessionTTL, DefaultSessionTTL)
	cfg.PageSize = cmp.Or(cfg.PageSize, DefaultPageSize)
	cfg.DBTimeout = cmp.Or(cfg.DBTimeout, DefaultDBTimeout)
	c := &Console{cfg: cfg, store: deps.Store, wallets: deps.Wallets, clock: deps.Clock, logger: deps.Logger, allow: deps.Allow}
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c.pages = pages
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c.static = http.StripPrefix(Prefix+"/static/", http.FileServer(http.FS(sub)))
	return c, nil
}

// Mount registers the console's routes on e.
func (c *Console) Mount(e *echo.Echo) {
	e.GET(Prefix, func(ec echo.Context) error { return ec.Redirect(http.StatusFound, Prefix+"/") })
	g := e.Group(Prefix, c.headers)
	g.GET("/static/*", c.serveStatic)
	g.GET("/login", c.loginPage)
	g.POST("/login", c.login)
	g.POST("/logout", c.logout)

	read := g.Group("", c.requireSession(needRead))
	read.GET("/", c.overview)
	read.GET("/overview.json", c.overviewJSON)
	read.GET("/search", c.search)
	read.GET("/batches", c.batches)
	read.GET("/batches/:id", c.batch)
	read.GET("/wallets", c.walletList)
	read.GET("/wallets/:wallet", c.wallet)
	read.GET("/wallets/:wallet/tasks/:id", c.task)
	read.GET("/wallets/:wallet/webhooks", c.webhooks)
	read.GET("/wallets/:wallet/webhooks/:endpoint", c.webhookEndpoint)
	read.GET("/chains", c.chains)
	read.GET("/pool/:sender", c.poolSender)
	read.GET("/bundles", c.bundles)
	read.GET("/bundles/:chain/:number", c.bundle)
	read.GET("/audit", c.audit)

	// The confirmation pages of the actions, and the actions.
	admin := g.Group("", c.requireSession(needAdmin))
	admin.GET("/wallets/:wallet/tasks/:id/cancel", c.confirmCancel)
	admin.POST("/wallets/:wallet/tasks/:id/cancel", c.cancelTask)
	admin.POST("/wallets/:wallet/tasks/:id/speed-up", c.speedUpTask)
	admin.GET("/wallets/:wallet/hold", c.confirmHold)
	admin.POST("/wallets/:wallet/hold", c.holdWallet)
	admin.GET("/wallets/:wallet/release", c.confirmRelease)
	admin.POST("/wallets/:wallet/release", c.releaseWallet)
	admin.GET("/wallets/:wallet/webhooks/:endpoint/deliveries/:id/retry", c.confirmRetry)
	admin.POST("/wallets/:wallet/webhooks/:endpoint/deliveries/:id/retry", c.retryDelivery)
}

// headers are the console's security headers: no framing, no sniffing,
// scripts and styles from the binary only.
func (c *Console) headers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		h := ec.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		if !strings.HasPrefix(ec.Path(), Prefix+"/static/") {
			h.Set("Cache-Control", "no-store")
		}
		return next(ec)
	}
}

func (c *Console) serveStatic(ec echo.Context) error {
	ec.Response().Header().Set("Cache-Control", "public, max-age=3600")
	c.static.ServeHTTP(ec.Response(), ec.Request())
	return nil
}

// dbContext bounds one database call.
func (c *Console) dbContext(ec echo.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ec.Request().Context(), c.cfg.DBTimeout)
}

// page is what every page template gets.
type page struct {
	Title string
	// Nav is the section the page belongs to, for the navigation.
	Nav string
	// Who is the key the session acts as ("" on the login page).
	Who  string
	Open bool
	// Admin: the key may act (the action buttons are shown).
	Admin bool
	CSRF  string
	// Notice is a message of the last action (from its redirect).
	Notice string
	// Error says what went wrong.
	Error string
	Now   time.Time
	Data  any
}

// render writes the page template name with status.
func (c *Console) render(ec echo.Context, status int, name string, p page) error {
	t, ok := c.pages[name]
	if !ok {
		return fmt.Errorf("console: no template %q", name)
	}
	if s, ok := sessionOf(ec); ok {
		p.Who, p.Open, p.Admin, p.CSRF = s.who(), c.cfg.Open, s.may(needAdmin), s.csrf()
	}
	if p.Notice == "" {
		p.Notice = notices[ec.QueryParam("done")]
	}
	p.Now = c.clock.Now().UTC()
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		return fmt.Errorf("console: rendering %s: %w", name, err)
	}
	return ec.HTMLBlob(status, buf.Bytes())
}

// notices are the messages an action's redirect names (?done=…): never
// text from the request.
var notices = map[string]string{
	"cancelled":          "The task was cancelled. It ended in Error, and its webhook endpoints are told.",
	"not-waiting":        "The task was not cancelled: it ended meanwhile.",
	"cancel-requested":   "The cancel is recorded: the wallet sends a no-op at the task's nonce in its next run. The chain decides: the no-op mined, the task ends cancelled; its own transaction mined, it ends Done.",
	"speed-up-requested": "The speed-up is recorded: the wallet signs the task's transaction again with these fees in its next run and sends it in place of the one out. The chain mines one of the two; the task ends Done either way.",
	"held":               "The wallet is paused: it sends no new task until it is resumed. Transactions in flight are still followed.",
	"already-held":       "The wallet was already paused; nothing changed.",
	"released":           "The wallet is resumed: its waiting tasks are sent again.",
	"not-held":           "The wallet was not paused; nothing changed.",
	"retried":            "The delivery is due again: its attempts start over.",
	"not-given-up":       "The delivery was not sent again: it is not given up (pending or delivered).",
	"logged-out":         "You are logged out.",
}

// fail renders the error page: what happened, and what to do.
func (c *Console) fail(ec echo.Context, status int, msg string) error {
	if !wantsHTML(ec.Request()) {
		return ec.JSON(status, map[string]any{"success": false, "message": msg})
	}
	return c.render(ec, status, "error.html", page{Title: http.StatusText(status), Error: msg})
}

// storeFail renders a store error: not found is 404, a database that does
// not answer 503, anything else 500 (and logged).
func (c *Console) storeFail(ec echo.Context, what string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return c.fail(ec, http.StatusNotFound, what+" was not found. Check the id, or search for it from the box at the top.")
	case errors.Is(err, context.DeadlineExceeded), store.IsUnavailable(err):
		c.logger.Warn("console: database unavailable", "error", err, "uri", ec.Request().URL.Path)
		return c.fail(ec, http.StatusServiceUnavailable, "The database did not answer in time while reading "+what+". Try again in a moment; if it lasts, check the database (the health panel of the overview).")
	}
	c.logger.Error("console: request failed", "error", err, "uri", ec.Request().URL.Path)
	return c.fail(ec, http.StatusInternalServerError, "Reading "+what+" failed: "+err.Error())
}

// limit applies the API's rate limits (Deps.Allow): 429 past them.
func (c *Console) limit(ec echo.Context, key store.APIKey, anonymous bool) error {
	if c.allow == nil {
		return nil
	}
	if err := c.allow(ec, key, anonymous); err != nil {
		return c.fail(ec, http.StatusTooManyRequests, "Slow down: "+err.Error()+". Nothing was done.")
	}
	return nil
}

// wantsHTML reports whether the request is a browser's page load (else it
// gets JSON answers: 401 instead of a redirect to the login page).
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}
