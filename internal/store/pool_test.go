package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/ethereum/go-ethereum/core/txpool/legacypool"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/gethpool/gethpooltest"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// The pool tests' chain, senders and transactions are testfactory's
// (PoolChainID, PoolSender, PoolTx).
const poolChain = testfactory.PoolChainID

type poolFixture struct {
	t      *testing.T
	st     *store.Store
	now    time.Time
	limits store.PoolLimits
	// chainNonce is what the chain reports for every sender.
	chainNonce uint64
}

func newPoolFixture(t *testing.T, st *store.Store) *poolFixture {
	t.Helper()
	return &poolFixture{t: t, st: st, now: testfactory.Start(), limits: store.DefaultPoolLimits()}
}

func (f *poolFixture) add(tx store.NewPoolTx) (store.PoolAddResult, error) {
	return f.st.PoolAdd(f.t.Context(), store.PoolAddParams{Now: f.now, Tx: tx, ChainNonce: f.chainNonce, Limits: f.limits})
}

func (f *poolFixture) mustAdd(tx store.NewPoolTx) store.PoolAddResult {
	f.t.Helper()
	res, err := f.add(tx)
	require.NoError(f.t, err, "adding nonce %d of %s", tx.Nonce, tx.Sender)
	return res
}

func (f *poolFixture) get(hash string) store.PoolTx {
	f.t.Helper()
	tx, err := f.st.PoolGet(f.t.Context(), poolChain, hash)
	require.NoError(f.t, err)
	return tx
}

// states returns the sender's transactions as "nonce:state", in nonce then
// received order.
func (f *poolFixture) states(sender int) []string {
	f.t.Helper()
	rows, err := f.st.DB().Query(f.t.Context(), `
		SELECT nonce || ':' || state FROM ledgerq.pool_txs
		WHERE chain_id = $1 AND sender = $2 AND state IN ('pending', 'queued', 'included')
		ORDER BY nonce`, poolChain, testfactory.PoolSender(sender))
	require.NoError(f.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(f.t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(f.t, rows.Err())
	return out
}

func (f *poolFixture) count(where string, args ...any) int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.st.DB().QueryRow(f.t.Context(), `SELECT count(*) FROM ledgerq.pool_txs WHERE `+where, args...).Scan(&n))
	return n
}

func TestPool_NonceEqualToTheNextIsPendingAndAboveItIsQueued(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	f.chainNonce = 3
	require.Equal(t, store.PoolPending, f.mustAdd(testfactory.PoolTx(1, 3, 10, 10)).Tx.State)
	require.Equal(t, store.PoolQueued, f.mustAdd(testfactory.PoolTx(1, 5, 10, 10)).Tx.State, "nonce 4 is missing")
	require.Equal(t, store.PoolPending, f.mustAdd(testfactory.PoolTx(1, 4, 10, 10)).Tx.State)
	next, err := f.st.PoolPendingNonce(t.Context(), poolChain, testfactory.PoolSender(1), 3)
	require.NoError(t, err)
	require.Equal(t, uint64(6), next)
}

func TestPool_NonceBelowTheNextIsRefusedAsNonceTooLow(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	f.chainNonce = 1
	_, err := f.add(testfactory.PoolTx(1, 0, 10, 10))
	require.EqualError(t, err, "nonce too low: next nonce 1, tx nonce 0")
	var low *store.PoolNonceTooLowError
	require.ErrorAs(t, err, &low)
	require.ErrorIs(t, err, core.ErrNonceTooLow, "geth's error")
	require.Equal(t, 0, f.count("true"), "nothing stored")

	// Transactions already in a bundle hold their nonces too: the next
	// nonce is past them.
	f.mustAdd(testfactory.PoolTx(1, 1, 10, 10))
	f.mustAdd(testfactory.PoolTx(1, 2, 10, 10))
	_, err = f.st.DB().Exec(t.Context(), `UPDATE ledgerq.pool_txs SET state = 'included', bundle_block = 7 WHERE nonce IN (1, 2)`)
	require.NoError(t, err)
	_, err = f.add(testfactory.PoolTx(1, 2, 20, 20))
	require.EqualError(t, err, "nonce too low: next nonce 3, tx nonce 2", "an included transaction cannot be replaced")
	require.Equal(t, store.PoolPending, f.mustAdd(testfactory.PoolTx(1, 3, 10, 10)).Tx.State)
}

