package httpapi_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
	"github.com/ledgerq/ledgerq/internal/store"
)

// twoChains are a chain with one node backing off and a send-only
// endpoint (degraded), and a chain whose one node is down (unavailable).
func twoChains() []evmnodes.ChainStatus {
	failed, retry := t0.Add(-time.Minute), t0.Add(30*time.Second)
	return []evmnodes.ChainStatus{
		{Name: "mainnet", ChainID: 1, State: evmnodes.ChainDegraded, Head: 120, Confirmations: 12, Nodes: []evmnodes.NodeStatus{
			{Name: "alchemy", URL: "https://eth.example/", State: evmnodes.NodeHealthy, Head: 120, Calls: 40, Errors: 1, ErrorRate: 0.025, LatencyMillis: 41.5},
			{Name: "infura", URL: "https://infura.example/", State: evmnodes.NodeBackoff, Head: 118, Lag: 2, Calls: 10, Errors: 4, ErrorRate: 0.4, LatencyMillis: 230,
				LastError: "429 Too Many Requests", LastErrorAt: &failed, RetryAt: &retry},
			{Name: "flashbots", URL: "https://rpc.flashbots.example/", SendOnly: true, State: evmnodes.NodeHealthy},
		}},
		{Name: "base", ChainID: 8453, State: evmnodes.ChainUnavailable, Head: 0, Confirmations: 3, Nodes: []evmnodes.NodeStatus{
			{Name: "own", URL: "http://10.0.0.7:8545/", State: evmnodes.NodeDown, Calls: 3, Errors: 3, ErrorRate: 1,
				LastError: "connection refused", LastErrorAt: &failed},
		}},
	}
}

// withChains serves chains as Config.Chains.
func withChains(chains func() []evmnodes.ChainStatus) func(*httpapi.Config) {
	return func(cfg *httpapi.Config) { cfg.Chains = chains }
}

const mainnetJSON = `{"name":"mainnet","chain_id":1,"state":"degraded","head":120,"confirmations":12,"nodes":[
	{"name":"alchemy","url":"https://eth.example/","send_only":false,"state":"healthy","head":120,"lag":0,"calls":40,"errors":1,"error_rate":0.025,"latency_ms":41.5},
	{"name":"infura","url":"https://infura.example/","send_only":false,"state":"backoff","head":118,"lag":2,"calls":10,"errors":4,"error_rate":0.4,"latency_ms":230,
	 "last_error":"429 Too Many Requests","last_error_at":"2026-01-02T03:03:05Z","retry_at":"2026-01-02T03:04:35Z"},
	{"name":"flashbots","url":"https://rpc.flashbots.example/","send_only":true,"state":"healthy","head":0,"lag":0,"calls":0,"errors":0,"error_rate":0,"latency_ms":0}]}`

const baseJSON = `{"name":"base","chain_id":8453,"state":"unavailable","head":0,"confirmations":3,"nodes":[
	{"name":"own","url":"http://10.0.0.7:8545/","send_only":false,"state":"down","head":0,"lag":0,"calls":3,"errors":3,"error_rate":1,"latency_ms":0,
	 "last_error":"connection refused","last_error_at":"2026-01-02T03:03:05Z"}]}`

func TestChains_ListShowsEveryChainAndItsNodesAsTheNodeLayerSeesThemAtTheRequest(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := setup(t, withChains(func() []evmnodes.ChainStatus {
		chains := twoChains()
		if calls.Add(1) > 1 {
			chains[1].State, chains[1].Nodes[0].State = evmnodes.ChainHealthy, evmnodes.NodeHealthy
		}
		return chains
	}))
	resp := f.get("/v1/chains")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.JSONEq(t, `{"chains":[`+mainnetJSON+`,`+baseJSON+`]}`, resp.Body)

	resp = f.get("/v1/chains/base")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, `"state":"healthy"`, "read again at the request, not at start")
	require.NotContains(t, resp.Body, "unavailable")
}

func TestChains_OneChainByNameOr404(t *testing.T) {
	t.Parallel()
	f := setup(t, withChains(twoChains))
	resp := f.get("/v1/chains/mainnet")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.JSONEq(t, mainnetJSON, resp.Body)
	resp = f.get("/v1/chains/polygon")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, resp.Body)
	require.JSONEq(t, `{"success":false,"message":"not found: this process serves no chain named \"polygon\""}`, resp.Body)
	resp = f.get("/v1/chains/main%00net")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, resp.Body)
}

