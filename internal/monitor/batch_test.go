package monitor_test

// BatchMonitor rules of the batch lane (Grid's one-round serial rule): what each
// status the ledger reports makes of a pending batch. Each test runs in a
// rolled-back transaction and calls the monitor's round with a fake clock.

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// batchSetup is what a BatchMonitor rule test needs.
type batchSetup struct {
	t     *testing.T
	st    *store.Store
	clock *clock.Fake
	rows  *testfactory.Factory
	cfg   batch.Config
	deps  loop.Deps
}

func setup(t *testing.T) *batchSetup {
	t.Helper()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	deps := loop.Deps{Clock: clk, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	return &batchSetup{
		t: t, st: st, clock: clk, rows: testfactory.New(t, st, clk), deps: deps,
		cfg: withRecordsInFlight(batch.Defaults(), 1), // a rule test reads a round's writes when it returns
	}
}

func withRecordsInFlight(c batch.Config, n int) batch.Config {
	c.RecordsInFlight = n
	return c
}

func (b *batchSetup) monitor(l ledger.BatchLedger) *monitor.BatchMonitor {
	return b.monitorWith(l, b.cfg)
}

func (b *batchSetup) monitorWith(l ledger.BatchLedger, cfg batch.Config) *monitor.BatchMonitor {
	b.t.Helper()
	m, err := monitor.NewBatchMonitor(b.st, l, b.deps, cfg)
	require.NoError(b.t, err)
	return m
}

// submitter is the lane's submitter with the default settings.
func (b *batchSetup) submitter(l ledger.BatchLedger) *submitter.BatchSubmitter {
	b.t.Helper()
	s, err := submitter.NewBatchSubmitter(b.st, l, b.deps, batch.Defaults())
	require.NoError(b.t, err)
	return s
}

func (b *batchSetup) get(id string) store.Batch { b.t.Helper(); return b.rows.Get(id) }

func (b *batchSetup) runOnce(name string, f func(context.Context) (int, error)) int {
	b.t.Helper()
	return b.rows.Run(name, f)
}

func pendingBatch(id string) testfactory.Batch {
	return testfactory.Batch{ID: id, ServiceID: "a", Submitted: true, Status: store.BatchStatusPending}
}

// reporting is a ledger that reports status (with reason) for batch id and
// knows no other batch.
func reporting(id string, status ledger.BatchStatus, reason string) *ledgertest.BatchLedger {
	l := &ledgertest.BatchLedger{}
	l.SetStatus(id, status, reason)
	return l
}

// roundOnPending puts the pending batch a1, runs one monitor round against
// l and returns how many batches the round handled and a1 as it left it.
func (b *batchSetup) roundOnPending(l ledger.BatchLedger) (int, store.Batch) {
	b.t.Helper()
	b.rows.PutBatches(pendingBatch("a1"))
	n := b.runOnce("monitor", b.monitor(l).RunOnce)
	return n, b.get("a1")
}

// submitOne posts one batch of service a and has a submitter with the
// default config send it to l, telling onAccepted what l accepted; it
// returns the batch's id.
func (b *batchSetup) submitOne(l ledger.BatchLedger, onAccepted func([]store.CheckBatch, time.Time) int) string {
	b.t.Helper()
	sub := b.submitter(l)
	sub.OnAccepted = onAccepted
	id := b.rows.PostBatches("a", 1)[0]
	require.Equal(b.t, 1, b.runOnce("submitter", sub.RunOnce))
	return id
}

func TestBatchMonitor_CommittedBecomesCommitted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n, got := b.roundOnPending(reporting("a1", ledger.BatchCommitted, ""))
	require.Equal(t, 1, n)
	require.Equal(t, store.BatchStatusCommitted, got.Status)
	require.NotNil(t, got.FinishedAt)
}

func TestBatchMonitor_InvalidBecomesInvalidWithTheLedgersReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, got := b.roundOnPending(reporting("a1", ledger.BatchInvalid, "txn 1: insufficient funds"))
	require.Equal(t, store.BatchStatusInvalid, got.Status)
	require.Equal(t, "txn 1: insufficient funds", got.LastError)
}