func TestPool_FillingAGapPromotesTheGapFreeQueuedSuccessorsInTheSameTransaction(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	for _, n := range []uint64{2, 3, 5} {
		require.Equal(t, store.PoolQueued, f.mustAdd(testfactory.PoolTx(1, n, 10, 10)).Tx.State)
	}
	require.Equal(t, store.PoolPending, f.mustAdd(testfactory.PoolTx(1, 0, 10, 10)).Tx.State)
	require.Equal(t, []string{"0:pending", "2:queued", "3:queued", "5:queued"}, f.states(1))

	res := f.mustAdd(testfactory.PoolTx(1, 1, 10, 10))
	require.Equal(t, store.PoolPending, res.Tx.State)
	require.Equal(t, 2, res.Promoted)
	require.Equal(t, []string{"0:pending", "1:pending", "2:pending", "3:pending", "5:queued"}, f.states(1),
		"2 and 3 follow 1 without a gap; 5 waits for 4")
	var next int64
	require.NoError(t, f.st.DB().QueryRow(t.Context(), `SELECT next_nonce FROM ledgerq.pool_senders WHERE sender = $1`, testfactory.PoolSender(1)).Scan(&next))
	require.Equal(t, int64(4), next)
}

func TestPool_InsertsInReverseNonceOrderEndAllPending(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	for n := 5; n >= 1; n-- {
		require.Equal(t, store.PoolQueued, f.mustAdd(testfactory.PoolTx(1, uint64(n), 10, 10)).Tx.State, "nonce %d", n)
	}
	res := f.mustAdd(testfactory.PoolTx(1, 0, 10, 10))
	require.Equal(t, 5, res.Promoted)
	require.Equal(t, []string{"0:pending", "1:pending", "2:pending", "3:pending", "4:pending", "5:pending"}, f.states(1))
}

func TestPool_ReplacementNeedsBothFeeCapAndTipRaisedByGethsPriceBump(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	old := f.mustAdd(testfactory.PoolTx(1, 0, 1000, 100)).Tx
	queued := f.mustAdd(testfactory.PoolTx(1, 2, 1000, 100)).Tx

	for _, tc := range []struct {
		name        string
		feeCap, tip int64
	}{
		{"both +5 %", 1050, 105},
		{"fee cap +10 % alone", 1100, 100},
		{"tip +10 % alone", 1000, 110},
		{"fee cap +10 %, tip +9 %", 1100, 109},
	} {
		_, err := f.add(testfactory.PoolTx(1, 0, tc.feeCap, tc.tip))
		require.EqualError(t, err, "replacement transaction underpriced", tc.name)
		require.ErrorIs(t, err, txpool.ErrReplaceUnderpriced)
	}
	require.Equal(t, store.PoolPending, f.get(old.Hash).State, "the refused replacements changed nothing")
	require.Equal(t, 2, f.count("true"))

	res := f.mustAdd(testfactory.PoolTx(1, 0, 1100, 110))
	require.Equal(t, store.PoolPending, res.Tx.State, "the replacement of a pending transaction is pending")
	require.Equal(t, old.Hash, res.Replaced)
	got := f.get(old.Hash)
	require.Equal(t, store.PoolReplaced, got.State)
	require.Equal(t, res.Tx.Hash, got.ReplacedBy)

	res = f.mustAdd(testfactory.PoolTx(1, 2, 5000, 5000))
	require.Equal(t, store.PoolQueued, res.Tx.State, "the replacement of a queued transaction is queued")
	require.Equal(t, store.PoolReplaced, f.get(queued.Hash).State)
	require.Equal(t, []string{"0:pending", "2:queued"}, f.states(1))
}

// geth's replacement rule at the edges where a percentage alone misleads:
// fee cap and tip each strictly above the old ones and at least
// old × 110 / 100 in integer division (core/txpool/legacypool/list.go), so
// 111 replaces 101 (the threshold 111.1 rounds down to 111) and a zero tip
// never replaces a zero tip. Each case is its own sender's nonce 0.
func TestPool_ReplacementFollowsGethsRuleAtNonMultiplesOfTenAndZeroTips(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	for i, tc := range gethpooltest.Edges {
		sender := 100 + i
		old := f.mustAdd(testfactory.PoolTx(sender, 0, tc.OldFeeCap, tc.OldTip)).Tx
		res, err := f.add(testfactory.PoolTx(sender, 0, tc.FeeCap, tc.Tip))
		if !tc.Replaces {
			require.EqualError(t, err, "replacement transaction underpriced", tc.Name)
			require.ErrorIs(t, err, txpool.ErrReplaceUnderpriced, tc.Name)
			require.Equal(t, store.PoolPending, f.get(old.Hash).State, tc.Name)
			continue
		}
		require.NoError(t, err, tc.Name)
		require.Equal(t, old.Hash, res.Replaced, tc.Name)
		require.Equal(t, store.PoolReplaced, f.get(old.Hash).State, tc.Name)
	}
}

