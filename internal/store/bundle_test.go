package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// The bundle tests share the pool tests' chain (poolChain) and testfactory's
// transactions (PoolTx).

const (
	bundleTimeout = 18 * time.Second
	minBackoff    = time.Second
	maxBackoff    = 8 * time.Second
)

type bundleFixture struct {
	t     *testing.T
	st    *store.Store
	clock *clock.Fake
	rows  *testfactory.Factory
	// head is the newest JAM slot: recent() are the 8 blocks up to it.
	head     uint64
	cores    int
	executed ledger.BlockRef
}

func newBundleFixture(t *testing.T, st *store.Store) *bundleFixture {
	t.Helper()
	clk := testfactory.NewClock()
	f := &bundleFixture{t: t, st: st, clock: clk, rows: testfactory.New(t, st, clk), head: 100, cores: 2,
		executed: ledger.BlockRef{Number: 41, Hash: jamHash("executed", 41)}}
	require.NoError(t, st.BundleEnsureCores(t.Context(), poolChain, f.cores, f.clock.Now()))
	return f
}

func jamHash(kind string, n uint64) ledger.Hash {
	return ledger.BundleHash(ledger.Hash{}, n, []ledger.Hash{{byte(len(kind))}})
}

// recent returns the chain's recent blocks at head, oldest first.
func (f *bundleFixture) recent() []ledger.BlockRef {
	var out []ledger.BlockRef
	for s := f.head - ledger.RecentHistorySize + 1; s <= f.head; s++ {
		out = append(out, ledger.BlockRef{Number: s, Hash: jamHash("jam", s)})
	}
	return out
}

// addTxs adds nonces 0..n-1 of sender, pending.
func (f *bundleFixture) addTxs(sender, n int) {
	f.t.Helper()
	for i := range n {
		f.rows.AddPoolTxs(testfactory.PoolTx(sender, uint64(i), 2_000_000_000, 1_000_000_000))
	}
}

func (f *bundleFixture) cut(size, maxQueued, maxBundles int) []store.Bundle {
	f.t.Helper()
	return f.rows.CutBundles(store.BundleCutParams{
		ChainID: poolChain, Size: size, MaxQueued: maxQueued, MaxBundles: maxBundles,
		Executed: f.executed, Recent: f.recent(), Cores: f.cores,
	})
}

func (f *bundleFixture) claim() *store.BundleClaim {
	f.t.Helper()
	c, err := f.st.BundleClaim(f.t.Context(), store.BundleClaimParams{ChainID: poolChain, Recent: f.recent(), Cores: f.cores, Now: f.clock.Now()})
	require.NoError(f.t, err)
	return c
}

func (f *bundleFixture) mustClaim(number uint64) *store.BundleClaim {
	f.t.Helper()
	c := f.claim()
	require.NotNil(f.t, c, "claim of bundle %d", number)
	require.Equal(f.t, number, c.Bundle.Number)
	return c
}

func (f *bundleFixture) result(c *store.BundleClaim, err error) {
	f.t.Helper()
	require.NoError(f.t, f.st.BundleSubmitResult(f.t.Context(), store.BundleSubmitResultParams{
		ChainID: poolChain, PackageHash: c.PackageHash(), Err: err, Now: f.clock.Now(), MinBackoff: minBackoff, MaxBackoff: maxBackoff,
	}))
}

// block applies one JAM block at the next slot after head, and moves head.
func (f *bundleFixture) block(guarantees, accumulations []ledger.Hash) store.BundleApplied {
	f.t.Helper()
	f.head++
	got, err := f.st.BundleApplyBlocks(f.t.Context(), poolChain, []ledger.JAMBlock{{
		Slot: f.head, Hash: jamHash("jam", f.head), Guarantees: guarantees, Accumulations: accumulations,
	}}, 2, f.clock.Now())
	require.NoError(f.t, err)
	return got
}

func (f *bundleFixture) timeouts(maxVersions int) store.BundleRetryTimedOutResult {
	f.t.Helper()
	res, err := f.st.BundleRetryTimedOut(f.t.Context(), store.BundleRetryTimedOutParams{
		ChainID: poolChain, Now: f.clock.Now(), Timeout: bundleTimeout, MaxVersions: maxVersions, HeadSlot: f.head,
	})
	require.NoError(f.t, err)
	return res
}

