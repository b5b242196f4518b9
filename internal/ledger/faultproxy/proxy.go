package faultproxy

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The keys of Counts.
const (
	// CountForwarded counts the HTTP requests forwarded to the node (the
	// proxy's own head reads for lagging answers are not counted).
	CountForwarded = "forwarded"
	// CountRateLimit counts the requests answered 429.
	CountRateLimit = "rate_limit"
	// CountBadGateway counts the requests answered 502 or 503.
	CountBadGateway = "bad_gateway"
	// CountReset counts the connections reset before forwarding.
	CountReset = "reset"
	// CountLostSendAnswer counts the sends forwarded whose answer was lost.
	CountLostSendAnswer = "lost_send_answer"
	// CountSlow counts the answers held for SlowDelay.
	CountSlow = "slow"
	// CountLag counts the requests answered as a lagging node would.
	CountLag = "lag"
	// CountUpstreamError counts the requests the node did not answer (the
	// proxy answered them 502).
	CountUpstreamError = "upstream_error"
)

const (
	// maxRequestBytes bounds a request's body: geth's own limit (5 MiB).
	maxRequestBytes = 5 << 20
	// maxResponseBytes bounds the node's answer: a batch of full blocks.
	maxResponseBytes = 64 << 20
	// headTTL is how long a head read from the node serves lagging answers.
	headTTL = 100 * time.Millisecond
	// headTimeout bounds the proxy's own eth_blockNumber.
	headTimeout = 5 * time.Second
)

// Config is the faults the proxy injects. Each probability is per HTTP
// request, in [0, 1], and they add up to at most 1: a request draws one
// number and takes the fault whose band it falls in, in the order of the
// fields, or none.
type Config struct {
	// Seed seeds the draws.
	Seed int64
	// Methods limits the faults to requests holding one of these JSON-RPC
	// methods (in a batch: any element); empty: every request.
	Methods []string

	// RateLimit answers HTTP 429 with Retry-After, without forwarding.
	RateLimit float64
	// RetryAfter is the 429's Retry-After, rounded up to whole seconds;
	// 0 means 1 s.
	RetryAfter time.Duration
	// BadGateway answers 502 and 503 in turn, without forwarding.
	BadGateway float64
	// ResetBeforeForward resets the connection, without forwarding.
	ResetBeforeForward float64
	// LoseSendAnswer forwards a request holding eth_sendRawTransaction,
	// then resets the connection instead of answering: the node has the
	// transaction, the client never hears. Other requests draw no fault
	// in this band.
	LoseSendAnswer float64
	// Slow forwards, then holds the answer for SlowDelay (or until the
	// client goes away).
	Slow float64
	// SlowDelay is how long Slow holds an answer; 0 means 10 s.
	SlowDelay time.Duration
	// Lag answers as a node LagBlocks behind the node's head would (see
	// Proxy).
	Lag float64
	// LagBlocks is how far behind a lagging answer is; 0 means 3.
	LagBlocks uint64
}

