package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// Issue 8, defect 5: when PostgreSQL picks the submitter's outcome
// transaction as a deadlock victim, the store runs it again, so the batches
// the ledger accepted do not stay held until their lease expires. The
// deadlock is made on purpose with a transaction that locks the rows in the
// other order (as an operator's SQL might).
func TestBatchRecordSubmit_ADeadlockVictimIsRunAgain(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	clk := testfactory.NewClock()
	rows := testfactory.New(t, db.Store, clk)
	deadlocksBefore := databaseDeadlocks(t, db)
	// PostgreSQL aborts the transaction whose deadlock check finds the
	// cycle: the outcome transaction's, if the other transaction begins to
	// wait within deadlock_timeout of it. On a machine too busy for that,
	// the other transaction is the victim; the scenario then runs again on
	// new batches.
	for try := 1; ; try++ {
		if victim := deadlockOutcomeTransaction(t, ctx, db, rows, try); victim == "outcome" {
			require.Equal(t, deadlocksBefore+int64(try), databaseDeadlocks(t, db), "PostgreSQL broke one deadlock per try")
			return
		}
		require.Less(t, try, 5, "the outcome transaction was never the deadlock victim")
	}
}

// deadlockOutcomeTransaction makes BatchRecordSubmit deadlock with a
// transaction that locks its two batches in the other order, as an
// operator's SQL might, and checks that the outcomes are recorded. It
// returns which transaction PostgreSQL aborted.
func deadlockOutcomeTransaction(t *testing.T, ctx context.Context, db *testdb.DB, rows *testfactory.Factory, try int) (victim string) {
	t.Helper()
	now := testfactory.Start()
	a, b := fmt.Sprintf("a%d", try), fmt.Sprintf("b%d", try)
	rows.PutBatches(
		testfactory.Batch{ID: a, ServiceID: "sa", Submitted: true, Attempts: 1, LastSubmittedAt: now, ClaimExpiresAt: now.Add(time.Minute)},
		testfactory.Batch{ID: b, ServiceID: "sb", Submitted: true, Attempts: 1, LastSubmittedAt: now, ClaimExpiresAt: now.Add(time.Minute)},
	)
	// The rows are locked in key order: a's seq is the smaller.
	seqA, seqB := rows.Get(a).Seq, rows.Get(b).Seq

	// The other transaction holds b.
	other, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer other.Close(context.Background())
	otherTx, err := other.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = otherTx.Rollback(context.Background()) }()
	_, err = otherTx.Exec(ctx, `UPDATE ledgerq.batches SET updated_at = updated_at WHERE seq = $1`, seqB)
	require.NoError(t, err)

	// The outcome transaction locks a, then waits for b.
	type result struct {
		rec store.BatchRecorded
		err error
	}
	done := make(chan result, 1)
	go func() {
		rec, err := db.Store.BatchRecordSubmit(ctx, store.BatchRecordSubmitParams{
			Now: now, NextCheckAt: now.Add(time.Second),
			Outcomes: []store.SubmitOutcome{
				{Seq: seqA, Attempt: 1, Result: store.SubmitAccepted},
				{Seq: seqB, Attempt: 1, Result: store.SubmitAccepted},
			},
		})
		done <- result{rec, err}
	}()
	waitForLockWait(t, ctx, db, "BatchRecordSubmitMany")

	// The other transaction now waits for a: a cycle. When the outcome
	// transaction is the victim, the other one gets a and commits, which
	// frees b for the outcome transaction's second run.
	_, err = otherTx.Exec(ctx, `UPDATE ledgerq.batches SET updated_at = updated_at WHERE seq = $1`, seqA)
	if isDeadlock(err) {
		t.Logf("try %d: the other transaction was the deadlock victim", try)
		require.NoError(t, otherTx.Rollback(ctx))
		require.NoError(t, (<-done).err)
		return "other"
	}
	require.NoError(t, err)
	require.NoError(t, otherTx.Commit(ctx))

	res := <-done
	require.NoError(t, res.err, "the deadlock victim is run again")
	require.Equal(t, 2, res.rec.Applied)
	for _, id := range []string{a, b} {
		got, err := db.Store.BatchGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, store.BatchStatusPending, got.Status, "batch %s", id)
		require.Nil(t, got.ClaimExpiresAt, "batch %s is no longer held", id)
	}
	return "outcome"
}

func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// waitForLockWait waits until a statement whose text contains name waits
// for a lock in the test's database.
func waitForLockWait(t *testing.T, ctx context.Context, db *testdb.DB, name string) {
	t.Helper()
	for {
		var waiting bool
		err := db.Store.DB().QueryRow(ctx, `
			SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			               WHERE datname = current_database() AND wait_event_type = 'Lock'
			                 AND strpos(query, $1) > 0 AND pid <> pg_backend_pid())`, name).Scan(&waiting)
		require.NoError(t, err)
		if waiting {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never waited for a lock: %v", name, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
