package queuer_test

// One test per row of the "Queue now", "Queue later" and "Don't queue" lists of
// Grid's one-round serial queuer and per step 1-6 of its algorithm, plus the
// held-batch exclusion that closes a gap in Grid's plan. Each runs in a
// rolled-back transaction, drives time with the fake clock and calls the
// BatchQueuer's round directly.

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// batchSetup is what a BatchQueuer rule test needs.
type batchSetup struct {
	t     *testing.T
	st    *store.Store
	clock *clock.Fake
	t0    time.Time // the clock's start
	rows  *testfactory.Factory
	cfg   batch.Config
	q     *queuer.BatchQueuer
}

// defaultBatchConfig is the batch lane's default configuration, as a
// BatchQueuer built with a zero Config has it.
func defaultBatchConfig() batch.Config { return batch.Config{}.WithDefaults() }

func setup(t *testing.T) *batchSetup {
	t.Helper()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	cfg := defaultBatchConfig()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	q, err := queuer.NewBatchQueuer(st, loop.Deps{Clock: clk, Logger: logger}, batch.Config{})
	require.NoError(t, err)
	return &batchSetup{t: t, st: st, clock: clk, t0: clk.Now(), rows: testfactory.New(t, st, clk), cfg: cfg, q: q}
}

func (b *batchSetup) queue() []string { b.t.Helper(); return b.rows.Queue(b.q.RunOnce) }

func (b *batchSetup) get(id string) store.Batch { b.t.Helper(); return b.rows.Get(id) }

// The delay window of Grid's one-round serial queuer is 15 s; ledgerq doubles
// it per attempt up to a cap of 5 minutes. The tests below use the configured
// values; this one pins the defaults to Grid's.
func TestBatchQueuer_DefaultDelayWindowIsGrids15SecondsCappedAt5Minutes(t *testing.T) {
	t.Parallel()
	cfg := defaultBatchConfig()
	require.Equal(t, 15*time.Second, cfg.DelayWindow)
	require.Equal(t, 5*time.Minute, cfg.DelayCap)
}

// Queue now: {submitted = false, batch_status = None}, no pending, unknown or
// delayed batch with this service_id.
func TestBatchQueuer_QueuesNowANewBatchWithNoBusyBatchInItsService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(testfactory.Batch{ID: "a1", ServiceID: "a"})
	require.Equal(t, []string{"a1"}, b.queue())
	got := b.get("a1")
	require.NotNil(t, got.QueuedAt)
	require.Equal(t, b.t0, *got.QueuedAt)
	require.False(t, got.Submitted)
}

// Queue now: {submitted = false, batch_status = Unknown}.
func TestBatchQueuer_QueuesNowAnUnknownBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(testfactory.Batch{ID: "a1", ServiceID: "a", Status: store.BatchStatusUnknown, LastSubmittedAt: b.t0})
	require.Equal(t, []string{"a1"}, b.queue(), "unknown is queued at once, with no delay window")
}

// Queue now: {submitted = false, batch_status = Delayed, last_submitted_at <= now - 15 s}.
func TestBatchQueuer_QueuesNowADelayedBatchOutsideTheDelayWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(testfactory.Batch{ID: "a1", ServiceID: "a", Status: store.BatchStatusDelayed, Attempts: 1,
		LastSubmittedAt: b.t0.Add(-b.cfg.DelayWindow)})
	require.Equal(t, []string{"a1"}, b.queue())
}

// Queue later: {submitted = false, batch_status = Delayed, last_submitted_at > now - 15 s}.
func TestBatchQueuer_QueuesLaterADelayedBatchInsideTheDelayWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(testfactory.Batch{ID: "a1", ServiceID: "a", Status: store.BatchStatusDelayed, Attempts: 1,
		LastSubmittedAt: b.t0.Add(-b.cfg.DelayWindow + time.Second)})
	require.Empty(t, b.queue())
	b.clock.Advance(time.Second)
	require.Equal(t, []string{"a1"}, b.queue(), "queued once the window has passed")
}

// Queue later: {submitted = false, batch_status = None, service_id = (service
// of a pending, unknown or delayed batch)}.
func TestBatchQueuer_QueuesLaterANewBatchOfAServiceWithAPendingUnknownOrDelayedBatch(t *testing.T) {
	t.Parallel()
	start := testfactory.Start()
	for _, busy := range []testfactory.Batch{
		{ID: "a0", ServiceID: "a", Submitted: true, Status: store.BatchStatusPending},
		{ID: "a0", ServiceID: "a", Status: store.BatchStatusUnknown, Queued: true},
		{ID: "a0", ServiceID: "a", Status: store.BatchStatusDelayed, LastSubmittedAt: start},
	} {
		t.Run(string(busy.Status), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			busy.CreatedAt = b.t0.Add(-2 * time.Hour)
			b.rows.PutBatches(busy, testfactory.Batch{ID: "a1", ServiceID: "a"})
			require.NotContains(t, b.queue(), "a1")
			require.Nil(t, b.get("a1").QueuedAt)
		})
	}
}

