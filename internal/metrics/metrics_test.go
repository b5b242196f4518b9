package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/metrics"
)

func TestMethodLabel_StandardMethodsAsTheyAreEveryOtherNameIsOther(t *testing.T) {
	t.Parallel()
	for method, want := range map[string]string{
		"GET": "GET", "HEAD": "HEAD", "POST": "POST", "PUT": "PUT", "PATCH": "PATCH", "DELETE": "DELETE",
		"OPTIONS": "OPTIONS", "CONNECT": "CONNECT", "TRACE": "TRACE",
		"get": "other", "Z1": "other", "PROPFIND": "other", "": "other", "GET ": "other",
	} {
		if got := metrics.MethodLabel(method); got != want {
			t.Errorf("MethodLabel(%q) = %q, want %q", method, got, want)
		}
	}
}

// series returns the series of family name in m's registry, by their
// labels written name=value and joined with commas in name order: a
// counter's or a gauge's value, a histogram's count of observations.
func series(t *testing.T, m *metrics.Metrics, name string) map[string]float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := s.GetCounter().GetValue() + s.GetGauge().GetValue() + float64(s.GetHistogram().GetSampleCount())
			out[strings.Join(labels, ",")] = v
		}
	}
	return out
}

func TestMetrics_NodeCallCountsEachCallByOutcomeAndTimesIt(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	for _, outcome := range []string{"ok", "ok", "verdict", "rate_limited", "unavailable", "timeout", "lagging"} {
		m.NodeCall("mainnet", "alchemy", outcome, 20*time.Millisecond)
	}
	m.NodeCall("base", "own", "ok", time.Second)
	require.Equal(t, map[string]float64{
		"chain=mainnet,node=alchemy,outcome=ok":           2,
		"chain=mainnet,node=alchemy,outcome=verdict":      1,
		"chain=mainnet,node=alchemy,outcome=rate_limited": 1,
		"chain=mainnet,node=alchemy,outcome=unavailable":  1,
		"chain=mainnet,node=alchemy,outcome=timeout":      1,
		"chain=mainnet,node=alchemy,outcome=lagging":      1,
		"chain=base,node=own,outcome=ok":                  1,
	}, series(t, m, "ledgerq_chain_node_calls_total"))
	require.Equal(t, map[string]float64{"chain=mainnet,node=alchemy": 7, "chain=base,node=own": 1},
		series(t, m, "ledgerq_chain_node_call_seconds"))
}

func TestMetrics_NodeHeadSetsTheNodesHeadAndLag(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.NodeHead("mainnet", "alchemy", 100, 0)
	m.NodeHead("mainnet", "infura", 97, 3)
	m.NodeHead("mainnet", "alchemy", 104, 1)
	require.Equal(t, map[string]float64{"chain=mainnet,node=alchemy": 104, "chain=mainnet,node=infura": 97},
		series(t, m, "ledgerq_chain_node_head"))
	require.Equal(t, map[string]float64{"chain=mainnet,node=alchemy": 1, "chain=mainnet,node=infura": 3},
		series(t, m, "ledgerq_chain_node_lag_blocks"))
}

// nodeStates is the state series of node n of chain mainnet, as state=value.
func nodeStates(t *testing.T, m *metrics.Metrics, n string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for labels, v := range series(t, m, "ledgerq_chain_node_state") {
		if rest, ok := strings.CutPrefix(labels, "chain=mainnet,node="+n+",state="); ok {
			out[rest] = v
		}
	}
	return out
}

func TestMetrics_NodeStateIsOneForTheNodesCurrentStateAndZeroForTheOthers(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.NodeState("mainnet", "alchemy", "healthy")
	m.NodeState("mainnet", "infura", "unknown")
	require.Equal(t, map[string]float64{"healthy": 1, "lagging": 0, "backoff": 0, "down": 0, "wrong_chain": 0, "unknown": 0},
		nodeStates(t, m, "alchemy"))
	m.NodeState("mainnet", "alchemy", "backoff")
	require.Equal(t, map[string]float64{"healthy": 0, "lagging": 0, "backoff": 1, "down": 0, "wrong_chain": 0, "unknown": 0},
		nodeStates(t, m, "alchemy"))
	require.Equal(t, map[string]float64{"healthy": 0, "lagging": 0, "backoff": 0, "down": 0, "wrong_chain": 0, "unknown": 1},
		nodeStates(t, m, "infura"), "another node's states are its own")

	// A state the metrics do not know is "other", and goes with the next
	// known one.
	m.NodeState("mainnet", "alchemy", "melting")
	require.Equal(t, map[string]float64{"healthy": 0, "lagging": 0, "backoff": 0, "down": 0, "wrong_chain": 0, "unknown": 0, "other": 1},
		nodeStates(t, m, "alchemy"))
	m.NodeState("mainnet", "alchemy", "down")
	require.Equal(t, map[string]float64{"healthy": 0, "lagging": 0, "backoff": 0, "down": 1, "wrong_chain": 0, "unknown": 0},
		nodeStates(t, m, "alchemy"))
}

// The node metrics' labels are the configured chain and node names and
// fixed sets of outcomes and states: whatever strings a node layer passes
// as an outcome or a state (an error's text, say), the series stay
// bounded.
func TestMetrics_NodeOutcomesAndStatesOutsideTheirSetsAddOneSeriesAtMost(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	for i := range 300 {
		m.NodeCall("mainnet", "alchemy", fmt.Sprintf("502 Bad Gateway %d", i), time.Millisecond)
		m.NodeState("mainnet", "alchemy", fmt.Sprintf("state %d", i))
	}
	require.Equal(t, map[string]float64{"chain=mainnet,node=alchemy,outcome=other": 300}, series(t, m, "ledgerq_chain_node_calls_total"))
	require.Len(t, series(t, m, "ledgerq_chain_node_state"), 7, "the six states and other")
}

// nodeObserver is package evmnodes' Observer, which *Metrics implements
// for the node layer to call.
type nodeObserver interface {
	NodeCall(chain, node, outcome string, d time.Duration)
	NodeHead(chain, node string, head, lag uint64)
	NodeState(chain, node, state string)
}

var _ nodeObserver = (*metrics.Metrics)(nil)

func TestMetrics_NodeMethodsAreSafeOnNil(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	m.NodeCall("mainnet", "alchemy", "ok", time.Millisecond)
	m.NodeHead("mainnet", "alchemy", 1, 0)
	m.NodeState("mainnet", "alchemy", "healthy")
}
