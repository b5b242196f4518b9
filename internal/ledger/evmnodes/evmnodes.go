package evmnodes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
	"github.com/ledgerq/ledgerq/internal/ledger/evmrpc"
)

// NodeConfig is one node of a chain.
type NodeConfig struct {
	// Name names the node in statuses, logs and metrics (its host when
	// empty).
	Name string
	// URL is its JSON-RPC endpoint (http or https).
	URL string
	// Handler, when set, serves the node in this process instead of URL
	// (the simulated chain).
	Handler http.Handler
	// SendOnly: transactions are broadcast to it and it is never read
	// from (a private mempool, a relay).
	SendOnly bool
}

// Observer is told what the nodes do (internal/metrics implements it).
type Observer interface {
	// NodeCall: one call to a node ended: outcome is "ok", "verdict" (the
	// node refused the transaction itself), "rate_limited",
	// "unavailable" (5xx, reset, refused), "timeout" or "lagging".
	NodeCall(chain, node, outcome string, d time.Duration)
	// NodeHead: a node's head, and its lag behind the chain's best.
	NodeHead(chain, node string, head, lag uint64)
	// NodeState: a node changed state (one of the Node* states).
	NodeState(chain, node, state string)
}

// Config configures a Chain.
type Config struct {
	// Name is the chain's declared name.
	Name string
	// ChainID is the declared chain id; every node must report it. 0: the
	// first node that answers tells it (the one-node shorthand).
	ChainID int64
	// Nodes are the chain's nodes; at least one is read from.
	Nodes []NodeConfig
	// Confirmations is shown in the status only (the lane decides).
	Confirmations int
	// CallTimeout bounds one call to one node (4 s when 0), so that a slow
	// node leaves the caller's deadline room for another.
	CallTimeout time.Duration
	// MaxResponseBytes bounds one answer (16 MiB when 0).
	MaxResponseBytes int64
	// ProbeInterval is how often Run checks each node's chain id and head
	// (1 s when 0).
	ProbeInterval time.Duration
	// HeadWindow is how long the highest head seen stands although no node
	// reports it any more (10 s when 0): answers from nodes behind it are
	// not used meanwhile, and a chain whose every node went back (a real
	// rewind) is believed once it has passed.
	HeadWindow time.Duration
	// LagTolerance is how many blocks behind the best a node may be and
	// still answer a read no decision rests on (fees, gas estimates,
	// balances); reads that decide (nonces, receipts, blocks) take none.
	LagTolerance uint64
	// MaxBackoff bounds how long a failing node is left out before it is
	// tried again (10 s when 0); a Retry-After longer than it is cut to it.
	MaxBackoff time.Duration
	// MaxWait is the longest a call waits for a node in backoff when no
	// other can answer (1.5 s when 0); past it the call fails with the
	// chain's *UnavailableError.
	MaxWait time.Duration
	// Observer, when set, is told each call's outcome, heads and states.
	Observer Observer
	// OnAvailable, when set, is called when the chain becomes available
	// again after no node could be read from.
	OnAvailable func()
	// Logger gets state changes (never a URL's secrets); nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.CallTimeout = cmp.Or(c.CallTimeout, 4*time.Second)
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, 16<<20)
	c.ProbeInterval = cmp.Or(c.ProbeInterval, time.Second)
	c.HeadWindow = cmp.Or(c.HeadWindow, 10*time.Second)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, 10*time.Second)
	c.MaxWait = cmp.Or(c.MaxWait, 1500*time.Millisecond)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Chain is one EVM chain behind its nodes: a ledger.WalletLedger.
type Chain struct {
	cfg   Config
	nodes []*node
	// chainID is the declared id, or the one learned (0 until then).
	chainID atomic.Int64

	mu sync.Mutex
	// peak is the highest head seen and peakAt when a node last reported
	// it (or higher).
	peak        uint64
	peakAt      time.Time
	unavailable bool

	stop chan struct{}
	done chan struct{}
}

var _ ledger.WalletLedger = (*Chain)(nil)

// node is one node and what the chain knows of it.
type node struct {
	cfg  NodeConfig
	name string
	// url is cfg.URL with its secrets redacted.
	url string
	rpc *rpc.Client
	led *evm.Ledger
	// hint is the last Retry-After the node's transport saw, in
	// nanoseconds (0: none).
	hint atomic.Int64

	mu         sync.Mutex
	head       uint64
	headAt     time.Time
	verified   bool
	wrongChain bool
	failures   int
	retryAt    time.Time
	limited    bool
	calls      uint64
	errs       uint64
	errRate    float64
	latency    float64
	lastErr    string
	lastErrAt  time.Time
	state      string
}