// Don't queue: {submitted = true, batch_status = Pending}.
func TestBatchQueuer_DoesNotQueueASubmittedPendingBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(testfactory.Batch{ID: "a1", ServiceID: "a", Submitted: true, Status: store.BatchStatusPending})
	require.Empty(t, b.queue())
}

// Don't queue: {submitted = true, batch_status = Invalid | Valid | Committed}.
func TestBatchQueuer_DoesNotQueueASubmittedInvalidValidOrCommittedBatch(t *testing.T) {
	t.Parallel()
	for _, status := range []store.BatchStatus{store.BatchStatusInvalid, store.BatchStatusValid, store.BatchStatusCommitted} {
		t.Run(string(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.rows.PutBatches(testfactory.Batch{ID: "a1", ServiceID: "a", Submitted: true, Status: status})
			require.Empty(t, b.queue())
			require.Nil(t, b.get("a1").QueuedAt)
		})
	}
}

// Don't queue: {submitted = true, batch_status = None}: the submitter has it.
func TestBatchQueuer_DoesNotQueueABatchBeingSubmitted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(testfactory.Batch{ID: "a1", ServiceID: "a", Submitted: true, Attempts: 1, LastSubmittedAt: b.t0,
		ClaimExpiresAt: b.t0.Add(time.Minute)})
	require.Empty(t, b.queue())
}

// The held-batch rule: a service whose batch the submitter holds gets nothing
// queued; step 6 of Grid's one-round serial plan would queue the next one,
// breaking seriality.
func TestBatchQueuer_ServiceWithHeldBatchIsNotQueued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(
		testfactory.Batch{ID: "a1", ServiceID: "a", CreatedAt: b.t0.Add(-2 * time.Hour), Submitted: true, Attempts: 1,
			LastSubmittedAt: b.t0, ClaimExpiresAt: b.t0.Add(time.Minute)},
		testfactory.Batch{ID: "a2", ServiceID: "a"},
		testfactory.Batch{ID: "b1", ServiceID: "b"},
	)
	require.Equal(t, []string{"b1"}, b.queue())
}

// Step 1: batches with status Committed, Valid or Invalid are left out; they
// are never queued and do not hold their service back.
func TestBatchQueuer_Step1_TerminalBatchesAreLeftOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(
		testfactory.Batch{ID: "a1", ServiceID: "a", CreatedAt: b.t0.Add(-3 * time.Hour), Submitted: true, Status: store.BatchStatusCommitted},
		testfactory.Batch{ID: "a2", ServiceID: "a", CreatedAt: b.t0.Add(-2 * time.Hour), Submitted: true, Status: store.BatchStatusValid},
		testfactory.Batch{ID: "a3", ServiceID: "a", CreatedAt: b.t0.Add(-90 * time.Minute), Submitted: true, Status: store.BatchStatusInvalid},
		testfactory.Batch{ID: "a4", ServiceID: "a"},
	)
	require.Equal(t, []string{"a4"}, b.queue())
}

// Step 2: the round builds one queue and marks exactly it: what the round
// returns is what is now queued, and a second round adds nothing.
func TestBatchQueuer_Step2_TheRoundMarksExactlyTheQueueItBuilt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(
		testfactory.Batch{ID: "a1", ServiceID: "a"},
		testfactory.Batch{ID: "b1", ServiceID: "b", Status: store.BatchStatusUnknown},
		testfactory.Batch{ID: "c1", ServiceID: "c", Status: store.BatchStatusDelayed, LastSubmittedAt: b.t0.Add(-time.Hour)},
		testfactory.Batch{ID: "d1", ServiceID: "d", Submitted: true, Status: store.BatchStatusPending},
	)
	require.Equal(t, []string{"a1", "b1", "c1"}, b.queue())
	for _, id := range []string{"a1", "b1", "c1"} {
		require.NotNil(t, b.get(id).QueuedAt, id)
	}
	require.Nil(t, b.get("d1").QueuedAt)
	require.Empty(t, b.queue(), "an already queued batch is not queued again")
}

