package monitor_test

// BatchRetention rules (the batch lane's retention rule): terminal batches
// older than the age are deleted, a few at a time; nothing else ever is. Rule
// tests run in a rolled-back transaction with a fake clock; testfactory stamps
// finished_at with the clock's now, so a row's age is how far the clock moved
// since.

import (
	"context"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// retentionSetup is what a BatchRetention rule test needs.
type retentionSetup struct {
	t       *testing.T
	st      *store.Store
	clock   *clock.Fake
	rows    *testfactory.Factory
	metrics *metrics.Metrics
	deps    loop.Deps
	cfg     monitor.RetentionConfig
}

func retentionSetupTx(t *testing.T) *retentionSetup {
	t.Helper()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	m := metrics.New()
	return &retentionSetup{
		t: t, st: st, clock: clk, rows: testfactory.New(t, st, clk), metrics: m,
		deps: loop.Deps{
			Clock: clk, Metrics: m,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		},
		cfg: monitor.RetentionConfig{Interval: time.Minute, DBTimeout: 10 * time.Second, Age: 24 * time.Hour, BatchSize: 100},
	}
}

func (r *retentionSetup) retention() *monitor.Retention { return r.batchRetention(r.st) }

// batchRetention is the batch lane's retention on st with r.cfg's settings.
func (r *retentionSetup) batchRetention(st *store.Store) *monitor.Retention {
	r.t.Helper()
	deps := r.deps
	deps.DBTimeout = r.cfg.DBTimeout
	ret, err := monitor.NewBatchRetention(st, deps, batch.Config{
		RetentionAge: r.cfg.Age, RetentionBatchSize: r.cfg.BatchSize, RetentionInterval: r.cfg.Interval,
	})
	require.NoError(r.t, err)
	return ret
}

func (r *retentionSetup) runOnce() int {
	r.t.Helper()
	return r.rows.Run("retention", r.retention().RunOnce)
}

// ids returns the ids of every batch in the table, sorted.
func (r *retentionSetup) ids() []string {
	r.t.Helper()
	all, err := r.st.BatchList(r.t.Context(), store.BatchListParams{Limit: 10000})
	require.NoError(r.t, err)
	ids := make([]string, len(all))
	for i, b := range all {
		ids[i] = b.ID
	}
	slices.Sort(ids)
	return ids
}

// deletedCount reads ledgerq_transitions_total{lane="batch",outcome="deleted"}.
func (r *retentionSetup) deletedCount() float64 {
	r.t.Helper()
	families, err := r.metrics.Registry().Gather()
	require.NoError(r.t, err)
	for _, f := range families {
		if f.GetName() != "ledgerq_transitions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["lane"] == "batch" && labels["outcome"] == "deleted" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func terminal(id string, st store.BatchStatus) testfactory.Batch {
	return testfactory.Batch{ID: id, Submitted: true, Status: st}
}

// nonTerminal is one batch in each state that is not final: never sent, queued,
// held by a submitter, at the ledger, unknown, delayed.
func nonTerminal(clk clock.Clock) []testfactory.Batch {
	return []testfactory.Batch{
		{ID: "new", ServiceID: "new"},
		{ID: "queued", ServiceID: "queued", Queued: true},
		{ID: "held", ServiceID: "held", Submitted: true, ClaimExpiresAt: clk.Now().Add(time.Minute)},
		{ID: "pending", ServiceID: "pending", Submitted: true, Status: store.BatchStatusPending},
		{ID: "unknown", ServiceID: "unknown", Status: store.BatchStatusUnknown},
		{ID: "delayed", ServiceID: "delayed", Status: store.BatchStatusDelayed},
	}
}

func TestBatchRetention_TerminalBatchesOlderThanTheAgeAreDeletedYoungerOnesKept(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	r.rows.PutBatches(
		terminal("old-committed", store.BatchStatusCommitted),
		terminal("old-valid", store.BatchStatusValid),
		terminal("old-invalid", store.BatchStatusInvalid),
	)
	r.clock.Advance(time.Second)
	r.rows.PutBatches(terminal("exactly-age", store.BatchStatusCommitted))
	r.clock.Advance(r.cfg.Age)
	r.rows.PutBatches(terminal("young", store.BatchStatusInvalid))

	require.Equal(t, 3, r.runOnce(), "the three batches finished more than the age ago")
	require.Equal(t, []string{"exactly-age", "young"}, r.ids(), "a batch finished exactly the age ago is kept")
	require.Equal(t, 3.0, r.deletedCount(), "deleted batches are counted as transitions")
	require.Equal(t, 0, r.runOnce())
}

func TestBatchRetention_NonTerminalBatchesAreKeptWhateverTheirAge(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	waiting := nonTerminal(r.clock)
	r.rows.PutBatches(waiting...)
	// A terminal batch as old as they are shows the round did run.
	r.rows.PutBatches(terminal("done", store.BatchStatusCommitted))
	r.clock.Advance(1000 * r.cfg.Age)

	require.Equal(t, 1, r.runOnce())
	var want []string
	for _, b := range waiting {
		want = append(want, b.ID)
	}
	slices.Sort(want)
	require.Equal(t, want, r.ids())
}

func TestBatchRetention_DeletesAtMostBatchSizePerRoundOldestFirst(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	r.cfg.BatchSize = 2
	for _, id := range []string{"d1", "d2", "d3", "d4", "d5"} {
		r.rows.PutBatches(terminal(id, store.BatchStatusCommitted))
		r.clock.Advance(time.Minute)
	}
	r.clock.Advance(r.cfg.Age)

	require.Equal(t, 2, r.runOnce())
	require.Equal(t, []string{"d3", "d4", "d5"}, r.ids(), "the oldest go first")
	require.Equal(t, 2, r.runOnce())
	require.Equal(t, []string{"d5"}, r.ids())
	require.Equal(t, 1, r.runOnce())
	require.Empty(t, r.ids())
	require.Equal(t, 0, r.runOnce())
	require.Equal(t, 5.0, r.deletedCount())
}

// The service asks for its next round at once while rounds delete a full
// BatchSize, and waits for the interval after a partial one.
func TestBatchRetention_AFullRoundIsFollowedAtOnceAndAPartialOneWaits(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	r.cfg.BatchSize = 2
	r.cfg.Interval = time.Hour
	for _, id := range []string{"d1", "d2", "d3", "d4", "d5"} {
		r.rows.PutBatches(terminal(id, store.BatchStatusCommitted))
	}
	r.clock.Advance(2 * r.cfg.Age)
	rounds := make(chan float64, 10)
	r.deps.Logger = slog.New(roundSignal{rounds})
	svc := r.retention()
	require.NoError(t, svc.Start(t.Context()))
	t.Cleanup(svc.Stop) // before the test's transaction is rolled back
	for i, want := range []float64{2, 2, 1} {
		select {
		case got := <-rounds:
			require.Equal(t, want, got, "round %d", i+1)
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d did not follow at once", i+1)
		}
	}
	select {
	case got := <-rounds:
		t.Fatalf("a round deleted %v after the backlog was cleared", got)
	case <-time.After(100 * time.Millisecond):
	}
	// Stop waits for a round in flight, so a fourth round started at once
	// (it would delete nothing and log nothing) is counted here.
	svc.Stop()
	require.EqualValues(t, 3, svc.Rounds(), "a partial round (1 of 2) waits for the interval")
	require.Empty(t, r.ids())
}

// roundSignal is a slog handler that sends the count of every "deleted" log
// record: the test's signal that a round deleted rows.
type roundSignal struct{ counts chan<- float64 }

func (roundSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h roundSignal) Handle(_ context.Context, rec slog.Record) error {
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "count" {
			h.counts <- float64(a.Value.Int64())
		}
		return true
	})
	return nil
}
func (h roundSignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h roundSignal) WithGroup(string) slog.Handler      { return h }

