package faultproxy_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/ledger/faultproxy"
)

var (
	chainID   = big.NewInt(1337)
	recipient = common.Address{0xaa}
)

// bundle is a simulated chain served over JSON-RPC behind a proxy, and
// clients of the proxy.
type bundle struct {
	chain *evmsim.Ledger
	proxy *faultproxy.Proxy
	url   string
	key   *ecdsa.PrivateKey
	from  common.Address
	rc    *rpc.Client
	ec    *ethclient.Client
}

func setup(t *testing.T, cfg faultproxy.Config) bundle {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	from := crypto.PubkeyToAddress(key.PublicKey)
	chain := evmsim.New(evmsim.Config{Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		Alloc: map[common.Address]*big.Int{from: big.NewInt(params.Ether)}})
	node := httptest.NewServer(evmsim.NewServer(chain, nil))
	t.Cleanup(node.Close)
	p, err := faultproxy.New(node.URL, cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	url, err := p.Start()
	require.NoError(t, err)
	rc, err := rpc.Dial(url)
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return bundle{chain: chain, proxy: p, url: url, key: key, from: from, rc: rc, ec: ethclient.NewClient(rc)}
}

// signed is a 1-wei transfer from key at nonce, paying 3 gwei at most.
func signed(t *testing.T, key *ecdsa.PrivateKey, nonce uint64) *types.Transaction {
	t.Helper()
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{
		ChainID: chainID, Nonce: nonce, GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(3 * params.GWei),
		Gas: params.TxGas, To: &recipient, Value: big.NewInt(1),
	})
	require.NoError(t, err)
	return tx
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// httpStatus is the status of err's rpc.HTTPError, or 0.
func httpStatus(err error) int {
	var he rpc.HTTPError
	if errors.As(err, &he) {
		return he.StatusCode
	}
	return 0
}

// requireReset requires err to be a connection reset: a transport error,
// neither an HTTP status nor a JSON-RPC error.
func requireReset(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	var re rpc.Error
	require.False(t, errors.As(err, &re), "a JSON-RPC error: %v", err)
	require.Zero(t, httpStatus(err), "an HTTP error: %v", err)
	require.ErrorIs(t, err, syscall.ECONNRESET)
}

func TestProxy_RateLimitAnswers429WithRetryAfterWithoutForwarding(t *testing.T) {
	t.Parallel()
	b := setup(t, faultproxy.Config{RateLimit: 1, RetryAfter: 1500 * time.Millisecond})
	_, err := b.ec.BlockNumber(ctx(t))
	require.Equal(t, http.StatusTooManyRequests, httpStatus(err), "%v", err)

	resp, err := http.Post(b.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "2", resp.Header.Get("Retry-After"), "1.5 s rounded up to whole seconds")

	require.Equal(t, map[string]int{faultproxy.CountRateLimit: 2}, b.proxy.Counts())
}

func TestProxy_BadGatewayAnswers502And503InTurn(t *testing.T) {
	t.Parallel()
	b := setup(t, faultproxy.Config{BadGateway: 1})
	var got []int
	for range 3 {
		_, err := b.ec.ChainID(ctx(t))
		got = append(got, httpStatus(err))
	}
	require.Equal(t, []int{502, 503, 502}, got)
	require.Equal(t, 3, b.proxy.Counts()[faultproxy.CountBadGateway])
	require.Zero(t, b.proxy.Counts()[faultproxy.CountForwarded])
}

func TestProxy_ResetBeforeForwardIsATransportErrorAndTheNodeNeverHearsTheSend(t *testing.T) {
	t.Parallel()
	b := setup(t, faultproxy.Config{ResetBeforeForward: 1})
	requireReset(t, b.ec.SendTransaction(ctx(t), signed(t, b.key, 0)))
	require.NoError(t, b.proxy.Set(faultproxy.Config{}))
	n, err := b.ec.PendingNonceAt(ctx(t), b.from)
	require.NoError(t, err)
	require.Zero(t, n, "the node got the send")
	require.Equal(t, map[string]int{faultproxy.CountReset: 1, faultproxy.CountForwarded: 1}, b.proxy.Counts())
}

func TestProxy_LostSendAnswerLeavesTheTransactionWithTheNode(t *testing.T) {
	t.Parallel()
	b := setup(t, faultproxy.Config{LoseSendAnswer: 1})
	tx := signed(t, b.key, 0)
	requireReset(t, b.ec.SendTransaction(ctx(t), tx))
	// Reads draw no fault in the lost-send band: they are answered.
	n, err := b.ec.PendingNonceAt(ctx(t), b.from)
	require.NoError(t, err)
	require.Equal(t, uint64(1), n, "the node's pool holds the send whose answer was lost")
	b.chain.Mine()
	r, err := b.ec.TransactionReceipt(ctx(t), tx.Hash())
	require.NoError(t, err)
	require.Equal(t, types.ReceiptStatusSuccessful, r.Status)
	require.Equal(t, 1, b.proxy.Counts()[faultproxy.CountLostSendAnswer])
}

func TestProxy_SlowAnswerOutlastsTheClientsTimeoutAndComesAfterTheDelay(t *testing.T) {
	t.Parallel()
	b := setup(t, faultproxy.Config{Slow: 1, SlowDelay: time.Minute})
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := b.ec.BlockNumber(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	require.NoError(t, b.proxy.Set(faultproxy.Config{Slow: 1, SlowDelay: 300 * time.Millisecond}))
	began := time.Now()
	_, err = b.ec.BlockNumber(ctx(t))
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(began), 300*time.Millisecond, "the answer was held")
	require.Equal(t, 2, b.proxy.Counts()[faultproxy.CountSlow])
}

func TestProxy_MethodsLimitTheFaultsToRequestsHoldingThem(t *testing.T) {
	t.Parallel()
	b := setup(t, faultproxy.Config{Methods: []string{"eth_estimateGas"}, RateLimit: 1})
	_, err := b.ec.BlockNumber(ctx(t))
	require.NoError(t, err)
	_, err = b.ec.EstimateGas(ctx(t), ethereum.CallMsg{From: b.from, To: &recipient, Value: big.NewInt(1)})
	require.Equal(t, http.StatusTooManyRequests, httpStatus(err), "%v", err)
	// A batch holding the method draws for the whole batch.
	batch := []rpc.BatchElem{{Method: "eth_blockNumber", Result: new(hexutil.Uint64)},
		{Method: "eth_estimateGas", Args: []any{map[string]any{"from": b.from, "to": recipient}}, Result: new(hexutil.Uint64)}}
	require.Equal(t, http.StatusTooManyRequests, httpStatus(b.rc.BatchCallContext(ctx(t), batch)))
}

// mineWithTxAt mines blocks 1 to head, the transfer at nonce 0 in block at.
func mineWithTxAt(t *testing.T, b bundle, at, head uint64) *types.Transaction {
	t.Helper()
	tx := signed(t, b.key, 0)
	for n := uint64(1); n <= head; n++ {
		if n == at {
			require.NoError(t, b.ec.SendTransaction(ctx(t), tx))
		}
		b.chain.Mine()
	}
	return tx
}

func TestProxy_LagAnswersReadsAsANodeKBlocksBehind(t *testing.T) {
	t.Parallel()
	b := setup(t, faultproxy.Config{})
	tx := mineWithTxAt(t, b, 4, 6)
	block4, err := b.ec.HeaderByNumber(ctx(t), big.NewInt(4))
	require.NoError(t, err)
	require.NoError(t, b.proxy.Set(faultproxy.Config{Lag: 1, LagBlocks: 3}))

	head, err := b.ec.BlockNumber(ctx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(3), head)
	for _, tag := range []string{"latest", "pending", "finalized"} {
		var h *types.Header
		require.NoError(t, b.rc.CallContext(ctx(t), &h, "eth_getBlockByNumber", tag, false))
		require.Equal(t, uint64(3), h.Number.Uint64(), tag)
	}
	_, err = b.ec.HeaderByNumber(ctx(t), big.NewInt(5))
	require.ErrorIs(t, err, ethereum.NotFound, "a block above head−k")
	_, err = b.ec.HeaderByHash(ctx(t), block4.Hash())
	require.ErrorIs(t, err, ethereum.NotFound, "a block above head−k by hash")
	n, err := b.ec.NonceAt(ctx(t), b.from, nil)
	require.NoError(t, err)
	require.Zero(t, n, "the nonce before the transfer")
	n, err = b.ec.PendingNonceAt(ctx(t), b.from)
	require.NoError(t, err)
	require.Zero(t, n, "the pending nonce before the transfer")
	_, err = b.ec.NonceAt(ctx(t), b.from, big.NewInt(5))
	require.ErrorContains(t, err, "header not found")
	_, err = b.ec.TransactionReceipt(ctx(t), tx.Hash())
	require.ErrorIs(t, err, ethereum.NotFound, "the receipt of a transaction mined above head−k")
	var receipts []*types.Receipt
	require.NoError(t, b.rc.CallContext(ctx(t), &receipts, "eth_getBlockReceipts", block4.Hash()))
	require.Nil(t, receipts, "the receipts of a block above head−k")

	require.NoError(t, b.proxy.Set(faultproxy.Config{}))
	n, err = b.ec.NonceAt(ctx(t), b.from, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), n, "faults off: the node's own answer")
	_, err = b.ec.TransactionReceipt(ctx(t), tx.Hash())
	require.NoError(t, err)
	require.Positive(t, b.proxy.Counts()[faultproxy.CountLag])
}

