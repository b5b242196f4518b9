package httpapi_test

// The chain side of /rpc: blocks and receipts follow the bundles' states,
// state and fee reads pass to the chain's EVM JSON-RPC unchanged, and every
// other method is refused as geth refuses it.

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmrpc"
	"github.com/ledgerq/ledgerq/internal/store"
)

// bundle cuts the pool's pending transactions into the next bundle, and
// moves it through its states up to want (accumulated or finalized; with
// depth 1, a bundle is finalized one block after its accumulation).
func (f *poolFixture) bundle(want store.BundleState) store.Bundle {
	f.t.Helper()
	ctx := f.t.Context()
	st := f.db.Store
	now := f.clock.Now()
	require.NoError(f.t, st.BundleEnsureCores(ctx, poolChainID, 1, now))
	slot, _, err := st.BundleProcessedSlot(ctx, poolChainID)
	require.NoError(f.t, err)
	slot += 10
	recent := make([]ledger.BlockRef, 0, ledger.RecentHistorySize)
	for s := slot - ledger.RecentHistorySize + 1; s <= slot; s++ {
		recent = append(recent, ledger.BlockRef{Number: s, Hash: ledger.Hash{byte(s)}})
	}
	heads, err := st.BundleHeads(ctx, poolChainID)
	require.NoError(f.t, err)
	var executed ledger.BlockRef
	if heads.Executed > 0 {
		b, err := st.BundleGet(ctx, poolChainID, heads.Executed)
		require.NoError(f.t, err)
		executed = ledger.BlockRef{Number: b.Number, Hash: b.Hash}
	}
	cut, err := st.BundleCut(ctx, store.BundleCutParams{ChainID: poolChainID, Size: 100, MaxQueued: 10, MaxBundles: 1,
		Executed: executed, Recent: recent, Cores: 1, Now: now})
	require.NoError(f.t, err)
	require.Len(f.t, cut, 1)
	c, err := st.BundleClaim(ctx, store.BundleClaimParams{ChainID: poolChainID, Recent: recent, Cores: 1, Now: now})
	require.NoError(f.t, err)
	require.NotNil(f.t, c)
	require.NoError(f.t, st.BundleSubmitResult(ctx, store.BundleSubmitResultParams{ChainID: poolChainID, PackageHash: c.PackageHash(), Now: now}))
	blocks := []ledger.JAMBlock{
		{Slot: slot + 1, Guarantees: []ledger.Hash{c.PackageHash()}},
		{Slot: slot + 2, Accumulations: []ledger.Hash{c.PackageHash()}},
	}
	if want == store.BundleFinalized {
		blocks = append(blocks, ledger.JAMBlock{Slot: slot + 3})
	}
	_, err = st.BundleApplyBlocks(ctx, poolChainID, blocks, 1, now)
	require.NoError(f.t, err)
	b, err := st.BundleGet(ctx, poolChainID, cut[0].Number)
	require.NoError(f.t, err)
	require.Equal(f.t, want, b.State)
	return b
}

// blockAnswers makes the EVM node answer eth_getBlockByNumber and
// eth_getBlockByHash with a block naming its number.
func (f *poolFixture) blockAnswers() {
	f.evm.Handle("eth_getBlockByNumber", func(ps []json.RawMessage) (json.RawMessage, error) {
		var n hexutil.Uint64
		require.NoError(f.t, json.Unmarshal(ps[0], &n))
		return json.RawMessage(fmt.Sprintf(`{"number":"%s","hash":"0x%064x","full":%s}`, n, uint64(n), ps[1])), nil
	})
	f.evm.Handle("eth_getBlockByHash", func(ps []json.RawMessage) (json.RawMessage, error) {
		var h common.Hash
		require.NoError(f.t, json.Unmarshal(ps[0], &h))
		n := new(big.Int).SetBytes(h[:]).Uint64()
		return json.RawMessage(fmt.Sprintf(`{"number":"%s","hash":"%s"}`, hexutil.Uint64(n), h.Hex())), nil
	})
}

