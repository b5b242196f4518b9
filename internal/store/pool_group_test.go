package store_test

import (
	"context"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// waitForIntakes waits until n PoolAdd calls of st wait for a group.
func waitForIntakes(t *testing.T, st *store.Store, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return st.PoolIntakesWaiting() == n }, 10*time.Second, time.Millisecond,
		"%d intakes never waited for a group", n)
}

// xmins returns how many transactions wrote the pool rows of the senders.
func xmins(t *testing.T, st *store.Store, senders ...int) int {
	t.Helper()
	addrs := make([]string, len(senders))
	for i, s := range senders {
		addrs[i] = testfactory.PoolSender(s)
	}
	var n int
	require.NoError(t, st.DB().QueryRow(t.Context(), `
		SELECT count(DISTINCT xmin::text) FROM ledgerq.pool_txs WHERE chain_id = $1 AND sender = ANY($2)`,
		poolChain, addrs).Scan(&n))
	return n
}

// Intakes of several senders that wait while others run are stored in one
// transaction, and each is answered as if it had run alone.
func TestPoolGroup_IntakesThatWaitTogetherAreStoredInOneTransaction(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	st := db.Store
	now := testfactory.Start()
	// The chain's first intake counts the pool: the bound exists from then.
	newPoolFixture(t, st).mustAdd(testfactory.PoolTx(9, 0, 10, 10))
	release := st.HoldPoolGroups()
	var wg sync.WaitGroup
	results := make([]store.PoolAddResult, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() {
			results[i], errs[i] = st.PoolAdd(t.Context(), store.PoolAddParams{
				Now: now, Tx: testfactory.PoolTx(i+1, uint64(i%2)*3, 10, 10), Limits: store.DefaultPoolLimits(),
			})
		})
	}
	waitForIntakes(t, st, 4)
	require.Zero(t, xmins(t, st, 1, 2, 3, 4), "the intakes wait for their group")
	release()
	wg.Wait()
	for i := range 4 {
		require.NoError(t, errs[i])
		want := store.PoolPending
		if i%2 == 1 {
			want = store.PoolQueued // nonce 3 over a chain nonce of 0
		}
		require.Equal(t, want, results[i].Tx.State, "intake %d", i)
		got, err := st.PoolGet(t.Context(), poolChain, results[i].Tx.Hash)
		require.NoError(t, err)
		require.Equal(t, want, got.State)
	}
	require.Equal(t, 1, xmins(t, st, 1, 2, 3, 4), "the four intakes were one transaction")
	require.Zero(t, st.PoolIntakesWaiting())
}

// An intake whose caller gives up while it waits for a group leaves the
// queue and stores nothing.
func TestPoolGroup_AnIntakeCancelledWhileItWaitsLeavesAndStoresNothing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	st := db.Store
	release := st.HoldPoolGroups()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := st.PoolAdd(ctx, store.PoolAddParams{Now: testfactory.Start(), Tx: testfactory.PoolTx(1, 0, 10, 10), Limits: store.DefaultPoolLimits()})
		done <- err
	}()
	waitForIntakes(t, st, 1)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Zero(t, st.PoolIntakesWaiting())
	release()
	// The next intake runs at once: no group was left running.
	newPoolFixture(t, st).mustAdd(testfactory.PoolTx(2, 0, 10, 10))
	_, err := st.PoolGet(t.Context(), poolChain, testfactory.PoolTx(1, 0, 10, 10).Hash)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// slotGrowth returns each admission slot's pending growth.
func slotGrowth(t *testing.T, st *store.Store) map[int16]int64 {
	t.Helper()
	rows, err := st.DB().Query(t.Context(), `SELECT slot, pending_growth FROM ledgerq.pool_admission_slots WHERE chain_id = $1`, poolChain)
	require.NoError(t, err)
	defer rows.Close()
	out := map[int16]int64{}
	for rows.Next() {
		var slot int16
		var g int64
		require.NoError(t, rows.Scan(&slot, &g))
		out[slot] = g
	}
	require.NoError(t, rows.Err())
	return out
}

