package monitor_test

// BatchMonitor rules of the batch lane (seed 001, DESIGN §2.1): what each
// status the ledger reports makes of a pending batch. Each test runs in a
// rolled-back transaction and calls the monitor's round with a fake clock.

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
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
	cfg   monitor.BatchConfig
	deps  loop.Deps
	q     *queuer.BatchQueuer
}

func setup(t *testing.T) *batchSetup {
	t.Helper()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	d := node.Defaults()
	deps := loop.Deps{Clock: clk, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	return &batchSetup{
		t: t, st: st, clock: clk, rows: testfactory.New(t, st, clk), deps: deps,
		cfg: d.BatchMonitorConfig(),
		q:   queuer.NewBatchQueuer(st, deps, d.BatchQueuerConfig()),
	}
}

func (b *batchSetup) monitor(l ledger.BatchLedger) *monitor.BatchMonitor {
	return monitor.NewBatchMonitor(b.st, l, b.deps, b.cfg)
}

func (b *batchSetup) queue() []string { b.t.Helper(); return b.rows.Queue(b.q.RunOnce) }

func (b *batchSetup) get(id string) store.Batch { b.t.Helper(); return b.rows.Get(id) }

func (b *batchSetup) runOnce(name string, f func(context.Context) (int, error)) int {
	b.t.Helper()
	return b.rows.Run(name, f)
}

func pendingBatch(id string) testfactory.Batch {
	return testfactory.Batch{ID: id, ServiceID: "a", Submitted: true, Status: store.BatchStatusPending}
}

func TestBatchMonitor_CommittedBecomesCommitted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(pendingBatch("a1"))
	l := &ledgertest.BatchLedger{}
	l.SetStatus("a1", ledger.BatchCommitted, "")
	require.Equal(t, 1, b.runOnce("monitor", b.monitor(l).RunOnce))
	got := b.get("a1")
	require.Equal(t, store.BatchStatusCommitted, got.Status)
	require.NotNil(t, got.FinishedAt)
}

func TestBatchMonitor_InvalidBecomesInvalidWithTheLedgersReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(pendingBatch("a1"))
	l := &ledgertest.BatchLedger{}
	l.SetStatus("a1", ledger.BatchInvalid, "txn 1: insufficient funds")
	b.runOnce("monitor", b.monitor(l).RunOnce)
	got := b.get("a1")
	require.Equal(t, store.BatchStatusInvalid, got.Status)
	require.Equal(t, "txn 1: insufficient funds", got.LastError)
}

// Seed 001: "The monitor needs to update submitted to false when it sets the
// batch status to Unknown."
func TestBatchMonitor_UnknownBecomesUnknownWithSubmittedFalse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(pendingBatch("a1"))
	b.runOnce("monitor", b.monitor(&ledgertest.BatchLedger{}).RunOnce)
	got := b.get("a1")
	require.Equal(t, store.BatchStatusUnknown, got.Status)
	require.False(t, got.Submitted)
	require.Equal(t, []string{"a1"}, b.queue())
}

func TestBatchMonitor_PendingStaysPendingAndIsAskedAgainAfterTheCheckInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows.PutBatches(pendingBatch("a1"))
	l := &ledgertest.BatchLedger{}
	l.SetStatus("a1", ledger.BatchPending, "")
	m := b.monitor(l)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	require.Equal(t, store.BatchStatusPending, b.get("a1").Status)
	require.Equal(t, 0, b.runOnce("monitor", m.RunOnce), "not due again yet")
	b.clock.Advance(b.cfg.CheckInterval)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
}