// Grid's one-round serial plan: "The monitor needs to update submitted to false
// when it sets the batch status to Unknown."
func TestBatchMonitor_UnknownBecomesUnknownWithSubmittedFalse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, got := b.roundOnPending(&ledgertest.BatchLedger{})
	require.Equal(t, store.BatchStatusUnknown, got.Status)
	require.False(t, got.Submitted)
	require.Equal(t, []string{"a1"}, b.rows.QueuedIDs(), "an unknown batch is queued again at once (step 3)")
}

func TestBatchMonitor_PendingStaysPendingAndIsAskedAgainAfterTheCheckInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(pendingBatch("a1"))
	m := b.monitor(reporting("a1", ledger.BatchPending, ""))
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	require.Equal(t, store.BatchStatusPending, b.get("a1").Status)
	require.Equal(t, 0, b.runOnce("monitor", m.RunOnce), "not due again yet")
	b.clock.Advance(b.cfg.CheckInterval)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
}

// A batch this process's submitter saw accepted is followed in memory: it
// stays held under the submitter's claim, unwritten, and the monitor asks
// about it at its first check without claiming it in the database. The
// claim's lease keeps other monitors off it until this process would have
// followed it up, which is the recovery path if the process dies.
func TestBatchMonitor_FollowsAcceptedBatchesInMemoryAndOthersStayOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := &ledgertest.BatchLedger{}
	m := b.monitor(l)
	d := batch.Defaults()
	id := b.submitOne(l, func(acc []store.CheckBatch, at time.Time) int { return m.Track(acc, at, d.FirstCheck) })
	held := b.get(id)
	require.True(t, held.Submitted)
	require.Equal(t, store.BatchStatusNone, held.Status, "accepted and followed: held, not written")
	require.NotNil(t, held.ClaimExpiresAt)
	stored := *held.ClaimExpiresAt
	require.Equal(t, b.clock.Now().Add(d.ClaimLease), stored)

	b.clock.Advance(d.FirstCheck)
	other := b.monitor(l) // another process: the database path only
	require.Zero(t, b.runOnce("other monitor", other.RunOnce), "the batch is followed elsewhere")

	// Still pending: asked from memory, nothing written.
	l.SetStatus(id, ledger.BatchPending, "")
	before := b.get(id).UpdatedAt
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	require.Equal(t, before, b.get(id).UpdatedAt, "a check from memory writes nothing")
	require.Zero(t, b.runOnce("monitor", m.RunOnce), "not due again before the check interval")

	// Pending for as long as the lease: it is written pending, once, with a
	// stored check time past the lease.
	for b.clock.Now().Before(stored.Add(-2 * d.CheckInterval)) {
		b.clock.Advance(d.CheckInterval)
		require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	}
	b.clock.Advance(d.CheckInterval)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	written := b.get(id)
	require.Equal(t, store.BatchStatusPending, written.Status)
	require.Nil(t, written.ClaimExpiresAt)
	require.True(t, written.NextCheckAt.After(stored), "the stored check time moved past the lease before it ran out")
	b.clock.Advance(d.CheckInterval)
	require.False(t, b.clock.Now().Before(stored), "past the lease")
	require.Zero(t, b.runOnce("other monitor", other.RunOnce))

	// Committed: recorded, and no longer followed.
	l.SetStatus(id, ledger.BatchCommitted, "")
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	require.Equal(t, store.BatchStatusCommitted, b.get(id).Status)
	b.clock.Advance(d.CheckInterval)
	require.Zero(t, b.runOnce("monitor", m.RunOnce))
}

// A followed batch the ledger answers for at once goes from held to its
// final status in one write, and frees its service for the next batch.
func TestBatchMonitor_AFollowedHeldBatchIsRecordedCommittedInOneWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := &ledgertest.BatchLedger{}
	m := b.monitor(l)
	d := batch.Defaults()
	id := b.submitOne(l, func(acc []store.CheckBatch, at time.Time) int { return m.Track(acc, at, d.FirstCheck) })
	next := b.rows.PostBatches("a", 1)[0]
	require.Empty(t, b.rows.QueuedIDs(), "the held batch keeps its service busy")
	l.SetStatus(id, ledger.BatchCommitted, "")
	b.clock.Advance(d.FirstCheck)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	got := b.get(id)
	require.Equal(t, store.BatchStatusCommitted, got.Status)
	require.Nil(t, got.ClaimExpiresAt)
	require.NotNil(t, got.FinishedAt)
	require.Equal(t, []string{next}, b.rows.QueuedIDs())
}