func TestPool_IdenticalBytesAreAlreadyKnownAndAddNoRow(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	tx := testfactory.PoolTx(1, 0, 10, 10)
	f.mustAdd(tx)
	queued := testfactory.PoolTx(1, 4, 10, 10)
	f.mustAdd(queued)
	for _, again := range []store.NewPoolTx{tx, queued} {
		_, err := f.add(again)
		require.EqualError(t, err, "already known")
		require.ErrorIs(t, err, txpool.ErrAlreadyKnown)
	}
	require.Equal(t, 2, f.count("true"))

	// Bytes that were replaced come back only by the rules: their
	// replacement is dearer, so they are underpriced.
	dearer := testfactory.PoolTx(1, 0, 20, 20)
	f.mustAdd(dearer)
	_, err := f.add(tx)
	require.ErrorIs(t, err, txpool.ErrReplaceUnderpriced)
	require.Equal(t, 3, f.count("true"))
}

// The builder-queue document's single cap of 16 pending and queued per
// sender stays expressible: MaxPerSender.
func TestPool_MaxPerSenderSixteenRefusesTheSeventeenthAndAllowsReplacements(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	f.limits.MaxPerSender = 16
	for n := range uint64(16) {
		f.mustAdd(testfactory.PoolTx(1, n*2, 10, 10)) // one pending, 15 queued
	}
	_, err := f.add(testfactory.PoolTx(1, 40, 10, 10))
	require.EqualError(t, err, "account limit exceeded: pooled 16 txs")
	var limit *store.PoolAccountLimitError
	require.ErrorAs(t, err, &limit)
	require.ErrorIs(t, err, txpool.ErrAccountLimitExceeded, "geth's error")
	f.mustAdd(testfactory.PoolTx(1, 2, 11, 11)) // a replacement takes no new place
	f.mustAdd(testfactory.PoolTx(2, 0, 10, 10)) // another sender has its own 16

	// Included transactions are out of the pool: they do not count.
	_, err = f.st.DB().Exec(t.Context(), `UPDATE ledgerq.pool_txs SET state = 'included', bundle_block = 1 WHERE sender = $1 AND nonce = 0`, testfactory.PoolSender(1))
	require.NoError(t, err)
	f.mustAdd(testfactory.PoolTx(1, 40, 10, 10))
}

// No sender is stranded behind its own nonce gap: with nonces 1..16 in the
// pool (its limit, all queued behind the missing 0), nonce 0 is taken and
// the highest queued nonce makes room for it, as geth truncates an
// account's queue from the top. A transaction further from running than
// all the queued ones is still refused.
func TestPool_AtMaxPerSenderTheGapFillerEvictsTheHighestQueuedNonce(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	f.limits.MaxPerSender = 16
	for n := uint64(1); n <= 16; n++ {
		f.mustAdd(testfactory.PoolTx(1, n, 10, 10))
	}
	_, err := f.add(testfactory.PoolTx(1, 17, 10, 10))
	require.EqualError(t, err, "account limit exceeded: pooled 16 txs", "above every queued nonce: no room is made")

	top := testfactory.PoolTx(1, 16, 10, 10)
	res := f.mustAdd(testfactory.PoolTx(1, 0, 10, 10))
	require.Equal(t, store.PoolPending, res.Tx.State)
	require.Equal(t, top.Hash, res.Evicted)
	require.Equal(t, 15, res.Promoted)
	want := []string{}
	for n := range 16 {
		want = append(want, fmt.Sprintf("%d:pending", n))
	}
	require.Equal(t, want, f.states(1))
	evicted := f.get(top.Hash)
	require.Equal(t, store.PoolDropped, evicted.State)
	require.Equal(t, store.PoolDropEvicted, evicted.DropReason)

	// A queued transaction nearer to running also takes the highest
	// queued one's place.
	for n := uint64(2); n <= 17; n++ {
		f.mustAdd(testfactory.PoolTx(2, n, 10, 10))
	}
	res = f.mustAdd(testfactory.PoolTx(2, 1, 10, 10))
	require.Equal(t, store.PoolQueued, res.Tx.State)
	require.Equal(t, testfactory.PoolTx(2, 17, 10, 10).Hash, res.Evicted)
}

