package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func TestShards_ScheduleOnARunningShardSetsMoreWorkAndReleaseRequeuesIt(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	res, err := st.ShardSchedule(ctx, store.ShardScheduleParams{Now: now, Key: "w:a"})
	require.NoError(t, err)
	require.Equal(t, store.ShardQueued, res)
	c, err := st.ShardClaim(ctx, store.ShardClaimParams{Now: now, Owner: "p/1", LeaseUntil: now.Add(time.Minute), Kinds: []string{"w"}})
	require.NoError(t, err)
	for range 2 {
		res, err = st.ShardSchedule(ctx, store.ShardScheduleParams{Now: now, Key: "w:a"})
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

func TestShards_ReleaseByANonOwnerOrAnOlderRunChangesNothing(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	_, err := st.ShardSchedule(ctx, store.ShardScheduleParams{Now: now, Key: "w:a"})
	require.NoError(t, err)
	c, err := st.ShardClaim(ctx, store.ShardClaimParams{Now: now, Owner: "p/1", LeaseUntil: now.Add(time.Minute), Kinds: []string{"w"}})
	require.NoError(t, err)
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

func TestShards_ClaimSkipsOtherKindsAndShardsInBackoff(t *testing.T) {
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

func TestShards_TableRefusesImpossibleStates(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	for name, sql := range map[string]string{
		"pending without a queue position": `INSERT INTO ledgerq.shards (key, state, created_at, updated_at) VALUES ('w:a', 'pending', now(), now())`,
		"running without a lease":          `INSERT INTO ledgerq.shards (key, state, owner, run, claimed_at, created_at, updated_at) VALUES ('w:a', 'running', 'p', 1, now(), now(), now())`,
		"idle with an owner":               `INSERT INTO ledgerq.shards (key, state, owner, created_at, updated_at) VALUES ('w:a', 'idle', 'p', now(), now())`,
		"idle with more work":              `INSERT INTO ledgerq.shards (key, state, more_work, created_at, updated_at) VALUES ('w:a', 'idle', true, now(), now())`,
		"a key without a kind":             `INSERT INTO ledgerq.shards (key, state, created_at, updated_at) VALUES ('nokind', 'idle', now(), now())`,
		"running never claimed":            `INSERT INTO ledgerq.shards (key, state, owner, claimed_at, lease_expires_at, created_at, updated_at) VALUES ('w:a', 'running', 'p', now(), now(), now(), now())`,
	} {
		_, err := st.DB().Exec(ctx, "SAVEPOINT s")
		require.NoError(t, err)
		_, err = st.DB().Exec(ctx, sql)
		require.Error(t, err, name)
		_, err = st.DB().Exec(ctx, "ROLLBACK TO SAVEPOINT s")
		require.NoError(t, err)
	}
}
