package httpapi_test

import (
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/httpapi"
)

// dial connects go-ethereum's own ethclient to the fixture's /rpc.
func (f *poolFixture) dial() *ethclient.Client {
	f.t.Helper()
	ec, err := ethclient.DialContext(f.t.Context(), f.url+"/rpc")
	require.NoError(f.t, err)
	f.t.Cleanup(ec.Close)
	return ec
}

// rpcErr returns err's JSON-RPC code and message.
func rpcErr(t *testing.T, err error) (int, string) {
	t.Helper()
	var e rpc.Error
	require.ErrorAs(t, err, &e, "not a JSON-RPC error: %v", err)
	return e.ErrorCode(), e.Error()
}

func TestRPC_EthclientSendsTransactionsOfEveryTypeAndReadsThemBack(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	ec := f.dial()
	ctx := t.Context()
	key := newKey(t)
	from := addr(key)
	f.chain.SetNonce(from, 3)

	chainID, err := ec.ChainID(ctx)
	require.NoError(t, err)
	require.Equal(t, big.NewInt(poolChainID), chainID)
	var version string
	require.NoError(t, ec.Client().CallContext(ctx, &version, "net_version"))
	require.Equal(t, "4242", version)

	dyn := dynTx(t, key, 3, 2, 1)
	legacy := signTx(t, key, poolChainID, &types.LegacyTx{Nonce: 4, GasPrice: big.NewInt(gwei), Gas: 21000, To: &poolRecipient, Value: big.NewInt(7)})
	accessList := signTx(t, key, poolChainID, &types.AccessListTx{ChainID: big.NewInt(poolChainID), Nonce: 6, GasPrice: big.NewInt(gwei),
		Gas: 21000 + 2400, To: &poolRecipient, AccessList: types.AccessList{{Address: poolRecipient}}})
	for _, tx := range []*types.Transaction{dyn, legacy, accessList} {
		require.NoError(t, ec.SendTransaction(ctx, tx), "type %d", tx.Type())
	}

	latest, err := ec.NonceAt(ctx, from, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(3), latest, "latest comes from the chain")
	pending, err := ec.PendingNonceAt(ctx, from)
	require.NoError(t, err)
	require.Equal(t, uint64(5), pending, "pending counts the pool's run 3, 4; the queued 6 waits for 5")

	for _, want := range []*types.Transaction{dyn, legacy, accessList} {
		got, isPending, err := ec.TransactionByHash(ctx, want.Hash())
		require.NoError(t, err)
		require.True(t, isPending)
		require.Equal(t, want.Hash(), got.Hash())
		require.Equal(t, want.Type(), got.Type())
		require.Equal(t, want.Nonce(), got.Nonce())
		sender, err := types.Sender(types.LatestSignerForChainID(chainID), got)
		require.NoError(t, err)
		require.Equal(t, from, sender)
	}
	_, _, err = ec.TransactionByHash(ctx, common.Hash{1})
	require.ErrorIs(t, err, ethereum.NotFound)

	// Filling the gap with 5 makes 6 pending: the pending nonce is 7.
	require.NoError(t, ec.SendTransaction(ctx, dynTx(t, key, 5, 2, 1)))
	pending, err = ec.PendingNonceAt(ctx, from)
	require.NoError(t, err)
	require.Equal(t, uint64(7), pending)

	var status map[string]any
	require.NoError(t, ec.Client().CallContext(ctx, &status, "ledgerq_txStatus", accessList.Hash()))
	require.Equal(t, "pending", status["state"])
	require.Equal(t, strings.ToLower(from.Hex()), status["sender"])
	var none json.RawMessage
	require.NoError(t, ec.Client().CallContext(ctx, &none, "ledgerq_txStatus", common.Hash{1}))
	require.Equal(t, "null", string(none))
}

