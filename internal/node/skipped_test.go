package node_test

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/store"
)

// The whole builder lane on the in-process simulated chain, judged by the
// chain's blocks. A sender's nonce 0 is one the chain refuses to execute
// (a gas limit above EIP-7825's cap; it is put into the pool directly, as
// the stand-in for anything the intake lets through that the chain then
// skips), its nonce 1 is sent to /rpc behind it. The chain skips both (the
// second for the gap): nonce 0 ends dropped with the chain's reason, unknown
// to eth_getTransactionByHash and without a receipt; the sender's next
// nonce is 0 again at "pending", a resend of nonce 0 is admitted, and it and
// nonce 1 run.
func TestBuilderLane_ATransactionTheChainSkipsIsDroppedWithItsReasonAndItsNonceIsFree(t *testing.T) {
	t.Parallel()
	c := simBuilderConfig(t)
	c.Builder.GuaranteeTimeout = 600 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, srv := openServed(t, ctx, c)
	require.NoError(t, n.Start(ctx))
	defer n.Stop()
	cl, err := ethclient.DialContext(ctx, srv.URL+"/rpc")
	require.NoError(t, err)
	defer cl.Close()

	key := jam.DevAccounts()[3].Key
	sender := crypto.PubkeyToAddress(key.PublicKey)
	id := big.NewInt(c.Builder.Pool.ChainID)
	to := common.Address{0xde, 0xad}
	sign := func(nonce, gas uint64, value int64) *types.Transaction {
		tx, err := types.SignNewTx(key, types.LatestSignerForChainID(id), &types.DynamicFeeTx{
			ChainID: id, Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(2e9), Gas: gas, To: &to, Value: big.NewInt(value),
		})
		require.NoError(t, err)
		return tx
	}
	refused := sign(0, 1<<24+1, 1) // EIP-7825: at most 2^24 gas
	raw, err := refused.MarshalBinary()
	require.NoError(t, err)
	_, err = n.Store().PoolAdd(ctx, store.PoolAddParams{Now: time.Now(), Limits: c.Builder.Pool.Limits, Tx: store.NewPoolTx{
		ChainID: c.Builder.Pool.ChainID, Hash: refused.Hash().Hex(), Sender: sender.Hex(), Nonce: 0, Type: refused.Type(),
		To: to.Hex(), GasFeeCap: refused.GasFeeCap(), GasTipCap: refused.GasTipCap(), Gas: refused.Gas(), Value: refused.Value(), Raw: raw,
	}})
	require.NoError(t, err)
	next := sign(1, 21000, 2)
	require.NoError(t, cl.SendTransaction(ctx, next), "nonce 1 behind a pooled nonce 0")

	var status struct {
		State       string `json:"state"`
		DropReason  string `json:"drop_reason"`
		ChainReason string `json:"chain_reason"`
	}
	for status.State != string(store.PoolDropped) {
		require.NoError(t, cl.Client().CallContext(ctx, &status, "ledgerq_txStatus", refused.Hash()))
		waitTick(t, ctx, "the skipped transaction to be dropped, now "+status.State)
	}
	require.Equal(t, store.PoolDropSkipped, status.DropReason)
	require.True(t, strings.HasPrefix(status.ChainReason, "transaction gas limit too high"), "chain reason %q", status.ChainReason)
	_, _, err = cl.TransactionByHash(ctx, refused.Hash())
	require.True(t, errors.Is(err, ethereum.NotFound), "eth_getTransactionByHash of the skipped one: %v", err)
	_, err = cl.TransactionReceipt(ctx, refused.Hash())
	require.True(t, errors.Is(err, ethereum.NotFound), "eth_getTransactionReceipt of the skipped one: %v", err)
	pending, err := cl.PendingNonceAt(ctx, sender)
	require.NoError(t, err)
	require.Equal(t, uint64(0), pending, "eth_getTransactionCount pending: nonce 0 is free")

	resend := sign(0, 21000, 3)
	require.NoError(t, cl.SendTransaction(ctx, resend), "the freed nonce is admitted")
	for {
		latest, err := cl.NonceAt(ctx, sender, nil)
		require.NoError(t, err)
		if latest == 2 {
			break
		}
		waitTick(t, ctx, "the resend and nonce 1 to run")
	}
	for _, tx := range []*types.Transaction{resend, next} {
		// /rpc answers a receipt once the monitor has seen its bundle
		// executed, which may lag the chain's nonce.
		r, err := cl.TransactionReceipt(ctx, tx.Hash())
		for errors.Is(err, ethereum.NotFound) {
			waitTick(t, ctx, "the receipt of the resend and of nonce 1")
			r, err = cl.TransactionReceipt(ctx, tx.Hash())
		}
		require.NoError(t, err, "receipt of nonce %d", tx.Nonce())
		require.Equal(t, types.ReceiptStatusSuccessful, r.Status)
	}
	_, err = cl.TransactionReceipt(ctx, refused.Hash())
	require.True(t, errors.Is(err, ethereum.NotFound), "the skipped one never ran: %v", err)
	pending, err = cl.PendingNonceAt(ctx, sender)
	require.NoError(t, err)
	require.Equal(t, uint64(2), pending)
}

// waitTick waits a poll interval, failing the test with what it waited for
// when ctx ends first.
func waitTick(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
	case <-time.After(50 * time.Millisecond):
	}
}
