// Package metrics is ledgerq's Prometheus instrumentation: one registry per
// process (node) with the series docs/operations.md lists ("Metrics"). Every
// method is safe on a nil *Metrics, so tests and tools build services without
// metrics.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
)

// Metrics holds the registry and the series ledgerq updates.
type Metrics struct {
	registry *prometheus.Registry

	transitions   *prometheus.CounterVec
	loopRounds    *prometheus.CounterVec
	loopFailures  *prometheus.CounterVec
	loopDuration  *prometheus.HistogramVec
	ledgerCalls   *prometheus.HistogramVec
	ledgerErrors  *prometheus.CounterVec
	httpRequests  *prometheus.CounterVec
	httpDuration  *prometheus.HistogramVec
	depthFailures *prometheus.CounterVec

	nodeCalls    *prometheus.CounterVec
	nodeDuration *prometheus.HistogramVec
	nodeHead     *prometheus.GaugeVec
	nodeLag      *prometheus.GaugeVec
	nodeState    *prometheus.GaugeVec

	signerCalls    *prometheus.CounterVec
	signerDuration *prometheus.HistogramVec

	policyRefusals *prometheus.CounterVec
	// nodeStateMu serializes NodeState.
	nodeStateMu sync.Mutex
}

// New returns a Metrics with its own registry, which also carries the Go
// runtime and process collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		registry: r,
		transitions: newCounter("ledgerq_transitions_total",
			"Items that changed state, by lane and outcome (the state they moved to, or what happened).", "lane", "outcome"),
		loopRounds:   newCounter("ledgerq_loop_rounds_total", "Rounds run by each loop, failed or not.", "loop"),
		loopFailures: newCounter("ledgerq_loop_round_failures_total", "Rounds that ended in an error, by loop.", "loop"),
		loopDuration: newDurations("ledgerq_loop_round_seconds", "Duration of one loop round.", "loop"),
		ledgerCalls:  newDurations("ledgerq_ledger_call_seconds", "Duration of one ledger call, by lane and operation.", "lane", "op"),
		ledgerErrors: newCounter("ledgerq_ledger_errors_total",
			"Ledger errors by lane, operation and class (transient, deterministic, indeterminate), counted per item the ledger answered for.",
			"lane", "op", "class"),
		httpRequests: newCounter("ledgerq_http_requests_total",
			"HTTP requests by route (the pattern, not the path), method and status code.", "route", "method", "code"),
		httpDuration: newDurations("ledgerq_http_request_seconds", "HTTP request duration by route and method.", "route", "method"),
		depthFailures: newCounter("ledgerq_queue_depth_errors_total",
			"Scrapes whose depth query for a lane failed or timed out (the depth series of that lane are then missing).", "lane"),
		nodeCalls: newCounter("ledgerq_chain_node_calls_total",
			"Calls to a chain's node by outcome: ok, verdict (the node refused the transaction itself), rate_limited, unavailable, timeout, lagging.",
			"chain", "node", "outcome"),
		nodeDuration: newDurations("ledgerq_chain_node_call_seconds", "Duration of one call to a chain's node, whatever its outcome.", "chain", "node"),
		nodeHead:     newGauge("ledgerq_chain_node_head", "The last head a chain's node reported.", "chain", "node"),
		nodeLag: newGauge("ledgerq_chain_node_lag_blocks",
			"How many blocks a chain's node is behind the highest head seen on its chain.", "chain", "node"),
		nodeState: newGauge("ledgerq_chain_node_state",
			"1 for a chain's node's current state (healthy, lagging, backoff, down, wrong_chain, unknown), 0 for the others.",
			"chain", "node", "state"),
		signerCalls: newCounter("ledgerq_signer_calls_total",
			"Signatures asked of a wallet's signer, by backend (keystore, pkcs11, awskms, …) and outcome: ok, unavailable (unreachable or throttling: the wallet waits), error.",
			"backend", "outcome"),
		signerDuration: newDurations("ledgerq_signer_call_seconds", "Duration of one signature by a wallet's signer, whatever its outcome, by backend.", "backend"),
		policyRefusals: newCounter("ledgerq_wallet_policy_refusals_total",
			"Tasks (and speed-ups) a wallet's policy refused, by wallet and rule: recipient, contract, selector, max_value, value_window, fee_window.",
			"wallet", "rule"),
	}
	r.MustRegister(m.transitions, m.loopRounds, m.loopFailures, m.loopDuration, m.ledgerCalls,
		m.ledgerErrors, m.httpRequests, m.httpDuration, m.depthFailures,
		m.nodeCalls, m.nodeDuration, m.nodeHead, m.nodeLag, m.nodeState, m.signerCalls, m.signerDuration,
		m.policyRefusals, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func newCounter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func newGauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// newDurations is a histogram of durations in seconds; every one has the
// same buckets, 0.5 ms to about 2 min, so that their quantiles compare.
func newDurations(name, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	}, labels)
}

