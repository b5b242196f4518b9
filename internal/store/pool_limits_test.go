package store_test

// The pool's limits are geth's, with geth's defaults: per account 16
// executable slots and a queue of 64, per chain 5120 pending and 1024
// queued. A burst that geth's pool holds is held here too, whatever order
// its nonces arrive in.

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/ethereum/go-ethereum/core/txpool/legacypool"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// pendingRun is "0:pending" .. "n-1:pending".
func pendingRun(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%d:pending", i)
	}
	return out
}

func TestPoolLimits_TwentyFiveOutOfOrderNoncesOfOneSenderAreAllAdmittedAndPendingOnceTheGapCloses(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	order := rand.New(rand.NewPCG(1, 2)).Perm(24)
	for _, n := range order {
		res := f.mustAdd(testfactory.PoolTx(1, uint64(n+1), 10, 10))
		require.Equal(t, store.PoolQueued, res.Tx.State, "nonce 0 is missing")
		require.Empty(t, res.Evicted)
	}
	res := f.mustAdd(testfactory.PoolTx(1, 0, 10, 10))
	require.Equal(t, store.PoolPending, res.Tx.State)
	require.Equal(t, 24, res.Promoted)
	require.Equal(t, pendingRun(25), f.states(1))
	require.Zero(t, f.count("state = 'dropped'"))
}

// 20 senders × 25 as one ethers provider sends them: in batches of 100
// calls, each batch answered in any order, so a sender's nonces arrive out
// of order and interleaved with the others'.
func TestPoolLimits_TwentySendersOfTwentyFiveInterleavedOutOfOrderLoseNone(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	var txs []store.NewPoolTx
	for n := range uint64(25) {
		for s := range 20 {
			txs = append(txs, testfactory.PoolTx(s, n, 10, 10))
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for start := 0; start < len(txs); start += 100 {
		batch := txs[start : start+100]
		r.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	}
	for _, tx := range txs {
		require.Empty(t, f.mustAdd(tx).Evicted, "nonce %d of %s", tx.Nonce, tx.Sender)
	}
	for s := range 20 {
		require.Equal(t, pendingRun(25), f.states(s), "sender %d", s)
	}
	require.Zero(t, f.count("state = 'dropped'"))
}

// nonces 2..65 fill the sender's queue of 64 behind the missing 0 and 1.
func fillQueue(f *poolFixture, sender int) {
	f.t.Helper()
	for n := uint64(2); n < 2+64; n++ {
		require.Equal(f.t, store.PoolQueued, f.mustAdd(testfactory.PoolTx(sender, n, 10, 10)).Tx.State)
	}
}

func TestPoolLimits_AFullAccountQueueEvictsItsHighestQueuedNonceForALowerOne(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	fillQueue(f, 1)
	top := testfactory.PoolTx(1, 65, 10, 10)
	res := f.mustAdd(testfactory.PoolTx(1, 1, 10, 10))
	require.Equal(t, store.PoolQueued, res.Tx.State)
	require.Equal(t, top.Hash, res.Evicted)
	evicted := f.get(top.Hash)
	require.Equal(t, store.PoolDropped, evicted.State)
	require.Equal(t, store.PoolDropEvicted, evicted.DropReason)
	require.Equal(t, 64, f.count("state = 'queued'"))

	// The gap closes: every queued one runs, none is evicted.
	res = f.mustAdd(testfactory.PoolTx(1, 0, 10, 10))
	require.Empty(t, res.Evicted)
	require.Equal(t, 64, res.Promoted)
	require.Equal(t, pendingRun(65), f.states(1))
	// Resent, the evicted one is admitted: the queue is empty now.
	require.Equal(t, store.PoolPending, f.mustAdd(top).Tx.State)
}

func TestPoolLimits_AFullAccountQueueRefusesAHigherNonce(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	fillQueue(f, 1)
	_, err := f.add(testfactory.PoolTx(1, 66, 10, 10))
	require.EqualError(t, err, "account limit exceeded: pooled 64 txs")
	var limit *store.PoolAccountLimitError
	require.ErrorAs(t, err, &limit)
	require.ErrorIs(t, err, txpool.ErrAccountLimitExceeded, "geth's error")
	require.Equal(t, 64, f.count("true"), "nothing stored")
	f.mustAdd(testfactory.PoolTx(1, 3, 11, 11))  // a replacement takes no new place
	f.mustAdd(testfactory.PoolTx(2, 66, 10, 10)) // another sender has its own queue
}

// Pending transactions never make room: at the queue's limit a sender's
// pending run stays whole, whatever arrives.
func TestPoolLimits_EvictionNeverDropsAPendingTransaction(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	for n := range uint64(20) {
		f.mustAdd(testfactory.PoolTx(1, n, 10, 10))
	}
	for n := uint64(21); n < 21+64; n++ {
		f.mustAdd(testfactory.PoolTx(1, n, 10, 10))
	}
	_, err := f.add(testfactory.PoolTx(1, 100, 10, 10))
	require.ErrorIs(t, err, txpool.ErrAccountLimitExceeded, "only queued transactions above it could make room: none is")
	res := f.mustAdd(testfactory.PoolTx(1, 20, 10, 10))
	require.Empty(t, res.Evicted, "it closes the gap: the queue empties")
	require.Equal(t, pendingRun(85), f.states(1))
	require.Zero(t, f.count("state = 'dropped'"))
}

// A sender past its account slots is admitted while the pool's pending
// transactions are below the global limit; a sender within its slots is
// admitted even when they are not, as geth's global limit trims only the
// accounts past their slots, so that one busy sender cannot shut every other
// out of the pool.
func TestPoolLimits_PendingPastTheAccountSlotsIsAdmittedWhileThePoolHasRoomAndWithinThemAlways(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	f.limits.MaxPending = 20
	for n := range uint64(20) {
		require.Equal(t, store.PoolPending, f.mustAdd(testfactory.PoolTx(1, n, 10, 10)).Tx.State, "nonce %d: 16 slots, room for 20", n)
	}
	_, err := f.add(testfactory.PoolTx(1, 20, 10, 10))
	require.EqualError(t, err, "txpool is full")
	require.ErrorIs(t, err, legacypool.ErrTxPoolOverflow)
	for n := range uint64(16) {
		require.Equal(t, store.PoolPending, f.mustAdd(testfactory.PoolTx(2, n, 10, 10)).Tx.State, "nonce %d: within the sender's 16 slots", n)
	}
	_, err = f.add(testfactory.PoolTx(2, 16, 10, 10))
	require.ErrorIs(t, err, legacypool.ErrTxPoolOverflow, "past its slots, the global limit holds")
	require.Equal(t, store.PoolQueued, f.mustAdd(testfactory.PoolTx(3, 1, 10, 10)).Tx.State, "a queued one is under the queue's limits, not the pending ones")
	_, err = f.add(testfactory.PoolTx(1, 20, 10, 10))
	require.ErrorIs(t, err, legacypool.ErrTxPoolOverflow, "the sender past its slots still waits for room")
	require.Equal(t, pendingRun(20), f.states(1), "no pending transaction made room")
	require.Equal(t, pendingRun(16), f.states(2))
}
