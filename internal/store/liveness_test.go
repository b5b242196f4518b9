package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
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