func TestProxy_LaggingBatchAnswersEveryElementAtTheSameHead(t *testing.T) {
	t.Parallel()
	b := setup(t, faultproxy.Config{})
	tx := mineWithTxAt(t, b, 2, 4)
	require.NoError(t, b.proxy.Set(faultproxy.Config{Lag: 1, LagBlocks: 3}))

	var head, nonce hexutil.Uint64
	var receipt, block map[string]any
	batch := []rpc.BatchElem{
		{Method: "eth_getTransactionReceipt", Args: []any{tx.Hash()}, Result: &receipt},
		{Method: "eth_blockNumber", Result: &head},
		{Method: "eth_getTransactionCount", Args: []any{b.from, "latest"}, Result: &nonce},
		{Method: "eth_getBlockByNumber", Args: []any{"latest", false}, Result: &block},
	}
	require.NoError(t, b.rc.BatchCallContext(ctx(t), batch))
	for _, e := range batch {
		require.NoError(t, e.Error, e.Method)
	}
	require.Equal(t, hexutil.Uint64(1), head)
	require.Zero(t, nonce)
	require.Nil(t, receipt, "mined in block 2, above head−k")
	require.Equal(t, "0x1", block["number"])
	require.Equal(t, 1, b.proxy.Counts()[faultproxy.CountLag], "one decision for the batch")

	require.NoError(t, b.proxy.Set(faultproxy.Config{}))
	require.NoError(t, b.rc.BatchCallContext(ctx(t), batch))
	require.Equal(t, hexutil.Uint64(4), head)
	require.Equal(t, hexutil.Uint64(1), nonce)
	require.NotNil(t, receipt)
}