func TestRPC_RefusalsAreGethsErrorsWordForWord(t *testing.T) {
	t.Parallel()
	f := setupPool(t, func(c *builder.Config) { c.Pool.Limits.MaxPending, c.Pool.Limits.AccountSlots = 2, 0 }) // no slots: MaxPending bounds every sender
	ec := f.dial()
	ctx := t.Context()
	key := newKey(t)
	f.chain.SetNonce(addr(key), 1)

	err := ec.SendTransaction(ctx, dynTx(t, key, 0, 2, 1))
	code, msg := rpcErr(t, err)
	require.Equal(t, -32000, code)
	require.Equal(t, "nonce too low: next nonce 1, tx nonce 0", msg)

	old := dynTx(t, key, 1, 100, 10)
	require.NoError(t, ec.SendTransaction(ctx, old))
	_, msg = rpcErr(t, ec.SendTransaction(ctx, old))
	require.Equal(t, "already known", msg)

	for _, fees := range [][2]int64{{105, 11}, {110, 10}, {100, 11}} {
		_, msg = rpcErr(t, ec.SendTransaction(ctx, dynTx(t, key, 1, fees[0], fees[1])))
		require.Equal(t, "replacement transaction underpriced", msg, "fee cap %d, tip %d gwei", fees[0], fees[1])
	}
	replacement := dynTx(t, key, 1, 110, 11)
	require.NoError(t, ec.SendTransaction(ctx, replacement), "+10 % on both")
	_, _, err = ec.TransactionByHash(ctx, old.Hash())
	require.ErrorIs(t, err, ethereum.NotFound, "a replaced transaction is no longer in the pool")
	var status map[string]any
	require.NoError(t, ec.Client().CallContext(ctx, &status, "ledgerq_txStatus", old.Hash()))
	require.Equal(t, "replaced", status["state"])
	require.Equal(t, replacement.Hash().Hex(), status["replaced_by"])

	require.NoError(t, ec.SendTransaction(ctx, dynTx(t, newKey(t), 0, 2, 1)))
	code, msg = rpcErr(t, ec.SendTransaction(ctx, dynTx(t, newKey(t), 0, 2, 1)))
	require.Equal(t, -32000, code, "a full pool is -32000 in geth: -32005 is a rate limit that viem retries forever")
	require.Equal(t, "txpool is full", msg)

	_, msg = rpcErr(t, ec.SendTransaction(ctx, signTx(t, key, 1, &types.DynamicFeeTx{ChainID: big.NewInt(1), Nonce: 2,
		GasFeeCap: big.NewInt(gwei), GasTipCap: big.NewInt(gwei), Gas: 21000, To: &poolRecipient})))
	require.Equal(t, "invalid sender: invalid chain id for signer: have 1 want 4242", msg)

	_, err = ec.NonceAt(ctx, addr(key), big.NewInt(5))
	_, msg = rpcErr(t, err)
	require.Contains(t, msg, "only latest and pending")

	f.chain.SetError(errors.New("down"))
	_, err = ec.PendingNonceAt(ctx, addr(key))
	_, msg = rpcErr(t, err)
	require.Contains(t, msg, "chain unavailable")
}

// The pool refuses at /rpc what the chain's EVM would refuse on its protocol
// rules, with geth's message, and stores nothing: here a transaction under
// EIP-7623's calldata floor and one over EIP-7825's per-transaction gas cap,
// which the chain would skip after the pool took them. One paying the floor
// is taken.
func TestRPC_RefusesWhatTheChainsEVMRefusesWithGethsMessage(t *testing.T) {
	t.Parallel()
	f := setupPool(t)
	key := newKey(t)
	zeros := make([]byte, 31<<10)
	tx := func(gas uint64, data []byte) string {
		return rawHex(t, signTx(t, key, poolChainID, &types.DynamicFeeTx{ChainID: big.NewInt(poolChainID),
			GasFeeCap: big.NewInt(2 * gwei), GasTipCap: big.NewInt(gwei), Gas: gas, To: &poolRecipient, Data: data}))
	}
	for _, tc := range []struct {
		name, raw, msg string
	}{
		{"calldata under its floor", tx(148_076, zeros), "insufficient gas for floor data gas cost: gas 148076, minimum needed 338440"},
		{"gas over the transaction cap", tx(16_777_217, nil), "transaction gas limit too high (cap: 16777216, tx: 16777217)"},
	} {
		_, rpcErr := f.rpcCall("eth_sendRawTransaction", tc.raw)
		require.NotNil(t, rpcErr, tc.name)
		require.Equal(t, -32000, rpcErr.Code, tc.name)
		require.Equal(t, tc.msg, rpcErr.Message, tc.name)
	}
	require.Equal(t, 0, f.poolRows(), "nothing stored")

	_, rpcErr := f.rpcCall("eth_sendRawTransaction", tx(338_440, zeros))
	require.Nil(t, rpcErr, "paying the floor")
	require.Equal(t, 1, f.poolRows())
}

