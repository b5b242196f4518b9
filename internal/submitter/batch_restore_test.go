package submitter_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// setupOn is setup on a committed database (a restore test backs it up with
// pg_dump, which sees no rolled-back transaction).
func setupOn(t *testing.T, st *store.Store, b *batchSetup) *batchSetup {
	t.Helper()
	out := *b
	out.st = st
	out.rows = testfactory.New(t, st, b.clock)
	q, err := queuer.NewBatchQueuer(st, b.deps, b.cfg)
	require.NoError(t, err)
	out.q = q
	return &out
}

// A restore behind the ledger, batch lane: the database is backed up while
// batches are queued (not yet sent) and new, the lane sends them and the
// ledger commits them, then the older copy is restored and the lane runs on
// it. The restored lane sends them again; the ledger holds each batch id
// once and answers COMMITTED for it, so every batch ends committed, none
// invalid, and the ledger committed each exactly once. Run on the simulated
// ledger in-process and through the Sawtooth REST adapter against its
// server.
func TestBatchRestoreBehindTheLedgerEndsCommittedNotInvalid(t *testing.T) {
	for _, via := range []string{"sim", "sawtooth-rest"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t)
			b := setupOn(t, db.Store, setup(t))
			simLedger := sim.New(sim.Config{Seed: 1, Clock: b.clock, CommitDelay: 500 * time.Millisecond})
			var l ledger.BatchLedger = simLedger
			if via == "sawtooth-rest" {
				srv := httptest.NewServer(sim.NewServer(simLedger, nil))
				t.Cleanup(srv.Close)
				c, err := sawtooth.NewClient(srv.URL, srv.Client(), nil)
				require.NoError(t, err)
				l = c
			}
			ids := append(b.rows.PostBatches("a", 3), b.rows.PostBatches("b", 1)...)
			b.queue()
			queued := b.rows.QueuedIDs()
			require.Len(t, queued, 2, "the first batch of each service is queued")
			dump := testdb.Dump(t, db.URL)

			b.runLane(l, 20)
			for _, id := range ids {
				require.Equal(t, store.BatchStatusCommitted, b.get(id).Status)
			}
			before := simLedger.Stats()
			require.EqualValues(t, len(ids), before.Committed)

			r := setupOn(t, testdb.Restore(t, dump).Store, b)
			for _, id := range queued {
				got := r.get(id)
				require.Empty(t, got.Status, "queued in the backup: never sent as far as it knows")
				require.False(t, got.Submitted)
			}
			r.runLane(l, 20)
			for _, id := range ids {
				got := r.get(id)
				require.Equal(t, store.BatchStatusCommitted, got.Status, "batch %s: %s", id, got.LastError)
			}
			after := simLedger.Stats()
			t.Logf("ledger: accepted %d, duplicates %d, committed %d, invalid %d", after.Accepted, after.Duplicates, after.Committed, after.Invalid)
			require.EqualValues(t, len(ids), after.Accepted, "the ledger took each batch once")
			require.EqualValues(t, len(ids), after.Committed, "the ledger committed each batch once")
			require.Zero(t, after.Invalid)
			require.EqualValues(t, len(ids), after.Duplicates-before.Duplicates, "the restored lane sent each batch again")
			committed := map[string]int{}
			for _, e := range simLedger.Events() {
				if e.Kind == sim.EventCommitted {
					committed[e.BatchID]++
				}
			}
			for _, id := range ids {
				require.Equal(t, 1, committed[id], "batch %s committed once on the ledger", id)
			}
		})
	}
}