func TestRPC_BlockNumberAndBlocksFollowTheExecutedAndFinalizedBundles(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	f.blockAnswers()
	ec := f.dial()
	ctx := t.Context()
	n, err := ec.BlockNumber(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "no bundle executed: the EVM's genesis")

	key := newKey(t)
	require.NoError(t, ec.SendTransaction(ctx, dynTx(t, key, 0, 2, 1)))
	first := f.bundle(store.BundleFinalized)
	require.NoError(t, ec.SendTransaction(ctx, dynTx(t, key, 1, 2, 1)))
	second := f.bundle(store.BundleAccumulated)
	require.Equal(t, first.Number+1, second.Number)
	require.NoError(t, ec.SendTransaction(ctx, dynTx(t, key, 2, 2, 1)))

	n, err = ec.BlockNumber(ctx)
	require.NoError(t, err)
	require.Equal(t, second.Number, n, "the newest executed bundle; the pending transaction is in none")
	for tag, want := range map[string]uint64{"latest": second.Number, "pending": second.Number,
		"safe": first.Number, "finalized": first.Number, "earliest": 0, hexutil.EncodeUint64(first.Number): first.Number} {
		res, e := f.rpcCall("eth_getBlockByNumber", tag, true)
		require.Nil(t, e, tag)
		var blk struct {
			Number hexutil.Uint64 `json:"number"`
			Full   bool           `json:"full"`
		}
		require.NoError(t, json.Unmarshal(res, &blk), tag)
		require.Equal(t, want, uint64(blk.Number), tag)
		require.True(t, blk.Full, "%s: the full flag passes", tag)
	}
	calls := len(f.evm.Calls())
	res, e := f.rpcCall("eth_getBlockByNumber", hexutil.EncodeUint64(second.Number+1), false)
	require.Nil(t, e)
	require.Equal(t, "null", string(res), "above the newest executed bundle")
	res, e = f.rpcCall("eth_getBlockByHash", common.BigToHash(new(big.Int).SetUint64(second.Number+1)), false)
	require.Nil(t, e)
	require.Equal(t, "null", string(res), "the chain's block above the newest executed bundle")
	require.Len(t, f.evm.Calls(), calls+1, "a number above the head is not asked of the chain")
	res, e = f.rpcCall("eth_getBlockByHash", common.BigToHash(new(big.Int).SetUint64(first.Number)), false)
	require.Nil(t, e)
	require.Contains(t, string(res), fmt.Sprintf(`"number":"%s"`, hexutil.Uint64(first.Number)))
}

func TestRPC_AReceiptExistsOnceTheTransactionsBundleExecuted(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	ec := f.dial()
	ctx := t.Context()
	f.evm.Handle("eth_getTransactionReceipt", func(ps []json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"transactionHash":` + string(ps[0]) + `,"status":"0x1","gasUsed":"0x5208","blockNumber":"0x1"}`), nil
	})
	f.evm.Handle("eth_getTransactionByHash", func(ps []json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"hash":` + string(ps[0]) + `,"blockNumber":"0x1","blockHash":"0x` + strings.Repeat("ab", 32) + `"}`), nil
	})
	tx := dynTx(t, newKey(t), 0, 2, 1)
	require.NoError(t, ec.SendTransaction(ctx, tx))
	_, err := ec.TransactionReceipt(ctx, tx.Hash())
	require.ErrorIs(t, err, ethereum.NotFound, "pending: no receipt")
	_, pending, err := ec.TransactionByHash(ctx, tx.Hash())
	require.NoError(t, err)
	require.True(t, pending)
	for _, c := range f.evm.Calls() {
		require.Equal(t, "eth_getBalance", c.Method, "only the intake's funds check asks the chain before the bundle executed")
	}

	f.bundle(store.BundleAccumulated)
	res, e := f.rpcCall("eth_getTransactionReceipt", tx.Hash())
	require.Nil(t, e)
	require.JSONEq(t, `{"transactionHash":"`+tx.Hash().Hex()+`","status":"0x1","gasUsed":"0x5208","blockNumber":"0x1"}`, string(res))
	res, e = f.rpcCall("eth_getTransactionByHash", tx.Hash())
	require.Nil(t, e)
	require.Contains(t, string(res), `"blockNumber":"0x1"`, "the chain's answer, with its block")

	res, e = f.rpcCall("eth_getTransactionReceipt", common.Hash{0x99})
	require.Nil(t, e)
	require.Equal(t, "null", string(res), "a hash the pool never held")
}

