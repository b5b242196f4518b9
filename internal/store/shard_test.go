package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// newClaimedShard gives a rule test a store on a transaction rolled back
// when the test ends, in which the shard w:a was scheduled (which queued
// it) and then claimed at testfactory.Start by p/1 with a lease of a
// minute.
func newClaimedShard(t *testing.T) (*store.Store, time.Time, store.ShardClaim) {
	t.Helper()
	st := testdb.NewTx(t)
	now := testfactory.Start()
	res, err := st.ShardSchedule(t.Context(), store.ShardScheduleParams{Now: now, Key: "w:a"})
	require.NoError(t, err)
	require.Equal(t, store.ShardQueued, res)
	c, err := st.ShardClaim(t.Context(), store.ShardClaimParams{Now: now, Owner: "p/1", LeaseUntil: now.Add(time.Minute), Kinds: []string{"w"}})
	require.NoError(t, err)
	require.Equal(t, "w:a", c.Key)
	return st, now, c
}

func TestShard_ScheduleOnARunningShardSetsMoreWorkAndReleaseRequeuesIt(t *testing.T) {
	t.Parallel()
	st, now, c := newClaimedShard(t)
	ctx := t.Context()
	for range 2 {
		res, err := st.ShardSchedule(ctx, store.ShardScheduleParams{Now: now, Key: "w:a"})
		require.NoError(t, err)
		require.Equal(t, store.ShardMoreWork, res)
	}
	state, err := st.ShardRelease(ctx, store.ShardReleaseParams{Now: now.Add(time.Second), Claim: c})
	require.NoError(t, err)
	require.Equal(t, store.ShardPending, state, "more_work outweighs a job that saw no work left")
	s, err := st.ShardGet(ctx, "w:a")
	require.NoError(t, err)
	require.False(t, s.MoreWork)
	require.Equal(t, now.Add(time.Second), *s.ScheduledAt, "at the back of the queue")
}

func TestShard_ReleaseByANonOwnerOrAnOlderRunChangesNothing(t *testing.T) {
	t.Parallel()
	st, now, c := newClaimedShard(t)
	ctx := t.Context()
	before, err := st.ShardGet(ctx, "w:a")
	require.NoError(t, err)
	for _, stale := range []store.ShardClaim{
		{Key: c.Key, Owner: "p/2", Run: c.Run},
		{Key: c.Key, Owner: c.Owner, Run: c.Run - 1},
	} {
		_, err := st.ShardRelease(ctx, store.ShardReleaseParams{Now: now, Claim: stale})
		require.ErrorIs(t, err, store.ErrShardLeaseLost)
		require.ErrorIs(t, st.ShardExtendLease(ctx, store.ShardExtendLeaseParams{Now: now, Claim: stale, LeaseUntil: now.Add(time.Hour)}), store.ErrShardLeaseLost)
		require.ErrorIs(t, st.ShardHeld(ctx, stale), store.ErrShardLeaseLost)
	}
	after, err := st.ShardGet(ctx, "w:a")
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoError(t, st.ShardHeld(ctx, c))
}

func TestShard_ClaimSkipsOtherKindsAndShardsInBackoff(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	for _, k := range []string{"other:a", "w:a"} {
		_, err := st.ShardSchedule(ctx, store.ShardScheduleParams{Now: now, Key: k})
		require.NoError(t, err)
	}
	claim := func(at time.Time) (store.ShardClaim, error) {
		return st.ShardClaim(ctx, store.ShardClaimParams{Now: at, Owner: "p/1", LeaseUntil: at.Add(time.Minute), Kinds: []string{"w"}})
	}
	c, err := claim(now)
	require.NoError(t, err)
	require.Equal(t, "w:a", c.Key, "a kind without a job here is left for another process")
	_, err = st.ShardRelease(ctx, store.ShardReleaseParams{Now: now, Claim: c, NotBefore: now.Add(time.Minute), Failure: context.DeadlineExceeded})
	require.NoError(t, err)
	_, err = claim(now.Add(time.Minute - time.Microsecond))
	require.ErrorIs(t, err, store.ErrNotFound, "not before its backoff")
	c, err = claim(now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, c.Failures)
}

func TestShard_TableRefusesImpossibleStates(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	for name, sql := range map[string]string{
		"pending without a queue position": `INSERT INTO ledgerq.shards (key, state, created_at, updated_at) VALUES ('w:a', 'pending', now(), now())`,
		"running without a lease":          `INSERT INTO ledgerq.shards (key, state, owner, run, claimed_at, created_at, updated_at) VALUES ('w:a', 'running', 'p', 1, now(), now(), now())`,
		"idle with an owner":               `INSERT INTO ledgerq.shards (key, state, owner, created_at, updated_at) VALUES ('w:a', 'idle', 'p', now(), now())`,
		"idle with more work":              `INSERT INTO ledgerq.shards (key, state, more_work, created_at, updated_at) VALUES ('w:a', 'idle', true, now(), now())`,
		"a key without a kind":             `INSERT INTO ledgerq.shards (key, state, created_at, updated_at) VALUES ('nokind', 'idle', now(), now())`,
		"running never claimed":            `INSERT INTO ledgerq.shards (key, state, owner, claimed_at, lease_expires_at, created_at, updated_at) VALUES ('w:a', 'running', 'p', now(), now(), now(), now())`,
	} {
		require.Error(t, execUndone(t, st, sql), name)
	}
}