// New returns the chain of cfg. Nothing is called until a read, a send or
// Run; a node that does not answer is not an error here.
func New(cfg Config) (*Chain, error) {
	cfg = cfg.withDefaults()
	if cfg.Name == "" {
		return nil, errors.New("evmnodes: a chain needs a name")
	}
	if cfg.ChainID < 0 {
		return nil, fmt.Errorf("evmnodes: chain %s: chain id must be positive, got %d", cfg.Name, cfg.ChainID)
	}
	c := &Chain{cfg: cfg}
	c.chainID.Store(cfg.ChainID)
	names := map[string]bool{}
	readable := false
	for i, nc := range cfg.Nodes {
		n, err := newNode(nc, i, cfg.MaxResponseBytes)
		if err != nil {
			return nil, fmt.Errorf("evmnodes: chain %s: %w", cfg.Name, err)
		}
		if names[n.name] {
			return nil, fmt.Errorf("evmnodes: chain %s: two nodes are named %q", cfg.Name, n.name)
		}
		names[n.name] = true
		readable = readable || !nc.SendOnly
		c.nodes = append(c.nodes, n)
	}
	if !readable {
		return nil, fmt.Errorf("evmnodes: chain %s: at least one node that is not send-only is needed", cfg.Name)
	}
	return c, nil
}

func newNode(nc NodeConfig, i int, limit int64) (*node, error) {
	n := &node{cfg: nc, name: nc.Name, url: Redact(nc.URL), state: NodeUnknown}
	if nc.Handler != nil {
		n.url = "in-process"
	}
	if n.name == "" {
		n.name = "node" + strconv.Itoa(i+1)
		if u, err := url.Parse(nc.URL); err == nil && u.Host != "" && nc.Handler == nil {
			n.name = u.Host
		}
	}
	endpoint, tr, err := evmrpc.Transport(nc.URL, nc.Handler, limit)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.name, err)
	}
	hc := &http.Client{Transport: hintTransport{next: tr, n: n}}
	rc, err := rpc.DialOptions(context.Background(), endpoint, rpc.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.name, err)
	}
	n.rpc = rc
	// The chain bounds each call itself; the adapter's own bound only
	// backs it up.
	n.led = evm.New(ethclient.NewClient(rc), evm.Config{CallTimeout: time.Hour})
	return n, nil
}

// Redact returns u without its user information and query (where hosted
// providers put API keys); a path's last segment long enough to be a key
// is hidden too.
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "(unparseable URL)"
	}
	p.User, p.RawQuery, p.Fragment = nil, "", ""
	segs := strings.Split(p.Path, "/")
	for i, s := range segs {
		if len(s) >= 16 {
			segs[i] = "***"
		}
	}
	p.Path = strings.Join(segs, "/")
	p.RawPath = ""
	return p.String()
}

// hintTransport keeps the Retry-After of a node's 429 or 503 answer.
type hintTransport struct {
	next http.RoundTripper
	n    *node
}

func (t hintTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if d := retryAfter(resp.Header.Get("Retry-After"), time.Now()); d > 0 {
			t.n.hint.Store(int64(d))
		}
	}
	return resp, err
}

// retryAfter parses a Retry-After value: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// Name is the chain's declared name.
func (c *Chain) Name() string { return c.cfg.Name }

// Close stops Run and closes the nodes' connections.
func (c *Chain) Close() {
	c.mu.Lock()
	stop, done := c.stop, c.done
	c.stop = nil
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	for _, n := range c.nodes {
		n.rpc.Close()
	}
}

// Start runs the health checks in the background until Close: each node's
// chain id and head every ProbeInterval (a node in backoff once its wait
// is over), so that a node taken out comes back and the chain's state is
// known while no lane calls it.
func (c *Chain) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		return
	}
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.run(c.stop, c.done)
}

func (c *Chain) run(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(c.cfg.ProbeInterval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-stop:
			case <-ctx.Done():
			}
			cancel()
		}()
		c.ProbeAll(ctx)
		cancel()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// ProbeAll checks every node that is read from and not in backoff, at
// once.
func (c *Chain) ProbeAll(ctx context.Context) {
	var wg sync.WaitGroup
	now := time.Now()
	for _, n := range c.nodes {
		if n.cfg.SendOnly || n.waitUntil().After(now) {
			continue
		}
		wg.Go(func() { _ = c.probe(ctx, n) })
	}
	wg.Wait()
	c.noteAvailability()
}