// The chain's state reads, and its fee hints where they are at or above
// what the pool admits (TestRPC_FeeHintsAreNeverBelowWhatThePoolAdmits has
// the others), reach the client as the chain gave them.
func TestRPC_StateAndFeeReadsPassToTheChainsEVMUnchanged(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	ctx := t.Context()
	f.evm.Answer("eth_getBalance", `"0xde0b6b3a7640000"`)
	f.evm.Answer("eth_gasPrice", `"0x3b9aca08"`)
	f.evm.Answer("eth_maxPriorityFeePerGas", `"0x3b9aca01"`)
	f.evm.Answer("eth_feeHistory", `{"oldestBlock":"0x1","baseFeePerGas":["0x7","0x7"],"gasUsedRatio":[0.5],"reward":[["0x3b9aca02"]]}`)
	f.evm.Answer("eth_estimateGas", `"0x5208"`)
	f.evm.Answer("eth_getCode", `"0x6001"`)
	f.evm.Answer("eth_syncing", `false`)
	f.evm.Handle("eth_call", func([]json.RawMessage) (json.RawMessage, error) {
		return nil, &evmrpc.Error{Code: 3, Message: "execution reverted: no", Data: json.RawMessage(`"0x08c379a0"`)}
	})
	ec := f.dial()
	who := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	bal, err := ec.BalanceAt(ctx, who, nil)
	require.NoError(t, err)
	require.Equal(t, "1000000000000000000", bal.String())
	price, err := ec.SuggestGasPrice(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1e9+8), price.Int64())
	tip, err := ec.SuggestGasTipCap(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1e9+1), tip.Int64())
	hist, err := ec.FeeHistory(ctx, 1, nil, []float64{50})
	require.NoError(t, err)
	require.Equal(t, int64(7), hist.BaseFee[0].Int64())
	require.Equal(t, int64(1e9+2), hist.Reward[0][0].Int64())
	gas, err := ec.EstimateGas(ctx, ethereum.CallMsg{From: who, To: &who, Value: big.NewInt(1)})
	require.NoError(t, err)
	require.Equal(t, uint64(21000), gas)
	code, err := ec.CodeAt(ctx, who, nil)
	require.NoError(t, err)
	require.Equal(t, []byte{0x60, 0x01}, code)
	syncing, err := ec.SyncProgress(ctx)
	require.NoError(t, err)
	require.Nil(t, syncing)

	// A revert keeps its code, message and data: clients decode the reason.
	_, err = ec.CallContract(ctx, ethereum.CallMsg{To: &who, Data: []byte{1}}, nil)
	var de rpc.DataError
	require.ErrorAs(t, err, &de)
	require.Equal(t, "execution reverted: no", de.Error())
	require.Equal(t, "0x08c379a0", de.ErrorData())
	code2, _ := rpcErr(t, err)
	require.Equal(t, 3, code2)

	// The parameters reach the chain as the client sent them, absent
	// trailing ones left out.
	var balCall []json.RawMessage
	for _, c := range f.evm.Calls() {
		if c.Method == "eth_getBalance" {
			balCall = c.Params
		}
	}
	require.Equal(t, []json.RawMessage{json.RawMessage(`"` + strings.ToLower(who.Hex()) + `"`), json.RawMessage(`"latest"`)}, balCall)
	res, e := f.rpcCall("eth_getBalance", who)
	require.Nil(t, e)
	require.Equal(t, `"0xde0b6b3a7640000"`, string(res))
	require.Len(t, f.evm.Calls()[len(f.evm.Calls())-1].Params, 1)
}

