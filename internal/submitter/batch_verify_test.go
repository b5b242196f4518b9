package submitter_test

// Batches stored through ledgerq.submit_batch (unverified): the submitter
// checks their signatures before sending, side by side within a round, and
// once per batch however often it is sent; a batch whose check failed is
// invalid, unsent, and keeps its flag.

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// checks counts the signature checks of a submitter, per batch id, and
// runs the real one.
type checks struct {
	mu sync.Mutex
	n  map[string]int
}

func countChecks(s *submitter.BatchSubmitter) *checks {
	c := &checks{n: map[string]int{}}
	submitter.SetCheck(s, func(id string, payload []byte) error {
		c.mu.Lock()
		c.n[id]++
		c.mu.Unlock()
		return sawtooth.CheckBatchForID(id, payload)
	})
	return c
}

func (c *checks) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// markUnverified makes the batches as ledgerq.submit_batch stores them.
func (b *batchSetup) markUnverified(ids ...string) {
	b.t.Helper()
	_, err := b.st.DB().Exec(b.t.Context(), `UPDATE ledgerq.batch_payloads SET unverified = true WHERE id = ANY($1)`, ids)
	require.NoError(b.t, err)
}

func (b *batchSetup) unverified(id string) bool {
	b.t.Helper()
	var u bool
	require.NoError(b.t, b.st.DB().QueryRow(b.t.Context(), `SELECT unverified FROM ledgerq.batch_payloads WHERE id = $1`, id).Scan(&u))
	return u
}

// A delayed batch is sent again after the delay window: its check, recorded
// with the delay, is not run again.
func TestBatchSubmitter_ASQLStoredBatchSentAgainAfterADelayIsNotCheckedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.rows.PostBatches("a", 1)[0]
	b.markUnverified(id)
	calls := 0
	l := &ledgertest.BatchLedger{Submit: func(ids []string) ([]error, error) {
		calls++
		if calls == 1 {
			return nil, ledger.NewError(ledger.Transient, "busy", nil)
		}
		return make([]error, len(ids)), nil
	}}
	s := b.submitter(l)
	c := countChecks(s)
	b.queue()
	require.Equal(t, 1, b.runOnce("submitter", s.RunOnce))
	require.Equal(t, store.BatchStatusDelayed, b.get(id).Status)
	require.Equal(t, 1, c.of(id))
	require.False(t, b.unverified(id), "cleared with the delay")

	b.clock.Advance(b.cfg.DelayWindow)
	b.queue()
	require.Equal(t, 1, b.runOnce("submitter", s.RunOnce))
	require.Equal(t, store.BatchStatusPending, b.get(id).Status)
	require.Equal(t, [][]string{{id}, {id}}, l.SubmitCalls())
	require.Equal(t, 1, c.of(id), "sent twice, checked once")
}

// A batch a monitor of the process follows in memory is not written when it
// is accepted; when the ledger then does not know it, the monitor's record
// clears the flag with the unknown status, and the batch is sent again
// without another check.
func TestBatchSubmitter_AFollowedSQLStoredBatchTheLedgerLostIsSentAgainWithoutAnotherCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.rows.PostBatches("a", 1)[0]
	b.markUnverified(id)
	l := &ledgertest.BatchLedger{} // accepts everything, knows nothing: UNKNOWN
	s, m := b.submitter(l), b.monitor(l)
	s.OnAccepted = func(acc []store.CheckBatch, leaseUntil time.Time) int {
		return m.Track(acc, leaseUntil, b.cfg.FirstCheck)
	}
	c := countChecks(s)
	b.queue()
	require.Equal(t, 1, b.runOnce("submitter", s.RunOnce))
	require.True(t, b.unverified(id), "followed: nothing written yet")
	b.clock.Advance(b.cfg.FirstCheck)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	require.Equal(t, store.BatchStatusUnknown, b.get(id).Status)
	require.False(t, b.unverified(id), "cleared with the unknown status")

	require.Equal(t, 1, b.runOnce("submitter", s.RunOnce))
	require.Equal(t, [][]string{{id}, {id}}, l.SubmitCalls())
	require.Equal(t, 1, c.of(id), "sent twice, checked once")
	l.SetStatus(id, ledger.BatchCommitted, "")
	b.clock.Advance(b.cfg.FirstCheck)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	require.Equal(t, store.BatchStatusCommitted, b.get(id).Status)
}

// A process that checked a batch and died before recording anything loses
// only the check: the flag is still set, and the batch, found unknown after
// its lease, is checked again before it is sent again.
func TestBatchSubmitterCrash_ABatchCheckedAndNeverRecordedIsCheckedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.rows.PostBatches("a", 1)[0]
	b.markUnverified(id)
	l := &ledgertest.BatchLedger{}
	s := b.submitter(l)
	// A monitor of the process takes the batch and the process dies.
	s.OnAccepted = func(acc []store.CheckBatch, _ time.Time) int { return len(acc) }
	c := countChecks(s)
	b.queue()
	require.Equal(t, 1, b.runOnce("submitter", s.RunOnce))
	require.Equal(t, 1, c.of(id))

	b.clock.Advance(b.cfg.ClaimLease)
	require.Equal(t, 1, b.runOnce("monitor", b.monitor(l).RunOnce))
	require.Equal(t, store.BatchStatusUnknown, b.get(id).Status)
	require.True(t, b.unverified(id), "no record of the check survived")

	again := b.submitter(l)
	c2 := countChecks(again)
	require.Equal(t, 1, b.runOnce("submitter", again.RunOnce))
	require.Equal(t, 1, c2.of(id), "checked again")
	require.Equal(t, store.BatchStatusPending, b.get(id).Status)
	require.False(t, b.unverified(id))
}

