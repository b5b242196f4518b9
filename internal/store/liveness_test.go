package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// livenessProcess is one ledgerq process as the database sees it: a store
// of its own (its pool) and its liveness lock, held.
type livenessProcess struct {
	st       *store.Store
	liveness *store.Liveness
	lock     int32
}

func newLivenessProcess(t *testing.T, db *testdb.DB) livenessProcess {
	t.Helper()
	st, err := store.Open(t.Context(), db.URL)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	l, err := st.NewLiveness(store.LivenessConfig{}, nil)
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	require.NoError(t, l.RunOnce(t.Context()))
	id, ok := l.Held()
	require.True(t, ok, "the lock is held after the first round")
	return livenessProcess{st: st, liveness: l, lock: id}
}

// livenessLockPid returns the backend holding liveness lock id, per
// ledgerq.liveness_locks, or ErrNoRows when none holds it.
func livenessLockPid(ctx context.Context, st *store.Store, id int32) (int32, error) {
	var pid int32
	err := st.DB().QueryRow(ctx, `SELECT pid FROM ledgerq.liveness_locks WHERE lock = $1`, id).Scan(&pid)
	return pid, err
}

// terminate ends the backend of p's liveness connection, as a crash of the
// process or a cut connection would, and returns once it is gone.
func (p livenessProcess) terminate(t *testing.T, admin *store.Store) {
	t.Helper()
	pid, err := livenessLockPid(t.Context(), admin, p.lock)
	require.NoError(t, err)
	var gone bool
	require.NoError(t, admin.DB().QueryRow(t.Context(), `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&gone))
	require.True(t, gone)
	_, err = livenessLockPid(t.Context(), admin, p.lock)
	require.ErrorIs(t, err, pgx.ErrNoRows, "the lock went with its session")
}

// awaitReleased polls until no session holds liveness lock id: a closed
// connection's backend ends soon after, not at once.
func awaitReleased(t *testing.T, st *store.Store, id int32) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := livenessLockPid(t.Context(), st, id)
		return err == pgx.ErrNoRows
	}, 10*time.Second, 5*time.Millisecond)
}

func TestLiveness_HoldsALockOfItsOwnAndTakesItAgainWhenItsConnectionDies(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	a, b := newLivenessProcess(t, db), newLivenessProcess(t, db)
	require.NotEqual(t, a.lock, b.lock, "each process has its own lock")
	require.Positive(t, a.lock)
	before, err := livenessLockPid(t.Context(), db.Store, a.lock)
	require.NoError(t, err, "ledgerq.liveness_locks lists it")

	a.terminate(t, db.Store)
	require.NoError(t, a.liveness.RunOnce(t.Context()), "the next check finds the connection lost and replaces it")
	id, ok := a.liveness.Held()
	require.True(t, ok)
	require.Equal(t, a.lock, id, "the id it held, free again, is taken first")
	after, err := livenessLockPid(t.Context(), db.Store, a.lock)
	require.NoError(t, err)
	require.NotEqual(t, before, after, "on a new connection")

	a.liveness.Stop()
	_, ok = a.liveness.Held()
	require.False(t, ok, "Stop releases the lock")
	awaitReleased(t, db.Store, a.lock)
	a.liveness.Stop() // twice is fine

	_, err = a.st.NewLiveness(store.LivenessConfig{}, nil)
	require.Error(t, err, "a store has one liveness")
	_, err = testdb.NewTx(t).NewLiveness(store.LivenessConfig{}, nil)
	require.Error(t, err, "a store bound to a transaction is no process")
}

// A dead deliverer lets go at once: a delivery claimed by a process whose
// liveness connection then closed is claimed again, same id, at the next
// claim, with its lease still running; one held by a live process is not.
// A delivery whose failure was recorded is no longer in flight: it waits for
// its retry time even after its last deliverer died.
func TestWebhookDeliveryClaim_DeliveryOfADeadDelivererIsClaimedAgainBeforeItsLease(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	now := testfactory.Start()
	lease := time.Minute
	dead, alive := newLivenessProcess(t, db), newLivenessProcess(t, db)
	testfactory.New(t, db.Store, testfactory.NewClock()).CreateWebhookEndpoint(testfactory.WebhookEndpoint{Wallet: "alpha"})
	_, err := db.Store.WebhookEmit(ctx, now, taskEvent("alpha", store.WebhookSubmitted, "t1"), taskEvent("alpha", store.WebhookConfirmed, "t1"))
	require.NoError(t, err)
	claim := func(p livenessProcess, at time.Time) []store.WebhookDelivery {
		t.Helper()
		ds, err := p.st.WebhookDeliveryClaim(ctx, store.WebhookDeliveryClaimParams{Now: at, LeaseUntil: at.Add(lease), Max: 1})
		require.NoError(t, err)
		return ds
	}
	byDead, byAlive := claim(dead, now), claim(alive, now)
	require.Len(t, byDead, 1)
	require.Len(t, byAlive, 1)
	for _, c := range []struct {
		d    store.WebhookDelivery
		lock int32
	}{{byDead[0], dead.lock}, {byAlive[0], alive.lock}} {
		got, err := db.Store.WebhookDeliveryGet(ctx, c.d.ID)
		require.NoError(t, err)
		require.Equal(t, c.lock, got.LivenessLock, "the claim records its process's liveness lock")
	}
	require.Empty(t, claim(alive, now.Add(time.Second)), "both deliverers alive, both leases running")

	dead.liveness.Stop() // closes its connection
	awaitReleased(t, db.Store, dead.lock)
	again := claim(alive, now.Add(time.Second))
	require.Len(t, again, 1, "the dead deliverer's delivery, 59 s before its lease ends")
	require.Equal(t, byDead[0].ID, again[0].ID, "with the same webhook-id")
	require.Equal(t, 2, again[0].Attempt)
	require.Empty(t, claim(alive, now.Add(time.Second)), "the live deliverer's own stays with it")

	// The live deliverer records a failure: the row waits for its retry
	// time, whoever claimed it last.
	retryAt := now.Add(10 * time.Second)
	ok, err := alive.st.WebhookDeliveryMarkFailed(ctx, store.WebhookDeliveryMarkFailedParams{
		Now: now.Add(time.Second), ID: again[0].ID, Attempt: again[0].Attempt, Error: "HTTP 500", Status: 500, NextAttemptAt: retryAt,
	})
	require.NoError(t, err)
	require.True(t, ok)
	got, err := db.Store.WebhookDeliveryGet(ctx, again[0].ID)
	require.NoError(t, err)
	require.Zero(t, got.LivenessLock, "no longer in flight")
	alive.terminate(t, db.Store)
	late := newLivenessProcess(t, db)
	ds := claim(late, now.Add(2*time.Second))
	require.Len(t, ds, 1, "the other delivery of the process that died")
	require.Equal(t, byAlive[0].ID, ds[0].ID)
	require.Empty(t, claim(late, retryAt.Add(-time.Millisecond)), "the failed one waits for its retry time")
	require.Len(t, claim(late, retryAt), 1)
}
