package evmnodes_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
)

const chainID = 1337

// node is a test node: the simulated chain's JSON-RPC behind a switch that
// makes it fail, lag or report another chain, as hosted providers do.
type node struct {
	inner http.Handler
	sim   *evmsim.Ledger

	mu sync.Mutex
	// status, when set, answers every request with it (and Retry-After).
	status     int
	retryAfter string
	// lag, when set, answers eth_blockNumber that many blocks low and
	// no receipt at all, as a node behind would.
	lag uint64
	// otherChain answers eth_chainId with another id.
	otherChain bool
	// verdict answers eth_estimateGas with a revert.
	verdict bool

	requests  atomic.Int64
	sends     atomic.Int64
	estimates atomic.Int64
}

type rpcReq struct {
	JSONRPC string            `json:"jsonrpc"`
	ID      json.RawMessage   `json:"id"`
	Method  string            `json:"method"`
	Params  []json.RawMessage `json:"params"`
}

func (n *node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.requests.Add(1)
	n.mu.Lock()
	status, ra, lag, other, verdict := n.status, n.retryAfter, n.lag, n.otherChain, n.verdict
	n.mu.Unlock()
	if status != 0 {
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		http.Error(w, http.StatusText(status), status)
		return
	}
	body, _ := io.ReadAll(r.Body)
	batch := bytes.HasPrefix(bytes.TrimSpace(body), []byte("["))
	var reqs []rpcReq
	if batch {
		_ = json.Unmarshal(body, &reqs)
	} else {
		var one rpcReq
		_ = json.Unmarshal(body, &one)
		reqs = []rpcReq{one}
	}
	var outs []json.RawMessage
	for _, q := range reqs {
		var res any
		synth := true
		if q.Method == "eth_estimateGas" {
			n.estimates.Add(1)
		}
		switch {
		case q.Method == "eth_sendRawTransaction":
			n.sends.Add(1)
			synth = false
		case q.Method == "eth_chainId" && other:
			res = map[string]any{"result": "0x5"}
		case q.Method == "eth_blockNumber" && lag > 0:
			res = map[string]any{"result": "0x" + strconv.FormatUint(n.sim.Head().Number-lag, 16)}
		case q.Method == "eth_getTransactionReceipt" && lag > 0:
			res = map[string]any{"result": nil}
		case q.Method == "eth_estimateGas" && verdict:
			res = map[string]any{"error": map[string]any{"code": 3, "message": "execution reverted", "data": "0x"}}
		default:
			synth = false
		}
		if !synth {
			one, _ := json.Marshal(q)
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(one))
			req.Header.Set("Content-Type", "application/json")
			n.inner.ServeHTTP(rec, req)
			outs = append(outs, rec.Body.Bytes())
			continue
		}
		m := res.(map[string]any)
		m["jsonrpc"], m["id"] = "2.0", q.ID
		b, _ := json.Marshal(m)
		outs = append(outs, b)
	}
	w.Header().Set("Content-Type", "application/json")
	if !batch {
		_, _ = w.Write(outs[0])
		return
	}
	_, _ = w.Write([]byte("["))
	for i, o := range outs {
		if i > 0 {
			_, _ = w.Write([]byte(","))
		}
		_, _ = w.Write(bytes.TrimSpace(o))
	}
	_, _ = w.Write([]byte("]"))
}

func (n *node) set(fn func(n *node)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fn(n)
}

// env is one simulated chain served by several test nodes.
type env struct {
	sim   *evmsim.Ledger
	key   *ecdsa.PrivateKey
	from  common.Address
	nodes []*node
}

func newEnv(t *testing.T, nodes int) *env {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	from := crypto.PubkeyToAddress(key.PublicKey)
	sim := evmsim.New(evmsim.Config{ChainID: chainID, Alloc: map[common.Address]*big.Int{from: big.NewInt(1e18)}})
	inner := evmsim.NewServer(sim, slog.New(slog.DiscardHandler))
	e := &env{sim: sim, key: key, from: from}
	for range nodes {
		e.nodes = append(e.nodes, &node{inner: inner, sim: sim})
	}
	return e
}