// Validate checks the probabilities.
func (c Config) Validate() error {
	sum := 0.0
	for _, f := range []struct {
		name string
		p    float64
	}{{"RateLimit", c.RateLimit}, {"BadGateway", c.BadGateway}, {"ResetBeforeForward", c.ResetBeforeForward},
		{"LoseSendAnswer", c.LoseSendAnswer}, {"Slow", c.Slow}, {"Lag", c.Lag}} {
		if f.p < 0 || f.p > 1 || math.IsNaN(f.p) {
			return fmt.Errorf("faultproxy: %s is %v, want a probability in [0, 1]", f.name, f.p)
		}
		sum += f.p
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("faultproxy: the probabilities add up to %v, more than 1", sum)
	}
	if c.RetryAfter < 0 || c.SlowDelay < 0 {
		return errors.New("faultproxy: RetryAfter and SlowDelay cannot be negative")
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.RetryAfter = cmp.Or(c.RetryAfter, time.Second)
	c.SlowDelay = cmp.Or(c.SlowDelay, 10*time.Second)
	c.LagBlocks = cmp.Or(c.LagBlocks, 3)
	return c
}

// fault is what one request drew.
type fault int

const (
	noFault fault = iota
	faultRateLimit
	faultBadGateway
	faultReset
	faultLoseSend
	faultSlow
	faultLag
)

// Proxy is the fault-injecting reverse proxy; it is an http.Handler, and
// Start serves it on a port of its own.
//
// A lagging answer is the node's own answer moved to head−LagBlocks, where
// head is the node's eth_blockNumber (read at most every 100 ms):
// eth_blockNumber answers head−k; eth_getBlockByNumber with "latest" or
// "pending" answers the block at head−k, with "safe" or "finalized" the
// lower of that tag's block and head−k, with a number above head−k null;
// eth_getTransactionCount, eth_getBalance, eth_getCode, eth_getStorageAt,
// eth_call and eth_estimateGas at "latest", "pending" or no block are asked
// at head−k, and at a number above it answer geth's "header not found";
// eth_getTransactionReceipt, eth_getTransactionByHash, eth_getBlockByHash
// and eth_getBlockReceipts answer null for a block above head−k (a block's
// receipts asked by hash or tag are known to be above only when it holds
// transactions). Every other method is forwarded as it is.
type Proxy struct {
	upstream  string
	transport *http.Transport
	client    *http.Client
	done      chan struct{} // closed by Close: ends held answers

	mu     sync.Mutex
	cfg    Config
	rnd    *rand.Rand
	counts map[string]int
	// methods counts the calls by JSON-RPC method (MethodCounts).
	methods map[string]int
	flip    bool // the next bad gateway is a 503
	srv     *http.Server
	addr    string // the address Start serves on, kept across Stop
	closed  bool

	headMu sync.Mutex
	headN  uint64
	headAt time.Time
}

// New returns a proxy in front of the JSON-RPC endpoint at upstream (an
// http or https URL), injecting cfg's faults.
func New(upstream string, cfg Config) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: upstream %q: %w", upstream, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: upstream %q is not an http(s) URL", upstream)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Proxy is nil: a test's proxy environment variables must not route
	// the node's traffic elsewhere.
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	p := &Proxy{
		upstream:  upstream,
		transport: tr,
		client:    &http.Client{Transport: tr},
		done:      make(chan struct{}),
		counts:    map[string]int{},
	}
	p.set(cfg)
	return p, nil
}

// Set changes the faults from the next request on, and seeds the draws
// anew with cfg.Seed.
func (p *Proxy) Set(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	p.set(cfg)
	return nil
}

func (p *Proxy) set(cfg Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = cfg.withDefaults()
	p.rnd = rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6661756c74)) // "fault"
}

// Counts returns how many requests drew each fault and how many were
// forwarded, by the Count… keys.
func (p *Proxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// MethodCounts is how many calls of each JSON-RPC method the proxy saw
// (every element of a batch), faulted or not.
func (p *Proxy) MethodCounts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.methods))
	for k, v := range p.methods {
		out[k] = v
	}
	return out
}

func (p *Proxy) countMethods(calls []*rpcCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.methods == nil {
		p.methods = map[string]int{}
	}
	for _, c := range calls {
		p.methods[c.method]++
	}
}

func (p *Proxy) count(key string) {
	p.mu.Lock()
	p.counts[key]++
	p.mu.Unlock()
}

// Start serves the proxy on 127.0.0.1 and returns its URL. The first Start
// takes a free port; a Start after Stop takes the same port again, so a
// client's URL stays valid across a "restart" of the endpoint.
func (p *Proxy) Start() (string, error) { return p.StartOn("") }

// StartOn is Start on the address addr ("host:port"); "" means the address
// of the last Start, or 127.0.0.1 on a free port.
func (p *Proxy) StartOn(addr string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return "", errors.New("faultproxy: closed")
	case p.srv != nil:
		return "", fmt.Errorf("faultproxy: already serving on %s", p.addr)
	}
	addr = cmp.Or(addr, p.addr, "127.0.0.1:0")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("faultproxy: listening on %s: %w", addr, err)
	}
	p.addr = ln.Addr().String()
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // returns http.ErrServerClosed on Stop
	p.srv = srv
	return "http://" + p.addr, nil
}

// URL is where Start serves (or served last); "" before the first Start.
func (p *Proxy) URL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addr == "" {
		return ""
	}
	return "http://" + p.addr
}