// Registry returns the registry, for the /metrics handler.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.registry
}

// Transition counts n items of lane that reached outcome.
func (m *Metrics) Transition(lane, outcome string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.transitions.WithLabelValues(lane, outcome).Add(float64(n))
}

// TransitionCount returns how many items of lane reached outcome in this
// process so far (bench reads its progress from it).
func (m *Metrics) TransitionCount(lane, outcome string) int64 {
	if m == nil {
		return 0
	}
	var out dto.Metric
	if err := m.transitions.WithLabelValues(lane, outcome).Write(&out); err != nil {
		return 0
	}
	return int64(out.GetCounter().GetValue())
}

// ObserveRound records one loop round; it fits loop.Config.Observe.
func (m *Metrics) ObserveRound(name string, took time.Duration, err error) {
	if m == nil {
		return
	}
	m.loopRounds.WithLabelValues(name).Inc()
	m.loopDuration.WithLabelValues(name).Observe(took.Seconds())
	if err != nil && !errors.Is(err, context.Canceled) {
		m.loopFailures.WithLabelValues(name).Inc()
	}
}

// SignerCall records one signature by a wallet's signer backend: its
// outcome and how long it took.
func (m *Metrics) SignerCall(backend, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.signerCalls.WithLabelValues(backend, outcome).Inc()
	m.signerDuration.WithLabelValues(backend).Observe(took.Seconds())
}

// SignerCallCount returns how many signatures backend answered with
// outcome in this process so far.
func (m *Metrics) SignerCallCount(backend, outcome string) int64 {
	if m == nil {
		return 0
	}
	var out dto.Metric
	if err := m.signerCalls.WithLabelValues(backend, outcome).Write(&out); err != nil {
		return 0
	}
	return int64(out.GetCounter().GetValue())
}

// PolicyRefusal counts one refusal by wallet's policy under rule.
func (m *Metrics) PolicyRefusal(wallet, rule string) {
	if m == nil {
		return
	}
	m.policyRefusals.WithLabelValues(wallet, rule).Inc()
}

// PolicyRefusalCount returns how many refusals by wallet's policy under
// rule this process counted so far.
func (m *Metrics) PolicyRefusalCount(wallet, rule string) int64 {
	if m == nil {
		return 0
	}
	var out dto.Metric
	if err := m.policyRefusals.WithLabelValues(wallet, rule).Write(&out); err != nil {
		return 0
	}
	return int64(out.GetCounter().GetValue())
}

// LedgerCall records one ledger call of lane and its errors: err applies to
// the whole call, perItem to single items (nil entries are successes).
func (m *Metrics) LedgerCall(lane, op string, took time.Duration, err error, perItem []error) {
	if m == nil {
		return
	}
	m.ledgerCalls.WithLabelValues(lane, op).Observe(took.Seconds())
	if err != nil {
		m.ledgerErrors.WithLabelValues(lane, op, ledger.ClassOf(err).String()).Inc()
	}
	for _, e := range perItem {
		if e != nil {
			m.ledgerErrors.WithLabelValues(lane, op, ledger.ClassOf(e).String()).Inc()
		}
	}
}

// HTTPRequest records one answered request. route must be the matched
// route's template (a bounded set), "" when none matched; the method is
// counted as one of the standard methods or "other". A label value a client
// chooses would be a new series per request: memory without bound.
func (m *Metrics) HTTPRequest(route, method string, code int, took time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	method = MethodLabel(method)
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.httpDuration.WithLabelValues(route, method).Observe(took.Seconds())
}

// MethodLabel is method as a label value: one of the methods of RFC 9110
// (and PATCH), or "other" for any other name a client sends.
func MethodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

// The node metrics (package evmnodes' Observer) are labelled by the
// configured chain and node names, never by URLs, and their outcome and
// state labels by the fixed sets below (anything else is "other"): the
// series are bounded by the configuration, whatever the nodes answer.

// nodeOutcomes are NodeCall's outcomes.
var nodeOutcomes = []string{"ok", "verdict", "rate_limited", "unavailable", "timeout", "lagging"}

// nodeStates are the states of package evmnodes' nodes.
var nodeStates = []string{evmnodes.NodeHealthy, evmnodes.NodeLagging, evmnodes.NodeBackoff, evmnodes.NodeDown,
	evmnodes.NodeWrongChain, evmnodes.NodeUnknown}

// other is the label value of an outcome or a state outside its set.
const other = "other"