func TestBatchRetention_AgeZeroIsOffAndNeverTouchesTheDatabase(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	r.rows.PutBatches(terminal("done", store.BatchStatusCommitted))
	r.clock.Advance(1000 * 24 * time.Hour)
	r.cfg.Age = 0
	require.Equal(t, 0, r.runOnce())
	require.Equal(t, []string{"done"}, r.ids())

	// A store whose database cannot be reached: with Age 0 the round still
	// succeeds, so it never sent a statement; with an age it fails.
	unreachable, err := store.Open(t.Context(), "postgres://ledgerq@127.0.0.1:1/none?connect_timeout=2&sslmode=disable")
	require.NoError(t, err)
	t.Cleanup(unreachable.Close)
	off := r.batchRetention(unreachable)
	n, err := off.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)
	r.cfg.Age = time.Hour
	_, err = r.batchRetention(unreachable).RunOnce(t.Context())
	require.Error(t, err, "the control: a round with an age does reach for the database")
}

// deleteFinishedSQL returns the statement sqlc generated for
// BatchDeleteFinished: what the store really sends. It is read from the
// generated source, since only the store may import that package.
func deleteFinishedSQL(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../store/internal/dbsqlc/batches.sql.go")
	require.NoError(t, err, "run sqlc generate")
	m := regexp.MustCompile("(?s)const batchDeleteFinished = `-- name: BatchDeleteFinished :execrows\\n(.*?)`").FindSubmatch(src)
	require.NotNil(t, m, "BatchDeleteFinished not found in the generated code")
	return string(m[1])
}