// A group stores only the intakes that simply add their transaction: a
// refused one gets its refusal and leaves nothing behind, not even its
// sender's row; one that would replace another runs alone; the already
// known is answered so. Its growth is recorded one transaction per
// admission slot, as the bound's allowance assumes.
func TestPoolGroup_StoresOnlyItsSimpleAddsAndAnswersTheOthersAsAlone(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	st := db.Store
	now := testfactory.Start()
	limits := store.DefaultPoolLimits()
	f := newPoolFixture(t, st)
	f.mustAdd(testfactory.PoolTx(3, 0, 10, 10))
	f.mustAdd(testfactory.PoolTx(4, 0, 10, 10))
	before := slotGrowth(t, st)

	params := []store.PoolAddParams{
		{Now: now, Tx: testfactory.PoolTx(1, 0, 10, 10), Limits: limits},
		{Now: now, Tx: testfactory.PoolTx(2, 0, 10, 10), Limits: limits, Balance: big.NewInt(1)}, // cannot pay
		{Now: now, Tx: testfactory.PoolTx(3, 0, 20, 20), Limits: limits},                         // replaces
		{Now: now, Tx: testfactory.PoolTx(4, 0, 10, 10), Limits: limits},                         // known
		{Now: now, Tx: testfactory.PoolTx(5, 0, 10, 10), Limits: limits},
	}
	res, errs, alone := st.PoolAddGroup(t.Context(), params)
	require.Equal(t, []bool{false, false, true, false, false}, alone)
	for _, i := range []int{0, 4} {
		require.NoError(t, errs[i])
		require.Equal(t, store.PoolPending, res[i].Tx.State)
		require.Equal(t, params[i].Tx.Hash, res[i].Tx.Hash)
	}
	var funds *store.PoolInsufficientFundsError
	require.ErrorAs(t, errs[1], &funds)
	require.NoError(t, errs[2], "left to run alone, not answered")
	require.ErrorIs(t, errs[3], txpool.ErrAlreadyKnown)

	require.Equal(t, 1, xmins(t, st, 1, 5), "the two adds were one transaction")
	for _, i := range []int{1, 2} {
		_, err := st.PoolGet(t.Context(), poolChain, params[i].Tx.Hash)
		require.ErrorIs(t, err, store.ErrNotFound, "intake %d stored", i)
	}
	old, err := st.PoolGet(t.Context(), poolChain, testfactory.PoolTx(3, 0, 10, 10).Hash)
	require.NoError(t, err)
	require.Equal(t, store.PoolPending, old.State, "the replacement is not the group's to make")
	var senders int
	require.NoError(t, st.DB().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.pool_senders WHERE sender = $1`,
		testfactory.PoolSender(2)).Scan(&senders))
	require.Zero(t, senders, "a refused intake leaves no sender row")

	after := slotGrowth(t, st)
	var grew int64
	for slot, g := range after {
		d := g - before[slot]
		require.Contains(t, []int64{0, 1}, d, "slot %d grew by %d", slot, d)
		grew += d
	}
	require.EqualValues(t, 2, grew, "two pending transactions recorded")
}

// A group admits on the bound only when its growth and one transaction for
// each slot it does not hold fit the limit; else each intake runs alone
// and counts.
func TestPoolGroup_AdmitsOnTheBoundOnlyWithRoomForEveryOtherSlotsHolder(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	st := db.Store
	now := testfactory.Start()
	f := newPoolFixture(t, st)
	for s := range 5 {
		f.mustAdd(testfactory.PoolTx(s, 0, 10, 10))
	}
	group := func(maxPending int) ([]error, []bool) {
		limits := store.DefaultPoolLimits()
		limits.MaxPending = maxPending
		var params []store.PoolAddParams
		for s := 10; s < 13; s++ {
			params = append(params, store.PoolAddParams{Now: now, Tx: testfactory.PoolTx(s, 0, 10, 10), Limits: limits})
		}
		_, errs, alone := st.PoolAddGroup(t.Context(), params)
		return errs, alone
	}
	// 5 pending + 3 + the 13 slots it does not hold = 21.
	errs, alone := group(20)
	require.Equal(t, []bool{true, true, true}, alone, "over 20: each runs alone and counts")
	require.Equal(t, []error{nil, nil, nil}, errs)
	require.Zero(t, xmins(t, st, 10, 11, 12), "nothing stored")
	errs, alone = group(21)
	require.Equal(t, []bool{false, false, false}, alone, "21 fits")
	require.Equal(t, []error{nil, nil, nil}, errs)
	require.Equal(t, 1, xmins(t, st, 10, 11, 12))
}

// holdSender holds sender's intake lock in a transaction of its own, as
// another process's long intake (or an operator's session) would, until
// the test ends or the returned func is called.
func holdSender(t *testing.T, url string, sender int) (release func()) {
	t.Helper()
	st, err := store.Open(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	tx, err := st.Conns().Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), `SELECT 1 FROM ledgerq.pool_senders WHERE chain_id = $1 AND sender = $2 FOR UPDATE`,
		poolChain, testfactory.PoolSender(sender))
	require.NoError(t, err)
	release = func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }
	t.Cleanup(release)
	return release
}

// A group does not make its other senders wait for one whose lock is held
// long: it gives up the group and each intake runs alone.
func TestPoolGroup_ASenderLockedElsewhereDoesNotHoldUpTheGroupsOtherSenders(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	st := db.Store
	now := testfactory.Start()
	limits := store.DefaultPoolLimits()
	f := newPoolFixture(t, st)
	f.mustAdd(testfactory.PoolTx(0, 0, 10, 10))
	f.mustAdd(testfactory.PoolTx(1, 0, 10, 10))
	release := holdSender(t, db.URL, 1)
	type answer struct {
		errs  []error
		alone []bool
	}
	done := make(chan answer, 1)
	go func() {
		_, errs, alone := st.PoolAddGroup(context.WithoutCancel(t.Context()), []store.PoolAddParams{
			{Now: now, Tx: testfactory.PoolTx(1, 1, 10, 10), Limits: limits},
			{Now: now, Tx: testfactory.PoolTx(2, 0, 10, 10), Limits: limits},
			{Now: now, Tx: testfactory.PoolTx(3, 0, 10, 10), Limits: limits},
		})
		done <- answer{errs, alone}
	}()
	select {
	case a := <-done:
		require.Equal(t, []bool{true, true, true}, a.alone, "each runs alone")
		require.Equal(t, []error{nil, nil, nil}, a.errs)
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("the group waited for the locked sender")
	}
	require.Zero(t, xmins(t, st, 2, 3), "the group stored nothing")
	_, err := st.PoolGet(t.Context(), poolChain, testfactory.PoolTx(1, 1, 10, 10).Hash)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// Intakes of a sender whose lock is held elsewhere wait for it, but not the
// other senders' intakes of the process: an intake that runs long gives up
// its place among the groups running.
func TestPoolGroup_IntakesWaitingForALockedSenderDoNotStopTheProcesssOtherIntakes(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	// Connections for the stuck intakes and the others: the pool is not
	// what this test exhausts.
	st, err := store.OpenPool(t.Context(), db.URL, 8)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	now := testfactory.Start()
	limits := store.DefaultPoolLimits()
	newPoolFixture(t, st).mustAdd(testfactory.PoolTx(1, 0, 10, 10))
	release := holdSender(t, db.URL, 1)
	stuck := make(chan error, 3)
	for n := range uint64(3) {
		go func() {
			_, err := st.PoolAdd(t.Context(), store.PoolAddParams{Now: now, Tx: testfactory.PoolTx(1, 1+n, 10, 10), Limits: limits})
			stuck <- err
		}()
	}
	// The three wait for the lock, each alone (one sender).
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, st.DB().QueryRow(t.Context(), `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%pool_senders%'`).Scan(&n))
		return n >= 2
	}, 10*time.Second, 5*time.Millisecond, "the locked sender's intakes never waited for its lock")
	other := make(chan error, 1)
	go func() {
		_, err := st.PoolAdd(t.Context(), store.PoolAddParams{Now: now, Tx: testfactory.PoolTx(2, 0, 10, 10), Limits: limits})
		other <- err
	}()
	select {
	case err := <-other:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("another sender's intake waited for the locked sender's")
	}
	release()
	for range 3 {
		require.NoError(t, <-stuck)
	}
}
