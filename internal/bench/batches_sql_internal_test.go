package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// A transaction of several services' batches takes their admission locks
// in the lane's order (BatchServiceLock: by hashtext of the service), so it
// never waits in a cycle with a lane transaction that holds the lower key
// and then asks for the higher: the chunk is given higher first, and the
// lane's transaction still gets its second lock and commits, and the chunk
// is stored after it. Submitted in the chunk's order instead, PostgreSQL
// finds the cycle and aborts one of the two (40P01).
func TestBatchSQLIntake_SubmitsInTheLanesLockOrder(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	var batches []store.NewBatch
	for _, service := range []string{"svc-a", "svc-b"} {
		signer, err := sawtooth.GenerateSigner()
		require.NoError(t, err)
		id, payload, err := signer.NewBatch([]byte(service))
		require.NoError(t, err)
		batches = append(batches, store.NewBatch{ID: id, ServiceID: service, Payload: payload})
	}
	in, err := newBatchSQLIntake(ctx, db.URL, 1, batches)
	require.NoError(t, err)
	defer in.close()
	low, high := batches[0], batches[1]
	if in.lockKey[low.ServiceID] > in.lockKey[high.ServiceID] {
		low, high = high, low
	}

	lane, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer lane.Close(context.Background())
	tx, err := lane.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	const lockSQL = `SELECT pg_advisory_xact_lock(1818585457, hashtext($1))::text`
	_, err = tx.Exec(ctx, lockSQL, low.ServiceID)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- in.submit(ctx, []store.NewBatch{high, low}) }()
	// The chunk's transaction waits for a lock the lane holds.
	require.Eventually(t, func() bool {
		var waiting int
		_ = db.Store.DB().QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
			WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted`).Scan(&waiting)
		return waiting > 0
	}, 10*time.Second, 5*time.Millisecond, "the chunk's transaction never waited for the lane's lock")

	_, err = tx.Exec(ctx, lockSQL, high.ServiceID)
	require.NoError(t, err, "the lane takes its second lock")
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-done, "the chunk is stored after the lane's commit")
	require.EqualValues(t, 1, in.transactions.Load())
}