// The funds check is geth's: the balance covers the transaction, and with
// it everything the sender's transactions not yet executed may spend (gas ×
// fee cap + value each); a replacement needs only its bump. Messages are
// geth's word for word.
func TestPool_FundsMustCoverEveryTransactionNotYetExecuted(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	add := func(tx store.NewPoolTx, balance int64) error {
		_, err := f.st.PoolAdd(t.Context(), store.PoolAddParams{Now: f.now, Tx: tx, Limits: f.limits, Balance: big.NewInt(balance)})
		return err
	}
	// poolTx costs 21000 × fee cap + 1.
	tx0 := testfactory.PoolTx(1, 0, 10, 10)
	require.EqualError(t, add(tx0, 210_000), "insufficient funds for gas * price + value: balance 210000, tx cost 210001, overshot 1")
	require.NoError(t, add(tx0, 210_001))
	tx1 := testfactory.PoolTx(1, 1, 10, 10)
	require.EqualError(t, add(tx1, 420_001),
		"insufficient funds for gas * price + value: balance 420001, queued cost 210001, tx cost 210001, overshot 1")
	require.NoError(t, add(tx1, 420_002))
	// Replacing nonce 1 at fee cap 11: a bump of 21000.
	bump := testfactory.PoolTx(1, 1, 11, 11)
	require.EqualError(t, add(bump, 441_001),
		"insufficient funds for gas * price + value: balance 441001, queued cost 420002, tx bumped 21000, overshot 1")
	require.NoError(t, add(bump, 441_002))
	var funds *store.PoolInsufficientFundsError
	require.ErrorAs(t, add(testfactory.PoolTx(1, 2, 10, 10), 0), &funds)
	require.ErrorIs(t, funds, core.ErrInsufficientFunds, "geth's error")
	// Without a balance (no chain to read it from), nothing is checked.
	_, err := f.st.PoolAdd(t.Context(), store.PoolAddParams{Now: f.now, Tx: testfactory.PoolTx(3, 0, 10, 10), Limits: f.limits})
	require.NoError(t, err)
}

