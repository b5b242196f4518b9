package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// The chain's reasons, as geth words them.
const (
	reasonFunds = "insufficient funds for gas * price + value: address 0x000000000000000000000000000000000000a001 have 0 want 42000000000001"
	reasonGap   = "nonce too high: address 0x000000000000000000000000000000000000a001, tx: 1 state: 0"
)

// run guarantees claim c in one block and accumulates it in the next,
// which lists skipped as the transactions the chain left out of its block;
// it returns what the second block did.
func (f *bundleFixture) run(c *store.BundleClaim, skipped ...ledger.SkippedTx) (ledger.JAMBlock, store.BundleApplied) {
	f.t.Helper()
	f.block([]ledger.Hash{c.PackageHash()}, nil)
	f.head++
	blk := ledger.JAMBlock{Slot: f.head, Hash: jamHash("jam", f.head), Accumulations: []ledger.Hash{c.PackageHash()}, Skipped: skipped}
	got, err := f.st.BundleApplyBlocks(f.t.Context(), poolChain, []ledger.JAMBlock{blk}, 2, f.clock.Now())
	require.NoError(f.t, err)
	return blk, got
}

// skip is the chain's word that it left tx out of c's block.
func skip(c *store.BundleClaim, tx store.NewPoolTx, reason string, gap bool) ledger.SkippedTx {
	h, _ := ledger.ParseHash(tx.Hash)
	return ledger.SkippedTx{Package: c.PackageHash(), Tx: h, Reason: reason, NonceGap: gap}
}

func (f *bundleFixture) pooled(hash string) store.PoolTx {
	f.t.Helper()
	tx, err := f.st.PoolGet(f.t.Context(), poolChain, hash)
	require.NoError(f.t, err)
	return tx
}

func (f *bundleFixture) pendingNonce(sender int, chainNonce uint64) uint64 {
	f.t.Helper()
	n, err := f.st.PoolPendingNonce(f.t.Context(), poolChain, testfactory.PoolSender(sender), chainNonce)
	require.NoError(f.t, err)
	return n
}

// Sender 1's nonces 0 and 1 are in one bundle, 2 and 3 pending behind
// them. The chain skips nonce 0 (it cannot pay) and so nonce 1 (a gap).
// Nonce 0 is dropped with the chain's reason, nonce 1 waits queued, 2 and 3
// wait again (queued): "pending" is the chain's nonce, 0. A resend of nonce
// 0 is admitted and brings 1, 2 and 3 back to pending. Applying the block
// again changes nothing.
func TestBundleApplyBlocks_ASkippedTxIsDroppedWithTheChainsReasonAndFreesItsNonce(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	txs := make([]store.NewPoolTx, 4)
	for i := range txs {
		txs[i] = testfactory.PoolTx(1, uint64(i), 2_000_000_000, 1_000_000_000)
	}
	f.rows.AddPoolTxs(txs...)
	require.Len(t, f.cut(2, 10, 1), 1)
	c := f.mustClaim(42)
	require.Equal(t, uint64(4), f.pendingNonce(1, 0), "before the skip: two included, two pending")

	blk, got := f.run(c, skip(c, txs[0], reasonFunds, false), skip(c, txs[1], reasonGap, true))
	require.Equal(t, 1, got.Accumulated)
	require.Equal(t, 1, got.SkippedDropped)
	require.Equal(t, 1, got.SkippedRequeued)
	require.Zero(t, got.UnknownSkipped)
	require.Equal(t, []store.SkippedPoolTx{
		{Hash: txs[0].Hash, Sender: txs[0].Sender, Nonce: 0, Bundle: 42, Reason: reasonFunds, State: store.PoolDropped},
		{Hash: txs[1].Hash, Sender: txs[1].Sender, Nonce: 1, Bundle: 42, Reason: reasonGap, NonceGap: true, State: store.PoolQueued},
	}, got.SkippedTxs)

	dropped := f.pooled(txs[0].Hash)
	require.Equal(t, store.PoolDropped, dropped.State)
	require.Equal(t, store.PoolDropSkipped, dropped.DropReason)
	require.Equal(t, reasonFunds, dropped.ChainReason)
	require.Nil(t, dropped.BundleBlock)
	requeued := f.pooled(txs[1].Hash)
	require.Equal(t, store.PoolQueued, requeued.State)
	require.Nil(t, requeued.BundleBlock)
	require.Empty(t, requeued.ChainReason)
	for _, tx := range txs[2:] {
		require.Equal(t, store.PoolQueued, f.pooled(tx.Hash).State, "nonce %d is behind the gap", tx.Nonce)
	}
	require.Equal(t, uint64(0), f.pendingNonce(1, 0), "eth_getTransactionCount pending = the chain's nonce")
	require.Equal(t, store.BundleAccumulated, f.get(42).State, "the bundle ran, without them")
	require.Empty(t, f.cut(2, 10, 10), "nothing pending to cut")

	again, err := st.BundleApplyBlocks(t.Context(), poolChain, []ledger.JAMBlock{blk}, 2, f.clock.Now())
	require.NoError(t, err)
	require.Equal(t, store.BundleApplied{Skipped: 1}, again)
	require.Equal(t, store.PoolQueued, f.pooled(txs[1].Hash).State)
	require.Equal(t, reasonFunds, f.pooled(txs[0].Hash).ChainReason)

	resend := testfactory.PoolTx(1, 0, 2_000_000_000, 1_000_000_000, "resend")
	res, err := st.PoolAdd(t.Context(), store.PoolAddParams{Now: f.clock.Now(), Tx: resend, Limits: store.DefaultPoolLimits()})
	require.NoError(t, err, "the freed nonce is admitted")
	require.Equal(t, store.PoolPending, res.Tx.State)
	require.Equal(t, 3, res.Promoted, "nonces 1, 2 and 3 follow it")
	for _, tx := range txs[1:] {
		require.Equal(t, store.PoolPending, f.pooled(tx.Hash).State)
	}
	require.Equal(t, uint64(4), f.pendingNonce(1, 0))
	require.Equal(t, store.PoolDropped, f.pooled(txs[0].Hash).State, "the skipped one stays dropped")
}