// probe reads n's chain id and head in one request and checks the id
// against the declaration: a node of another chain is taken out, loudly.
func (c *Chain) probe(ctx context.Context, n *node) error {
	_, err := c.probeWait(ctx, n)
	return err
}

// probeWait is probe, with how long a call waits before asking n again
// after a failed probe.
func (c *Chain) probeWait(ctx context.Context, n *node) (time.Duration, error) {
	var id, head hexutil.Big
	batch := []rpc.BatchElem{
		{Method: "eth_chainId", Result: &id},
		{Method: "eth_blockNumber", Result: &head},
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	err := n.rpc.BatchCallContext(cctx, batch)
	cancel()
	if err == nil {
		err = cmp.Or(batch[0].Error, batch[1].Error)
	}
	if err != nil {
		wait := 250 * time.Millisecond
		if ctx.Err() == nil {
			wait = c.record(n, c.outcome(ctx, err, false), time.Since(start), err)
		}
		return wait, err
	}
	got := (*big.Int)(&id)
	want := c.chainID.Load()
	if want == 0 && got.IsInt64() && got.Sign() > 0 {
		c.chainID.CompareAndSwap(0, got.Int64())
		want = c.chainID.Load()
	}
	if !got.IsInt64() || got.Int64() != want {
		n.mu.Lock()
		was := n.wrongChain
		n.wrongChain, n.verified = true, false
		n.lastErr, n.lastErrAt = fmt.Sprintf("reports chain id %s, not %d", got, want), time.Now()
		n.mu.Unlock()
		if !was {
			c.cfg.Logger.Error("chain: a node reports another chain id: taken out until it reports the declared one",
				"chain", c.cfg.Name, "node", n.name, "url", n.url, "declared", want, "reported", got.String())
		}
		c.setState(n)
		return c.cfg.MaxBackoff, fmt.Errorf("node %s of chain %s reports chain id %s, not %d", n.name, c.cfg.Name, got, want)
	}
	n.mu.Lock()
	n.wrongChain, n.verified = false, true
	n.mu.Unlock()
	c.observeHead(n, (*big.Int)(&head).Uint64())
	c.record(n, "ok", time.Since(start), nil)
	return 0, nil
}

// observeHead records a head n answered.
func (c *Chain) observeHead(n *node, h uint64) {
	now := time.Now()
	n.mu.Lock()
	n.head, n.headAt = h, now
	n.mu.Unlock()
	c.mu.Lock()
	if h >= c.peak || now.Sub(c.peakAt) >= c.cfg.HeadWindow {
		if h >= c.peak {
			c.peak, c.peakAt = h, now
		}
	}
	c.mu.Unlock()
}

// Best is the highest head the chain stands by: the highest seen within
// HeadWindow, or the highest a read node reported within it.
func (c *Chain) Best() uint64 {
	now := time.Now()
	c.mu.Lock()
	best := uint64(0)
	if now.Sub(c.peakAt) < c.cfg.HeadWindow {
		best = c.peak
	}
	c.mu.Unlock()
	for _, n := range c.nodes {
		n.mu.Lock()
		if !n.cfg.SendOnly && !n.wrongChain && !n.headAt.IsZero() && now.Sub(n.headAt) < c.cfg.HeadWindow {
			best = max(best, n.head)
		}
		n.mu.Unlock()
	}
	return best
}

// waitUntil is when n may be called again.
func (n *node) waitUntil() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.retryAt
}

// The outcomes of a call (Observer.NodeCall).
const (
	outcomeOK          = "ok"
	outcomeVerdict     = "verdict"
	outcomeRateLimited = "rate_limited"
	outcomeUnavailable = "unavailable"
	outcomeTimeout     = "timeout"
	outcomeLagging     = "lagging"
)

// headUnknown is what a read's fn returns when its answer tells no head.
const headUnknown = ^uint64(0)

// errLagging is an answer from a node behind the chain's best head.
var errLagging = errors.New("the node is behind the highest head seen")

// outcome classes a call's error; verdicts: a JSON-RPC error that
// ledger.ClassifyCallMessage calls Deterministic is the node's verdict on
// the transaction, not the node's failure.
func (c *Chain) outcome(ctx context.Context, err error, verdicts bool) string {
	var httpErr rpc.HTTPError
	var rpcErr rpc.Error
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, errLagging):
		return outcomeLagging
	case verdicts && ledger.CallRefused(err):
		return outcomeVerdict
	case errors.As(err, &httpErr):
		if httpErr.StatusCode == http.StatusTooManyRequests {
			return outcomeRateLimited
		}
		return outcomeUnavailable
	case errors.As(err, &rpcErr):
		if rateLimitMessage(rpcErr.ErrorCode(), rpcErr.Error()) {
			return outcomeRateLimited
		}
		return outcomeUnavailable
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return outcomeTimeout
	}
	return outcomeUnavailable
}