// A dead holder lets go at once: of three running shards, the one whose
// holder's liveness connection died is rescued at the next round, with its
// lease still running; the one of a live holder and the one claimed without
// a liveness lock wait for their lease, the backstop.
func TestShardRescue_TakesOverTheShardOfADeadHolderBeforeItsLeaseEnds(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	now := testfactory.Start()
	lease := 30 * time.Second
	dead, alive := newLivenessProcess(t, db), newLivenessProcess(t, db)
	leaseOnly := db.Store // no liveness
	claims := map[string]store.ShardClaim{}
	for i, p := range []*store.Store{dead.st, alive.st, leaseOnly} {
		key := []string{"w:dead", "w:alive", "w:lease-only"}[i]
		_, err := p.ShardSchedule(ctx, store.ShardScheduleParams{Now: now, Key: key})
		require.NoError(t, err)
		c, err := p.ShardClaim(ctx, store.ShardClaimParams{Now: now, Owner: key, LeaseUntil: now.Add(lease), Kinds: []string{"w"}})
		require.NoError(t, err)
		require.Equal(t, key, c.Key)
		claims[key] = c
	}
	for key, want := range map[string]int32{"w:dead": dead.lock, "w:alive": alive.lock, "w:lease-only": 0} {
		s, err := db.Store.ShardGet(ctx, key)
		require.NoError(t, err)
		require.Equal(t, want, s.LivenessLock, "%s records its holder's liveness lock", key)
	}
	rescue := func(at time.Time) []store.ShardRescued {
		t.Helper()
		rescued, err := db.Store.ShardRescue(ctx, store.ShardRescueParams{Now: at, Max: 100})
		require.NoError(t, err)
		return rescued
	}
	require.Empty(t, rescue(now.Add(time.Second)), "every holder alive, every lease running")

	dead.terminate(t, db.Store)
	require.Equal(t, []store.ShardRescued{{Key: "w:dead", HolderDied: true}}, rescue(now.Add(time.Second)),
		"the dead holder's shard, 29 s before its lease ends")
	s, err := db.Store.ShardGet(ctx, "w:dead")
	require.NoError(t, err)
	require.Equal(t, store.ShardPending, s.State)
	require.Zero(t, s.LivenessLock)
	require.ErrorIs(t, dead.st.ShardHeld(ctx, claims["w:dead"]), store.ErrShardLeaseLost, "the dead holder's late commit is fenced off")
	require.NoError(t, alive.st.ShardHeld(ctx, claims["w:alive"]))

	require.Empty(t, rescue(now.Add(lease-time.Millisecond)))
	require.ElementsMatch(t, []store.ShardRescued{{Key: "w:alive"}, {Key: "w:lease-only"}}, rescue(now.Add(lease)),
		"the lease stays the backstop")
}

// A claim made without a liveness lock is freed by its lease alone, also
// when no process holds a liveness lock at all (NULL NOT IN an empty set
// would be true).
func TestShardRescue_AClaimWithoutALivenessLockWaitsForItsLease(t *testing.T) {
	t.Parallel()
	st, now, _ := newClaimedShard(t)
	ctx := t.Context()
	var held int
	require.NoError(t, st.DB().QueryRow(ctx, `SELECT count(*) FROM ledgerq.liveness_locks`).Scan(&held))
	require.Zero(t, held, "no process holds a liveness lock in this database")
	rescued, err := st.ShardRescue(ctx, store.ShardRescueParams{Now: now.Add(time.Minute - time.Millisecond), Max: 100})
	require.NoError(t, err)
	require.Empty(t, rescued)
	rescued, err = st.ShardRescue(ctx, store.ShardRescueParams{Now: now.Add(time.Minute), Max: 100})
	require.NoError(t, err)
	require.Equal(t, []store.ShardRescued{{Key: "w:a"}}, rescued)
}

// A job's fenced commit (ShardFenced) keeps its claim from the rescuer but
// not from schedule(): a client storing a task for the wallet whose shard is
// running must set more_work without waiting for the run's commit, which can
// take as long as a round of chain answers takes to record. The release
// after the commit then sees the more_work the schedule set.
func TestShard_ScheduleDoesNotWaitForAFencedCommitButTheRescuerIsStillFencedOff(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	now := testfactory.Start()
	_, err := db.Store.ShardSchedule(ctx, store.ShardScheduleParams{Now: now, Key: "w:a"})
	require.NoError(t, err)
	c, err := db.Store.ShardClaim(ctx, store.ShardClaimParams{Now: now, Owner: "p/1", LeaseUntil: now.Add(time.Second), Kinds: []string{"w"}})
	require.NoError(t, err)

	inside, finish := make(chan struct{}), make(chan struct{})
	fenced := make(chan error, 1)
	var once sync.Once
	commit := func() { once.Do(func() { close(finish) }) }
	t.Cleanup(commit) // a failed check must not leave the transaction open
	go func() {
		fenced <- db.Store.ShardFenced(ctx, c, func(*store.Store) error {
			close(inside)
			<-finish
			return nil
		})
	}()
	<-inside
	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := db.Store.ShardSchedule(quick, store.ShardScheduleParams{Now: now, Key: "w:a"})
	require.NoError(t, err, "the schedule waited for the fenced commit")
	require.Equal(t, store.ShardMoreWork, res)
	rescued, err := db.Store.ShardRescue(quick, store.ShardRescueParams{Now: now.Add(time.Hour), Max: 10})
	require.NoError(t, err)
	require.Empty(t, rescued, "the rescuer took over a shard whose holder was committing")

	commit()
	require.NoError(t, <-fenced)
	state, err := db.Store.ShardRelease(ctx, store.ShardReleaseParams{Now: now, Claim: c})
	require.NoError(t, err)
	require.Equal(t, store.ShardPending, state, "the release sees the schedule's more_work")
}