// At the sender's queue limit a lower nonce evicts the highest queued one:
// the evicted transaction is gone from eth_getTransactionByHash, ledgerq_txStatus
// says dropped with reason evicted, the eviction is counted, and the same
// bytes sent again are admitted once there is room: what a client must do.
func TestRPC_AnEvictedTransactionIsNullDroppedEvictedCountedAndMayBeResent(t *testing.T) {
	t.Parallel()
	f := setupPool(t, func(c *builder.Config) { c.Pool.Limits.AccountQueue = 2 })
	ec := f.dial()
	ctx := t.Context()
	key := newKey(t)
	top := dynTx(t, key, 3, 2, 1)
	require.NoError(t, ec.SendTransaction(ctx, dynTx(t, key, 2, 2, 1)))
	require.NoError(t, ec.SendTransaction(ctx, top))
	_, _, err := ec.TransactionByHash(ctx, top.Hash())
	require.NoError(t, err, "queued: in the pool")
	require.NoError(t, ec.SendTransaction(ctx, dynTx(t, key, 1, 2, 1)), "a lower nonce makes room")

	_, _, err = ec.TransactionByHash(ctx, top.Hash())
	require.ErrorIs(t, err, ethereum.NotFound, "an evicted transaction is no longer in the pool")
	var status map[string]any
	require.NoError(t, ec.Client().CallContext(ctx, &status, "ledgerq_txStatus", top.Hash()))
	require.Equal(t, "dropped", status["state"])
	require.Equal(t, "evicted", status["drop_reason"])
	require.EqualValues(t, 1, f.metrics.TransitionCount("pool", "evicted"))

	require.NoError(t, ec.SendTransaction(ctx, dynTx(t, key, 0, 2, 1)), "the gap closes: 0..2 pending")
	require.NoError(t, ec.SendTransaction(ctx, top), "resent, the same bytes")
	require.NoError(t, ec.Client().CallContext(ctx, &status, "ledgerq_txStatus", top.Hash()))
	require.Equal(t, "pending", status["state"])
	require.EqualValues(t, 1, f.metrics.TransitionCount("pool", "evicted"))
}

// A JSON-RPC batch is many calls in one request, which go-ethereum's server
// runs one after another: the request timeout bounds each call, not the
// batch, so a batch whose calls each take well under it is accepted whole
// however long the batch takes (ethers sends a burst as batches of 100).
func TestRPC_ABatchLongerThanTheRequestTimeoutIsAcceptedWhole(t *testing.T) {
	t.Parallel()
	cfg := httpapi.DefaultConfig()
	cfg.RequestTimeout = 200 * time.Millisecond
	f := setupPoolAPI(t, cfg)
	f.chain.SetDelay(20 * time.Millisecond) // 30 calls: 600 ms, three timeouts
	key := newKey(t)
	var batch []rpc.BatchElem
	hashes := make([]common.Hash, 30)
	for i := range hashes {
		tx := dynTx(t, key, uint64(i), 2, 1)
		batch = append(batch, rpc.BatchElem{Method: "eth_sendRawTransaction", Args: []any{rawHex(t, tx)}, Result: &hashes[i]})
	}
	client, err := rpc.DialContext(t.Context(), f.url+"/rpc")
	require.NoError(t, err)
	defer client.Close()
	require.NoError(t, client.BatchCallContext(t.Context(), batch))
	for i, b := range batch {
		require.NoError(t, b.Error, "call %d of the batch", i)
	}
	var stored int
	require.NoError(t, f.db.Store.Conns().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.pool_txs`).Scan(&stored))
	require.Equal(t, 30, stored)
}