func TestPool_GlobalLimitsRefuseAFullPoolAndStoreNothing(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	f.limits.MaxPending, f.limits.MaxQueued = 3, 2
	f.limits.AccountSlots = 0 // MaxPending bounds every sender
	for s := range 3 {
		f.mustAdd(testfactory.PoolTx(s, 0, 10, 10))
	}
	_, err := f.add(testfactory.PoolTx(3, 0, 10, 10))
	require.EqualError(t, err, "txpool is full")
	require.ErrorIs(t, err, legacypool.ErrTxPoolOverflow)
	f.mustAdd(testfactory.PoolTx(3, 5, 10, 10))
	f.mustAdd(testfactory.PoolTx(4, 5, 10, 10))
	_, err = f.add(testfactory.PoolTx(5, 5, 10, 10))
	require.ErrorIs(t, err, legacypool.ErrTxPoolOverflow, "2 queued is the limit")
	require.Equal(t, 5, f.count("true"), "the refused transactions stored nothing")
	var senders int
	require.NoError(t, f.st.DB().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.pool_senders`).Scan(&senders))
	require.Equal(t, 5, senders, "a refused sender's lock row is rolled back with it")

	// A replacement grows nothing, so a full pool still takes it.
	f.mustAdd(testfactory.PoolTx(0, 0, 11, 11))
	// A promotion that would overfill pending is refused whole: one place is
	// free, and nonce 0 would take it with its queued successor 1.
	_, err = f.st.DB().Exec(t.Context(), `UPDATE ledgerq.pool_txs SET state = 'included', bundle_block = 1 WHERE sender = $1`, testfactory.PoolSender(1))
	require.NoError(t, err)
	_, err = f.st.DB().Exec(t.Context(), `UPDATE ledgerq.pool_txs SET state = 'dropped', drop_reason = 'test' WHERE sender = $1`, testfactory.PoolSender(4))
	require.NoError(t, err)
	f.mustAdd(testfactory.PoolTx(3, 1, 10, 10))
	_, err = f.add(testfactory.PoolTx(3, 0, 10, 10))
	require.ErrorIs(t, err, legacypool.ErrTxPoolOverflow)
	require.Equal(t, []string{"1:queued", "5:queued"}, f.states(3))
}

func TestPool_TTLExpiryDropsWithReasonExpiredAndRequeuesWhatFollowsTheGap(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	f.limits.TTL = time.Hour
	first := f.mustAdd(testfactory.PoolTx(1, 0, 10, 10)).Tx
	f.now = f.now.Add(30 * time.Minute)
	f.mustAdd(testfactory.PoolTx(1, 1, 10, 10))
	f.mustAdd(testfactory.PoolTx(1, 3, 10, 10))
	f.mustAdd(testfactory.PoolTx(2, 7, 10, 10))
	require.Equal(t, first.ReceivedAt.Add(time.Hour), first.ExpiresAt)

	dropped, _, err := f.st.PoolExpire(t.Context(), store.PoolExpireParams{Now: first.ExpiresAt.Add(-time.Microsecond), ChainID: poolChain, MaxSenders: 10})
	require.NoError(t, err)
	require.Zero(t, dropped, "not yet")

	dropped, senders, err := f.st.PoolExpire(t.Context(), store.PoolExpireParams{Now: first.ExpiresAt, ChainID: poolChain, MaxSenders: 10})
	require.NoError(t, err)
	require.Equal(t, int64(1), dropped)
	require.Equal(t, 1, senders)
	got := f.get(first.Hash)
	require.Equal(t, store.PoolDropped, got.State)
	require.Equal(t, "expired", got.DropReason)
	require.Equal(t, []string{"1:queued", "3:queued"}, f.states(1), "1 waits for 0 again")

	dropped, _, err = f.st.PoolExpire(t.Context(), store.PoolExpireParams{Now: f.now.Add(time.Hour), ChainID: poolChain, MaxSenders: 10})
	require.NoError(t, err)
	require.Equal(t, int64(3), dropped, "queued transactions expire too")
	require.Equal(t, 4, f.count("state = 'dropped' AND drop_reason = 'expired'"))

	// The sender starts again from its next nonce.
	require.Equal(t, store.PoolPending, f.mustAdd(testfactory.PoolTx(1, 0, 10, 10, "again")).Tx.State)
}

func TestPool_ExpiredBytesSentAgainAreAdmittedAgainAsTheSameRow(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	tx := f.mustAdd(testfactory.PoolTx(1, 0, 10, 10)).Tx
	f.now = f.now.Add(2 * time.Hour)
	_, _, err := f.st.PoolExpire(t.Context(), store.PoolExpireParams{Now: f.now, ChainID: poolChain, MaxSenders: 10})
	require.NoError(t, err)
	res := f.mustAdd(testfactory.PoolTx(1, 0, 10, 10))
	require.Equal(t, tx.Hash, res.Tx.Hash)
	require.Equal(t, store.PoolPending, res.Tx.State)
	require.Empty(t, res.Tx.DropReason)
	require.Equal(t, f.now, res.Tx.ReceivedAt)
	require.Equal(t, 1, f.count("true"))
}

func TestPool_WaitingTransactionsTheChainNoncePassedAreDroppedAsStale(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	f.mustAdd(testfactory.PoolTx(1, 0, 10, 10))
	f.mustAdd(testfactory.PoolTx(1, 1, 10, 10))
	f.mustAdd(testfactory.PoolTx(1, 3, 10, 10))
	f.chainNonce = 2 // nonces 0 and 1 were used outside the pool
	res := f.mustAdd(testfactory.PoolTx(1, 2, 10, 10))
	require.Equal(t, store.PoolPending, res.Tx.State)
	require.Equal(t, []string{"2:pending", "3:pending"}, f.states(1))
	require.Equal(t, 2, f.count("drop_reason = 'stale'"))

	// A lagging chain read does not move the sender back.
	f.chainNonce = 0
	_, err := f.add(testfactory.PoolTx(1, 1, 10, 10, "late"))
	require.EqualError(t, err, "nonce too low: next nonce 2, tx nonce 1")
}

// Several processes (stores with their own connection pools) take
// transactions for one sender and for many senders at once: the per-sender
// and the global limits hold exactly, no nonce is ever live twice, and the
// pending run never has a gap.
func TestPool_LimitsStayExactUnderConcurrentIntakeFromSeveralProcesses(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	procs := make([]*store.Store, 3)
	for i := range procs {
		st, err := store.OpenPool(ctx, db.URL, 4)
		require.NoError(t, err)
		t.Cleanup(st.Close)
		procs[i] = st
	}
	// No account slots: MaxPending bounds every sender, exactly.
	limits := store.PoolLimits{MaxPending: 25, MaxQueued: 15, AccountQueue: 64, MaxPerSender: 16, TTL: time.Hour}
	now := testfactory.Start()

	type outcome struct {
		tx  store.NewPoolTx
		err error
	}
	var mu sync.Mutex
	var outcomes []outcome
	var wg sync.WaitGroup
	// Sender 0: 40 intakes over nonces 0..19, each nonce twice with the
	// same fees from two processes (one of them must be refused) — more
	// than its 16 places.
	// Senders 1..80: nonces 0 and 2 each — more than the pool's 25 pending
	// and 15 queued places.
	var txs []store.NewPoolTx
	for n := range uint64(20) {
		txs = append(txs, testfactory.PoolTx(0, n, 10, 10, "a"), testfactory.PoolTx(0, n, 10, 10, "b"))
	}
	for s := 1; s <= 80; s++ {
		txs = append(txs, testfactory.PoolTx(s, 0, 10, 10), testfactory.PoolTx(s, 2, 10, 10))
	}
	for i, tx := range txs {
		wg.Go(func() {
			_, err := procs[i%len(procs)].PoolAdd(ctx, store.PoolAddParams{Now: now, Tx: tx, Limits: limits})
			mu.Lock()
			outcomes = append(outcomes, outcome{tx, err})
			mu.Unlock()
		})
	}
	wg.Wait()

	admitted := 0
	for _, o := range outcomes {
		var acct *store.PoolAccountLimitError
		var low *store.PoolNonceTooLowError
		switch {
		case o.err == nil:
			admitted++
		case errors.Is(o.err, legacypool.ErrTxPoolOverflow), errors.Is(o.err, txpool.ErrReplaceUnderpriced),
			errors.As(o.err, &acct), errors.As(o.err, &low):
		default:
			t.Fatalf("intake of %s nonce %d failed: %v", o.tx.Sender, o.tx.Nonce, o.err)
		}
	}
	var pending, queued, evicted, sender0, liveDup int
	require.NoError(t, db.Store.DB().QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'queued'),
		       count(*) FILTER (WHERE drop_reason = 'evicted'),
		       count(*) FILTER (WHERE sender = $1 AND state IN ('pending', 'queued'))
		FROM ledgerq.pool_txs`, testfactory.PoolSender(0)).Scan(&pending, &queued, &evicted, &sender0))
	require.NoError(t, db.Store.DB().QueryRow(ctx, `
		SELECT count(*) FROM (SELECT sender, nonce FROM ledgerq.pool_txs WHERE state IN ('pending', 'queued', 'included')
		GROUP BY sender, nonce HAVING count(*) > 1) d`).Scan(&liveDup))
	t.Logf("admitted %d of %d intakes: %d pending, %d queued, %d evicted, sender 0 holds %d", admitted, len(txs), pending, queued, evicted, sender0)
	require.LessOrEqual(t, pending, limits.MaxPending)
	require.LessOrEqual(t, queued, limits.MaxQueued)
	require.LessOrEqual(t, sender0, limits.MaxPerSender)
	require.Zero(t, liveDup, "a nonce live twice")
	require.Equal(t, admitted, pending+queued+evicted,
		"every admitted transaction is in the pool or made room for a lower nonce of its sender (none was replaced: equal fees)")

	// Every sender's pending transactions are a gap-free run from 0, and
	// its queued ones follow a gap.
	rows, err := db.Store.DB().Query(ctx, `
		SELECT sender, array_agg(nonce ORDER BY nonce) FILTER (WHERE state = 'pending'),
		       coalesce(min(nonce) FILTER (WHERE state = 'queued'), -1)
		FROM ledgerq.pool_txs WHERE state IN ('pending', 'queued') GROUP BY sender`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var sender string
		var run []int64
		var firstQueued int64
		require.NoError(t, rows.Scan(&sender, &run, &firstQueued))
		for i, n := range run {
			require.Equal(t, int64(i), n, "%s: pending run %v has a gap", sender, run)
		}
		require.NotEqual(t, int64(len(run)), firstQueued, "%s: queued nonce %d follows its pending run %v without a gap", sender, firstQueued, run)
	}
	require.NoError(t, rows.Err())
}

