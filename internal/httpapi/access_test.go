package httpapi_test

// The access model: every /v1 route and /metrics needs a key unless the API
// is opened; a key opens what its scopes say; the Sawtooth drop-in and
// /rpc are open unless asked to need one.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/ratelimit"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// accessFixture serves the API with every lane's routes on (the builder
// lane's too) under access, with no key of its own.
func accessFixture(t *testing.T, access httpapi.AccessConfig) *apiFixture {
	t.Helper()
	db := testdb.New(t)
	cfg := httpapi.DefaultConfig()
	cfg.Access = access
	pc := poolConfig()
	evm := ledgertest.NewEVMRPC()
	evm.Answer("eth_getBalance", `"0x3635c9adc5dea00000"`)
	m := metrics.New()
	api := httpapi.New(cfg, httpapi.Deps{Store: db.Store, Clock: clock.NewFake(t0), Logger: testLogger(t), Metrics: m,
		Pool: &pc, PoolChain: ledgertest.NewPoolChain(), EVM: evm})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &apiFixture{t: t, db: db, url: srv.URL, metrics: m}
}

// as sends method path body with key (none when empty) and returns the
// answer, checked against the document.
func (f *apiFixture) as(key, method, path, body string) httpResult {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	require.NoError(f.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return do(f.t, req)
}

// publicOps need no key whatever the configuration: the probes and the
// document; and the Sawtooth drop-in and /rpc by default.
var publicOps = map[string]bool{
	"healthz": true, "headHealthz": true, "readyz": true, "headReadyz": true, "getOpenAPI": true,
	"postSawtoothBatches": true, "getSawtoothBatchStatuses": true, "postSawtoothBatchStatuses": true, "postRPC": true,
}

// Every operation of the document that is not public answers 401 without
// a key: a route added later cannot be left open by mistake.
func TestAccess_EveryRouteButTheProbesTheDocumentSawtoothAndRPCNeedsAKey(t *testing.T) {
	t.Parallel()
	f := accessFixture(t, httpapi.AccessConfig{})
	doc, err := apigen.GetSpec()
	require.NoError(t, err)
	param := regexp.MustCompile(`\{[^}]+\}`)
	seen := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			concrete := param.ReplaceAllStringFunc(path, func(string) string { return "x1" })
			if method == http.MethodHead {
				continue
			}
			resp := f.as("", method, concrete, "")
			if publicOps[op.OperationID] {
				require.NotEqual(t, http.StatusUnauthorized, resp.StatusCode, "%s %s is public", method, path)
				continue
			}
			seen++
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s %s (%s) without a key: %s", method, path, op.OperationID, resp.Body)
			require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer", "%s %s", method, path)
		}
	}
	require.GreaterOrEqual(t, seen, 15, "the secured routes were found")
}