// The checks of a round run side by side (each of four waits until all four
// have begun, which checks one at a time never reach), and a batch that fails
// among batches that pass ends invalid with its reason, unsent and still
// unverified, while the others go out in one ledger call in the order they
// were claimed.
func TestBatchSubmitter_ChecksARoundsBatchesSideBySideAndSendsThoseThatPassInClaimOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.VerifyWorkers = 4
	handed, lease := b.claimFour()
	ids := make([]string, len(handed))
	for i := range handed {
		handed[i].Unverified = true
		ids[i] = handed[i].ID
	}
	b.markUnverified(ids...)
	handed[1].Payload = []byte("not a batch") // as sent: it fails its check
	l := &ledgertest.BatchLedger{}
	s := b.submitter(l)
	var (
		mu      sync.Mutex
		begun   int
		allHere = make(chan struct{})
	)
	submitter.SetCheck(s, func(id string, payload []byte) error {
		mu.Lock()
		if begun++; begun == len(handed) {
			close(allHere)
		}
		mu.Unlock()
		select {
		case <-allHere:
		case <-time.After(10 * time.Second): // only a failing run waits this long
			t.Errorf("check of %s: the round's other checks did not begin beside it", id)
		}
		return sawtooth.CheckBatchForID(id, payload)
	})
	s.Hand(handed, lease)
	require.Equal(t, 4, b.runOnce("submitter", s.RunOnce))
	require.Equal(t, [][]string{{ids[0], ids[2], ids[3]}}, l.SubmitCalls())
	got := b.get(ids[1])
	require.Equal(t, store.BatchStatusInvalid, got.Status)
	require.Contains(t, got.LastError, "malformed batch")
	require.True(t, b.unverified(ids[1]), "a batch that failed its check keeps its flag")
	for _, id := range []string{ids[0], ids[2], ids[3]} {
		require.Equal(t, store.BatchStatusPending, b.get(id).Status, id)
		require.False(t, b.unverified(id), id)
	}
}

// The whole lane on the simulated ledger, every batch stored unverified and
// checked four at a time: one whose bytes fail ends invalid with its reason,
// its service goes on, every other batch commits in its service's order,
// and each batch is checked once.
func TestBatchLane_SQLStoredBatchesCheckedSideBySideCommitInServiceOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.VerifyWorkers = 4
	services := []string{"a", "b", "c", "d", "e"}
	order := map[string][]string{}
	var all []string
	for _, svc := range services {
		order[svc] = b.rows.PostBatches(svc, 4)
		all = append(all, order[svc]...)
	}
	b.markUnverified(all...)
	bad := order["c"][1]
	_, err := b.st.DB().Exec(t.Context(), `UPDATE ledgerq.batch_payloads SET payload = '\x00' WHERE id = $1`, bad)
	require.NoError(t, err)

	l := sim.New(sim.Config{Seed: 1, Clock: b.clock, CommitDelay: 500 * time.Millisecond})
	s := b.submitter(l)
	c := countChecks(s)
	b.runRounds(s, b.monitor(l), 20)
	require.True(t, b.rows.AllFinal())

	got := b.get(bad)
	require.Equal(t, store.BatchStatusInvalid, got.Status)
	require.Contains(t, got.LastError, "malformed batch")
	var committed []string
	for _, e := range l.Events() {
		if e.Kind == sim.EventCommitted {
			committed = append(committed, e.BatchID)
		}
	}
	for _, svc := range services {
		want := slices.DeleteFunc(slices.Clone(order[svc]), func(id string) bool { return id == bad })
		var seen []string
		for _, id := range committed {
			if slices.Contains(want, id) {
				seen = append(seen, id)
			}
		}
		require.Equal(t, want, seen, "service %s commits in its order", svc)
	}
	for _, id := range all {
		require.Equal(t, 1, c.of(id), id)
	}
}

// The checks of a full round (SubmitBatchSize batches, all stored through
// submit_batch), one at a time and VerifyWorkers (GOMAXPROCS) at a time.
func BenchmarkBatchSubmitter_VerifyARound(b *testing.B) {
	cfg := defaultLaneConfig()
	claimed := make([]store.ClaimedBatch, cfg.SubmitBatchSize)
	for i := range claimed {
		id, payload := testfactory.SignedBatch(b)
		claimed[i] = store.ClaimedBatch{Seq: int64(i + 1), ID: id, ServiceID: "s", Payload: payload, Attempt: 1, Unverified: true}
	}
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			cfg.VerifyWorkers = workers
			s, err := submitter.NewBatchSubmitter(nil, &ledgertest.BatchLedger{}, loop.Deps{}, cfg)
			require.NoError(b, err)
			for b.Loop() {
				refused, _ := submitter.Verify(s, claimed)
				if slices.ContainsFunc(refused, func(err error) bool { return err != nil }) {
					b.Fatal("a signed batch failed its check")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(claimed)), "ns/batch")
		})
	}
}
