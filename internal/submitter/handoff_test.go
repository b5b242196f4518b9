package submitter_test

// The hand-off of a running process (DESIGN §2.1, issue 7): the monitor's
// transaction that frees a service claims the service's next batch for a
// submitter of the same process, which sends it without a queued state or a
// claim of its own. Seed 001 holds throughout: the batch is submitted (held,
// with a lease) from the moment it leaves the database's hands.

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/store"
)

func TestBatchHandOff_TheFreedServicesNextBatchIsHeldForThisProcessesSubmitterNotQueued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.rows.PostBatches("a", 2)
	l := &ledgertest.BatchLedger{}
	s, m := b.submitter(l), b.monitor(l)
	var handed []store.ClaimedBatch
	m.OnClaimed = func(c []store.ClaimedBatch) { handed = append(handed, c...) }

	require.Equal(t, 1, b.runOnce("submitter", s.RunOnce))
	l.SetStatus(ids[0], ledger.BatchCommitted, "")
	b.clock.Advance(b.cfg.submitter.FirstCheck)
	b.runOnce("monitor", m.RunOnce)

	require.Equal(t, store.BatchStatusCommitted, b.get(ids[0]).Status)
	require.Len(t, handed, 1)
	require.Equal(t, ids[1], handed[0].ID)
	require.Equal(t, 1, handed[0].Attempt)
	require.NotEmpty(t, handed[0].Payload, "the payload travels with the claim")
	next := b.get(ids[1])
	require.True(t, next.Submitted, "held: seed 001's submitted flag is set before it leaves the database")
	require.NotNil(t, next.ClaimExpiresAt)
	require.Equal(t, b.clock.Now().Add(b.cfg.submitter.ClaimLease), *next.ClaimExpiresAt)
	require.Nil(t, next.QueuedAt, "not queued: no other submitter can claim it")
	require.Empty(t, b.rows.QueuedIDs())

	s.HandOff(t.Context(), handed)
	require.Equal(t, 1, b.runOnce("submitter", s.RunOnce))
	calls := l.SubmitCalls()
	require.Equal(t, []string{ids[1]}, calls[len(calls)-1], "the handed batch is sent")
	got := b.get(ids[1])
	require.Equal(t, store.BatchStatusPending, got.Status)
	require.Equal(t, 1, got.Attempts, "one attempt: the hand-off counted it")
}

func TestBatchHandOff_WithoutAHandOffTheFreedServicesNextBatchIsQueued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.rows.PostBatches("a", 2)
	l := &ledgertest.BatchLedger{}
	s, m := b.submitter(l), b.monitor(l)
	b.runOnce("submitter", s.RunOnce)
	l.SetStatus(ids[0], ledger.BatchCommitted, "")
	b.clock.Advance(b.cfg.submitter.FirstCheck)
	b.runOnce("monitor", m.RunOnce)
	require.Equal(t, []string{ids[1]}, b.rows.QueuedIDs(), "a RunOnce (cron) process queues it for whoever runs next")
	require.False(t, b.get(ids[1]).Submitted)
}

func TestBatchHandOff_AStoppedSubmitterHandsUnsentBatchesBackToBeSentAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.rows.PostBatches("a", 2)
	l := &ledgertest.BatchLedger{}
	s, m := b.submitter(l), b.monitor(l)
	var handed []store.ClaimedBatch
	m.OnClaimed = func(c []store.ClaimedBatch) { handed = append(handed, c...) }
	b.runOnce("submitter", s.RunOnce)
	l.SetStatus(ids[0], ledger.BatchCommitted, "")
	b.clock.Advance(b.cfg.submitter.FirstCheck)
	b.runOnce("monitor", m.RunOnce)
	require.Len(t, handed, 1)

	stopping := b.submitter(l)
	stopping.HandOff(t.Context(), handed)
	stopping.Stop() // never started: no round sent it
	got := b.get(ids[1])
	require.Equal(t, store.BatchStatusUnknown, got.Status, "handed back: the ledger never saw it")
	require.False(t, got.Submitted)
	require.Nil(t, got.ClaimExpiresAt)
	require.Equal(t, []string{ids[1]}, b.rows.QueuedIDs(), "queued again at once (seed 001 step 3), not after the lease")
	sent := slices.Concat(l.SubmitCalls()...)
	require.NotContains(t, sent, ids[1])

	// A hand-off to a submitter that has stopped goes back at once too.
	b.runOnce("submitter", s.RunOnce) // sends it (attempt 2)
	l.SetStatus(ids[1], ledger.BatchCommitted, "")
	require.Equal(t, 2, b.get(ids[1]).Attempts)
}

func TestBatchHandOff_ABatchHandedTooLongAgoIsHandedBackNotSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.rows.PostBatches("a", 2)
	l := &ledgertest.BatchLedger{}
	s, m := b.submitter(l), b.monitor(l)
	var handed []store.ClaimedBatch
	m.OnClaimed = func(c []store.ClaimedBatch) { handed = append(handed, c...) }
	b.runOnce("submitter", s.RunOnce)
	l.SetStatus(ids[0], ledger.BatchCommitted, "")
	b.clock.Advance(b.cfg.submitter.FirstCheck)
	b.runOnce("monitor", m.RunOnce)
	s.HandOff(t.Context(), handed)

	// The submitter falls behind until the lease could run out mid-send:
	// the stale hand-off is handed back (unknown, queued again), and the
	// same round claims it afresh, with a new lease and attempt.
	b.clock.Advance(b.cfg.submitter.ClaimLease - b.cfg.submitter.LedgerTimeout + time.Millisecond)
	b.runOnce("submitter", s.RunOnce)
	got := b.get(ids[1])
	require.Equal(t, 2, got.Attempts, "sent under a fresh claim, not the stale one")
	require.Equal(t, store.BatchStatusPending, got.Status)
	calls := l.SubmitCalls()
	require.Equal(t, []string{ids[1]}, calls[len(calls)-1])
	require.Len(t, slices.Concat(calls...), 2, "each batch sent once")
}