func TestRPC_MethodsOutsideTheListAreMethodNotFoundAndAnUnansweringChainIsUnavailable(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	for _, m := range []string{"eth_sign", "eth_sendTransaction", "personal_unlockAccount", "admin_peers", "debug_traceTransaction", "eth_fillTransaction"} {
		_, e := f.rpcCall(m)
		require.NotNil(t, e, m)
		require.Equal(t, -32601, e.Code, m)
	}
	for _, c := range f.evm.Calls() {
		t.Fatalf("%s reached the chain", c.Method)
	}
	f.evm.Handle("eth_gasPrice", func([]json.RawMessage) (json.RawMessage, error) {
		return nil, fmt.Errorf("%w: connection refused", evmrpc.ErrUnavailable)
	})
	_, e := f.rpcCall("eth_gasPrice")
	require.NotNil(t, e)
	require.Equal(t, -32603, e.Code)
	require.Equal(t, "chain unavailable: eth_gasPrice was not answered", e.Message)

	res, e := f.rpcCall("web3_clientVersion")
	require.Nil(t, e)
	require.Equal(t, `"ledgerq/v9.9.9-test"`, string(res))
	res, e = f.rpcCall("eth_accounts")
	require.Nil(t, e)
	require.Equal(t, `[]`, string(res))
}

func TestRPC_ABatchMixesThePoolsMethodsAndTheChainsInOrder(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	f.evm.Answer("eth_gasPrice", `"0x3b9aca01"`)
	f.evm.Answer("eth_feeHistory", `{"oldestBlock":"0x1","baseFeePerGas":["0x1","0x1"],"gasUsedRatio":[0.5],"reward":[]}`)
	key := newKey(t)
	tx := dynTx(t, key, 0, 2, 1)
	body := fmt.Sprintf(`[
		{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},
		{"jsonrpc":"2.0","id":2,"method":"eth_gasPrice"},
		{"jsonrpc":"2.0","id":3,"method":"eth_sendRawTransaction","params":[%q]},
		{"jsonrpc":"2.0","id":4,"method":"eth_getTransactionCount","params":[%q,"pending"]},
		{"jsonrpc":"2.0","id":5,"method":"eth_blockNumber"},
		{"jsonrpc":"2.0","id":6,"method":"eth_nope"}]`, rawHex(t, tx), addr(key).Hex())
	out, _ := f.rpcBatch(body)
	require.Len(t, out, 6)
	want := []string{`"0x1092"`, `"0x3b9aca01"`, `"` + tx.Hash().Hex() + `"`, `"0x1"`, `"0x0"`}
	for i, w := range want {
		require.Equal(t, i+1, out[i].ID)
		require.Nil(t, out[i].Error, "id %d", i+1)
		require.Equal(t, w, string(out[i].Result), "id %d", i+1)
	}
	require.Equal(t, -32601, out[5].Error.Code)
}

// The intake checks funds as geth's pool does, against the chain's balance:
// a sender that cannot pay is refused with geth's message, and a chain that
// does not answer is unavailable, not a pass.
func TestRPC_ASenderThatCannotPayIsRefusedAsGethRefusesIt(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	ec := f.dial()
	ctx := t.Context()
	poor := newKey(t)
	f.evm.Handle("eth_getBalance", func(ps []json.RawMessage) (json.RawMessage, error) {
		if strings.EqualFold(string(ps[0]), `"`+addr(poor).Hex()+`"`) {
			return json.RawMessage(`"0x2386f26fc10000"`), nil // 0.01 ether
		}
		return json.RawMessage(`"0x3635c9adc5dea00000"`), nil
	})
	// 21000 × 1000 gwei + 1 wei = 0.021 ether + 1 wei.
	err := ec.SendTransaction(ctx, dynTx(t, poor, 0, 1000, 1))
	code, msg := rpcErr(t, err)
	require.Equal(t, -32000, code)
	require.Equal(t, "insufficient funds for gas * price + value: balance 10000000000000000, tx cost 21000000000000001, overshot 11000000000000001", msg)
	require.NoError(t, ec.SendTransaction(ctx, dynTx(t, poor, 0, 200, 1)), "0.0042 ether")
	_, msg = rpcErr(t, ec.SendTransaction(ctx, dynTx(t, poor, 1, 300, 1)))
	require.Equal(t, "insufficient funds for gas * price + value: balance 10000000000000000, queued cost 4200000000000001, tx cost 6300000000000001, overshot 500000000000002", msg)

	f.evm.Handle("eth_getBalance", func([]json.RawMessage) (json.RawMessage, error) {
		return nil, fmt.Errorf("%w: connection refused", evmrpc.ErrUnavailable)
	})
	_, msg = rpcErr(t, ec.SendTransaction(ctx, dynTx(t, newKey(t), 0, 2, 1)))
	require.Equal(t, "chain unavailable: cannot read the sender's balance", msg)
}