// A transaction skipped for a nonce gap whose gap the pool has already
// filled (a resend of the missing nonce came before the block that skipped
// it was applied) goes back to pending, not queued: nothing else would
// promote it.
func TestBundleApplyBlocks_ANonceGapSkipWhoseGapIsFilledGoesBackPending(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	tx0 := testfactory.PoolTx(2, 0, 2_000_000_000, 1_000_000_000)
	tx1 := testfactory.PoolTx(2, 1, 2_000_000_000, 1_000_000_000)
	f.rows.AddPoolTxs(tx0, tx1)
	require.Len(t, f.cut(1, 10, 10), 2)
	c42, c43 := f.mustClaim(42), f.mustClaim(43)

	_, got := f.run(c42, skip(c42, tx0, reasonFunds, false))
	require.Equal(t, 1, got.SkippedDropped)
	require.Equal(t, store.PoolIncluded, f.pooled(tx1.Hash).State, "in bundle 43, not executed yet")
	require.Equal(t, uint64(0), f.pendingNonce(2, 0))
	resend := f.rows.AddPoolTxs(testfactory.PoolTx(2, 0, 2_000_000_000, 1_000_000_000, "resend"))[0]
	require.Equal(t, store.PoolPending, resend.State)

	_, got = f.run(c43, skip(c43, tx1, reasonGap, true))
	require.Equal(t, 1, got.SkippedRequeued)
	require.Equal(t, store.PoolPending, got.SkippedTxs[0].State)
	require.Equal(t, store.PoolPending, f.pooled(tx1.Hash).State)
	require.Equal(t, uint64(2), f.pendingNonce(2, 0))
	cut := f.cut(2, 10, 10)
	require.Len(t, cut, 1)
	require.Equal(t, 2, cut[0].TxCount, "the resend and nonce 1, in order")
}

// A skipped transaction this database does not know, or not in the bundle
// the package is of, changes nothing and is counted.
func TestBundleApplyBlocks_ASkippedTxThisDatabaseDoesNotKnowIsIgnored(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	f.addTxs(3, 2)
	require.Len(t, f.cut(1, 10, 10), 2)
	c42, c43 := f.mustClaim(42), f.mustClaim(43)
	other := testfactory.PoolTx(3, 1, 2_000_000_000, 1_000_000_000) // in bundle 43
	_, got := f.run(c42,
		ledger.SkippedTx{Package: c42.PackageHash(), Tx: ledger.Hash{0x01}, Reason: reasonFunds},
		ledger.SkippedTx{Package: ledger.Hash{0x02}, Tx: ledger.Hash{0x03}, Reason: reasonFunds},
		skip(c42, other, reasonFunds, false))
	require.Equal(t, 3, got.UnknownSkipped)
	require.Zero(t, got.SkippedDropped+got.SkippedRequeued)
	require.Equal(t, map[string]int{"included": 2}, f.txStates())
	_ = c43
}