// If the process that followed a batch dies, the batch is not lost: once its
// claim's lease passes, any monitor claims it from the database.
func TestBatchMonitor_AFollowedBatchOfADeadProcessIsTakenOverWhenItsLeaseRunsOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := &ledgertest.BatchLedger{}
	d := batch.Defaults()
	id := b.submitOne(l, func(acc []store.CheckBatch, _ time.Time) int { return len(acc) }) // followed by a monitor that then dies
	l.SetStatus(id, ledger.BatchCommitted, "")

	other := b.monitor(l)
	b.clock.Advance(d.ClaimLease - time.Millisecond)
	require.Zero(t, b.runOnce("other monitor", other.RunOnce))
	b.clock.Advance(time.Millisecond)
	require.Equal(t, 1, b.runOnce("other monitor", other.RunOnce))
	require.Equal(t, store.BatchStatusCommitted, b.get(id).Status)
}

// A monitor follows at most TrackMax batches in memory; the submitter
// records the rest pending, for the database path.
func TestBatchMonitor_BatchesPastTrackMaxAreRecordedPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := &ledgertest.BatchLedger{}
	cfg := b.cfg
	cfg.TrackMax = 1
	m := b.monitorWith(l, cfg)
	d := batch.Defaults()
	sub := b.submitter(l)
	sub.OnAccepted = func(acc []store.CheckBatch, at time.Time) int { return m.Track(acc, at, d.FirstCheck) }
	ids := []string{b.rows.PostBatches("p", 1)[0], b.rows.PostBatches("q", 1)[0]}
	require.Equal(t, 2, b.runOnce("submitter", sub.RunOnce))
	var statuses []store.BatchStatus
	for _, id := range ids {
		statuses = append(statuses, b.get(id).Status)
	}
	require.ElementsMatch(t, []store.BatchStatus{store.BatchStatusNone, store.BatchStatusPending}, statuses,
		"one followed (held), one recorded pending")
}

// While batches followed in memory keep its rounds busy, the monitor claims
// in the database (batches of other processes, expired leases) at most once
// per check interval: the claim costs a statement per round, and the
// database's batches are due at that grain anyway.
func TestBatchMonitor_WhileFollowedBatchesKeepItBusyItClaimsFromTheDatabaseOncePerCheckInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := &ledgertest.BatchLedger{}
	m := b.monitor(l)
	t0 := b.clock.Now()
	b.rows.PutBatches(
		testfactory.Batch{ID: "f1", ServiceID: "f", Submitted: true, Status: store.BatchStatusPending},
		testfactory.Batch{ID: "g1", ServiceID: "g", Submitted: true, Status: store.BatchStatusPending},
	)
	stored := t0.Add(time.Hour)
	_, err := b.st.DB().Exec(t.Context(), `UPDATE ledgerq.batches SET next_check_at = $1`, stored)
	require.NoError(t, err)
	l.SetStatus("f1", ledger.BatchPending, "")
	l.SetStatus("g1", ledger.BatchPending, "")
	follow := func(id string, after time.Duration) {
		got := b.get(id)
		m.Track([]store.CheckBatch{{Seq: got.Seq, ID: id, ServiceID: got.ServiceID, Attempt: got.Attempts}}, stored, after)
	}
	follow("f1", 0)
	follow("g1", 10*time.Millisecond)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce), "f1, from memory")

	// Another process's batch comes due in the database.
	b.rows.PutBatches(testfactory.Batch{ID: "x1", ServiceID: "x", Submitted: true, Status: store.BatchStatusPending})
	_, err = b.st.DB().Exec(t.Context(), `UPDATE ledgerq.batches SET next_check_at = $1 WHERE status = 'pending' AND service_id = 'x'`, t0.Add(5*time.Millisecond))
	require.NoError(t, err)
	l.SetStatus("x1", ledger.BatchCommitted, "")
	b.clock.Advance(10 * time.Millisecond)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce), "g1, from memory; the database was asked 10ms ago")
	require.Equal(t, store.BatchStatusPending, b.get("x1").Status)

	b.clock.Set(t0.Add(b.cfg.CheckInterval))
	require.Equal(t, 2, b.runOnce("monitor", m.RunOnce), "f1 from memory, x1 from the database")
	require.Equal(t, store.BatchStatusCommitted, b.get("x1").Status)
}

