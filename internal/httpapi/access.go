package httpapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/ratelimit"
	"github.com/ledgerq/ledgerq/internal/store"
)

// The access model, one for every lane. A request to a secured route
// carries an API key (Authorization: Bearer <key>, or X-API-Key: <key>);
// the key's scopes say what it opens:
//
//	wallet:NAME    the routes of wallet NAME (any other wallet is 404 to it)
//	service:ID     posting and reading the batches of service ID
//	service:*      the same for every service
//	pool:write     sending transactions to the builder lane's pool
//	read           every read route, /metrics, the console's pages
//	admin          everything, the console's actions included
//
// Every /v1 route and /metrics is secured unless the API is opened
// (AccessConfig.Open, --api-insecure-open; MetricsOpen for /metrics alone).
// The Sawtooth drop-in and /rpc are open by default, as a validator's REST
// API and a public RPC endpoint are (their batches and transactions are
// signed); SawtoothRequireKey and RPCRequireKey secure them. A missing,
// unknown or revoked key is 401; a valid key without the scope is 403,
// except on the wallet routes, where a wallet the key may not see is 404
// like a missing one.

// AccessConfig says which surfaces need a key.
type AccessConfig struct {
	// Open serves every route without a key (--api-insecure-open): each request
	// acts as an anonymous admin. For a trusted network only.
	Open bool `flag:"insecure-open" help:"serve every /v1 route, /metrics and the console without an API key (each request acts as an anonymous admin): for a trusted network only"`
	// MetricsOpen serves /metrics without a key (--api-metrics-open), for
	// scrapers that send none.
	MetricsOpen bool `flag:"metrics-open" help:"serve /metrics without an API key (for scrapers that send none); the rest still needs one"`
	// SawtoothRequireKey secures the Sawtooth drop-in (POST /batches, GET
	// and POST /batch_statuses): posting needs the batches' service scope,
	// reading statuses any valid key.
	SawtoothRequireKey bool `flag:"sawtooth-require-key" help:"batch lane: the Sawtooth drop-in (POST /batches, /batch_statuses) needs an API key: posting one with the batches' service scope (service:ID or service:*), reading statuses any valid key"`
	// RPCRequireKey secures POST /rpc: it then needs pool:write.
	RPCRequireKey bool `flag:"rpc-require-key" help:"builder lane: POST /rpc needs an API key with pool:write"`
	// KeyCache is how long a key authenticate looked up is kept in memory
	// (keyCache); 0 reads the key on every request.
	KeyCache time.Duration `flag:"key-cache" help:"how long an API key read from the database is kept in memory, so that its requests read nothing (0: read on every request); a key revoked or changed is forgotten at once when its change is notified, else after this"`
	// RateLimits bound each key's requests, and each client address's on
	// the routes that need no key, so that one client cannot starve the
	// others: past its rate a request is 429 with Retry-After.
	RateLimits RateLimits `group:""`
}

// RateLimits are the request rates (ratelimit.Rate: COUNT/UNIT:BURST; zero
// is unlimited).
type RateLimits struct {
	// Key is a key's rate when none of its scopes has one of its own.
	Key ratelimit.Rate `flag:"rate-limit" help:"each API key's request rate, COUNT/UNIT:BURST (UNIT s, m or h; 0: unlimited), when none of its scopes has a rate of its own; past it a request is 429 with Retry-After"`
	// Anonymous is each client address's rate where no key is sent (the
	// Sawtooth drop-in and /rpc when open, every route with Open). The
	// probes and the document are never limited.
	Anonymous ratelimit.Rate `flag:"rate-limit-anonymous" help:"each client address's request rate on the routes that need no key (the Sawtooth drop-in, /rpc; every route with --api-insecure-open), COUNT/UNIT:BURST (0: unlimited); the probes and the API document are never limited"`
	// Scopes are rates by scope kind (admin, read, pool:write, service,
	// wallet): a key's rate is the most generous of its scopes' that have
	// one.
	Scopes ScopeRates `flag:"rate-limit-scope" help:"a rate for the keys holding a kind of scope, KIND=COUNT/UNIT:BURST with KIND one of admin, read, pool:write, service, wallet (repeatable; a list in the file); a key's rate is the most generous of its scopes'"`
}

// DefaultRateLimits are generous: a runaway client is stopped, a busy one
// is not.
func DefaultRateLimits() RateLimits {
	r := ratelimit.Rate{Count: 1000, Period: time.Second, Burst: 2000}
	return RateLimits{Key: r, Anonymous: r}
}

// ScopeKinds are the kinds RateLimits.Scopes takes.
var ScopeKinds = []string{"admin", "read", "pool:write", "service", "wallet"}

// ScopeRates are rates by scope kind. As a setting's value it is
// repeatable: each value is KIND=RATE and adds one kind's rate (a list in
// the configuration file).
type ScopeRates map[string]ratelimit.Rate

