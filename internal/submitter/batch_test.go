package submitter_test

// BatchSubmitter rules of the batch lane (Grid's one-round serial rule): what each
// ledger outcome makes of a batch, the fencing of a late outcome, and what
// becomes of a batch whose submitter died. Each test runs in a rolled-back
// transaction and drives the loops through RunOnce with a fake clock.

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// defaultLaneConfig is the batch lane's default configuration.
func defaultLaneConfig() batch.Config {
	c := batch.Defaults()
	c.RecordsInFlight = 1 // a rule test reads a round's writes when it returns, on one transaction
	return c
}

// batchSetup is what a BatchSubmitter rule test needs: a store in a
// rolled-back transaction, a fake clock, and the lane's three services.
type batchSetup struct {
	t     *testing.T
	st    *store.Store
	clock *clock.Fake
	rows  *testfactory.Factory
	cfg   batch.Config
	deps  loop.Deps
	q     *queuer.BatchQueuer
}

func setup(t *testing.T) *batchSetup {
	t.Helper()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	cfg := defaultLaneConfig()
	deps := loop.Deps{Clock: clk, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	q, err := queuer.NewBatchQueuer(st, deps, cfg)
	require.NoError(t, err)
	return &batchSetup{t: t, st: st, clock: clk, rows: testfactory.New(t, st, clk), cfg: cfg, deps: deps, q: q}
}

func (b *batchSetup) submitter(l ledger.BatchLedger) *submitter.BatchSubmitter {
	s, err := submitter.NewBatchSubmitter(b.st, l, b.deps, b.cfg)
	require.NoError(b.t, err)
	return s
}

func (b *batchSetup) monitor(l ledger.BatchLedger) *monitor.BatchMonitor {
	m, err := monitor.NewBatchMonitor(b.st, l, b.deps, b.cfg)
	require.NoError(b.t, err)
	return m
}

func (b *batchSetup) queue() []string { b.t.Helper(); return b.rows.Queue(b.q.RunOnce) }

func (b *batchSetup) get(id string) store.Batch { b.t.Helper(); return b.rows.Get(id) }

func (b *batchSetup) runOnce(name string, f func(context.Context) (int, error)) int {
	b.t.Helper()
	return b.rows.Run(name, f)
}

// submitFailing posts one batch of service "a", queues it and runs a
// submitter round on a ledger whose every submit call fails with class and
// reason. It returns the batch's id and the ledger.
func (b *batchSetup) submitFailing(class ledger.Class, reason string) (string, *ledgertest.BatchLedger) {
	b.t.Helper()
	id := b.rows.PostBatches("a", 1)[0]
	l := &ledgertest.BatchLedger{Submit: func([]string) ([]error, error) {
		return nil, ledger.NewError(class, reason, nil)
	}}
	b.queue()
	b.runOnce("submitter", b.submitter(l).RunOnce)
	return id, l
}

// postAndClaim posts one batch of service "a", queues it and claims it as
// the submitter does, with its lease, but sends nothing. It returns the
// batch's id and the claim.
func (b *batchSetup) postAndClaim() (string, []store.ClaimedBatch) {
	b.t.Helper()
	id := b.rows.PostBatches("a", 1)[0]
	b.queue()
	now := b.clock.Now()
	claimed, err := b.st.BatchClaimQueued(b.t.Context(), store.BatchClaimQueuedParams{Now: now, LeaseUntil: now.Add(b.cfg.ClaimLease), Max: 10})
	require.NoError(b.t, err)
	return id, claimed
}

// runLane runs queuer, submitter and monitor rounds, moving the clock past
// the first check between submitter and monitor, until every batch is
// committed or invalid or the round budget is spent.
func (b *batchSetup) runLane(l ledger.BatchLedger, rounds int) {
	b.t.Helper()
	b.runRounds(b.submitter(l), b.monitor(l), rounds)
}

// runRounds is runLane's loop with a submitter and a monitor of the
// caller's (one whose checks a test counts, for one).
func (b *batchSetup) runRounds(s *submitter.BatchSubmitter, m *monitor.BatchMonitor, rounds int) {
	b.t.Helper()
	step := max(b.cfg.FirstCheck, b.cfg.CheckInterval)
	for range rounds {
		b.runOnce("queuer", b.q.RunOnce)
		b.runOnce("submitter", s.RunOnce)
		b.clock.Advance(step)
		b.runOnce("monitor", m.RunOnce)
		if b.rows.AllFinal() {
			return
		}
	}
}

func TestBatchSubmitter_AcceptedBatchesArePendingAndWereSentInOneLedgerCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.rows.PostBatches("a", 1)[0]
	c := b.rows.PostBatches("c", 1)[0]
	l := &ledgertest.BatchLedger{}
	want := []string{a, c}
	slices.Sort(want)
	require.Equal(t, want, b.rows.QueuedIDs(), "a batch posted to an idle service is queued at once")
	require.Equal(t, 2, b.runOnce("submitter", b.submitter(l).RunOnce))
	require.Len(t, l.SubmitCalls(), 1, "one BatchList for both")
	for _, id := range []string{a, c} {
		got := b.get(id)
		require.Equal(t, store.BatchStatusPending, got.Status)
		require.True(t, got.Submitted)
		require.Nil(t, got.ClaimExpiresAt)
		require.Nil(t, got.QueuedAt)
		require.Equal(t, 1, got.Attempts)
	}
}

