package store_test

// The batch lane's rules that the database itself keeps: the CHECK
// constraints that refuse states the batch lane's rules rule out, and the
// operators' view.

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// The table refuses states the lane's rules say cannot exist.
func TestBatchTable_RefusesStatesTheLaneRulesOut(t *testing.T) {
	t.Parallel()
	_, clk, rows := txRows(t)
	t0 := clk.Now()
	for name, r := range map[string]testfactory.Batch{
		"pending but not submitted":       {ID: "x1", Status: store.BatchStatusPending},
		"held without a lease":            {ID: "x2", Submitted: true, Attempts: 1, LastSubmittedAt: t0},
		"lease on a batch nobody holds":   {ID: "x3", ClaimExpiresAt: t0},
		"queued while held":               {ID: "x4", Submitted: true, Queued: true, Attempts: 1, LastSubmittedAt: t0, ClaimExpiresAt: t0},
		"queued while pending":            {ID: "x5", Submitted: true, Status: store.BatchStatusPending, Queued: true},
		"queued after it was committed":   {ID: "x6", Submitted: true, Status: store.BatchStatusCommitted, Queued: true},
		"lease on a committed batch":      {ID: "x7", Submitted: true, Status: store.BatchStatusCommitted, ClaimExpiresAt: t0},
		"unknown but submitted, no lease": {ID: "x8", Submitted: true, Status: store.BatchStatusUnknown},
	} {
		err := rows.InsertBatch(t.Context(), r)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: stored, want a CHECK violation (err %v)", name, err)
		require.Equal(t, "23514", pgErr.Code, "%s: %v", name, err)
	}
}

func TestBatchOverview_CountsBatchesPerServiceAndStateWithTheOldestWaiting(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	t0 := clk.Now()
	testfactory.New(t, st, clk).PutBatches(
		testfactory.Batch{ID: "a1", ServiceID: "a", CreatedAt: t0.Add(-3 * time.Hour), Submitted: true, Status: store.BatchStatusCommitted},
		testfactory.Batch{ID: "a2", ServiceID: "a", CreatedAt: t0.Add(-2 * time.Hour), Submitted: true, Status: store.BatchStatusPending},
		testfactory.Batch{ID: "a3", ServiceID: "a", CreatedAt: t0.Add(-time.Hour)},
		testfactory.Batch{ID: "a4", ServiceID: "a", CreatedAt: t0.Add(-time.Minute)},
		testfactory.Batch{ID: "b1", ServiceID: "b", Queued: true},
	)
	rows, err := st.DB().Query(t.Context(), `SELECT service_id, state, batches, coalesce(oldest_waiting_id, '') FROM ledgerq.batch_overview ORDER BY 1, 2`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var svc, state, oldest string
		var n int
		require.NoError(t, rows.Scan(&svc, &state, &n, &oldest))
		got = append(got, fmt.Sprintf("%s/%s=%d:%s", svc, state, n, oldest))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"a/committed=1:", "a/new=2:a3", "a/pending=1:a2", "b/queued=1:b1"}, got)
}

// A time the API could not read back ('infinity', written by an operator's
// SQL) is refused by the table, in every time column.
func TestBatchTable_RefusesInfiniteTimes(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	testfactory.New(t, st, clk).PutBatches(testfactory.Batch{ID: "f1", ServiceID: "s"})
	for _, col := range []string{"created_at", "received_at", "updated_at", "queued_at", "next_check_at", "last_submitted_at"} {
		for _, v := range []string{"infinity", "-infinity"} {
			err := execUndone(t, st, `UPDATE ledgerq.batches SET `+col+` = '`+v+`' WHERE seq = (SELECT seq FROM ledgerq.batch_payloads WHERE id = 'f1')`)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "%s = %s: stored, want a CHECK violation (err %v)", col, v, err)
			require.Equal(t, "batches_times_finite", pgErr.ConstraintName, "%s = %s: %v", col, v, err)
		}
	}
}