// rateLimitMessage reports whether a JSON-RPC error is a provider's rate
// limit: -32005 (limit exceeded, EIP-1474), -32029 and -32090 (hosted
// providers' "too many requests"), or a message that says so.
func rateLimitMessage(code int, msg string) bool {
	switch code {
	case -32005, -32029, -32090:
		return true
	}
	m := strings.ToLower(msg)
	return strings.Contains(m, "rate limit") || strings.Contains(m, "too many requests") ||
		strings.Contains(m, "limit exceeded") || strings.Contains(m, "exceeded the quota") || strings.Contains(m, "capacity")
}

// outAfter is how many failures in a row, over all the calls of the
// process, take a node out for a while: fewer (a provider's random 429,
// 502 or reset) only make each call that got one wait before it asks that
// node again. The calls of every wallet count together, so at a few dozen
// calls a second two in a row come every second or two from a provider
// that fails one call in five, and the node would be out, for every
// wallet, a third of the time; four in a row come from such a provider
// once in tens of seconds, and from a node that is down within a moment.
const outAfter = 4

// record counts a call's outcome against n and returns how long the call
// that got it waits before asking n again: 250 ms after a failure, a 429
// its Retry-After (at least a second). From outAfter failures in a row the
// node is out for every call, for a wait that starts at 250 ms and doubles
// with each failure past outAfter up to MaxBackoff, or the Retry-After
// when longer (honoured by all); a success brings it back. The doubling
// counts from outAfter, not from the first failure: the failures in a row
// are every wallet's together, and a provider that fails one call in five
// reaches four now and then, to be out for a moment, not for seconds.
func (c *Chain) record(n *node, outcome string, d time.Duration, err error) time.Duration {
	now := time.Now()
	failed := outcome != outcomeOK && outcome != outcomeVerdict && outcome != outcomeLagging
	var wait time.Duration
	n.mu.Lock()
	n.calls++
	const alpha = 0.1
	v := 0.0
	if failed {
		v = 1
		n.errs++
	}
	n.errRate += alpha * (v - n.errRate)
	ms := float64(d) / float64(time.Millisecond)
	if n.latency == 0 {
		n.latency = ms
	} else {
		n.latency += alpha * (ms - n.latency)
	}
	switch {
	case failed:
		n.failures++
		n.lastErr, n.lastErrAt = n.errText(err), now
		wait = 250 * time.Millisecond
		if n.failures >= outAfter {
			wait = min(wait<<min(n.failures-outAfter, 8), c.cfg.MaxBackoff)
		}
		n.limited = outcome == outcomeRateLimited
		if h := time.Duration(n.hint.Swap(0)); h > 0 && (n.limited || outcome == outcomeUnavailable) {
			wait = min(max(h, wait), c.cfg.MaxBackoff)
		} else if n.limited {
			wait = min(max(wait, time.Second), c.cfg.MaxBackoff)
		}
		if n.failures >= outAfter {
			n.retryAt = now.Add(wait)
		}
	case outcome == outcomeLagging:
		n.lastErr, n.lastErrAt = "answered from behind the chain's highest head", now
	default:
		n.failures, n.limited, n.retryAt = 0, false, time.Time{}
	}
	n.mu.Unlock()
	if o := c.cfg.Observer; o != nil {
		o.NodeCall(c.cfg.Name, n.name, outcome, d)
	}
	c.setState(n)
	return wait
}

// urlInText finds the URLs an error's text holds.
var urlInText = regexp.MustCompile(`https?://[^\s"']+`)