func TestBatchSubmitter_TransientFailureMakesTheBatchDelayedNotSubmittedWithOneMoreAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, l := b.submitFailing(ledger.Transient, "validator busy")
	got := b.get(id)
	require.Equal(t, store.BatchStatusDelayed, got.Status)
	require.False(t, got.Submitted)
	require.Equal(t, 1, got.Attempts)
	require.Equal(t, "validator busy", got.LastError)

	require.Empty(t, b.queue(), "inside the delay window")
	b.clock.Advance(b.cfg.DelayWindow)
	require.Equal(t, []string{id}, b.queue())
	b.runOnce("submitter", b.submitter(l).RunOnce)
	require.Equal(t, 2, b.get(id).Attempts)
}

func TestBatchSubmitter_DeterministicRejectionMakesTheBatchInvalidWithTheReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.rows.PostBatches("a", 2)
	l := &ledgertest.BatchLedger{Submit: func([]string) ([]error, error) {
		return []error{ledger.NewError(ledger.Deterministic, "bad signature", nil)}, nil
	}}
	require.Equal(t, []string{ids[0]}, b.rows.QueuedIDs(), "only the oldest batch of the service is queued")
	b.runOnce("submitter", b.submitter(l).RunOnce)
	got := b.get(ids[0])
	require.Equal(t, store.BatchStatusInvalid, got.Status)
	require.Equal(t, "bad signature", got.LastError)
	require.NotNil(t, got.FinishedAt)
	require.Equal(t, []string{ids[1]}, b.rows.QueuedIDs(), "an invalid batch releases its service: its next batch is queued in the same transaction")
}

func TestBatchSubmitter_IndeterminateOutcomeIsTreatedAsSentAndCheckedByTheMonitor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, l := b.submitFailing(ledger.Indeterminate, "connection reset after the request was sent")
	require.Equal(t, store.BatchStatusPending, b.get(id).Status)

	// The ledger never got it: the monitor finds UNKNOWN and the queuer resends it.
	b.clock.Advance(b.cfg.FirstCheck)
	require.Equal(t, 1, b.runOnce("monitor", b.monitor(l).RunOnce))
	got := b.get(id)
	require.Equal(t, store.BatchStatusUnknown, got.Status)
	require.False(t, got.Submitted)
	require.Equal(t, []string{id}, b.rows.QueuedIDs(), "an unknown batch is queued again at once (step 3)")
}

// A submitter slower than its lease loses the batch to the monitor; its late
// outcome must not overwrite what the monitor recorded.
func TestBatchSubmitter_OutcomeOfAClaimThatExpiredIsNotRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.rows.PostBatches("a", 1)[0]
	monitorLedger := &ledgertest.BatchLedger{} // knows nothing: UNKNOWN
	slow := &ledgertest.BatchLedger{Submit: func([]string) ([]error, error) {
		b.clock.Advance(2 * b.cfg.ClaimLease) // past the lease
		_, err := b.monitor(monitorLedger).RunOnce(t.Context())
		require.NoError(t, err)
		return []error{ledger.NewError(ledger.Deterministic, "late answer", nil)}, nil
	}}
	b.queue()
	b.runOnce("submitter", b.submitter(slow).RunOnce)
	got := b.get(id)
	require.Equal(t, store.BatchStatusUnknown, got.Status, "the monitor's answer stands")
	require.NotEqual(t, "late answer", got.LastError)
}