// Two processes race for the pool's last pending place. Each takes the
// chain's row lock before it counts, so with the lock held elsewhere both
// wait; released, exactly one is admitted and the other finds the pool full.
// (Without the lock both would count the other's insert as uncommitted and
// both commit: one over the limit.)
func TestPool_TwoProcessesRacingForTheLastPlaceAdmitExactlyOne(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	limits := store.PoolLimits{MaxPending: 3, MaxQueued: 10, AccountQueue: 64, TTL: time.Hour} // no account slots: MaxPending bounds every sender
	now := testfactory.Start()
	for s := range 2 {
		_, err := db.Store.PoolAdd(ctx, store.PoolAddParams{Now: now, Tx: testfactory.PoolTx(s, 0, 10, 10), Limits: limits})
		require.NoError(t, err)
	}
	procs := make([]*store.Store, 2)
	for i := range procs {
		st, err := store.OpenPool(ctx, db.URL, 1)
		require.NoError(t, err)
		t.Cleanup(st.Close)
		procs[i] = st
	}

	holder, err := db.Store.Conns().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(context.WithoutCancel(ctx)) }()
	// Every admission slot held: both intakes must wait for one.
	_, err = holder.Exec(ctx, `SELECT slot FROM ledgerq.pool_admission_slots WHERE chain_id = $1 FOR UPDATE`, poolChain)
	require.NoError(t, err)

	errs := make(chan error, 2)
	for i, st := range procs {
		go func() {
			_, err := st.PoolAdd(ctx, store.PoolAddParams{Now: now, Tx: testfactory.PoolTx(10+i, 0, 10, 10), Limits: limits})
			errs <- err
		}()
	}
	// Both intakes have written their row and wait for an admission slot.
	for waiting := 0; waiting < 2; {
		require.Zero(t, len(errs), "an intake finished without waiting for an admission slot")
		require.NoError(t, db.Store.DB().QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%pool_admission_slots%'`).Scan(&waiting))
		select {
		case <-ctx.Done():
			t.Fatalf("the intakes never waited for an admission slot: %v", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	require.NoError(t, holder.Rollback(ctx))
	var admitted, full int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			admitted++
		case errors.Is(err, legacypool.ErrTxPoolOverflow):
			full++
		default:
			t.Fatalf("intake failed: %v", err)
		}
	}
	require.Equal(t, 1, admitted, "exactly one takes the last place")
	require.Equal(t, 1, full)
	var pending int
	require.NoError(t, db.Store.DB().QueryRow(ctx, `SELECT count(*) FROM ledgerq.pool_txs WHERE state = 'pending'`).Scan(&pending))
	require.Equal(t, limits.MaxPending, pending)
}

func TestPoolTx_CheckConstraintsRefuseImpossibleStates(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newPoolFixture(t, st)
	tx := f.mustAdd(testfactory.PoolTx(1, 0, 10, 10)).Tx
	other := f.mustAdd(testfactory.PoolTx(1, 1, 10, 10)).Tx
	for _, tc := range []struct{ name, set string }{
		{"replaced without replaced_by", "state = 'replaced'"},
		{"replaced_by on a pending row", "replaced_by = '" + other.Hash + "'"},
		{"dropped without a reason", "state = 'dropped'"},
		{"a reason on a pending row", "drop_reason = 'expired'"},
		{"included without a bundle", "state = 'included'"},
		{"a bundle on a pending row", "bundle_block = 3"},
		{"tip above the fee cap", "gas_tip_cap = 11"},
		{"zero gas", "gas = 0"},
		{"negative value", "value_wei = -1"},
		{"expiry before receipt", "expires_at = received_at"},
		{"a second live transaction for the nonce", "nonce = 1"},
		{"upper-case hash", "tx_hash = upper(tx_hash)"},
	} {
		err := execUndone(t, st, `UPDATE ledgerq.pool_txs SET `+tc.set+` WHERE tx_hash = $1`, tx.Hash)
		require.Error(t, err, tc.name)
	}
}

func TestPoolOverview_CountsTransactionsPerStateAndDropReason(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, testdb.NewTx(t))
	f.mustAdd(testfactory.PoolTx(1, 0, 10, 10))
	f.mustAdd(testfactory.PoolTx(2, 0, 10, 10))
	f.mustAdd(testfactory.PoolTx(2, 3, 10, 10))
	f.mustAdd(testfactory.PoolTx(2, 0, 20, 20))
	rows, err := f.st.DB().Query(t.Context(), `
		SELECT state || coalesce('/' || drop_reason, '') || '=' || txs || '/' || senders
		FROM ledgerq.pool_overview WHERE chain_id = $1 ORDER BY 1`, poolChain)
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		got = append(got, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"pending=2/2", "queued=1/1", "replaced=1/1"}, got)
}