// errText is err's text for statuses and logs, every URL in it redacted
// (an HTTP client's error names the URL it posted to, keys and all).
func (n *node) errText(err error) string {
	if err == nil {
		return ""
	}
	s := urlInText.ReplaceAllStringFunc(err.Error(), Redact)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// stateOf is n's state now, given the chain's best head.
func (c *Chain) stateOf(n *node, best uint64, now time.Time) (string, uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var lag uint64
	if best > n.head {
		lag = best - n.head
	}
	switch {
	case n.wrongChain:
		return NodeWrongChain, lag
	case n.limited && now.Before(n.retryAt):
		return NodeBackoff, lag
	case n.failures >= outAfter || n.failures > 0 && n.headAt.IsZero():
		return NodeDown, lag
	case n.cfg.SendOnly:
		return NodeHealthy, 0
	case n.headAt.IsZero():
		return NodeUnknown, lag
	case lag > c.cfg.LagTolerance:
		return NodeLagging, lag
	}
	return NodeHealthy, lag
}

// setState logs and tells the observer when n's state changed.
func (c *Chain) setState(n *node) {
	best := c.Best()
	state, lag := c.stateOf(n, best, time.Now())
	n.mu.Lock()
	old, head, lastErr := n.state, n.head, n.lastErr
	n.state = state
	n.mu.Unlock()
	if o := c.cfg.Observer; o != nil {
		o.NodeHead(c.cfg.Name, n.name, head, lag)
		if old != state {
			o.NodeState(c.cfg.Name, n.name, state)
		}
	}
	if old != state && old != NodeUnknown || state == NodeDown && old == NodeUnknown {
		c.cfg.Logger.Info("chain: node state changed", "chain", c.cfg.Name, "node", n.name, "from", old, "to", state, "head", head, "lag", lag, "last_error", lastErr)
	}
}

// noteAvailability tells OnAvailable when the chain is readable again.
func (c *Chain) noteAvailability() {
	st := c.Status()
	c.mu.Lock()
	was := c.unavailable
	c.unavailable = st.State == ChainUnavailable
	now := c.unavailable
	c.mu.Unlock()
	switch {
	case now && !was:
		c.cfg.Logger.Warn("chain: no node can be read from: its wallets wait", "chain", c.cfg.Name)
	case was && !now:
		c.cfg.Logger.Info("chain: a node can be read from again", "chain", c.cfg.Name)
		if c.cfg.OnAvailable != nil {
			c.cfg.OnAvailable()
		}
	}
}

// Status is the chain and its nodes as they are now.
func (c *Chain) Status() ChainStatus {
	now := time.Now()
	best := c.Best()
	st := ChainStatus{Name: c.cfg.Name, ChainID: c.chainID.Load(), Head: best, Confirmations: c.cfg.Confirmations}
	healthy, readers := 0, 0
	for _, n := range c.nodes {
		state, lag := c.stateOf(n, best, now)
		n.mu.Lock()
		ns := NodeStatus{Name: n.name, URL: n.url, SendOnly: n.cfg.SendOnly, State: state, Head: n.head, Lag: lag,
			Calls: n.calls, Errors: n.errs, ErrorRate: n.errRate, LatencyMillis: n.latency, LastError: n.lastErr}
		if !n.lastErrAt.IsZero() {
			at := n.lastErrAt
			ns.LastErrorAt = &at
		}
		if n.retryAt.After(now) {
			at := n.retryAt
			ns.RetryAt = &at
		}
		n.mu.Unlock()
		st.Nodes = append(st.Nodes, ns)
		if !n.cfg.SendOnly {
			readers++
			if state == NodeHealthy {
				healthy++
			}
		}
	}
	switch {
	case healthy == 0:
		st.State = ChainUnavailable
	case healthy < readers:
		st.State = ChainDegraded
	default:
		st.State = ChainHealthy
	}
	return st
}

// UnavailableError is a call no node of the chain could answer: a
// Transient ledger error (it unwraps to one), with the wait before a node
// may answer again (RetryAfter).
type UnavailableError struct {
	Chain, Op string
	// Err is the last node's failure.
	Err   error
	After time.Duration
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("chain %s: %s: no node answered: %v", e.Chain, e.Op, e.Err)
}

// Unwrap is a Transient ledger error wrapping the last failure.
func (e *UnavailableError) Unwrap() error {
	return ledger.NewError(ledger.Transient, fmt.Sprintf("chain %s: no node answered %s", e.Chain, e.Op), e.Err)
}

// RetryAfter is how long until a node of the chain may answer again.
func (e *UnavailableError) RetryAfter() time.Duration { return e.After }

// pick returns the node a read goes to next: a read node of the chain,
// out of its own wait and of this call's (notBefore: a node this call
// already asked waits there before it is asked again), and no more than
// lagBy behind the best; the fewest failures, then the most caught-up, then
// the fastest. When none is ready it returns when the first will be.
func (c *Chain) pick(notBefore map[*node]time.Time, lagBy uint64, best uint64) (*node, time.Time) {
	now := time.Now()
	var ready, behind []*node
	var next time.Time
	for _, n := range c.nodes {
		if n.cfg.SendOnly {
			continue
		}
		n.mu.Lock()
		wrong, at, head, seen := n.wrongChain, n.retryAt, n.head, !n.headAt.IsZero()
		n.mu.Unlock()
		if nb, ok := notBefore[n]; ok && nb.After(at) {
			at = nb
		}
		switch {
		case wrong:
		case at.After(now):
			if next.IsZero() || at.Before(next) {
				next = at
			}
		case seen && head+lagBy < best:
			// Behind: asked only when no other can be (its answer is
			// checked against the best all the same).
			behind = append(behind, n)
		default:
			ready = append(ready, n)
		}
	}
	if len(ready) == 0 {
		ready = behind
	}
	if len(ready) == 0 {
		return nil, next
	}
	slices.SortStableFunc(ready, func(a, b *node) int {
		a.mu.Lock()
		ah, al, af := a.head, a.latency, a.failures
		a.mu.Unlock()
		b.mu.Lock()
		bh, bl, bf := b.head, b.latency, b.failures
		b.mu.Unlock()
		_, at := notBefore[a]
		_, bt := notBefore[b]
		return cmp.Or(cmp.Compare(boolInt(at), boolInt(bt)), cmp.Compare(af, bf), -cmp.Compare(ah, bh), cmp.Compare(al, bl))
	})
	return ready[0], time.Time{}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// maxAttempts is how many times one call asks a node, all nodes together
// (a chain of k read nodes: k + maxAttempts - 1).
const maxAttempts = 5

// read calls fn on one node after another until one answers. A node that
// fails is asked again by this call only after its wait (record), another
// node first; when every node is waiting, the call waits for the first
// that fits MaxWait and its deadline. fn returns the head the node answered
// at (headUnknown: not known), checked against the chain's best with lagBy
// blocks of tolerance; an answer from behind is asked again at once (one
// URL may stand for several backends, one of them behind). verdicts: a
// JSON-RPC verdict on the transaction is fn's answer, not a failure.
func (c *Chain) read(ctx context.Context, op string, lagBy uint64, verdicts bool, fn func(ctx context.Context, n *node) (uint64, error)) error {
	notBefore := map[*node]time.Time{}
	var last error
	readers := 0
	for _, n := range c.nodes {
		if !n.cfg.SendOnly {
			readers++
		}
	}
	for attempt := 0; attempt < readers+maxAttempts-1; attempt++ {
		if err := ctx.Err(); err != nil {
			return c.unavailableErr(op, cmp.Or(last, err), notBefore)
		}
		n, next := c.pick(notBefore, lagBy, c.Best())
		if n == nil {
			wait := time.Until(next)
			dl, hasDL := ctx.Deadline()
			if next.IsZero() || wait > c.cfg.MaxWait || hasDL && time.Now().Add(wait).After(dl) {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return c.unavailableErr(op, cmp.Or(last, ctx.Err()), notBefore)
			case <-t.C:
			}
			attempt--
			continue
		}
		n.mu.Lock()
		verified := n.verified
		n.mu.Unlock()
		if !verified {
			if wait, err := c.probeWait(ctx, n); err != nil {
				last = fmt.Errorf("node %s: %w", n.name, err)
				notBefore[n] = time.Now().Add(wait)
				continue
			}
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
		head, err := fn(cctx, n)
		cancel()
		if ctx.Err() != nil && err != nil {
			return c.unavailableErr(op, err, notBefore)
		}
		if err == nil && head != headUnknown {
			c.observeHead(n, head)
			if best := c.Best(); head+lagBy < best {
				err = fmt.Errorf("%w: node %s answered %s at block %d, the chain is at %d", errLagging, n.name, op, head, best)
			}
		}
		outcome := c.outcome(ctx, err, verdicts)
		wait := c.record(n, outcome, time.Since(start), err)
		switch outcome {
		case outcomeOK:
			c.noteAvailability()
			return nil
		case outcomeVerdict:
			return err
		}
		notBefore[n] = time.Now().Add(wait)
		last = fmt.Errorf("node %s: %w", n.name, err)
	}
	if last == nil {
		last = errors.New("no node can be read from")
	}
	c.noteAvailability()
	return c.unavailableErr(op, last, notBefore)
}

// unavailableErr is the error of a call no node answered; notBefore are the
// call's own waits for the nodes it asked.
func (c *Chain) unavailableErr(op string, err error, notBefore map[*node]time.Time) error {
	now := time.Now()
	var next time.Time
	for _, n := range c.nodes {
		at := n.waitUntil()
		if nb := notBefore[n]; nb.After(at) {
			at = nb
		}
		if !n.cfg.SendOnly && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return &UnavailableError{Chain: c.cfg.Name, Op: op, Err: err, After: max(next.Sub(now), 0)}
}

// ChainID implements ledger.WalletLedger: the declared id, or the one the
// first node that answers reports.
func (c *Chain) ChainID(ctx context.Context) (*big.Int, error) {
	if id := c.chainID.Load(); id != 0 {
		return big.NewInt(id), nil
	}
	err := c.read(ctx, "eth_chainId", ^uint64(0)/2, false, func(ctx context.Context, n *node) (uint64, error) {
		return headUnknown, c.probe(ctx, n)
	})
	if err != nil {
		return nil, err
	}
	return big.NewInt(c.chainID.Load()), nil
}

// withHead calls method with args in one batch after eth_blockNumber, so
// the answer comes with the head it was answered at.
func withHead(ctx context.Context, n *node, result any, method string, args ...any) (uint64, error) {
	var head hexutil.Uint64
	batch := []rpc.BatchElem{
		{Method: "eth_blockNumber", Result: &head},
		{Method: method, Args: args, Result: result},
	}
	if err := n.rpc.BatchCallContext(ctx, batch); err != nil {
		return 0, err
	}
	if err := cmp.Or(batch[0].Error, batch[1].Error); err != nil {
		return 0, err
	}
	return uint64(head), nil
}

// PendingNonceAt implements ledger.WalletLedger.
func (c *Chain) PendingNonceAt(ctx context.Context, addr ledger.Address) (uint64, error) {
	var out uint64
	err := c.read(ctx, "eth_getTransactionCount(pending)", c.cfg.LagTolerance, false, func(ctx context.Context, n *node) (uint64, error) {
		var v hexutil.Uint64
		head, err := withHead(ctx, n, &v, "eth_getTransactionCount", common.Address(addr), "pending")
		out = uint64(v)
		return head, err
	})
	return out, err
}

// NonceAt implements ledger.WalletLedger from a node at the best head.
func (c *Chain) NonceAt(ctx context.Context, addr ledger.Address) (uint64, error) {
	var out uint64
	err := c.read(ctx, "eth_getTransactionCount", 0, false, func(ctx context.Context, n *node) (uint64, error) {
		var v hexutil.Uint64
		head, err := withHead(ctx, n, &v, "eth_getTransactionCount", common.Address(addr), "latest")
		out = uint64(v)
		return head, err
	})
	return out, err
}

// BalanceAt implements ledger.WalletLedger.
func (c *Chain) BalanceAt(ctx context.Context, addr ledger.Address) (*big.Int, error) {
	var out *big.Int
	err := c.read(ctx, "eth_getBalance", c.cfg.LagTolerance, false, func(ctx context.Context, n *node) (uint64, error) {
		var v hexutil.Big
		head, err := withHead(ctx, n, &v, "eth_getBalance", common.Address(addr), "latest")
		out = (*big.Int)(&v)
		return head, err
	})
	return out, err
}

// SuggestFees implements ledger.WalletLedger.
func (c *Chain) SuggestFees(ctx context.Context) (ledger.Fees, error) {
	var out ledger.Fees
	err := c.read(ctx, "fees", c.cfg.LagTolerance, false, func(ctx context.Context, n *node) (uint64, error) {
		var err error
		out, err = n.led.SuggestFees(ctx)
		return headUnknown, err
	})
	return out, err
}

// EstimateGas implements ledger.WalletLedger: a verdict (the transaction
// would revert, cannot be paid for) is the answer, a node's failure is
// not.
func (c *Chain) EstimateGas(ctx context.Context, msg ledger.CallMsg) (uint64, error) {
	var out uint64
	err := c.read(ctx, "eth_estimateGas", c.cfg.LagTolerance, true, func(ctx context.Context, n *node) (uint64, error) {
		var err error
		out, err = n.led.EstimateGas(ctx, msg)
		return headUnknown, err
	})
	return out, err
}

// Call implements ledger.WalletLedger as EstimateGas: a verdict (a revert,
// with its data) is the answer, a node's failure is not. A call at a block
// is asked of a node that has it: one at the best head (no lag tolerance).
func (c *Chain) Call(ctx context.Context, msg ledger.CallMsg, block *uint64) ([]byte, error) {
	var out []byte
	lag := c.cfg.LagTolerance
	if block != nil {
		lag = 0
	}
	err := c.read(ctx, "eth_call", lag, true, func(ctx context.Context, n *node) (uint64, error) {
		var err error
		out, err = n.led.Call(ctx, msg, block)
		return headUnknown, err
	})
	return out, err
}

// TransactionReceipt implements ledger.WalletLedger from a node at the
// best head: "no receipt" is believed only from a node that has every
// block the chain is known to have.
func (c *Chain) TransactionReceipt(ctx context.Context, hash ledger.TxHash) (ledger.Receipt, error) {
	var out ledger.Receipt
	err := c.read(ctx, "eth_getTransactionReceipt", 0, false, func(ctx context.Context, n *node) (uint64, error) {
		var r *types.Receipt
		head, err := withHead(ctx, n, &r, "eth_getTransactionReceipt", common.Hash(hash))
		out = ledger.Receipt{}
		if err == nil && r != nil {
			out = evm.ReceiptOf(r)
			head = max(head, out.BlockNumber)
		}
		return head, err
	})
	return out, err
}

// blockRef is the part of a block the lane reads.
type blockRef struct {
	Number hexutil.Uint64 `json:"number"`
	Hash   common.Hash    `json:"hash"`
}

// HeadBlock implements ledger.WalletLedger: a node's head below the best is
// not the chain's head.
func (c *Chain) HeadBlock(ctx context.Context) (ledger.BlockRef, error) {
	var out ledger.BlockRef
	err := c.read(ctx, "eth_getBlockByNumber(latest)", 0, false, func(ctx context.Context, n *node) (uint64, error) {
		var b *blockRef
		if err := n.rpc.CallContext(ctx, &b, "eth_getBlockByNumber", "latest", false); err != nil {
			return 0, err
		}
		if b == nil {
			return 0, errors.New("the node has no latest block")
		}
		out = ledger.BlockRef{Number: uint64(b.Number), Hash: ledger.Hash(b.Hash)}
		return uint64(b.Number), nil
	})
	return out, err
}

// BlockAt implements ledger.WalletLedger: a block "not found" is believed
// only above the best head, from a node that has reached the best.
func (c *Chain) BlockAt(ctx context.Context, number uint64) (ledger.BlockRef, bool, error) {
	var out ledger.BlockRef
	var found bool
	err := c.read(ctx, "eth_getBlockByNumber", 0, false, func(ctx context.Context, n *node) (uint64, error) {
		var b *blockRef
		head, err := withHead(ctx, n, &b, "eth_getBlockByNumber", hexutil.Uint64(number), false)
		if err != nil {
			return 0, err
		}
		found = b != nil
		if found {
			out = ledger.BlockRef{Number: uint64(b.Number), Hash: ledger.Hash(b.Hash)}
			return max(head, number), nil
		}
		if number <= head {
			return 0, fmt.Errorf("%w: node %s has no block %d at head %d", errLagging, n.name, number, head)
		}
		return head, nil
	})
	return out, found, err
}

// nodeHead reads n's head alone.
func nodeHead(ctx context.Context, n *node) (uint64, error) {
	var h hexutil.Uint64
	if err := n.rpc.CallContext(ctx, &h, "eth_blockNumber"); err != nil {
		return 0, err
	}
	return uint64(h), nil
}

// TxsAtNonce implements ledger.WalletLedger on a node that has reached the
// best head (checked before the search).
func (c *Chain) TxsAtNonce(ctx context.Context, addr ledger.Address, nonce uint64) ([]ledger.NonceTx, bool, error) {
	var out []ledger.NonceTx
	var found bool
	err := c.read(ctx, "transactions at a nonce", 0, false, func(ctx context.Context, n *node) (uint64, error) {
		head, err := nodeHead(ctx, n)
		if err != nil {
			return 0, err
		}
		if head < c.Best() {
			return head, nil // lagging: read rejects it
		}
		out, found, err = n.led.TxsAtNonce(ctx, addr, nonce)
		return head, err
	})
	return out, found, err
}

// TxsInBlock implements ledger.WalletLedger on a node that has reached the
// best head; a block it lacks at or below the best is its lag, not the
// chain's.
func (c *Chain) TxsInBlock(ctx context.Context, addr ledger.Address, number uint64) ([]ledger.NonceTx, bool, error) {
	var out []ledger.NonceTx
	var found bool
	err := c.read(ctx, "transactions in a block", 0, false, func(ctx context.Context, n *node) (uint64, error) {
		head, err := nodeHead(ctx, n)
		if err != nil {
			return 0, err
		}
		if head < c.Best() {
			return head, nil
		}
		out, found, err = n.led.TxsInBlock(ctx, addr, number)
		if err == nil && !found && number <= head {
			return 0, fmt.Errorf("%w: node %s has no block %d at head %d", errLagging, n.name, number, head)
		}
		return head, err
	})
	return out, found, err
}