func (e *env) chain(t *testing.T, mod func(c *evmnodes.Config)) *evmnodes.Chain {
	t.Helper()
	cfg := evmnodes.Config{Name: "dev", ChainID: chainID, CallTimeout: time.Second, MaxWait: 100 * time.Millisecond}
	for i, n := range e.nodes {
		cfg.Nodes = append(cfg.Nodes, evmnodes.NodeConfig{Name: "n" + strconv.Itoa(i), Handler: n})
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := evmnodes.New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// signed is a transfer of 1 wei at nonce, signed for the chain.
func (e *env) signed(t *testing.T, nonce uint64) (*types.Transaction, []byte) {
	t.Helper()
	to := common.HexToAddress("0xdead")
	tx, err := types.SignNewTx(e.key, types.LatestSignerForChainID(big.NewInt(chainID)), &types.DynamicFeeTx{
		ChainID: big.NewInt(chainID), Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(3e9), Gas: 21000, To: &to, Value: big.NewInt(1),
	})
	require.NoError(t, err)
	raw, err := tx.MarshalBinary()
	require.NoError(t, err)
	return tx, raw
}

func nodeState(c *evmnodes.Chain, name string) evmnodes.NodeStatus {
	for _, n := range c.Status().Nodes {
		if n.Name == name {
			return n
		}
	}
	return evmnodes.NodeStatus{}
}

func TestChain_AReadGoesToAnotherNodeWhenOneFails(t *testing.T) {
	e := newEnv(t, 2)
	c := e.chain(t, nil)
	c.ProbeAll(t.Context())
	e.nodes[0].set(func(n *node) { n.status = http.StatusBadGateway })
	e.sim.Mine()
	for range 5 {
		nonce, err := c.NonceAt(t.Context(), ledger.Address(e.from))
		require.NoError(t, err, "the healthy node answers")
		require.Zero(t, nonce)
	}
	require.LessOrEqual(t, e.nodes[0].requests.Load(), int64(2), "a node that failed is asked last, not again at once (one probe, one read)")
	require.NotEqual(t, evmnodes.NodeDown, nodeState(c, "n0").State, "one failure does not take a node out")
	for range evmnodes.OutAfter {
		c.ProbeAll(t.Context())
	}
	require.Equal(t, evmnodes.NodeDown, nodeState(c, "n0").State, "failures in a row do")
	require.Equal(t, evmnodes.NodeHealthy, nodeState(c, "n1").State)
	require.Equal(t, evmnodes.ChainDegraded, c.Status().State)
}

// A provider that fails one call in five fails three in a row about once
// in a hundred calls, over all the calls of the process: that makes only
// the calls that got them wait, the node stays in for every other call (no
// wait of its own, not down), and the next success clears the count;
// OutAfter in a row take it out, for 250 ms at first.
func TestChain_ThreeFailuresInARowHoldBackNoOtherCall(t *testing.T) {
	e := newEnv(t, 1)
	c := e.chain(t, nil)
	c.ProbeAll(t.Context())
	e.nodes[0].set(func(n *node) { n.status = http.StatusBadGateway })
	for range 3 {
		c.ProbeAll(t.Context())
	}
	st := nodeState(c, "n0")
	require.Nil(t, st.RetryAt, "no wait for every call")
	require.Equal(t, evmnodes.NodeHealthy, st.State)
	e.nodes[0].set(func(n *node) { n.status = 0 })
	_, err := c.NonceAt(t.Context(), ledger.Address(e.from))
	require.NoError(t, err, "a new call asks the node at once")

	e.nodes[0].set(func(n *node) { n.status = http.StatusBadGateway })
	for range 3 {
		c.ProbeAll(t.Context())
	}
	require.Nil(t, nodeState(c, "n0").RetryAt, "the success cleared the failures in a row")
	for range evmnodes.OutAfter - 3 {
		c.ProbeAll(t.Context())
	}
	st = nodeState(c, "n0")
	require.Equal(t, evmnodes.NodeDown, st.State, "OutAfter in a row take it out")
	require.NotNil(t, st.RetryAt)
	require.WithinDuration(t, time.Now().Add(250*time.Millisecond), *st.RetryAt, 150*time.Millisecond,
		"out for a moment first: the wait doubles from OutAfter on, not from the first failure")
}

func TestChain_ARateLimitedNodeWaitsItsRetryAfter(t *testing.T) {
	e := newEnv(t, 2)
	c := e.chain(t, func(c *evmnodes.Config) { c.MaxBackoff = time.Minute })
	e.nodes[0].set(func(n *node) { n.status, n.retryAfter = http.StatusTooManyRequests, "30" })
	for range 3 {
		_, err := c.NonceAt(t.Context(), ledger.Address(e.from))
		require.NoError(t, err)
	}
	for range evmnodes.OutAfter {
		c.ProbeAll(t.Context()) // 429s in a row
	}
	st := nodeState(c, "n0")
	require.Equal(t, evmnodes.NodeBackoff, st.State)
	require.NotNil(t, st.RetryAt)
	require.WithinDuration(t, time.Now().Add(30*time.Second), *st.RetryAt, 3*time.Second, "Retry-After: 30 is honoured")
	before := e.nodes[0].requests.Load()
	for range 5 {
		_, err := c.NonceAt(t.Context(), ledger.Address(e.from))
		require.NoError(t, err)
	}
	require.Equal(t, before, e.nodes[0].requests.Load(), "no call goes to a node before its Retry-After")
}

func TestChain_ANodeOfAnotherChainIsTakenOut(t *testing.T) {
	e := newEnv(t, 2)
	c := e.chain(t, nil)
	e.nodes[1].set(func(n *node) { n.otherChain = true })
	c.ProbeAll(t.Context())
	require.Equal(t, evmnodes.NodeWrongChain, nodeState(c, "n1").State)
	require.Contains(t, nodeState(c, "n1").LastError, "chain id 5")
	before := e.nodes[1].requests.Load()
	e.nodes[0].set(func(n *node) { n.status = http.StatusServiceUnavailable })
	_, err := c.NonceAt(t.Context(), ledger.Address(e.from))
	require.Error(t, err, "the node of another chain is never read from, even when the other is down")
	for range evmnodes.OutAfter {
		c.ProbeAll(t.Context())
	}
	require.Equal(t, before+evmnodes.OutAfter, e.nodes[1].requests.Load(), "only the probes, which check its chain id again")
	require.Equal(t, evmnodes.NodeWrongChain, nodeState(c, "n1").State)
	require.Equal(t, evmnodes.ChainUnavailable, c.Status().State)
}

func TestChain_NoReceiptFromANodeBehindTheHighestHeadIsBelieved(t *testing.T) {
	e := newEnv(t, 2)
	c := e.chain(t, nil)
	_, raw := e.signed(t, 0)
	require.NoError(t, c.SendRawTransaction(t.Context(), raw))
	e.sim.Mine()
	e.sim.Mine()
	e.sim.Mine()
	tx, _ := e.signed(t, 0)
	c.ProbeAll(t.Context())
	e.nodes[0].set(func(n *node) { n.lag = 3 })
	for range 5 {
		r, err := c.TransactionReceipt(t.Context(), ledger.TxHash(tx.Hash()))
		require.NoError(t, err)
		require.True(t, r.Found, "the receipt comes from the node that is caught up: %+v, head %d", r, e.sim.Head().Number)
	}
	e.nodes[1].set(func(n *node) { n.status = http.StatusBadGateway })
	_, err := c.TransactionReceipt(t.Context(), ledger.TxHash(tx.Hash()))
	require.Error(t, err, "with only a lagging node left, no answer rather than \"not mined\"")
	require.Equal(t, ledger.Transient, ledger.ClassOf(err))
	_, err = c.NonceAt(t.Context(), ledger.Address(e.from))
	require.Error(t, err, "nor a nonce from behind")
}

func TestChain_AnEstimateThatRevertsIsTheNodesVerdictNotItsFailure(t *testing.T) {
	e := newEnv(t, 2)
	c := e.chain(t, nil)
	for _, n := range e.nodes {
		n.set(func(n *node) { n.verdict = true })
	}
	to := ledger.Address(common.HexToAddress("0xdead"))
	_, err := c.EstimateGas(t.Context(), ledger.CallMsg{From: ledger.Address(e.from), To: &to, Value: big.NewInt(1)})
	require.Error(t, err)
	require.True(t, ledger.CallRefused(err), "a revert is the transaction's verdict: %v", err)
	require.Equal(t, int64(1), e.nodes[0].estimates.Load()+e.nodes[1].estimates.Load(), "one node's verdict is the answer; no other node is asked")
	require.Equal(t, evmnodes.NodeHealthy, nodeState(c, "n0").State)

	for _, n := range e.nodes {
		n.set(func(n *node) { n.verdict, n.status, n.retryAfter = false, http.StatusTooManyRequests, "1" })
	}
	_, err = c.EstimateGas(t.Context(), ledger.CallMsg{From: ledger.Address(e.from), To: &to, Value: big.NewInt(1)})
	require.Error(t, err)
	require.False(t, ledger.CallRefused(err), "a rate limit is the provider's failure, never the task's")
	var ue *evmnodes.UnavailableError
	require.ErrorAs(t, err, &ue)
	require.Greater(t, ue.RetryAfter(), 500*time.Millisecond, "the wait of Retry-After: 1 is passed on")
}

func TestChain_TheSameBytesGoToEveryNodeAndToSendOnlyEndpoints(t *testing.T) {
	e := newEnv(t, 3)
	c := e.chain(t, func(c *evmnodes.Config) { c.Nodes[2].SendOnly = true })
	_, raw := e.signed(t, 0)
	require.NoError(t, c.SendRawTransaction(t.Context(), raw))
	for i, n := range e.nodes {
		require.Equal(t, int64(1), n.sends.Load(), "node %d got the transaction", i)
	}
	reads := e.nodes[2].requests.Load()
	for range 3 {
		_, err := c.NonceAt(t.Context(), ledger.Address(e.from))
		require.NoError(t, err)
	}
	require.Equal(t, reads, e.nodes[2].requests.Load(), "a send-only endpoint is never read from")
}

func TestChain_ASendNoNodeTookIsBusyAndOneThatMayBeOutIsIndeterminate(t *testing.T) {
	e := newEnv(t, 2)
	c := e.chain(t, nil)
	_, raw := e.signed(t, 0)
	for _, n := range e.nodes {
		n.set(func(n *node) { n.status, n.retryAfter = http.StatusTooManyRequests, "60" })
	}
	err := c.SendRawTransaction(t.Context(), raw)
	require.Equal(t, ledger.SendBusy, ledger.SendResultOf(err), "%v", err)

	e2 := newEnv(t, 2)
	c2 := e2.chain(t, nil)
	_, raw2 := e2.signed(t, 0)
	e2.nodes[0].set(func(n *node) { n.status = http.StatusTooManyRequests })
	e2.nodes[1].set(func(n *node) { n.status = http.StatusBadGateway })
	err = c2.SendRawTransaction(t.Context(), raw2)
	require.Equal(t, ledger.SendIndeterminate, ledger.SendResultOf(err), "a 502 may have been forwarded: %v", err)

	e2.nodes[1].set(func(n *node) { n.status = 0 })
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, c2.SendRawTransaction(t.Context(), raw2), "once a node answers, the same bytes are taken")
}

func TestChain_StartsWithEveryNodeDownAndSaysSo(t *testing.T) {
	c, err := evmnodes.New(evmnodes.Config{Name: "down", ChainID: 1, CallTimeout: 200 * time.Millisecond, MaxWait: time.Millisecond,
		Nodes: []evmnodes.NodeConfig{{URL: "http://127.0.0.1:1/"}, {URL: "http://user:secret@127.0.0.1:2/v3/0123456789abcdef0123?key=k"}}})
	require.NoError(t, err, "nodes that do not answer do not stop a chain from being built")
	defer c.Close()
	id, err := c.ChainID(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(1), id.Int64(), "the declared chain id needs no node")
	c.ProbeAll(t.Context())
	st := c.Status()
	require.Equal(t, evmnodes.ChainUnavailable, st.State)
	for _, n := range st.Nodes {
		require.Equal(t, evmnodes.NodeDown, n.State)
		require.NotContains(t, n.URL, "secret")
		require.NotContains(t, n.URL, "key=")
		require.NotContains(t, n.URL, "0123456789abcdef0123")
		require.NotContains(t, n.LastError, "secret", "an error's text names the redacted URL")
		require.NotContains(t, n.LastError, "0123456789abcdef0123")
	}
	_, err = c.HeadBlock(t.Context())
	require.Error(t, err)
	require.Equal(t, ledger.Transient, ledger.ClassOf(err))
	var ue *evmnodes.UnavailableError
	require.True(t, errors.As(err, &ue))
	_ = context.Background
}

// A lone node that rate-limits one call is waited for, its Retry-After
// honoured, within the call's deadline: the read is answered, not failed.
func TestChain_AReadWaitsOutALoneNodesRetryAfterWithinItsDeadline(t *testing.T) {
	e := newEnv(t, 1)
	c := e.chain(t, func(c *evmnodes.Config) { c.MaxWait = 1500 * time.Millisecond })
	c.ProbeAll(t.Context())
	var once atomic.Bool
	e.nodes[0].set(func(n *node) { n.status, n.retryAfter = http.StatusTooManyRequests, "1" })
	go func() {
		for e.nodes[0].requests.Load() < 2 {
			time.Sleep(time.Millisecond)
		}
		once.Store(true)
		e.nodes[0].set(func(n *node) { n.status = 0 })
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	began := time.Now()
	_, err := c.NonceAt(ctx, ledger.Address(e.from))
	require.NoError(t, err)
	require.True(t, once.Load())
	require.GreaterOrEqual(t, time.Since(began), 900*time.Millisecond, "the Retry-After was waited out")
}

// A call that reverts is the node's verdict, with its revert data, as for
// an estimate; a provider's failure is not.
func TestChain_ACallThatRevertsIsTheNodesVerdictWithItsData(t *testing.T) {
	e := newEnv(t, 2)
	c := e.chain(t, nil)
	to := ledger.Address(common.HexToAddress("0xdead"))
	data := append(append([]byte(nil), evmsim.RevertMarker...), 0xca, 0xfe)
	_, err := c.Call(t.Context(), ledger.CallMsg{From: ledger.Address(e.from), To: &to, Data: data}, nil)
	require.True(t, ledger.CallRefused(err), "a revert is the call's verdict: %v", err)
	re, ok := ledger.RevertDataOf(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, []byte{0xca, 0xfe}, re.Data)
	require.Equal(t, evmnodes.NodeHealthy, nodeState(c, "n0").State, "a verdict is no failure of the node")

	out, err := c.Call(t.Context(), ledger.CallMsg{From: ledger.Address(e.from), To: &to}, nil)
	require.NoError(t, err)
	require.Empty(t, out)

	for _, n := range e.nodes {
		n.set(func(n *node) { n.status, n.retryAfter = http.StatusTooManyRequests, "1" })
	}
	_, err = c.Call(t.Context(), ledger.CallMsg{From: ledger.Address(e.from), To: &to, Data: data}, nil)
	require.Error(t, err)
	require.False(t, ledger.CallRefused(err), "a rate limit is the provider's failure, never the task's")
}