// Strings are the rates as KIND=RATE, by kind.
func (s *ScopeRates) Strings() []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, kind := range slices.Sorted(maps.Keys(*s)) {
		out = append(out, kind+"="+(*s)[kind].String())
	}
	return out
}

func (s *ScopeRates) String() string { return strings.Join(s.Strings(), ",") }

// Set adds the rate of one kind, KIND=RATE; "" adds none.
func (s *ScopeRates) Set(v string) error {
	if v == "" {
		return nil
	}
	kind, rate, ok := strings.Cut(v, "=")
	if !ok || !slices.Contains(ScopeKinds, kind) {
		return fmt.Errorf("want KIND=RATE with KIND one of %s, got %q", strings.Join(ScopeKinds, ", "), v)
	}
	r, err := ratelimit.ParseRate(rate)
	if err != nil {
		return err
	}
	if *s == nil {
		*s = ScopeRates{}
	}
	(*s)[kind] = r
	return nil
}

// scopeKind is the kind of scope for RateLimits.Scopes.
func scopeKind(s store.Scope) string {
	kind, _, found := strings.Cut(string(s), ":")
	if !found || s == store.ScopePoolWrite {
		return string(s)
	}
	return kind
}

// rateOf is p's rate: by its key's scopes, or Anonymous.
func (l RateLimits) rateOf(p principal) ratelimit.Rate {
	if p.anonymous {
		return l.Anonymous
	}
	best, found := l.Key, false
	for _, sc := range p.key.Scopes {
		r, ok := l.Scopes[scopeKind(sc)]
		switch {
		case !ok:
		case !found, r.Unlimited(), !best.Unlimited() && perSecond(r) > perSecond(best):
			best, found = r, true
		}
	}
	return best
}

func perSecond(r ratelimit.Rate) float64 { return float64(r.Count) / r.Period.Seconds() }

// unlimitedOps are never rate limited: the probes and the document.
var unlimitedOps = map[string]bool{"healthz": true, "headHealthz": true, "readyz": true, "headReadyz": true, "getOpenAPI": true}

// allow answers 429 with Retry-After when the request's principal (its key,
// or its client address) is past its rate.
func (s *Server) allow(c echo.Context, p principal) error {
	r := s.cfg.Access.RateLimits.rateOf(p)
	if r.Unlimited() {
		return nil
	}
	key := "k:" + p.key.ID
	if p.anonymous {
		key = "a:" + clientAddr(c.Request())
	}
	if ok, wait := s.limiter.Allow(key, r); !ok {
		retry := ratelimit.RetryAfterSeconds(wait)
		c.Response().Header().Set("Retry-After", retry)
		return errorf(http.StatusTooManyRequests, "too many requests: %s is limited to %s; retry after %s s", p.name(), r, retry)
	}
	return nil
}

// clientAddr is the request's peer address without its port. Forwarding
// headers are not trusted: any client can write them.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limitAnonymous rate-limits a route that needs no key by client address.
func (s *Server) limitAnonymous(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.allow(c, principal{anonymous: true}); err != nil {
			return err
		}
		return next(c)
	}
}

// principal is who a request acts as: a key, or anyone on an open API.
type principal struct {
	key       store.APIKey
	anonymous bool
}

// has reports whether the principal holds scope (admin holds every one).
func (p principal) has(scope store.Scope) bool { return p.anonymous || p.key.Has(scope) }

// wallet reports whether the principal opens wallet's routes.
func (p principal) wallet(name string) bool { return p.anonymous || p.key.AllowsWallet(name) }

// service reports whether the principal opens service's batches.
func (p principal) service(id string) bool { return p.anonymous || p.key.AllowsService(id) }

// admin reports whether the principal holds admin.
func (p principal) admin() bool { return p.has(store.ScopeAdmin) }

// reads reports whether the principal may read every lane.
func (p principal) reads() bool { return p.has(store.ScopeRead) }

// name is who the principal is, for logs and the audit.
func (p principal) name() string {
	if p.anonymous {
		return "anonymous"
	}
	return p.key.Name
}

// audit is the principal's audit entry for an action made via where.
func (p principal) audit(via string) *store.AuditEntry {
	// An anonymous principal has the zero key: no id.
	return &store.AuditEntry{KeyID: p.key.ID, KeyName: p.name(), Via: via}
}

type principalKey struct{}

