package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// A round's outcomes are one statement over up to a full round of rows
// (500 batches here, as --submit-batch-size 500 sends). Its cost must grow
// with the rows it records, not with their square: a plan that reaches the
// updated rows by probing the whole round's seq list once per row (a nested
// loop over the locked rows whose inner index scan is `seq = ANY(…)`) costs
// about a thousand buffer hits a row at 500 rows and made whole bench runs
// four times slower. The planner picks such a plan when it expects the
// locked rows to be one or two, which the join with the unnested outcomes
// makes it expect; this test sets up that case and executes both statements
// under EXPLAIN ANALYZE.
func TestQueries_ARoundsOutcomesCostTheSameForEachOfItsRows(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	t0 := testfactory.Start()
	const rows = 500
	// 10 000 batches: the first half held by a submitter, the second half
	// pending at the ledger, every one in its first attempt.
	_, err := db.Store.DB().Exec(ctx, `
		WITH b AS (
		INSERT INTO ledgerq.batches (service_id, created_at, submitted, status, claim_expires_at,
			attempts, last_submitted_at, next_check_at, received_at, updated_at)
		SELECT 'svc-' || g, $1::timestamptz, true, CASE WHEN g > 5000 THEN 'pending'::ledgerq.batch_status END,
			CASE WHEN g <= 5000 THEN $1::timestamptz + interval '1 minute' END, 1, $1,
			CASE WHEN g > 5000 THEN $1 END, $1, $1
		FROM generate_series(1, 10000) g
		RETURNING seq, service_id
		)
		INSERT INTO ledgerq.batch_payloads (seq, id, service_id, payload)
		SELECT b.seq, b.service_id, b.service_id, '\x00' FROM b`, t0)
	require.NoError(t, err)
	_, err = db.Store.DB().Exec(ctx, `ANALYZE ledgerq.batches, ledgerq.batch_payloads`)
	require.NoError(t, err)

	seqsWhere := func(cond string) []int64 {
		var seqs []int64
		require.NoError(t, db.Store.DB().QueryRow(ctx,
			`SELECT array_agg(seq ORDER BY seq) FROM (SELECT seq FROM ledgerq.batches WHERE `+cond+` ORDER BY seq LIMIT $1) s`,
			rows).Scan(&seqs))
		require.Len(t, seqs, rows)
		return seqs
	}
	repeat := func(v string) []string {
		out := make([]string, rows)
		for i := range out {
			out[i] = v
		}
		return out
	}
	ones := make([]int32, rows)
	for i := range ones {
		ones[i] = 1
	}
	generated := generatedSQL(t)
	cases := []struct {
		query string
		args  []any
	}{
		// $1 next_check_at, $2 now, $3 seqs, $4 attempts, $5 results, $6 reasons.
		{"BatchRecordSubmitMany", []any{t0.Add(time.Second), t0, seqsWhere("status IS NULL"), ones, repeat("accepted"), repeat("")}},
		// $1 now, $2 next_check_at, $3 seqs, $4 attempts, $5 statuses, $6 reasons.
		{"BatchRecordStatusMany", []any{t0, t0.Add(time.Second), seqsWhere("status = 'pending'"), ones, repeat("committed"), repeat("")}},
	}
	for _, c := range cases {
		sql, ok := generated[c.query]
		require.True(t, ok, "query %s not found in the generated code", c.query)
		tx, err := db.Store.DB().Begin(ctx)
		require.NoError(t, err)
		var out []byte
		err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, c.args...).Scan(&out)
		require.NoError(t, tx.Rollback(ctx))
		require.NoError(t, err, c.query)
		var plan []struct {
			ExecutionTime float64 `json:"Execution Time"`
			Plan          struct {
				ActualRows      int64 `json:"Actual Rows"`
				SharedHitBlocks int64 `json:"Shared Hit Blocks"`
				SharedReadBlock int64 `json:"Shared Read Blocks"`
			} `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal(out, &plan))
		require.Len(t, plan, 1)
		p := plan[0].Plan
		t.Logf("%s over %d rows: %d rows updated, %d buffers hit, %d read, %.1f ms", c.query, rows, p.ActualRows,
			p.SharedHitBlocks, p.SharedReadBlock, plan[0].ExecutionTime)
		require.EqualValues(t, rows, p.ActualRows, "%s updated the wrong number of rows", c.query)
		// A row's update touches its heap page and each index's pages: tens
		// of buffers, not hundreds.
		perRow := (p.SharedHitBlocks + p.SharedReadBlock) / rows
		require.Less(t, perRow, int64(60),
			"%s touched %d buffers a row over %d rows: its plan probes the round once per row:\n%s", c.query, perRow, rows, out)
	}
}