// bound returns the chain's admission bound: base plus every slot's growth
// (pending, queued), and whether the base is known.
func (f *poolFixture) bound() (pending, queued int64, growth int64, known bool) {
	f.t.Helper()
	var pb, qb *int64
	require.NoError(f.t, f.st.DB().QueryRow(f.t.Context(), `
		SELECT c.pending_base, c.queued_base, (SELECT coalesce(sum(pending_growth + queued_growth), 0)::bigint
		FROM ledgerq.pool_admission_slots s WHERE s.chain_id = c.chain_id)
		FROM ledgerq.pool_chains c WHERE c.chain_id = $1`, poolChain).Scan(&pb, &qb, &growth))
	if pb == nil || qb == nil {
		return 0, 0, growth, false
	}
	var pg, qg int64
	require.NoError(f.t, f.st.DB().QueryRow(f.t.Context(), `
		SELECT coalesce(sum(pending_growth), 0)::bigint, coalesce(sum(queued_growth), 0)::bigint
		FROM ledgerq.pool_admission_slots WHERE chain_id = $1`, poolChain).Scan(&pg, &qg))
	return *pb + pg, *qb + qg, growth, true
}

// Far from the limits an intake admits on the bound, without a count; the
// bound follows the pool through cuts; within 15 of a limit an intake counts
// exactly and rebases, and the limit still refuses the one past it.
func TestPool_AdmissionCountsOnlyNearTheLimitsAndItsBoundFollowsThePool(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newPoolFixture(t, st)
	f.limits.MaxPending, f.limits.MaxQueued = 20, 20
	f.limits.AccountSlots = 0 // MaxPending bounds every sender
	f.mustAdd(testfactory.PoolTx(0, 0, 10, 10))
	pending, queued, growth, known := f.bound()
	require.True(t, known, "the first intake counted")
	require.Equal(t, []int64{1, 0, 0}, []int64{pending, queued, growth}, "an exact count rebases: its growth is 0")
	for s := 1; s < 4; s++ {
		f.mustAdd(testfactory.PoolTx(s, 0, 10, 10))
	}
	f.mustAdd(testfactory.PoolTx(9, 5, 10, 10)) // queued
	pending, queued, growth, _ = f.bound()
	require.Equal(t, []int64{4, 1, 4}, []int64{pending, queued, growth}, "admitted on the bound: recorded in the slots, nothing counted")

	rows := testfactory.New(t, st, clock.NewFake(f.now))
	require.Len(t, rows.CutBundles(store.BundleCutParams{Size: 3, MaxBundles: 1}), 1)
	pending, _, _, _ = f.bound()
	require.EqualValues(t, 1, pending, "the cut lowered the bound by what it took")

	// pending 1 + 4 more = 5, the most the bound admits on (5 + 15 = 20);
	// the sixth counts exactly and rebases.
	for s := 10; s < 14; s++ {
		f.mustAdd(testfactory.PoolTx(s, 0, 10, 10))
	}
	_, _, growth, _ = f.bound()
	require.Positive(t, growth, "still on the bound")
	f.mustAdd(testfactory.PoolTx(14, 0, 10, 10))
	pending, _, growth, _ = f.bound()
	require.Equal(t, []int64{6, 0}, []int64{pending, growth}, "near the limit: an exact count, rebased")
	for s := 15; s < 29; s++ {
		f.mustAdd(testfactory.PoolTx(s, 0, 10, 10))
	}
	_, err := f.add(testfactory.PoolTx(29, 0, 10, 10))
	require.ErrorIs(t, err, legacypool.ErrTxPoolOverflow, "20 pending is the limit")
	require.Equal(t, 20, f.count("state = 'pending'"))
}