// withPrincipal returns ctx carrying p.
func withPrincipal(ctx context.Context, p principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalOf returns the request's principal: a route that is not secured
// has none (a zero principal opens nothing).
func principalOf(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// opNeeds is what a secured operation needs of a valid key, by operationId;
// an operation not listed is decided by its handler (the wallet routes by
// walletFor, the batch routes by the batches' services).
var opNeeds = map[string]struct {
	allows func(principal) bool
	needs  string
}{
	"metrics":     {principal.reads, "read"},
	"listBundles": {principal.reads, "read"},
	"getBundle":   {principal.reads, "read"},
	"listChains":  {principal.reads, "read"},
	"getChain":    {principal.reads, "read"},
	"getPoolTx": {func(p principal) bool { return p.reads() || p.has(store.ScopePoolWrite) },
		"read or pool:write"},
	"postPoolTx":         {func(p principal) bool { return p.has(store.ScopePoolWrite) }, "pool:write"},
	"postRPC":            {func(p principal) bool { return p.has(store.ScopePoolWrite) }, "pool:write"},
	"addWallet":          {principal.admin, "admin"},
	"updateWallet":       {principal.admin, "admin"},
	"removeWallet":       {principal.admin, "admin"},
	"putWalletPolicy":    {principal.admin, "admin"},
	"deleteWalletPolicy": {principal.admin, "admin"},
}

// securedOps returns which operations need a key under the configuration:
// those the document secures, the Sawtooth drop-in and /rpc when asked,
// /metrics unless opened.
func (s *Server) securedOps(rules specRules) map[string]bool {
	out := make(map[string]bool, len(rules.secured)+4)
	for op := range rules.secured {
		out[op] = true
	}
	if s.cfg.Access.MetricsOpen {
		delete(out, "metrics")
	}
	if s.cfg.Access.SawtoothRequireKey {
		for _, op := range []string{"postSawtoothBatches", "getSawtoothBatchStatuses", "postSawtoothBatchStatuses"} {
			out[op] = true
		}
	}
	if s.cfg.Access.RPCRequireKey {
		out["postRPC"] = true
	}
	return out
}

// withAccess returns the operations' middlewares, with the access check
// first on the secured ones. rules is shared by every Server: it is
// copied, not changed.
func (s *Server) withAccess(rules specRules) map[string][]echo.MiddlewareFunc {
	secured := s.securedOps(rules)
	out := make(map[string][]echo.MiddlewareFunc, len(rules.guards))
	for op, mws := range rules.guards {
		switch {
		case !secured[op] && unlimitedOps[op]:
		case !secured[op] && rules.sawtoothOps[op]:
			mws = append(slices.Clone(mws), s.limitAnonymous)
		case !secured[op]:
			mws = append([]echo.MiddlewareFunc{s.limitAnonymous}, mws...)
		case rules.sawtoothOps[op]:
			// Inside sawtoothErrors, so that a refusal is a Sawtooth error
			// object.
			mws = append(slices.Clone(mws), s.requireAccess(op))
		default:
			mws = append([]echo.MiddlewareFunc{s.requireAccess(op)}, mws...)
		}
		out[op] = mws
	}
	return out
}

// requireAccess answers 401 unless the request carries a valid key (or the
// API is open), 403 when the key lacks what op needs (opNeeds), and leaves
// the principal in the request's context.
func (s *Server) requireAccess(op string) echo.MiddlewareFunc {
	need, listed := opNeeds[op]
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, err := s.authenticate(c)
			if err != nil {
				return err
			}
			if err := s.allow(c, p); err != nil {
				return err
			}
			if listed && !need.allows(p) {
				return errorf(http.StatusForbidden, "forbidden: key %q has scopes %s; this route needs %s", p.name(), store.JoinScopes(p.key.Scopes, ","), need.needs)
			}
			req := c.Request()
			c.SetRequest(req.WithContext(withPrincipal(req.Context(), p)))
			return next(c)
		}
	}
}

// authenticate returns the request's principal: anonymous on an open API,
// else the valid key it carries, or a 401.
func (s *Server) authenticate(c echo.Context) (principal, error) {
	if s.cfg.Access.Open {
		return principal{anonymous: true}, nil
	}
	token, problem := apiKeyToken(c.Request().Header)
	if problem != "" {
		return principal{}, unauthorized(c, problem, token != "")
	}
	if s.store == nil {
		return principal{}, errorf(http.StatusServiceUnavailable, "database unavailable")
	}
	now := time.Now() // the cache's age is the wall clock's, not the rules'
	cached, ok, gen := s.keys.get(token, now)
	if ok {
		return principal{key: cached}, nil
	}
	ctx, cancel := s.dbContext(c.Request().Context())
	key, err := s.store.APIKeyLookup(ctx, token)
	cancel()
	switch {
	case errors.Is(err, store.ErrNotFound):
		return principal{}, unauthorized(c, "invalid API key: unknown or revoked", true)
	case err != nil:
		return principal{}, err
	}
	s.keys.put(token, key, now, gen)
	return principal{key: key}, nil
}

// forbiddenService is the 403 of a key that may not use service's batches.
func forbiddenService(p principal, service string) error {
	return errorf(http.StatusForbidden, "forbidden: key %q has scopes %s; the batches of service %q need service:%s or service:*",
		p.name(), store.JoinScopes(p.key.Scopes, ","), service, service)
}