func (f *bundleFixture) get(number uint64) store.Bundle {
	f.t.Helper()
	b, err := f.st.BundleGet(f.t.Context(), poolChain, number)
	require.NoError(f.t, err)
	return b
}

// guaranteedVersions counts the bundle's versions with a guarantee recorded.
func (f *bundleFixture) guaranteedVersions(id int64) int {
	f.t.Helper()
	vs, err := f.st.BundleVersionList(f.t.Context(), id)
	require.NoError(f.t, err)
	n := 0
	for _, v := range vs {
		if v.GuaranteedSlot != nil {
			n++
		}
	}
	return n
}

// txStates counts the chain's pool transactions by state.
func (f *bundleFixture) txStates() map[string]int {
	f.t.Helper()
	rows, err := f.st.DB().Query(f.t.Context(), `SELECT state::text, count(*) FROM ledgerq.pool_txs WHERE chain_id = $1 GROUP BY state`, poolChain)
	require.NoError(f.t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(f.t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(f.t, rows.Err())
	return out
}

func hashesOf(hexes ...string) []ledger.Hash {
	out := make([]ledger.Hash, len(hexes))
	for i, h := range hexes {
		out[i], _ = ledger.ParseHash(h)
	}
	return out
}

func TestBundleCut_TakesPendingTxsInSenderNonceOrderIntoConsecutiveBundlesChainedByParent(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	// Inserted in reverse (sender, nonce) order: sender 2 first, each
	// sender's nonces from the highest down (queued until nonce 0 arrives).
	var want []string
	for _, sender := range []int{2, 1} {
		var hs []string
		for n := 2; n >= 0; n-- {
			tx := f.rows.AddPoolTxs(testfactory.PoolTx(sender, uint64(n), 2_000_000_000, 1_000_000_000))[0]
			hs = append([]string{tx.Hash}, hs...)
		}
		want = append(hs, want...)
	}

	bs := f.cut(4, 10, 10)
	require.Len(t, bs, 2, "a partial last bundle is cut")
	require.Equal(t, []uint64{42, 43}, []uint64{bs[0].Number, bs[1].Number})
	require.Equal(t, []int{4, 2}, []int{bs[0].TxCount, bs[1].TxCount})
	require.Equal(t, f.executed.Hash, bs[0].Parent)
	require.Equal(t, bs[0].Hash, bs[1].Parent)
	for i, b := range bs {
		got, err := st.BundleTxListHashes(t.Context(), b.ID)
		require.NoError(t, err)
		wantHashes := hashesOf(want[i*4 : min(len(want), i*4+4)]...)
		require.Equal(t, wantHashes, got, "bundle %d", b.Number)
		require.Equal(t, ledger.BundleHash(b.Parent, b.Number, got), b.Hash)
		require.Equal(t, store.BundleQueued, b.State)
		require.Equal(t, 1, b.Version)
		require.NotNil(t, b.Anchor)
	}
	tx := f.get(43)
	require.Equal(t, bs[1].ID, tx.ID)
	ptx, err := st.PoolGet(t.Context(), poolChain, want[5])
	require.NoError(t, err)
	require.Equal(t, store.PoolIncluded, ptx.State)
	require.Equal(t, int64(43), *ptx.BundleBlock)

	// A partial bundle waits while a bundle is queued for every core; once
	// the queue is shorter, it is cut, following the highest live bundle.
	require.Equal(t, 2, f.cores)
	f.addTxs(3, 1)
	require.Empty(t, f.cut(4, 10, 10), "a partial bundle waits while every core has a queued bundle")
	require.NotNil(t, f.claim())
	next := f.cut(4, 10, 10)
	require.Len(t, next, 1)
	require.Equal(t, uint64(44), next[0].Number)
	require.Equal(t, bs[1].Hash, next[0].Parent)
}

// A bundle's transactions fit the block's gas limit by their gas limits:
// the chain would skip one past it ("gas limit reached"), a valid
// transaction lost. A bundle the gas limit cut short counts as full.
func TestBundleCut_ABundlesTransactionsFitTheBlocksGasLimit(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	for n := range uint64(7) {
		tx := testfactory.PoolTx(1, n, 2_000_000_000, 1_000_000_000)
		tx.Gas = 10_000_000
		f.rows.AddPoolTxs(tx)
	}
	bs := f.rows.CutBundles(store.BundleCutParams{
		ChainID: poolChain, Size: 10, MaxQueued: 10, MaxBundles: 10, GasLimit: 30_000_000,
		Executed: f.executed, Recent: f.recent(), Cores: 1,
	})
	require.Len(t, bs, 2, "three of 10M gas fill a 30M block; a bundle the gas limit cut short is full, and the last one, partial, waits (a bundle is queued for the one core)")
	require.Equal(t, []int{3, 3}, []int{bs[0].TxCount, bs[1].TxCount})
	require.Equal(t, map[string]int{"included": 6, "pending": 1}, f.txStates())
}

func TestBundleCut_AFullQueueLeavesTxsPending(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	f.addTxs(1, 5)
	require.Len(t, f.cut(2, 1, 10), 1)
	require.Empty(t, f.cut(2, 1, 10), "the queue holds its limit")
	require.Equal(t, map[string]int{"included": 2, "pending": 3}, f.txStates())
	// MaxBundles bounds one call.
	require.Len(t, f.cut(1, 10, 2), 2)
	require.Equal(t, map[string]int{"included": 4, "pending": 1}, f.txStates())
}

func TestBundleCut_CreatingTheBundleAndIncludingItsTxsCommitTogether(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	f.addTxs(1, 3)
	// Including the third transaction fails: the bundle must not stay.
	_, err := st.DB().Exec(t.Context(), `
		CREATE FUNCTION pg_temp.refuse_nonce_2() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.state = 'included' AND NEW.nonce = 2 THEN RAISE EXCEPTION 'refused'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_nonce_2 BEFORE UPDATE ON ledgerq.pool_txs
			FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_nonce_2();`)
	require.NoError(t, err)
	_, err = st.BundleCut(t.Context(), store.BundleCutParams{
		ChainID: poolChain, Size: 3, MaxQueued: 10, MaxBundles: 1, Executed: f.executed, Cores: 2, Now: f.clock.Now(),
	})
	require.Error(t, err)
	bs, err := st.BundleList(t.Context(), store.BundleListParams{ChainID: poolChain, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, bs)
	require.Equal(t, map[string]int{"pending": 3}, f.txStates())
}

func TestBundleClaim_AtMostCoresBundlesAreSubmittedAcrossConcurrentClaimers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	f := newBundleFixture(t, db.Store)
	f.addTxs(1, 8)
	require.Len(t, f.cut(1, 10, 10), 8)
	// Four processes, each with its own pool of connections.
	stores := make([]*store.Store, 4)
	for i := range stores {
		st, err := store.Open(t.Context(), db.URL)
		require.NoError(t, err)
		t.Cleanup(st.Close)
		stores[i] = st
	}
	for round := range 3 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var claimed []uint64
		for _, st := range stores {
			wg.Go(func() {
				for range 3 {
					c, err := st.BundleClaim(t.Context(), store.BundleClaimParams{ChainID: poolChain, Recent: f.recent(), Cores: f.cores, Now: f.clock.Now()})
					if err != nil {
						t.Error(err)
						return
					}
					if c != nil {
						mu.Lock()
						claimed = append(claimed, c.Bundle.Number)
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		require.Len(t, claimed, 2, "round %d: claimed %v", round, claimed)
		var submitted, cores int
		require.NoError(t, db.Store.DB().QueryRow(t.Context(), `
			SELECT count(*), count(DISTINCT core) FROM ledgerq.bundles WHERE chain_id = $1 AND state = 'submitted'`, poolChain).Scan(&submitted, &cores))
		require.Equal(t, 2, submitted)
		require.Equal(t, 2, cores)
		// Free both cores for the next round.
		var hashes []ledger.Hash
		for _, n := range claimed {
			vs, err := db.Store.BundleVersionList(t.Context(), f.get(n).ID)
			require.NoError(t, err)
			hashes = append(hashes, vs[0].PackageHash)
		}
		f.block(hashes, nil)
	}
}

func TestBundleClaim_TakesTheLowestNumberFirst(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	f.addTxs(1, 3)
	f.cut(1, 10, 10)
	c := f.mustClaim(42)
	require.Equal(t, 0, c.Package.Core)
	require.Equal(t, uint64(42), c.Package.Number)
	require.Equal(t, f.executed.Hash, c.Package.Parent)
	require.Len(t, c.Package.Txs, 1)
	require.Equal(t, store.BundleSubmitted, c.Bundle.State)
	require.Equal(t, 0, *c.Bundle.Core)
	f.mustClaim(43)
	require.Nil(t, f.claim(), "both cores are held")
}

func TestBundleClaim_SkipsABundleStillInItsBackoff(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	f.addTxs(1, 2)
	f.cut(1, 10, 10)
	c := f.mustClaim(42)
	f.result(c, ledger.NewError(ledger.Transient, "busy", nil))
	f.mustClaim(43)
	require.Nil(t, f.claim(), "42 waits its backoff")
	f.clock.Advance(minBackoff)
	f.mustClaim(42)
}

func TestBundleClaim_RebuildsOnVersionAboveOneOrAStaleAnchorAndKeepsAFreshOne(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	f.addTxs(1, 2)
	bs := f.cut(1, 10, 10)
	// Cut at head 100 with nothing ahead: offset 6, anchor slot 94; the
	// second with one bundle ahead (2 cores): still offset 6.
	require.Equal(t, uint64(94), bs[0].Anchor.Number)
	require.Equal(t, uint64(94), bs[1].Anchor.Number)

	c := f.mustClaim(42)
	require.False(t, c.Rebuilt, "a fresh anchor is kept")
	require.Equal(t, *bs[0].Anchor, c.Package.Anchor)

	f.head = 101 // 101 - 94 = 7 > 6: stale
	c2 := f.mustClaim(43)
	require.True(t, c2.Rebuilt)
	require.Equal(t, uint64(95), c2.Package.Anchor.Number, "offset 6 from head 101")

	// Version 2 always rebuilds, even on a fresh anchor.
	f.clock.Advance(bundleTimeout)
	f.head = 96
	require.Equal(t, []uint64{42, 43}, f.timeouts(3).Requeued)
	c3 := f.mustClaim(42)
	require.Equal(t, 2, c3.Package.Version)
	require.True(t, c3.Rebuilt)
	require.Equal(t, uint64(90), c3.Package.Anchor.Number, "offset 6 from head 96")
	require.NotEqual(t, c.PackageHash(), c3.PackageHash())
}

func TestBundleSubmitResult_RecordsEachClassAndBacksOffDoublingUpToTheCap(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	f.addTxs(1, 1)
	bs := f.cut(1, 10, 10)
	outcome := func(c *store.BundleClaim) string {
		vs, err := st.BundleVersionList(t.Context(), bs[0].ID)
		require.NoError(t, err)
		for _, v := range vs {
			if v.PackageHash == c.PackageHash() {
				return v.Outcome
			}
		}
		t.Fatalf("no version %s", c.PackageHash().Hex())
		return ""
	}

	c := f.mustClaim(42)
	f.result(c, nil)
	require.Equal(t, "sent", outcome(c))
	require.Equal(t, store.BundleSubmitted, f.get(42).State)

	f.result(c, errors.New("connection reset"))
	require.Equal(t, "unknown", outcome(c), "indeterminate: the timeout decides")
	require.Equal(t, store.BundleSubmitted, f.get(42).State)

	// Requeue it by timeout so that refusals can follow.
	f.clock.Advance(bundleTimeout)
	f.timeouts(10)
	for i, want := range []time.Duration{1, 2, 4, 8, 8} {
		c := f.mustClaim(42)
		class := ledger.Transient
		if i%2 == 1 {
			class = ledger.Deterministic
		}
		f.result(c, ledger.NewError(class, fmt.Sprintf("no %d", i), nil))
		require.Equal(t, fmt.Sprintf("refused: no %d", i), outcome(c))
		b := f.get(42)
		require.Equal(t, store.BundleQueued, b.State)
		require.Nil(t, b.Core)
		require.Equal(t, i+1, b.SubmitFailures)
		require.Equal(t, f.clock.Now().Add(want*time.Second), b.NextSubmitAt, "refusal %d", i+1)
		require.NotNil(t, b.Anchor)
		f.clock.Set(b.NextSubmitAt)
	}
	// The core was freed each time: both are free.
	var free int
	require.NoError(t, st.DB().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.cores WHERE chain_id = $1 AND bundle_id IS NULL`, poolChain).Scan(&free))
	require.Equal(t, 2, free)

	// G15 clears the anchor and retries at once, on a rebuilt package.
	c = f.mustClaim(42)
	f.result(c, ledger.NewError(ledger.Deterministic, ledger.AnchorNotRecent+": anchor 90", nil))
	b := f.get(42)
	require.Nil(t, b.Anchor)
	require.Equal(t, f.clock.Now(), b.NextSubmitAt)
	c = f.mustClaim(42)
	require.True(t, c.Rebuilt)
}

func TestBundleApplyBlocks_FirstGuaranteeWinsFreesTheCoreThenAccumulatesAndFinalizesAfterTheDepth(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	f.addTxs(1, 2)
	f.cut(1, 10, 10)
	c1 := f.mustClaim(42)
	c2 := f.mustClaim(43)

	got := f.block([]ledger.Hash{c1.PackageHash(), {0xee}}, nil)
	require.Equal(t, 1, got.Guaranteed)
	require.Equal(t, 1, got.UnknownGuarantees)
	b := f.get(42)
	require.Equal(t, store.BundleGuaranteed, b.State)
	require.Equal(t, c1.PackageHash(), *b.GuaranteedHash)
	require.Equal(t, 1, *b.GuaranteedVersion)
	require.Nil(t, b.Core)
	g := f.head
	// Core 0 is free again: a claim finds it (nothing left to claim).
	var holder *int64
	require.NoError(t, st.DB().QueryRow(t.Context(), `SELECT bundle_id FROM ledgerq.cores WHERE chain_id = $1 AND core = 0`, poolChain).Scan(&holder))
	require.Nil(t, holder)

	// Applying the same block again changes nothing.
	again, err := st.BundleApplyBlocks(t.Context(), poolChain, []ledger.JAMBlock{{Slot: g, Guarantees: []ledger.Hash{c2.PackageHash()}}}, 2, f.clock.Now())
	require.NoError(t, err)
	require.Equal(t, store.BundleApplied{Skipped: 1}, again)
	require.Equal(t, store.BundleSubmitted, f.get(43).State)
	slot, ok, err := st.BundleProcessedSlot(t.Context(), poolChain)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, g, slot)

	got = f.block(nil, []ledger.Hash{c1.PackageHash(), c2.PackageHash()})
	require.Equal(t, 1, got.Accumulated)
	require.Equal(t, 1, got.IgnoredAccumulations, "43 is not guaranteed")
	b = f.get(42)
	require.Equal(t, store.BundleAccumulated, b.State)
	require.Equal(t, f.head, *b.AccumulatedSlot)

	require.Zero(t, f.block(nil, nil).Finalized, "depth 2 not reached")
	require.Equal(t, 1, f.block(nil, nil).Finalized)
	require.Equal(t, store.BundleFinalized, f.get(42).State)
}

// BundleHeads follows the bundles' states: the newest accumulated or
// finalized bundle is the executed head, the newest finalized one the
// finalized head; a bundle only guaranteed or in flight is neither.
func TestBundleHeads_AreTheNewestExecutedAndTheNewestFinalizedBundle(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	heads := func() store.BundleHeads {
		t.Helper()
		h, err := st.BundleHeads(t.Context(), poolChain)
		require.NoError(t, err)
		return h
	}
	require.Equal(t, store.BundleHeads{}, heads(), "no bundle yet")
	f.addTxs(1, 3)
	f.cut(1, 10, 10) // 42, 43, 44
	c42, c43 := f.mustClaim(42), f.mustClaim(43)
	f.block([]ledger.Hash{c42.PackageHash(), c43.PackageHash()}, nil)
	require.Equal(t, store.BundleHeads{}, heads(), "guaranteed is not executed")
	f.block(nil, []ledger.Hash{c42.PackageHash()})
	require.Equal(t, store.BundleHeads{Executed: 42}, heads())
	f.block(nil, []ledger.Hash{c43.PackageHash()})
	require.Equal(t, store.BundleHeads{Executed: 43}, heads())
	f.block(nil, nil)
	require.Equal(t, store.BundleHeads{Executed: 43, Finalized: 42}, heads())
	f.block(nil, nil)
	require.Equal(t, store.BundleHeads{Executed: 43, Finalized: 43}, heads())
	require.Equal(t, store.BundleQueued, f.get(44).State, "44 is above both")
}

func TestBundleRetryTimedOut_RequeuesATimedOutBundleAsTheNextVersionAndFreesItsCore(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	f.addTxs(1, 1)
	f.cut(1, 10, 10)
	f.mustClaim(42)
	f.clock.Advance(bundleTimeout - time.Millisecond)
	require.Empty(t, f.timeouts(3).Requeued, "not yet")
	f.clock.Advance(time.Millisecond)
	require.Equal(t, []uint64{42}, f.timeouts(3).Requeued)
	b := f.get(42)
	require.Equal(t, store.BundleQueued, b.State)
	require.Equal(t, 2, b.Version)
	require.Nil(t, b.Core)
	require.Nil(t, b.Anchor)
	require.Equal(t, f.clock.Now(), b.NextSubmitAt)
}

func TestBundleRetryTimedOut_PastTheRetryLimitWaitsForAnchorExpiryThenDropsWithItsSuccessorsAndLosesNoTx(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := newBundleFixture(t, st)
	f.addTxs(1, 4)
	f.cut(1, 10, 10) // 42..45
	f.block(nil, nil)
	// 42 reaches version 2 (the limit), 43 is guaranteed, 44 submitted, 45
	// queued.
	f.mustClaim(42)
	f.clock.Advance(bundleTimeout)
	f.timeouts(2)
	c42 := f.mustClaim(42)
	require.Equal(t, 2, c42.Package.Version)
	c43 := f.mustClaim(43)
	f.block([]ledger.Hash{c43.PackageHash()}, nil)
	f.clock.Advance(bundleTimeout)
	f.mustClaim(44) // not timed out below
	require.Equal(t, map[string]int{"included": 4}, f.txStates())

	// Its anchor is still recent: a guarantee may still come, it waits and
	// keeps its core.
	require.Equal(t, store.BundleRetryTimedOutResult{}, f.timeouts(2))
	require.Equal(t, store.BundleSubmitted, f.get(42).State)
	// Blocks up to anchor + 8 applied: no version can be guaranteed any more.
	for f.head < c42.Package.Anchor.Number+ledger.RecentHistorySize-1 {
		f.block(nil, nil)
	}
	require.Empty(t, f.timeouts(2).Dropped, "one slot short")
	f.block(nil, nil)
	res := f.timeouts(2)
	require.Empty(t, res.Requeued)
	require.ElementsMatch(t, []uint64{42, 43, 44, 45}, res.Dropped)
	for n, reason := range map[uint64]string{
		42: "no guarantee after 2 versions", 43: "predecessor 42 dropped", 44: "predecessor 42 dropped", 45: "predecessor 42 dropped",
	} {
		b := f.get(n)
		require.Equal(t, store.BundleDropped, b.State, "bundle %d", n)
		require.Equal(t, reason, b.DropReason)
		require.Nil(t, b.Core)
	}
	require.Equal(t, map[string]int{"pending": 4}, f.txStates(), "every transaction is back in the pool")
	var held int
	require.NoError(t, st.DB().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.cores WHERE chain_id = $1 AND bundle_id IS NOT NULL`, poolChain).Scan(&held))
	require.Zero(t, held)

	// The dropped numbers are cut again, after the last live bundle.
	again := f.cut(4, 10, 10)
	require.Len(t, again, 1)
	require.Equal(t, uint64(42), again[0].Number)
	require.Equal(t, f.executed.Hash, again[0].Parent)
	require.Equal(t, again[0].ID, f.get(42).ID, "the live bundle is read before the dropped one")
}

// The requeue race: bundle v1 submitted, its guarantee delayed
// past the timeout. In every order of events exactly one version is
// guaranteed and the bundle is never submitted again after it.

func raceSetup(t *testing.T) (*bundleFixture, *store.BundleClaim) {
	t.Helper()
	f := newBundleFixture(t, testdb.NewTx(t))
	f.addTxs(1, 1)
	f.cut(1, 10, 10)
	c := f.mustClaim(42)
	f.result(c, nil)
	f.clock.Advance(bundleTimeout)
	return f, c
}

func requireGuaranteedOnce(f *bundleFixture, v1 *store.BundleClaim) {
	f.t.Helper()
	b := f.get(42)
	require.Equal(f.t, store.BundleGuaranteed, b.State)
	require.Equal(f.t, 1, *b.GuaranteedVersion)
	require.Equal(f.t, v1.PackageHash(), *b.GuaranteedHash)
	require.Nil(f.t, b.Core)
	require.Equal(f.t, 1, f.guaranteedVersions(b.ID))
}

func TestBundleRace_AGuaranteeBeforeTheTimeoutCheckIsNeverRequeued(t *testing.T) {
	t.Parallel()
	f, v1 := raceSetup(t)
	f.block([]ledger.Hash{v1.PackageHash()}, nil)
	require.Empty(t, f.timeouts(3).Requeued)
	requireGuaranteedOnce(f, v1)
}

func TestBundleRace_AGuaranteeBetweenTimeoutDetectionAndRequeueMakesTheRequeueAFalse(t *testing.T) {
	t.Parallel()
	f, v1 := raceSetup(t)
	// The timeout round saw it submitted and timed out ...
	b := f.get(42)
	require.Equal(t, store.BundleSubmitted, b.State)
	// ... then the guarantee is applied before its requeue runs.
	f.block([]ledger.Hash{v1.PackageHash()}, nil)
	ok, err := f.st.BundleRequeue(t.Context(), poolChain, b.ID, 1, f.clock.Now())
	require.NoError(t, err)
	require.False(t, ok)
	requireGuaranteedOnce(f, v1)
	require.Equal(t, 1, f.get(42).Version)
}

func TestBundleRace_AGuaranteeAfterV2IsQueuedMeansV2IsNeverClaimed(t *testing.T) {
	t.Parallel()
	f, v1 := raceSetup(t)
	require.Equal(t, []uint64{42}, f.timeouts(3).Requeued)
	f.block([]ledger.Hash{v1.PackageHash()}, nil)
	require.Nil(t, f.claim())
	requireGuaranteedOnce(f, v1)
	vs, err := f.st.BundleVersionList(t.Context(), f.get(42).ID)
	require.NoError(t, err)
	require.Len(t, vs, 1, "v2 was never built")
}

func TestBundleRace_AGuaranteeAfterV2IsSubmittedWinsAndV2sGuaranteeIsIgnored(t *testing.T) {
	t.Parallel()
	f, v1 := raceSetup(t)
	require.Equal(t, []uint64{42}, f.timeouts(3).Requeued)
	v2 := f.mustClaim(42)
	require.Equal(t, 2, v2.Package.Version)
	f.block([]ledger.Hash{v1.PackageHash()}, nil)
	got := f.block([]ledger.Hash{v2.PackageHash()}, nil)
	require.Equal(t, 1, got.IgnoredGuarantees)
	requireGuaranteedOnce(f, v1)
	// And v2's late submission result changes nothing.
	f.result(v2, ledger.NewError(ledger.Transient, "busy", nil))
	requireGuaranteedOnce(f, v1)
	require.Nil(t, f.claim())
}