func TestProxy_HTTPFaultAnswersTheWholeBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, faultproxy.Config{BadGateway: 1})
	batch := []rpc.BatchElem{{Method: "eth_blockNumber", Result: new(hexutil.Uint64)}, {Method: "eth_chainId", Result: new(hexutil.Big)}}
	require.Equal(t, http.StatusBadGateway, httpStatus(b.rc.BatchCallContext(ctx(t), batch)))
	require.Equal(t, map[string]int{faultproxy.CountBadGateway: 1}, b.proxy.Counts())
}

func TestProxy_StopAndStartServeOnTheSamePort(t *testing.T) {
	t.Parallel()
	b := setup(t, faultproxy.Config{})
	_, err := b.ec.BlockNumber(ctx(t))
	require.NoError(t, err)
	b.proxy.Stop()
	_, err = b.ec.BlockNumber(ctx(t))
	require.Error(t, err, "the kept-alive connection was cut")
	_, err = b.ec.BlockNumber(ctx(t))
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "the port is closed")
	url, err := b.proxy.Start()
	require.NoError(t, err)
	require.Equal(t, b.url, url)
	_, err = b.ec.BlockNumber(ctx(t))
	require.NoError(t, err)
}

func TestProxy_TheSeedMakesTheDrawsRepeatable(t *testing.T) {
	t.Parallel()
	draws := func() []int {
		b := setup(t, faultproxy.Config{Seed: 7, RateLimit: 0.5})
		var got []int
		for range 20 {
			_, err := b.ec.ChainID(ctx(t))
			got = append(got, httpStatus(err))
		}
		return got
	}
	first := draws()
	require.Equal(t, first, draws())
	require.Contains(t, first, 0)
	require.Contains(t, first, http.StatusTooManyRequests)
}

func TestConfig_ValidateRefusesProbabilitiesAddingUpToMoreThanOne(t *testing.T) {
	t.Parallel()
	require.NoError(t, faultproxy.Config{RateLimit: 0.5, Lag: 0.5}.Validate())
	require.Error(t, faultproxy.Config{RateLimit: 0.6, Lag: 0.5}.Validate())
	require.Error(t, faultproxy.Config{Slow: -0.1}.Validate())
	_, err := faultproxy.New("127.0.0.1:8545", faultproxy.Config{})
	require.Error(t, err, "not a URL with a scheme")
}