// An intake whose commit went through but whose answer was lost (the
// request's deadline passed during the commit, the connection was cut) is
// answered as stored when its transaction is found stored: answered
// "database unavailable", a client that sent it once would be told it was
// not taken while the pool holds it and the chain will include it. Alone
// and in a group alike.
func TestPool_AnIntakeWhoseCommitAnswerWasLostIsAnsweredAsStoredWhenItWas(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	f := newPoolFixture(t, db.Store.WithCommitAnswersLost(1))
	tx := testfactory.PoolTx(1, 0, 10, 10)
	res, err := f.add(tx)
	require.NoError(t, err, "the commit went through")
	require.Equal(t, tx.Hash, res.Tx.Hash)
	require.Equal(t, store.PoolPending, res.Tx.State)
	require.Equal(t, 1, f.count("true"))

	// A group of intakes, every one of which lost its answer.
	g := newPoolFixture(t, db.Store.WithCommitAnswersLost(1))
	params := []store.PoolAddParams{}
	for sender := 2; sender <= 4; sender++ {
		params = append(params, store.PoolAddParams{Now: g.now, Tx: testfactory.PoolTx(sender, 0, 10, 10), Limits: g.limits})
	}
	var wg sync.WaitGroup
	errs := make([]error, len(params))
	release := g.st.HoldPoolGroups()
	for i, p := range params {
		wg.Go(func() { _, errs[i] = g.st.PoolAdd(t.Context(), p) })
	}
	require.Eventually(t, func() bool { return g.st.PoolIntakesWaiting() == len(params) }, 10*time.Second, 5*time.Millisecond)
	release()
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "intake %d", i)
	}
	require.Equal(t, 4, f.count("true"))
}
