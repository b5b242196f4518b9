package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	gethmetrics "github.com/ethereum/go-ethereum/metrics"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// Unauthenticated requests may not grow memory (issue 18 item 7): every
// label value the HTTP and JSON-RPC layers record comes from a bounded set,
// so no client-chosen string becomes a new series.

// httpSeries returns the label sets of every series of the ledgerq_http_
// families in m's registry.
func httpSeries(t *testing.T, m *metrics.Metrics) []map[string]string {
	t.Helper()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	var out []map[string]string
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "ledgerq_http_") {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out = append(out, labels)
		}
	}
	return out
}

// gethMetricNames returns the names in go-ethereum's default metrics
// registry, where its JSON-RPC server times each method it serves.
func gethMetricNames() []string {
	var names []string
	gethmetrics.DefaultRegistry.Each(func(name string, _ any) { names = append(names, name) })
	return names
}

// send makes a request without checking it against the document: these
// requests are not in it on purpose.
func send(t *testing.T, method, url string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestMetrics_ClientChosenMethodsPathsAndRPCMethodsAddNoSeries(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	pc := poolConfig()
	m := metrics.New()
	api := httpapi.New(httpapi.DefaultConfig(), httpapi.Deps{
		Store: db.Store, Clock: clock.NewFake(t0), Logger: testLogger(t), Metrics: m,
		Pool: &pc, PoolChain: ledgertest.NewPoolChain(),
	})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	rpcBody := func(method string) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":%q,"params":[]}`, method)
	}
	// Every kind of answer once, so the series the hostile requests below
	// may land in exist already.
	for _, method := range []string{http.MethodGet, http.MethodPost, "Z0", "PROPFIND"} {
		send(t, method, srv.URL+"/healthz", nil)
		send(t, method, srv.URL+"/no/such/route-0", nil)
	}
	send(t, http.MethodPost, srv.URL+"/rpc", rpcBody("eth_chainId"))
	send(t, http.MethodPost, srv.URL+"/rpc", rpcBody("nope_0"))
	before := len(httpSeries(t, m))
	gethBefore := len(gethMetricNames())

	const n = 300
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			send(t, fmt.Sprintf("Z%d", i), srv.URL+"/healthz", nil)
			send(t, fmt.Sprintf("M%d", i), srv.URL+fmt.Sprintf("/no/such/route-%d", i), nil)
			send(t, http.MethodGet, srv.URL+fmt.Sprintf("/v1/batches/%d/x/%d", i, i), nil)
			send(t, http.MethodPost, srv.URL+"/rpc", rpcBody(fmt.Sprintf("nope_%d", i)))
			send(t, http.MethodPost, srv.URL+"/rpc", rpcBody(fmt.Sprintf("eth_nope%d", i)))
		})
	}
	wg.Wait()

	// The hostile requests may add a few series (a code not seen yet), never
	// one per request.
	series := httpSeries(t, m)
	require.LessOrEqual(t, len(series)-before, 6, "series grew from %d to %d", before, len(series))
	require.LessOrEqual(t, len(gethMetricNames())-gethBefore, 2, "go-ethereum's JSON-RPC metrics grew: %v",
		slices.DeleteFunc(gethMetricNames(), func(s string) bool { return !strings.Contains(s, "nope") }))
	known := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "other"}
	for _, s := range series {
		require.Contains(t, known, s["method"], "method label of %v", s)
		require.NotContains(t, s["route"], "route-", "route label of %v", s)
		require.False(t, strings.HasPrefix(s["route"], "/v1/batches/") && !strings.Contains(s["route"], ":"), "route label of %v", s)
	}
}