// Each scope opens what it names: read every read route and /metrics but
// no write; pool:write the pool's intake; service scopes their service's
// batches; admin all of it.
func TestAccess_AKeyOpensWhatItsScopesNameAndIs403ElseWhere(t *testing.T) {
	t.Parallel()
	f := accessFixture(t, httpapi.AccessConfig{})
	st := f.db.Store
	read := keyWith(t, st, store.ScopeRead)
	pool := keyWith(t, st, store.ScopePoolWrite)
	orders := keyWith(t, st, store.ServiceScope("orders"))
	anyService := keyWith(t, st, store.ScopeAnyService)
	admin := keyWith(t, st, store.ScopeAdmin)
	wallet := keyWith(t, st, store.WalletScope("main"))

	id, payload := signedBatch(t)
	ordersBatch := string(batchBody(t, id, "orders", payload, ""))
	id2, payload2 := signedBatch(t)
	paymentsBatch := string(batchBody(t, id2, "payments", payload2, ""))
	tx := rawHex(t, dynTx(t, newKey(t), 0, 2, 1))
	for _, c := range []struct {
		key, method, path, body string
		want                    int
	}{
		{orders, http.MethodPost, "/v1/batches", ordersBatch, http.StatusCreated},
		{orders, http.MethodPost, "/v1/batches", paymentsBatch, http.StatusForbidden},
		{read, http.MethodPost, "/v1/batches", paymentsBatch, http.StatusForbidden},
		{wallet, http.MethodPost, "/v1/batches", paymentsBatch, http.StatusForbidden},
		{anyService, http.MethodPost, "/v1/batches", paymentsBatch, http.StatusCreated},
		{orders, http.MethodGet, "/v1/batches/" + id, "", http.StatusOK},
		{orders, http.MethodGet, "/v1/batches/" + id2, "", http.StatusNotFound},
		{orders, http.MethodGet, "/v1/batches?service_id=orders", "", http.StatusOK},
		{orders, http.MethodGet, "/v1/batches?service_id=payments", "", http.StatusForbidden},
		{orders, http.MethodGet, "/v1/batches", "", http.StatusForbidden},
		{anyService, http.MethodGet, "/v1/batches", "", http.StatusOK},
		{read, http.MethodGet, "/v1/batches", "", http.StatusOK},
		{read, http.MethodGet, "/v1/batches/" + id2, "", http.StatusOK},
		{read, http.MethodGet, "/v1/bundles", "", http.StatusOK},
		{read, http.MethodGet, "/metrics", "", http.StatusOK},
		{pool, http.MethodGet, "/metrics", "", http.StatusForbidden},
		{orders, http.MethodGet, "/v1/bundles", "", http.StatusForbidden},
		{read, http.MethodPost, "/v1/pool/txs", fmt.Sprintf(`{"raw":%q}`, tx), http.StatusForbidden},
		{pool, http.MethodPost, "/v1/pool/txs", fmt.Sprintf(`{"raw":%q}`, tx), http.StatusCreated},
		{pool, http.MethodGet, "/v1/bundles", "", http.StatusForbidden},
		{admin, http.MethodGet, "/v1/bundles", "", http.StatusOK},
		{admin, http.MethodGet, "/metrics", "", http.StatusOK},
	} {
		resp := f.as(c.key, c.method, c.path, c.body)
		require.Equal(t, c.want, resp.StatusCode, "%s %s: %s", c.method, c.path, resp.Body)
		if c.want == http.StatusForbidden {
			require.Contains(t, resp.Body, "forbidden: key", "the message says what the key has and needs")
		}
	}
}

// A revoked key opens nothing, at once.
func TestAccess_ARevokedKeyIs401(t *testing.T) {
	t.Parallel()
	f := accessFixture(t, httpapi.AccessConfig{})
	k, token, err := f.db.Store.APIKeyCreate(context.Background(), store.APIKeyCreateParams{Now: t0, Name: "r", Scopes: []store.Scope{store.ScopeRead}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, f.as(token, http.MethodGet, "/v1/bundles", "").StatusCode)
	_, _, err = f.db.Store.APIKeyRevoke(context.Background(), store.APIKeyRevokeParams{Now: t0, ID: k.ID})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, f.as(token, http.MethodGet, "/v1/bundles", "").StatusCode)
}

// --api-insecure-open serves every route without a key; --api-metrics-open only
// /metrics.
func TestAccess_AnOpenedAPINeedsNoKey(t *testing.T) {
	t.Parallel()
	open := accessFixture(t, httpapi.AccessConfig{Open: true})
	id, payload := signedBatch(t)
	require.Equal(t, http.StatusCreated, open.as("", http.MethodPost, "/v1/batches", string(batchBody(t, id, "s", payload, ""))).StatusCode)
	require.Equal(t, http.StatusOK, open.as("", http.MethodGet, "/metrics", "").StatusCode)

	metricsOnly := accessFixture(t, httpapi.AccessConfig{MetricsOpen: true})
	require.Equal(t, http.StatusOK, metricsOnly.as("", http.MethodGet, "/metrics", "").StatusCode)
	require.Equal(t, http.StatusUnauthorized, metricsOnly.as("", http.MethodGet, "/v1/bundles", "").StatusCode)
}