// Submitter crash: a batch claimed and never answered for. After its lease the
// monitor asks the ledger; the ledger does not know it, so it becomes unknown
// and is sent again.
func TestBatchSubmitterCrash_ClaimedBatchTheLedgerDoesNotKnowBecomesUnknownAndIsResent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := sim.New(sim.Config{Seed: 1, Clock: b.clock, CommitDelay: 500 * time.Millisecond})
	id, _ := b.postAndClaim() // …and the submitter dies
	lease := b.cfg.ClaimLease

	m := b.monitor(l)
	require.Equal(t, 0, b.runOnce("monitor", m.RunOnce), "nothing to check while the lease runs")
	require.Empty(t, b.queue(), "held: not queued again")
	b.clock.Advance(lease)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	got := b.get(id)
	require.Equal(t, store.BatchStatusUnknown, got.Status)
	require.False(t, got.Submitted)

	b.runLane(l, 10)
	got = b.get(id)
	require.Equal(t, store.BatchStatusCommitted, got.Status)
	require.Equal(t, 2, got.Attempts)
}

// Submitter crash after the ledger took the batch: the monitor finds it
// PENDING, records it as pending, and follows it to COMMITTED without sending
// it again.
func TestBatchSubmitterCrash_ClaimedBatchTheLedgerHasBecomesPendingAndIsFollowedUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := sim.New(sim.Config{Seed: 1, Clock: b.clock, CommitDelay: 2 * time.Minute})
	id, claimed := b.postAndClaim()
	lease := b.cfg.ClaimLease
	require.Len(t, claimed, 1)
	perBatch, err := l.SubmitBatches(t.Context(), []ledger.Batch{{ID: claimed[0].ID, Payload: claimed[0].Payload}})
	require.NoError(t, err)
	require.Len(t, perBatch, 1)
	require.NoError(t, perBatch[0]) // …and the submitter dies before recording it

	b.clock.Advance(lease)
	m := b.monitor(l)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	got := b.get(id)
	require.Equal(t, store.BatchStatusPending, got.Status)
	require.True(t, got.Submitted)
	require.Nil(t, got.ClaimExpiresAt)

	b.clock.Advance(2 * time.Minute)
	b.runOnce("monitor", m.RunOnce)
	got = b.get(id)
	require.Equal(t, store.BatchStatusCommitted, got.Status)
	require.Equal(t, 1, got.Attempts, "never sent twice")
	require.Equal(t, uint64(1), l.Stats().Accepted)
}

// claimFour posts one batch each of services h1..h4, queues and claims them
// as a monitor claims the next batches of the services it frees, and
// returns the claims and their lease.
func (b *batchSetup) claimFour() ([]store.ClaimedBatch, time.Time) {
	b.t.Helper()
	for _, svc := range []string{"h1", "h2", "h3", "h4"} {
		b.rows.PostBatches(svc, 1)
	}
	b.queue()
	now := b.clock.Now()
	lease := now.Add(b.cfg.ClaimLease)
	claimed, err := b.st.BatchClaimQueued(b.t.Context(), store.BatchClaimQueuedParams{Now: now, LeaseUntil: lease, Max: 10})
	require.NoError(b.t, err)
	require.Len(b.t, claimed, 4)
	return claimed, lease
}

// Batches a monitor of the process claimed for the submitter are sent first,
// as claimed (no second claim, no second attempt), with queued ones in the
// same ledger call; while handed batches fill its rounds the submitter still
// claims a quarter round of queued ones, so the queue is not starved.
func TestBatchSubmitter_SendsHandedBatchesFirstWithoutClaimingThemAgainAndStillServesTheQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.SubmitBatchSize = 4
	handed, lease := b.claimFour()
	queued := b.rows.PostBatches("q", 1)[0]
	b.queue()
	l := &ledgertest.BatchLedger{}
	s := b.submitter(l)
	s.Hand(handed, lease)
	require.Equal(t, 5, b.runOnce("submitter", s.RunOnce), "four handed, one of the queue")
	var want []string
	for _, h := range handed {
		want = append(want, h.ID)
	}
	require.Equal(t, [][]string{append(want, queued)}, l.SubmitCalls())
	for _, id := range append(want, queued) {
		got := b.get(id)
		require.Equal(t, store.BatchStatusPending, got.Status, id)
		require.Equal(t, 1, got.Attempts, "%s: claimed once", id)
	}
	require.Zero(t, b.runOnce("submitter", s.RunOnce), "each handed batch is sent once")
}