// Step 3: every Unknown batch is queued, whatever its service.
func TestBatchQueuer_Step3_EveryUnknownBatchIsQueued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(
		testfactory.Batch{ID: "a1", ServiceID: "a", Status: store.BatchStatusUnknown},
		testfactory.Batch{ID: "b1", ServiceID: "b", Status: store.BatchStatusUnknown},
		testfactory.Batch{ID: "b2", ServiceID: "b"}, // waits: its service has an unknown batch
	)
	require.Equal(t, []string{"a1", "b1"}, b.queue())
}

// Step 4: Delayed batches are queued only outside the delay window, which
// grows with attempts (15 s, 30 s, 60 s, …) up to its cap.
func TestBatchQueuer_Step4_DelayedBatchesWaitOutADelayWindowThatGrowsWithAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	window, limit := b.cfg.DelayWindow, b.cfg.DelayCap
	require.Greater(t, limit, 4*window, "the cap is reached after the third attempt")
	b.rows.PutBatches(
		testfactory.Batch{ID: "a1", ServiceID: "a", Status: store.BatchStatusDelayed, Attempts: 1, LastSubmittedAt: b.t0},
		testfactory.Batch{ID: "b1", ServiceID: "b", Status: store.BatchStatusDelayed, Attempts: 2, LastSubmittedAt: b.t0},
		testfactory.Batch{ID: "c1", ServiceID: "c", Status: store.BatchStatusDelayed, Attempts: 3, LastSubmittedAt: b.t0},
		testfactory.Batch{ID: "d1", ServiceID: "d", Status: store.BatchStatusDelayed, Attempts: 60, LastSubmittedAt: b.t0},
	)
	require.Empty(t, b.queue())
	b.clock.Advance(window)
	require.Equal(t, []string{"a1"}, b.queue())
	b.clock.Advance(window)
	require.Equal(t, []string{"b1"}, b.queue())
	b.clock.Advance(2 * window)
	require.Equal(t, []string{"c1"}, b.queue())
	b.clock.Set(b.t0.Add(limit - time.Second))
	require.Empty(t, b.queue())
	b.clock.Set(b.t0.Add(limit))
	require.Equal(t, []string{"d1"}, b.queue(), "the window is capped")
}

// Step 5: services with a Pending, Unknown or Delayed batch get no new batch.
func TestBatchQueuer_Step5_ServicesWithPendingUnknownOrDelayedBatchesAreExcluded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.t0.Add(-2 * time.Hour)
	b.rows.PutBatches(
		testfactory.Batch{ID: "p0", ServiceID: "p", CreatedAt: old, Submitted: true, Status: store.BatchStatusPending},
		testfactory.Batch{ID: "p1", ServiceID: "p"},
		testfactory.Batch{ID: "u0", ServiceID: "u", CreatedAt: old, Status: store.BatchStatusUnknown, Queued: true},
		testfactory.Batch{ID: "u1", ServiceID: "u"},
		testfactory.Batch{ID: "d0", ServiceID: "d", CreatedAt: old, Status: store.BatchStatusDelayed, LastSubmittedAt: b.t0},
		testfactory.Batch{ID: "d1", ServiceID: "d"},
		testfactory.Batch{ID: "z1", ServiceID: "z"},
	)
	require.Equal(t, []string{"z1"}, b.queue())
}

// Step 6: for each remaining service, its batch with the oldest created_at is
// queued, and only that one.
func TestBatchQueuer_Step6_OldestBatchOfEachServiceIsQueued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(
		testfactory.Batch{ID: "a-newer", ServiceID: "a", CreatedAt: b.t0.Add(-time.Minute)},
		testfactory.Batch{ID: "a-oldest", ServiceID: "a", CreatedAt: b.t0.Add(-time.Hour)},
		testfactory.Batch{ID: "z-middle", ServiceID: "a", CreatedAt: b.t0.Add(-30 * time.Minute)},
		testfactory.Batch{ID: "b-only", ServiceID: "b", CreatedAt: b.t0.Add(-time.Second)},
	)
	require.Equal(t, []string{"a-oldest", "b-only"}, b.queue())
}

// Step 6: when several batches share the oldest created_at, the first by
// batch header (id) wins, so queuing is deterministic.
func TestBatchQueuer_Step6_TieOnCreatedAtIsBrokenByHeader(t *testing.T) {
	t.Parallel()
	b := setup(t)
	same := b.t0.Add(-time.Hour)
	b.rows.PutBatches(
		testfactory.Batch{ID: "c", ServiceID: "s", CreatedAt: same},
		testfactory.Batch{ID: "a", ServiceID: "s", CreatedAt: same},
		testfactory.Batch{ID: "b", ServiceID: "s", CreatedAt: same},
	)
	require.Equal(t, []string{"a"}, b.queue())
}