// A batch the request's deadline cuts answers every one of its calls, as
// JSON-RPC requires: the calls run after the deadline with an error, never
// left out (ethers fails the whole batch with "missing response for
// request" when one is).
func TestRPC_ABatchCutByTheRequestsDeadlineAnswersEveryCall(t *testing.T) {
	t.Parallel()
	cfg := httpapi.DefaultConfig()
	cfg.RequestTimeout = 100 * time.Millisecond
	f := setupPoolAPI(t, cfg)
	f.evm.Handle("eth_gasPrice", func([]json.RawMessage) (json.RawMessage, error) {
		time.Sleep(30 * time.Millisecond)
		return json.RawMessage(`"0x1"`), nil
	})
	var body strings.Builder
	body.WriteString("[")
	for i := range 20 {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"jsonrpc":"2.0","id":%d,"method":"eth_gasPrice"}`, i+1)
	}
	body.WriteString("]")
	for run := range 30 {
		out, raw := f.rpcBatch(body.String())
		require.Len(t, out, 20, "run %d: %s", run, raw)
		for i, o := range out {
			require.Equal(t, i+1, o.ID, "run %d", run)
			require.True(t, (o.Error == nil) != (o.Result == nil), "run %d, id %d: a result or an error", run, o.ID)
		}
		require.NotNil(t, out[19].Error, "run %d: the last call ran past the deadline", run)
	}
}

// rpcBatchAnswer is one answer of a JSON-RPC batch.
type rpcBatchAnswer struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

// rpcBatch posts the JSON-RPC batch body to /rpc and returns its answers
// (200 required) and the raw body.
func (f *poolFixture) rpcBatch(body string) ([]rpcBatchAnswer, string) {
	f.t.Helper()
	resp := f.post("/rpc", []byte(body))
	require.Equal(f.t, http.StatusOK, resp.StatusCode, resp.Body)
	var out []rpcBatchAnswer
	require.NoError(f.t, json.Unmarshal([]byte(resp.Body), &out), resp.Body)
	return out, resp.Body
}

// TestRPC_AnotherClientsAnswerReachesTheClientInGethsCodeAndWords: /rpc
// speaks as geth whatever node runs behind it. Anvil's, reth's and Besu's
// answers to eth_call and eth_estimateGas (their texts and codes:
// docs/clients.md) reach the client with geth's code and phrase for the same
// case, a revert keeps its data, and an answer geth would give as well
// passes unchanged.
func TestRPC_AnotherClientsAnswerReachesTheClientInGethsCodeAndWords(t *testing.T) {
	t.Parallel()
	cases := []struct {
		client   string
		node     evmrpc.Error
		code     int
		msg      string
		withData bool
	}{
		{"anvil", evmrpc.Error{Code: -32003, Message: "Insufficient funds for gas * price + value"}, -32000, "insufficient funds for gas * price + value", false},
		{"anvil", evmrpc.Error{Code: -32003, Message: "nonce too low"}, -32000, "nonce too low", false},
		{"anvil", evmrpc.Error{Code: -32003, Message: "Out of gas: gas required exceeds allowance: 21000"}, -32000, "gas required exceeds allowance (21000)", false},
		{"anvil", evmrpc.Error{Code: 3, Message: "execution reverted: no", Data: json.RawMessage(`"0x08c379a0"`)}, 3, "execution reverted: no", true},
		{"reth", evmrpc.Error{Code: -32003, Message: "insufficient funds for gas * price + value: have 0 want 1"}, -32000, "insufficient funds for gas * price + value: have 0 want 1", false},
		{"besu", evmrpc.Error{Code: -32004, Message: "Upfront cost exceeds account balance"}, -32000, "insufficient funds for gas * price + value", false},
		{"besu", evmrpc.Error{Code: -32001, Message: "Nonce too low"}, -32000, "nonce too low", false},
		{"besu", evmrpc.Error{Code: -32003, Message: "Intrinsic gas exceeds gas limit"}, -32000, "intrinsic gas too low", false},
		{"besu", evmrpc.Error{Code: 3, Message: "Execution reverted (no)", Data: json.RawMessage(`"0x08c379a0"`)}, 3, "execution reverted: no", true},
		{"geth", evmrpc.Error{Code: -32000, Message: "header not found"}, -32000, "header not found", false},
		{"besu", evmrpc.Error{Code: -32000, Message: "Block not found"}, -32000, "Block not found", false},
	}
	for _, c := range cases {
		f := setupPool(t)
		answer := c.node
		f.evm.Handle("eth_estimateGas", func([]json.RawMessage) (json.RawMessage, error) { return nil, &answer })
		who := common.HexToAddress("0x00000000000000000000000000000000000000aa")
		_, err := f.dial().EstimateGas(t.Context(), ethereum.CallMsg{From: who, To: &who, Value: big.NewInt(1)})
		require.Error(t, err, c.client)
		code, _ := rpcErr(t, err)
		require.Equal(t, c.code, code, "%s %q", c.client, c.node.Message)
		require.Equal(t, c.msg, err.Error(), "%s %q", c.client, c.node.Message)
		if c.withData {
			var de rpc.DataError
			require.ErrorAs(t, err, &de)
			require.Equal(t, "0x08c379a0", de.ErrorData(), c.client)
		}
	}
}

// A state read at latest (or pending, or none) is of the newest bundle
// ledgerq saw executed, the block eth_blockNumber names, not of whatever the
// chain executed since: a client never reads a nonce, balance or call result
// from a block it cannot yet fetch. safe and finalized are the newest
// finalized bundle's; a number passes as given.
func TestRPC_StateReadsAtLatestAreOfTheBlockEthBlockNumberNames(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	ctx := t.Context()
	ec := f.dial()
	key := newKey(t)
	require.NoError(t, ec.SendTransaction(ctx, dynTx(t, key, 0, 2, 1)))
	f.bundle(store.BundleAccumulated)
	head, err := ec.BlockNumber(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), head)

	// The chain executed further: its own latest nonce is 5.
	f.chain.SetNonce(addr(key), 5)
	f.evm.Handle("eth_getTransactionCount", func(ps []json.RawMessage) (json.RawMessage, error) {
		if string(ps[1]) == `"0x1"` {
			return json.RawMessage(`"0x1"`), nil
		}
		return json.RawMessage(`"0x5"`), nil
	})
	for _, m := range []string{"eth_getCode", "eth_call", "eth_estimateGas"} {
		f.evm.Answer(m, `"0x"`)
	}
	lastBlock := func(method string) string {
		t.Helper()
		calls := f.evm.Calls()
		for i := len(calls) - 1; i >= 0; i-- {
			if calls[i].Method == method {
				return string(calls[i].Params[len(calls[i].Params)-1])
			}
		}
		t.Fatalf("%s did not reach the chain", method)
		return ""
	}
	nonce, err := ec.NonceAt(ctx, addr(key), nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), nonce, "the nonce at block 1, not the chain's newer 5")
	pending, err := ec.PendingNonceAt(ctx, addr(key))
	require.NoError(t, err)
	require.Equal(t, uint64(5), pending, "pending is the pool's, past the chain's own nonce")

	for _, tc := range []struct {
		method string
		params []any
		want   string
	}{
		{"eth_getBalance", []any{addr(key), "latest"}, `"0x1"`},
		{"eth_getBalance", []any{addr(key), "pending"}, `"0x1"`},
		{"eth_getBalance", []any{addr(key)}, `"0x1"`},
		{"eth_getBalance", []any{addr(key), "safe"}, `"safe"`}, // nothing finalized yet: as given
		{"eth_getBalance", []any{addr(key), "0x0"}, `"0x0"`},
		{"eth_getCode", []any{addr(key), "latest"}, `"0x1"`},
		{"eth_call", []any{map[string]any{"to": addr(key)}}, `"0x1"`},
		{"eth_estimateGas", []any{map[string]any{"to": addr(key)}}, `"0x1"`},
	} {
		_, e := f.rpcCall(tc.method, tc.params...)
		require.Nil(t, e, "%s %v", tc.method, tc.params)
		require.Equal(t, tc.want, lastBlock(tc.method), "%s %v", tc.method, tc.params)
	}
}