func TestChains_AProcessWithoutChainsListsNone(t *testing.T) {
	t.Parallel()
	for name, chains := range map[string]func() []evmnodes.ChainStatus{
		"no source": nil, "no chain": func() []evmnodes.ChainStatus { return nil },
	} {
		f := setup(t, withChains(chains))
		resp := f.get("/v1/chains")
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", name, resp.Body)
		require.JSONEq(t, `{"chains":[]}`, resp.Body, name)
		require.Equal(t, http.StatusNotFound, f.get("/v1/chains/mainnet").StatusCode, name)
	}
}

// The chains are an operator's view: a key with read (or admin) sees
// them, a key scoped to a wallet, a service or the pool does not.
func TestChains_NeedAKeyWithRead(t *testing.T) {
	t.Parallel()
	f := setup(t, withChains(twoChains))
	st := f.db.Store
	for _, c := range []struct {
		key  string
		want int
	}{
		{"", http.StatusUnauthorized},
		{keyWith(t, st, store.ScopeRead), http.StatusOK},
		{keyWith(t, st, store.ScopeAdmin), http.StatusOK},
		{keyWith(t, st, store.WalletScope("main")), http.StatusForbidden},
		{keyWith(t, st, store.ScopeAnyService), http.StatusForbidden},
		{keyWith(t, st, store.ScopePoolWrite), http.StatusForbidden},
	} {
		for _, path := range []string{"/v1/chains", "/v1/chains/mainnet"} {
			resp := f.as(c.key, http.MethodGet, path, "")
			require.Equal(t, c.want, resp.StatusCode, "%s: %s", path, resp.Body)
		}
	}
}

// A chain none of whose nodes serves is named in /readyz with each node's
// state and last error (not its URL: /readyz needs no key), and the
// process stays ready: the API still takes and answers tasks, and every
// process of a deployment reads the same providers.
func TestReadyz_NamesAnUnavailableChainAndItsNodesAndStaysReady(t *testing.T) {
	t.Parallel()
	healthy := func() []evmnodes.ChainStatus { return twoChains()[:1] }
	f := setup(t, withChains(healthy))
	resp := f.get("/readyz")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.JSONEq(t, `{"success":true,"status":"ready"}`, resp.Body, "a degraded chain is not named")

	wantBase := `{"name":"base","chain_id":8453,"nodes":[{"name":"own","state":"down","last_error":"connection refused","last_error_at":"2026-01-02T03:03:05Z"}]}`
	f = setup(t, withChains(twoChains))
	resp = f.get("/readyz")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.JSONEq(t, `{"success":true,"status":"ready","unavailable_chains":[`+wantBase+`]}`, resp.Body)
	require.NotContains(t, resp.Body, "10.0.0.7")

	// Every chain unavailable: still ready, every chain named.
	allDown := func() []evmnodes.ChainStatus {
		chains := twoChains()
		chains[0].State = evmnodes.ChainUnavailable
		return chains
	}
	f = setup(t, withChains(allDown))
	resp = f.get("/readyz")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.JSONEq(t, `{"success":true,"status":"ready","unavailable_chains":[{"name":"mainnet","chain_id":1,"nodes":[
		{"name":"alchemy","state":"healthy"},
		{"name":"infura","state":"backoff","last_error":"429 Too Many Requests","last_error_at":"2026-01-02T03:03:05Z","retry_at":"2026-01-02T03:04:35Z"},
		{"name":"flashbots","state":"healthy"}]},`+wantBase+`]}`, resp.Body)
	require.Equal(t, http.StatusOK, f.head("/readyz").StatusCode)
}

// The console the API serves shows the same chains (Config.Chains).
func TestChains_TheConsoleShowsTheSameChains(t *testing.T) {
	t.Parallel()
	f := setup(t, withChains(twoChains), func(cfg *httpapi.Config) { cfg.Access.Open = true })
	req, err := http.NewRequest(http.MethodGet, f.url+"/ui/chains", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/html")
	resp, body := roundTrip(t, req)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), "https://infura.example/")
	require.Contains(t, string(body), `<span class="pill bad">unavailable</span>`)
}