// Stop stops serving: the port is closed and every connection to it cut,
// as when a node's process dies. Start serves again. Safe to call twice.
func (p *Proxy) Stop() {
	p.mu.Lock()
	srv := p.srv
	p.srv = nil
	p.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Close stops serving for good, ends held answers and closes the idle
// connections to the node. Safe to call twice.
func (p *Proxy) Close() {
	p.Stop()
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	p.mu.Unlock()
	p.transport.CloseIdleConnections()
}

// draw decides the fault of a request holding calls, and returns the
// configuration it was drawn under and, for a bad gateway, its status.
func (p *Proxy) draw(calls []*rpcCall) (fault, Config, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg := p.cfg
	if len(cfg.Methods) > 0 && !slices.ContainsFunc(calls, func(c *rpcCall) bool { return slices.Contains(cfg.Methods, c.method) }) {
		return noFault, cfg, 0
	}
	u := p.rnd.Float64()
	for _, band := range []struct {
		f fault
		p float64
	}{{faultRateLimit, cfg.RateLimit}, {faultBadGateway, cfg.BadGateway}, {faultReset, cfg.ResetBeforeForward},
		{faultLoseSend, cfg.LoseSendAnswer}, {faultSlow, cfg.Slow}, {faultLag, cfg.Lag}} {
		if u >= band.p {
			u -= band.p
			continue
		}
		switch band.f {
		case faultLoseSend:
			if !slices.ContainsFunc(calls, func(c *rpcCall) bool { return c.method == "eth_sendRawTransaction" }) {
				return noFault, cfg, 0
			}
		case faultBadGateway:
			p.flip = !p.flip
			if p.flip {
				return band.f, cfg, http.StatusBadGateway
			}
			return band.f, cfg, http.StatusServiceUnavailable
		}
		return band.f, cfg, 0
	}
	return noFault, cfg, 0
}

// ServeHTTP answers one request: with the fault it draws, or as the node
// answers it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		http.Error(w, "faultproxy: reading the request: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	calls, batch, parsed := parseCalls(body)
	p.countMethods(calls)
	f, cfg, status := p.draw(calls)
	switch f {
	case faultRateLimit:
		p.count(CountRateLimit)
		secs := int((cfg.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		// The body hosted providers send with their 429s.
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":429,"message":"Too Many Requests: rate limit exceeded, retry in %d s"}}`+"\n", secs)
		return
	case faultBadGateway:
		p.count(CountBadGateway)
		http.Error(w, strconv.Itoa(status)+" "+http.StatusText(status), status)
		return
	case faultReset:
		p.count(CountReset)
		reset(w)
		return
	case faultLag:
		if parsed {
			p.count(CountLag)
			p.serveLagging(w, r, calls, batch, cfg.LagBlocks)
			return
		}
	}
	ans, err := p.forward(r.Context(), body, r.Header.Get("Content-Type"))
	if err != nil {
		p.count(CountUpstreamError)
		http.Error(w, "faultproxy: the node did not answer: "+err.Error(), http.StatusBadGateway)
		return
	}
	switch f {
	case faultLoseSend:
		p.count(CountLostSendAnswer)
		reset(w)
		return
	case faultSlow:
		p.count(CountSlow)
		if !p.hold(r.Context(), cfg.SlowDelay) {
			return
		}
	}
	ans.write(w)
}

// hold waits d, and reports false when the client went away or the proxy
// closed first.
func (p *Proxy) hold(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-p.done:
	}
	return false
}

// reset closes the request's connection with a TCP reset (SO_LINGER 0), as a
// load balancer that drops a connection does.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// HTTP/2 or a recorder: net/http's own way to cut the answer.
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// answer is the node's answer to one HTTP request.
type answer struct {
	status      int
	contentType string
	retryAfter  string
	body        []byte
}

func (a answer) write(w http.ResponseWriter) {
	if a.contentType != "" {
		w.Header().Set("Content-Type", a.contentType)
	}
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// forward posts body to the node and reads its whole answer.
func (p *Proxy) forward(ctx context.Context, body []byte, contentType string) (answer, error) {
	p.count(CountForwarded)
	return p.post(ctx, body, contentType)
}

func (p *Proxy) post(ctx context.Context, body []byte, contentType string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.upstream, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", cmp.Or(contentType, "application/json"))
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return answer{}, fmt.Errorf("reading the answer: %w", err)
	}
	if len(b) > maxResponseBytes {
		return answer{}, fmt.Errorf("the answer is larger than %d bytes", maxResponseBytes)
	}
	return answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"),
		retryAfter: resp.Header.Get("Retry-After"), body: b}, nil
}