// A stopping process hands over the batches its monitor follows in memory:
// written pending and due at once, so that any monitor checks them now
// instead of when the claim's lease runs out.
func TestBatchMonitor_ReleaseWritesTheFollowedBatchesPendingAndDueNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := &ledgertest.BatchLedger{}
	m := b.monitor(l)
	d := batch.Defaults()
	id := b.submitOne(l, func(acc []store.CheckBatch, at time.Time) int { return m.Track(acc, at, d.FirstCheck) })
	require.Equal(t, store.BatchStatusNone, b.get(id).Status, "held, followed")
	m.Release(t.Context())
	got := b.get(id)
	require.Equal(t, store.BatchStatusPending, got.Status)
	require.Nil(t, got.ClaimExpiresAt)
	require.Equal(t, b.clock.Now(), *got.NextCheckAt)

	l.SetStatus(id, ledger.BatchCommitted, "")
	require.Equal(t, 1, b.runOnce("another monitor", b.monitor(l).RunOnce), "due at once from the database")
	require.Equal(t, store.BatchStatusCommitted, b.get(id).Status)
	require.Zero(t, b.runOnce("monitor", m.RunOnce), "no longer followed by the stopped one")
}

// With two records in flight a round returns while its record commits, so
// the next round asks the ledger meanwhile; Wait waits for the records, and
// a record's error is the next round's, so that the loop backs off.
func TestBatchMonitor_ARoundsRecordRunsBesideTheNextAndItsErrorIsTheNextRounds(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	clk := testfactory.NewClock()
	rows := testfactory.New(t, db.Store, clk)
	deps := loop.Deps{Clock: clk, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	cfg := withRecordsInFlight(batch.Defaults(), 2)
	cfg.CheckBatchSize = 1
	l := &ledgertest.BatchLedger{}
	var ids []string
	for _, svc := range []string{"a", "b", "c"} {
		id := svc + "1"
		rows.PutBatches(testfactory.Batch{ID: id, ServiceID: svc, Submitted: true, Status: store.BatchStatusPending})
		l.SetStatus(id, ledger.BatchCommitted, "")
		ids = append(ids, id)
	}
	next := rows.PostBatches("a", 1)
	m, err := monitor.NewBatchMonitor(db.Store, l, deps, cfg)
	require.NoError(t, err)
	queued := make(chan struct{}, 3)
	m.OnQueued = func() { queued <- struct{}{} }
	for range ids {
		n, err := m.RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	require.NoError(t, m.Wait())
	for _, id := range ids {
		require.Equal(t, store.BatchStatusCommitted, rows.Get(id).Status, "batch %s", id)
	}
	require.Equal(t, next, rows.QueuedIDs(), "a's next batch admitted by its record")
	require.Len(t, queued, 1)

	// A record that fails: its error is Wait's (a cron run's round ends
	// with it) or, in a loop, the next round's, once.
	_, err = db.Store.Conns().Exec(t.Context(), `ALTER TABLE ledgerq.batches ADD CONSTRAINT no_commits CHECK (status IS DISTINCT FROM 'committed') NOT VALID`)
	require.NoError(t, err)
	fails := func(id string) {
		rows.PutBatches(testfactory.Batch{ID: id, ServiceID: id[:1], Submitted: true, Status: store.BatchStatusPending})
		l.SetStatus(id, ledger.BatchCommitted, "")
		n, err := m.RunOnce(t.Context())
		require.NoError(t, err, "the record runs apart")
		require.Equal(t, 1, n)
	}
	fails("d1")
	require.ErrorContains(t, m.Wait(), "no_commits")
	require.Equal(t, store.BatchStatusPending, rows.Get("d1").Status)

	fails("e1")
	require.Eventually(t, func() bool {
		_, err = m.RunOnce(t.Context())
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "no round returned the record's error")
	require.ErrorContains(t, err, "no_commits")
	require.NoError(t, m.Wait(), "the error is reported once")
}