// The Sawtooth drop-in and /rpc are open by default, as a validator's REST
// API and a public RPC are; asked to, they need a key: /rpc with
// pool:write, Sawtooth's POST /batches with the batches' service scope.
func TestAccess_SawtoothAndRPCNeedAKeyOnlyWhenAskedTo(t *testing.T) {
	t.Parallel()
	rpcBody := `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`
	open := accessFixture(t, httpapi.AccessConfig{})
	require.Equal(t, http.StatusOK, open.as("", http.MethodPost, "/rpc", rpcBody).StatusCode)
	_, list := batchList(t, 1)
	require.Equal(t, http.StatusAccepted, open.postBatchList("/batches", list).StatusCode)

	keyed := accessFixture(t, httpapi.AccessConfig{SawtoothRequireKey: true, RPCRequireKey: true})
	require.Equal(t, http.StatusUnauthorized, keyed.as("", http.MethodPost, "/rpc", rpcBody).StatusCode)
	require.Equal(t, http.StatusForbidden, keyed.as(keyWith(t, keyed.db.Store, store.ScopeRead), http.MethodPost, "/rpc", rpcBody).StatusCode)
	require.Equal(t, http.StatusOK, keyed.as(keyWith(t, keyed.db.Store, store.ScopePoolWrite), http.MethodPost, "/rpc", rpcBody).StatusCode)

	resp := keyed.postBatchList("/batches", list)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, resp.Body, `"code":103`, "a Sawtooth error object")
	resp = keyed.postBatchList("/batches?service_id=orders", list, "Authorization", "Bearer "+keyWith(t, keyed.db.Store, store.ServiceScope("payments")))
	require.Equal(t, http.StatusForbidden, resp.StatusCode, resp.Body)
	resp = keyed.postBatchList("/batches?service_id=orders", list, "Authorization", "Bearer "+keyWith(t, keyed.db.Store, store.ServiceScope("orders")))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
}

// A key past its rate is 429 with Retry-After, and only that key is: the
// next key, and the probes, are served.
func TestAccess_AKeyPastItsRateIs429WithRetryAfterAndOthersAreServed(t *testing.T) {
	t.Parallel()
	slow := ratelimit.Rate{Count: 1, Period: time.Hour, Burst: 2}
	f := accessFixture(t, httpapi.AccessConfig{RateLimits: httpapi.RateLimits{Key: slow, Anonymous: slow}})
	busy, other := keyWith(t, f.db.Store, store.ScopeRead), keyWith(t, f.db.Store, store.ScopeRead)

	for i := range 2 {
		require.Equal(t, http.StatusOK, f.as(busy, http.MethodGet, "/v1/bundles", "").StatusCode, "request %d is within the burst", i)
	}
	refused := f.as(busy, http.MethodGet, "/v1/bundles", "")
	require.Equal(t, http.StatusTooManyRequests, refused.StatusCode, refused.Body)
	wait, err := strconv.Atoi(refused.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After is whole seconds")
	require.Greater(t, wait, 1000, "a token is back in an hour/1, not at once")
	require.Contains(t, refused.Body, "too many requests")

	require.Equal(t, http.StatusOK, f.as(other, http.MethodGet, "/v1/bundles", "").StatusCode, "another key has its own bucket")
	for range 5 {
		require.Equal(t, http.StatusOK, f.as("", http.MethodGet, "/healthz", "").StatusCode, "the probes are never limited")
	}
}

// A scope's own rate replaces the default for the keys that hold it; the
// routes that need no key are limited by client address.
func TestAccess_ScopeRatesAndAnonymousRates(t *testing.T) {
	t.Parallel()
	one := ratelimit.Rate{Count: 1, Period: time.Hour, Burst: 1}
	f := accessFixture(t, httpapi.AccessConfig{RateLimits: httpapi.RateLimits{
		Key: one, Anonymous: one, Scopes: map[string]ratelimit.Rate{"admin": {}},
	}})
	admin, reader := keyWith(t, f.db.Store, store.ScopeAdmin), keyWith(t, f.db.Store, store.ScopeRead)
	for range 5 {
		require.Equal(t, http.StatusOK, f.as(admin, http.MethodGet, "/v1/bundles", "").StatusCode, "admin's scope rate is unlimited")
	}
	require.Equal(t, http.StatusOK, f.as(reader, http.MethodGet, "/v1/bundles", "").StatusCode)
	require.Equal(t, http.StatusTooManyRequests, f.as(reader, http.MethodGet, "/v1/bundles", "").StatusCode, "read has no rate of its own: the key rate")

	rpc := `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`
	require.Equal(t, http.StatusOK, f.as("", http.MethodPost, "/rpc", rpc).StatusCode)
	anon := f.as("", http.MethodPost, "/rpc", rpc)
	require.Equal(t, http.StatusTooManyRequests, anon.StatusCode, anon.Body)
	require.NotEmpty(t, anon.Header.Get("Retry-After"))
}