// NodeCall records one call to node of chain that ended with outcome ("ok",
// "verdict", "rate_limited", "unavailable", "timeout" or "lagging"; any
// other is counted as "other") after d.
func (m *Metrics) NodeCall(chain, node, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	if !slices.Contains(nodeOutcomes, outcome) {
		outcome = other
	}
	m.nodeCalls.WithLabelValues(chain, node, outcome).Inc()
	m.nodeDuration.WithLabelValues(chain, node).Observe(d.Seconds())
}

// NodeHead records node's head and its lag behind the highest head seen on
// chain.
func (m *Metrics) NodeHead(chain, node string, head, lag uint64) {
	if m == nil {
		return
	}
	m.nodeHead.WithLabelValues(chain, node).Set(float64(head))
	m.nodeLag.WithLabelValues(chain, node).Set(float64(lag))
}

// NodeState records that node of chain is now in state (one of evmnodes'
// Node* states; any other is "other"): its series of that state is 1, of
// every other state 0, so that an alert needs no absent series.
func (m *Metrics) NodeState(chain, node, state string) {
	if m == nil {
		return
	}
	if !slices.Contains(nodeStates, state) {
		state = other
	}
	// One change at a time, so that two changes of a node racing cannot
	// leave two states at 1; the new state is set before the old one is
	// cleared, so that a scrape never sees the node in no state.
	m.nodeStateMu.Lock()
	defer m.nodeStateMu.Unlock()
	m.nodeState.WithLabelValues(chain, node, state).Set(1)
	for _, s := range nodeStates {
		if s != state {
			m.nodeState.WithLabelValues(chain, node, s).Set(0)
		}
	}
	if state != other {
		m.nodeState.DeleteLabelValues(chain, node, other)
	}
}

// StateDepth is how many items of a lane wait in one state and when the
// oldest of them arrived.
type StateDepth struct {
	State  string
	Items  int64
	Oldest time.Time
}

// DepthFunc reads one lane's non-terminal depth. It must be one cheap,
// indexed query: it runs on every scrape.
type DepthFunc func(ctx context.Context) ([]StateDepth, error)

// RegisterDepth adds the depth and oldest-age series of lane, read by depth
// on every scrape with timeout as its deadline. A state absent from the
// answer has depth 0.
func (m *Metrics) RegisterDepth(lane string, states []string, depth DepthFunc, clk clock.Clock, timeout time.Duration, logger *slog.Logger) {
	if m == nil {
		return
	}
	m.registry.MustRegister(&depthCollector{
		lane: lane, states: states, depth: depth, clock: clk, timeout: timeout, logger: logger,
		failures: m.depthFailures.WithLabelValues(lane),
	})
}

var (
	depthDesc = prometheus.NewDesc("ledgerq_queue_depth",
		"Items waiting in each non-terminal state, by lane and state.", []string{"lane", "state"}, nil)
	oldestDesc = prometheus.NewDesc("ledgerq_queue_oldest_age_seconds",
		"Age of the oldest item in each non-terminal state (0 when the state is empty), by lane and state.", []string{"lane", "state"}, nil)
)

type depthCollector struct {
	lane     string
	states   []string
	depth    DepthFunc
	clock    clock.Clock
	timeout  time.Duration
	logger   *slog.Logger
	failures prometheus.Counter
}

func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- depthDesc
	ch <- oldestDesc
}

func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	rows, err := c.depth(ctx)
	if err != nil {
		c.failures.Inc()
		if c.logger != nil {
			c.logger.Warn("metrics: reading queue depth", "lane", c.lane, "error", err)
		}
		return
	}
	now := c.clock.Now()
	got := make(map[string]StateDepth, len(rows))
	for _, r := range rows {
		got[r.State] = r
	}
	for _, s := range c.states {
		d := got[s]
		age := 0.0
		if d.Items > 0 && !d.Oldest.IsZero() {
			age = max(now.Sub(d.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(d.Items), c.lane, s)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age, c.lane, s)
	}
}

// BatchLedger wraps a batch-lane ledger so that every call is timed and its
// errors counted by class.
func BatchLedger(inner ledger.BatchLedger, m *Metrics) ledger.BatchLedger {
	if m == nil {
		return inner
	}
	return &batchLedger{inner: inner, m: m}
}

type batchLedger struct {
	inner ledger.BatchLedger
	m     *Metrics
}

func (l *batchLedger) SubmitBatches(ctx context.Context, batches []ledger.Batch) ([]error, error) {
	began := time.Now()
	per, err := l.inner.SubmitBatches(ctx, batches)
	l.m.LedgerCall("batch", "submit", time.Since(began), err, per)
	return per, err
}

func (l *batchLedger) BatchStatuses(ctx context.Context, ids []string) (map[string]ledger.BatchStatusResult, error) {
	began := time.Now()
	st, err := l.inner.BatchStatuses(ctx, ids)
	l.m.LedgerCall("batch", "status", time.Since(began), err, nil)
	return st, err
}
