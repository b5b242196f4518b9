package node_test

// The batch lane end to end inside one node (Grid's one-round serial rule): the
// queuer, submitter and monitor the node wires, driven round by round with
// node.RunOnce and a fake clock, against the simulated ledger, whose event
// log witnesses what the ledger saw.

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// batchLaneNode is a node with the default settings on a database of its
// own, a fake clock and a simulated ledger the test inspects.
type batchLaneNode struct {
	t      *testing.T
	n      *node.Node
	clock  *clock.Fake
	ledger *sim.Ledger
	rows   *testfactory.Factory
	cfg    node.Config
}

// openBatchLaneNode opens the node; mutate changes the simulated ledger's
// settings (from the defaults) before it is made.
func openBatchLaneNode(t *testing.T, mutate func(*sim.Config)) *batchLaneNode {
	t.Helper()
	return openBatchLaneNodeWith(t, mutate, nil)
}

// openBatchLaneNodeWith is openBatchLaneNode with the node's settings
// changed by mutateNode (from the defaults) too.
func openBatchLaneNodeWith(t *testing.T, mutate func(*sim.Config), mutateNode func(*node.Config)) *batchLaneNode {
	t.Helper()
	db := testdb.New(t)
	clk := testfactory.NewClock()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := node.Defaults()
	cfg.DatabaseURL, cfg.Clock, cfg.Logger = db.URL, clk, logger
	if mutateNode != nil {
		mutateNode(&cfg)
	}
	simCfg := cfg.Batch.Ledger.Sim
	if mutate != nil {
		mutate(&simCfg)
	}
	l := node.NewSimLedger(simCfg, clk, logger)
	cfg.Batch.Ledger.Instance = l
	n, err := node.Open(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(n.Close)
	return &batchLaneNode{t: t, n: n, clock: clk, ledger: l, rows: testfactory.New(t, n.Store(), clk), cfg: cfg}
}

// runLane runs the node's rounds, moving the clock past the monitor's next
// check after each, until every batch is committed or invalid or the round
// budget is spent.
func (b *batchLaneNode) runLane(rounds int) {
	b.t.Helper()
	step := max(b.cfg.Batch.FirstCheck, b.cfg.Batch.CheckInterval)
	for range rounds {
		require.NoError(b.t, b.n.RunOnce(b.t.Context()))
		b.clock.Advance(step)
		if b.rows.AllFinal() {
			return
		}
	}
}

func (b *batchLaneNode) get(id string) store.Batch {
	b.t.Helper()
	return b.rows.Get(id)
}

func TestBatchLane_CommittedBatchUnblocksTheNextBatchOfItsService(t *testing.T) {
	t.Parallel()
	b := openBatchLaneNode(t, nil)
	ids := b.rows.PostBatches("a", 3)
	b.runLane(20)
	var accepted []string
	for _, e := range b.ledger.Events() {
		if e.Kind == sim.EventAccepted {
			accepted = append(accepted, e.BatchID)
		}
		if e.Kind == sim.EventCommitted {
			require.NotEmpty(t, accepted, "seq %d: batch %s committed before any batch was accepted", e.Seq, e.BatchID)
			require.Equal(t, accepted[len(accepted)-1], e.BatchID, "the batch committed is the one outstanding")
		}
	}
	require.Equal(t, ids, accepted, "sent one at a time, in created_at order")
	for _, id := range ids {
		require.Equal(t, store.BatchStatusCommitted, b.get(id).Status)
	}
}

func TestBatchLane_InvalidBatchUnblocksTheNextBatchOfItsService(t *testing.T) {
	t.Parallel()
	b := openBatchLaneNode(t, func(s *sim.Config) { s.RejectRate = 1 })
	ids := b.rows.PostBatches("a", 2)
	b.runLane(20)
	for _, id := range ids {
		got := b.get(id)
		require.Equal(t, store.BatchStatusInvalid, got.Status)
		require.Equal(t, sim.InvalidReason, got.LastError)
	}
}