// A retention round reads the rows it deletes through the partial index on
// finished_at and never scans the table, however many batches are waiting or
// were kept. The check runs at the round sizes a deployment would use.
func TestBatchRetention_DeleteIsIndexDrivenAndNeverScansTheTable(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	t0 := testfactory.Start()
	// 60 000 waiting batches (new, pending, delayed), 20 000 terminal ones a
	// week old and 20 000 finished an hour ago; the cutoff is a day ago.
	// State rows only: the delete's cascade to batch_payloads is not in its
	// plan.
	_, err := db.Store.DB().Exec(ctx, `
		INSERT INTO ledgerq.batches (service_id, created_at, submitted, status, attempts,
			last_submitted_at, next_check_at, received_at, updated_at)
		SELECT 'svc-' || (g % 1000), $1::timestamptz, g % 3 = 1,
			(ARRAY[NULL, 'pending', 'delayed'])[g % 3 + 1]::ledgerq.batch_status,
			CASE WHEN g % 3 = 0 THEN 0 ELSE 1 END,
			CASE WHEN g % 3 = 0 THEN NULL ELSE $1::timestamptz END,
			CASE WHEN g % 3 = 1 THEN $1::timestamptz END,
			$1::timestamptz, $1::timestamptz
		FROM generate_series(1, 60000) g`, t0)
	require.NoError(t, err)
	_, err = db.Store.DB().Exec(ctx, `
		INSERT INTO ledgerq.batches (service_id, created_at, submitted, status, attempts,
			last_submitted_at, finished_at, received_at, updated_at)
		SELECT 'svc-' || (g % 1000), $1::timestamptz, true, 'committed', 1,
			$1::timestamptz, f, f, f
		FROM generate_series(1, 40000) g,
			LATERAL (SELECT $1::timestamptz - CASE WHEN g % 2 = 0 THEN interval '7 days' ELSE interval '1 hour' END AS f) x`, t0)
	require.NoError(t, err)
	_, err = db.Store.DB().Exec(ctx, `ANALYZE ledgerq.batches`)
	require.NoError(t, err)

	sql := deleteFinishedSQL(t)
	for _, max := range []int{100, 1000, 10000} {
		rows, err := db.Store.DB().Query(ctx, "EXPLAIN "+sql, t0.Add(-24*time.Hour), max)
		require.NoError(t, err)
		var plan []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan = append(plan, line)
		}
		require.NoError(t, rows.Err())
		text := strings.Join(plan, "\n")
		t.Logf("EXPLAIN BatchDeleteFinished, max %d:\n%s", max, text)
		require.Contains(t, text, "batches_finished", "max %d: the rows to delete are found through the retention index", max)
		require.NotContains(t, text, "Seq Scan", "max %d: the delete scans a table", max)
	}
}
