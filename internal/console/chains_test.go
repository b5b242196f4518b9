package console

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
)

// testChains are the fixture's chains: mainnet degraded (a node backing
// off, a send-only endpoint), base unavailable (its one node down, with an
// error text a page must escape).
func testChains(now time.Time) []evmnodes.ChainStatus {
	failed, retry := now.Add(-time.Minute), now.Add(30*time.Second)
	return []evmnodes.ChainStatus{
		{Name: "mainnet", ChainID: 1, State: evmnodes.ChainDegraded, Head: 120, Confirmations: 12, Nodes: []evmnodes.NodeStatus{
			{Name: "alchemy", URL: "https://eth.example/", State: evmnodes.NodeHealthy, Head: 120, Calls: 40, Errors: 1, ErrorRate: 0.025, LatencyMillis: 41.5},
			{Name: "infura", URL: "https://infura.example/", State: evmnodes.NodeBackoff, Head: 118, Lag: 2, Calls: 10, Errors: 4, ErrorRate: 0.4, LatencyMillis: 230,
				LastError: "429 Too Many Requests", LastErrorAt: &failed, RetryAt: &retry},
			{Name: "flashbots", URL: "https://rpc.flashbots.example/", SendOnly: true, State: evmnodes.NodeHealthy, Head: 120},
		}},
		{Name: "base", ChainID: 8453, State: evmnodes.ChainUnavailable, Confirmations: 3, Nodes: []evmnodes.NodeStatus{
			{Name: "own", URL: "http://10.0.0.7:8545/", State: evmnodes.NodeDown, Calls: 3, Errors: 3, ErrorRate: 1,
				LastError: "<script>alert(1)</script> connection refused", LastErrorAt: &failed},
		}},
	}
}

var (
	tags   = regexp.MustCompile(`<[^>]+>`)
	spaces = regexp.MustCompile(`\s+`)
)

// rowText is the text of the table row that holds cell, tags stripped and
// spaces folded ("" when none does).
func rowText(body, cell string) string {
	for _, row := range strings.Split(body, "<tr>") {
		if strings.Contains(row, cell) {
			row, _, _ = strings.Cut(row, "</tr>")
			return strings.TrimSpace(spaces.ReplaceAllString(tags.ReplaceAllString(row, " "), " "))
		}
	}
	return ""
}

func TestConsole_ChainsPageShowsEachChainAndItsNodes(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{})
	b := fx.loggedIn("read")
	rec := b.get("/ui/chains")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	body := rec.Body.String()
	require.Contains(t, body, `<a href="/ui/chains" aria-current="page">Chains</a>`)

	require.Contains(t, body, `<h2>mainnet <span class="pill warn">degraded</span></h2>`)
	require.Contains(t, body, `<dt>Chain id</dt><dd>1</dd>`)
	require.Contains(t, body, `<dt>Head</dt><dd>120</dd>`)
	require.Contains(t, body, `<dt>Confirmations</dt><dd>12</dd>`)
	require.Contains(t, body, `<h2>base <span class="pill bad">unavailable</span></h2>`)
	require.Contains(t, body, `<dt>Head</dt><dd>none seen yet</dd>`)

	// Node, URL, send only, state, head, lag, error rate, latency, last
	// error, retry at.
	retry := fx.clock.Now().Add(30 * time.Second).UTC().Format("2006-01-02 15:04:05")
	require.Equal(t, "alchemy https://eth.example/ no healthy 120 0 2.5 % (1 of 40 calls failed) 42 ms — —", rowText(body, ">alchemy<"))
	require.Equal(t, "infura https://infura.example/ no backoff 118 2 40.0 % (4 of 10 calls failed) 230 ms 429 Too Many Requests 1m 0s ago "+retry,
		rowText(body, ">infura<"))
	require.Equal(t, "flashbots https://rpc.flashbots.example/ yes healthy 120 0 0.0 % (0 of 0 calls failed) 0.0 ms — —", rowText(body, ">flashbots<"))
	require.Contains(t, body, `<span class="pill bad">down</span>`)
	require.Contains(t, body, "&lt;script&gt;alert(1)&lt;/script&gt; connection refused", "a node's error text is escaped")
	require.NotContains(t, body, "<script>alert")

	// Every page links to it.
	require.Contains(t, b.get("/ui/").Body.String(), `<a href="/ui/chains" >Chains</a>`)
}

func TestConsole_ChainsPageSaysWhenTheProcessServesNoChain(t *testing.T) {
	t.Parallel()
	fx := setup(t, Config{Chains: func() []evmnodes.ChainStatus { return nil }})
	rec := fx.loggedIn("read").get("/ui/chains")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "This server sends on no chain")
}