// A handed batch whose lease would run out during a ledger call is not sent:
// the monitors ask the ledger about it when the lease has run out, and a
// send racing them could be sent again by them.
func TestBatchSubmitter_AHandedBatchWhoseLeaseIsNearlyOutIsLeftToTheMonitors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	handed, _ := b.claimFour()
	l := &ledgertest.BatchLedger{}
	s := b.submitter(l)
	s.Hand(handed[:2], b.clock.Now().Add(b.cfg.Ledger.Timeout))
	s.Hand(handed[2:], b.clock.Now().Add(b.cfg.Ledger.Timeout+time.Second))
	require.Equal(t, 2, b.runOnce("submitter", s.RunOnce))
	require.Equal(t, [][]string{{handed[2].ID, handed[3].ID}}, l.SubmitCalls())
	for _, h := range handed[:2] {
		got := b.get(h.ID)
		require.True(t, got.Submitted)
		require.Equal(t, store.BatchStatusNone, got.Status, "still held, for the monitors")
	}
}

// A stopping process gives back the batches handed to its submitter that it
// did not send: queued again at once for any process, the attempt counted,
// instead of held until their lease runs out.
func TestBatchSubmitter_ReleaseQueuesAgainTheHandedBatchesItDidNotSend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	handed, lease := b.claimFour()
	l := &ledgertest.BatchLedger{}
	s := b.submitter(l)
	s.Hand(handed, lease)
	s.Release(t.Context())
	for _, h := range handed {
		got := b.get(h.ID)
		require.False(t, got.Submitted, h.ID)
		require.Nil(t, got.ClaimExpiresAt, h.ID)
		require.NotNil(t, got.QueuedAt, h.ID)
		require.Equal(t, 1, got.Attempts, "%s: the claim stays counted", h.ID)
	}
	require.Equal(t, 4, b.runOnce("submitter", s.RunOnce), "claimed from the queue, each once")
	require.Equal(t, 4, l.Sent())
	for _, h := range handed {
		require.Equal(t, 2, b.get(h.ID).Attempts, h.ID)
	}
}

// A batch stored through ledgerq.submit_batch (Unverified) is checked as the
// API checks a posted one before it is sent: one that fails is recorded
// invalid with the reason and left out of the ledger call; one that passes
// goes out with the round, and the batches the API checked already go out
// unchecked.
func TestBatchSubmitter_UnverifiedBatchIsCheckedBeforeSendingAndAFailureEndsInvalidUnsent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	handed, lease := b.claimFour()
	// The factory's batches are signed: one unverified is made to fail
	// (its bytes are no batch), another passes; a verified one that would
	// fail is not checked again.
	handed[0].Unverified, handed[0].Payload = true, []byte("not a batch")
	handed[1].Payload = []byte("not a batch either")
	handed[2].Unverified = true
	// The ledger rejects the last one: each answer goes to its batch.
	l := &ledgertest.BatchLedger{Submit: func(ids []string) ([]error, error) {
		errs := make([]error, len(ids))
		for i, id := range ids {
			if id == handed[3].ID {
				errs[i] = ledger.NewError(ledger.Deterministic, "rejected by the ledger", nil)
			}
		}
		return errs, nil
	}}
	s := b.submitter(l)
	s.Hand(handed, lease)
	require.Equal(t, 4, b.runOnce("submitter", s.RunOnce))
	require.Equal(t, [][]string{{handed[1].ID, handed[2].ID, handed[3].ID}}, l.SubmitCalls())
	got := b.get(handed[0].ID)
	require.Equal(t, store.BatchStatusInvalid, got.Status)
	require.Contains(t, got.LastError, "malformed batch")
	for _, h := range handed[1:3] {
		require.Equal(t, store.BatchStatusPending, b.get(h.ID).Status, h.ID)
	}
	got = b.get(handed[3].ID)
	require.Equal(t, store.BatchStatusInvalid, got.Status)
	require.Equal(t, "rejected by the ledger", got.LastError)
}
