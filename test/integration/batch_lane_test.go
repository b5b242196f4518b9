package integration

// Submitter and monitor rules of the batch lane (seed 001, DESIGN §2.1),
// driven through RunOnce with a fake clock.

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
)

// postBatches stores real signed batches of one service, oldest first.
func (b *batchLane) postBatches(service string, n int) []string {
	b.t.Helper()
	ids := make([]string, n)
	nbs := make([]store.NewBatch, n)
	for i := range n {
		id, payload := signedBatch(b.t)
		ids[i] = id
		nbs[i] = store.NewBatch{ID: id, ServiceID: service, Payload: payload, CreatedAt: t0.Add(time.Duration(i) * time.Second)}
	}
	_, err := b.st.InsertBatches(b.ctx, b.clock.Now(), nbs)
	require.NoError(b.t, err)
	return ids
}

func (b *batchLane) runOnce(name string, f func(context.Context) (int, error)) int {
	b.t.Helper()
	n, err := f(b.ctx)
	require.NoError(b.t, err, name)
	return n
}

func TestSubmitter_AcceptedBatchesArePendingAndWereSentInOneLedgerCall(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	a := b.postBatches("a", 1)[0]
	c := b.postBatches("c", 1)[0]
	l := &scriptedLedger{}
	require.Len(t, b.queue(), 2)
	require.Equal(t, 2, b.runOnce("submitter", b.submitter(l).RunOnce))
	require.Len(t, l.sent, 1, "one BatchList for both")
	for _, id := range []string{a, c} {
		got := b.get(id)
		require.Equal(t, store.BatchStatusPending, got.Status)
		require.True(t, got.Submitted)
		require.Nil(t, got.ClaimExpiresAt)
		require.Nil(t, got.QueuedAt)
		require.Equal(t, 1, got.Attempts)
	}
}

func TestSubmitter_TransientFailureMakesTheBatchDelayedNotSubmittedWithOneMoreAttempt(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	id := b.postBatches("a", 1)[0]
	l := &scriptedLedger{submit: func(ids []string) ([]error, error) {
		return nil, ledger.NewError(ledger.Transient, "validator busy", nil)
	}}
	b.queue()
	b.runOnce("submitter", b.submitter(l).RunOnce)
	got := b.get(id)
	require.Equal(t, store.BatchStatusDelayed, got.Status)
	require.False(t, got.Submitted)
	require.Equal(t, 1, got.Attempts)
	require.Equal(t, "validator busy", got.LastError)

	require.Empty(t, b.queue(), "inside the delay window")
	b.clock.Advance(15 * time.Second)
	require.Equal(t, []string{id}, b.queue())
	b.runOnce("submitter", b.submitter(l).RunOnce)
	require.Equal(t, 2, b.get(id).Attempts)
}

func TestSubmitter_DeterministicRejectionMakesTheBatchInvalidWithTheReason(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	ids := b.postBatches("a", 2)
	l := &scriptedLedger{submit: func(sent []string) ([]error, error) {
		return []error{ledger.NewError(ledger.Deterministic, "bad signature", nil)}, nil
	}}
	require.Equal(t, []string{ids[0]}, b.queue())
	b.runOnce("submitter", b.submitter(l).RunOnce)
	got := b.get(ids[0])
	require.Equal(t, store.BatchStatusInvalid, got.Status)
	require.Equal(t, "bad signature", got.LastError)
	require.NotNil(t, got.FinishedAt)
	require.Equal(t, []string{ids[1]}, b.queue(), "an invalid batch releases its service")
}

func TestSubmitter_IndeterminateOutcomeIsTreatedAsSentAndCheckedByTheMonitor(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	id := b.postBatches("a", 1)[0]
	l := &scriptedLedger{submit: func([]string) ([]error, error) {
		return nil, ledger.NewError(ledger.Indeterminate, "connection reset after the request was sent", nil)
	}}
	b.queue()
	b.runOnce("submitter", b.submitter(l).RunOnce)
	require.Equal(t, store.BatchStatusPending, b.get(id).Status)

	// The ledger never got it: the monitor finds UNKNOWN and the queuer resends it.
	b.clock.Advance(time.Second)
	require.Equal(t, 1, b.runOnce("monitor", b.monitor(l).RunOnce))
	got := b.get(id)
	require.Equal(t, store.BatchStatusUnknown, got.Status)
	require.False(t, got.Submitted)
	require.Equal(t, []string{id}, b.queue())
}

// A submitter slower than its lease loses the batch to the monitor; its late
// outcome must not overwrite what the monitor recorded.
func TestSubmitter_OutcomeOfAClaimThatExpiredIsNotRecorded(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	id := b.postBatches("a", 1)[0]
	monitorLedger := &scriptedLedger{} // knows nothing: UNKNOWN
	slow := &scriptedLedger{}
	slow.submit = func([]string) ([]error, error) {
		b.clock.Advance(2 * time.Minute) // past the lease
		_, err := b.monitor(monitorLedger).RunOnce(context.Background())
		require.NoError(t, err)
		return []error{ledger.NewError(ledger.Deterministic, "late answer", nil)}, nil
	}
	b.queue()
	b.runOnce("submitter", b.submitter(slow).RunOnce)
	got := b.get(id)
	require.Equal(t, store.BatchStatusUnknown, got.Status, "the monitor's answer stands")
	require.NotEqual(t, "late answer", got.LastError)
}

func TestMonitor_CommittedBecomesCommitted(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(row{id: "a1", service: "a", submitted: true, status: "pending"})
	l := &scriptedLedger{}
	l.setStatus("a1", ledger.BatchCommitted, "")
	require.Equal(t, 1, b.runOnce("monitor", b.monitor(l).RunOnce))
	got := b.get("a1")
	require.Equal(t, store.BatchStatusCommitted, got.Status)
	require.NotNil(t, got.FinishedAt)
}

func TestMonitor_InvalidBecomesInvalidWithTheLedgersReason(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(row{id: "a1", service: "a", submitted: true, status: "pending"})
	l := &scriptedLedger{}
	l.setStatus("a1", ledger.BatchInvalid, "txn 1: insufficient funds")
	b.runOnce("monitor", b.monitor(l).RunOnce)
	got := b.get("a1")
	require.Equal(t, store.BatchStatusInvalid, got.Status)
	require.Equal(t, "txn 1: insufficient funds", got.LastError)
}

// Seed 001: "The monitor needs to update submitted to false when it sets the
// batch status to Unknown."
func TestMonitor_UnknownBecomesUnknownWithSubmittedFalse(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(row{id: "a1", service: "a", submitted: true, status: "pending"})
	b.runOnce("monitor", b.monitor(&scriptedLedger{}).RunOnce)
	got := b.get("a1")
	require.Equal(t, store.BatchStatusUnknown, got.Status)
	require.False(t, got.Submitted)
	require.Equal(t, []string{"a1"}, b.queue())
}

func TestMonitor_PendingStaysPendingAndIsAskedAgainAfterTheCheckInterval(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(row{id: "a1", service: "a", submitted: true, status: "pending"})
	l := &scriptedLedger{}
	l.setStatus("a1", ledger.BatchPending, "")
	m := b.monitor(l)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
	require.Equal(t, store.BatchStatusPending, b.get("a1").Status)
	require.Equal(t, 0, b.runOnce("monitor", m.RunOnce), "not due again yet")
	b.clock.Advance(time.Second)
	require.Equal(t, 1, b.runOnce("monitor", m.RunOnce))
}

// runLane runs queuer, submitter and monitor rounds, moving the clock, until
// no batch is waiting or the round budget is spent.
func (b *batchLane) runLane(l ledger.BatchLedger, rounds int) {
	b.t.Helper()
	s, m := b.submitter(l), b.monitor(l)
	for range rounds {
		b.runOnce("queuer", b.q.RunOnce)
		b.runOnce("submitter", s.RunOnce)
		b.clock.Advance(time.Second)
		b.runOnce("monitor", m.RunOnce)
		counts, err := b.st.BatchCountsByState(b.ctx)
		require.NoError(b.t, err)
		if counts["committed"]+counts["invalid"] == sum(counts) {
			return
		}
	}
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func TestBatchLane_CommittedBatchUnblocksTheNextBatchOfItsService(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	ids := b.postBatches("a", 3)
	l := sim.New(sim.Config{Seed: 1, Clock: b.clock, CommitDelay: 500 * time.Millisecond})
	b.runLane(l, 20)
	var accepted []string
	for _, e := range l.Events() {
		if e.Kind == sim.EventAccepted {
			accepted = append(accepted, e.BatchID)
		}
		if e.Kind == sim.EventCommitted {
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
	b := setupBatchLane(t)
	ids := b.postBatches("a", 2)
	l := sim.New(sim.Config{Seed: 1, Clock: b.clock, CommitDelay: 500 * time.Millisecond, RejectRate: 1})
	b.runLane(l, 20)
	for _, id := range ids {
		got := b.get(id)
		require.Equal(t, store.BatchStatusInvalid, got.Status)
		require.Equal(t, sim.InvalidReason, got.LastError)
	}
}

// Submitter crash: a batch claimed and never answered for. After its lease the
// monitor asks the ledger; the ledger does not know it, so it becomes unknown
// and is sent again.
func TestSubmitterCrash_ClaimedBatchTheLedgerDoesNotKnowBecomesUnknownAndIsResent(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	id := b.postBatches("a", 1)[0]
	l := sim.New(sim.Config{Seed: 1, Clock: b.clock, CommitDelay: 500 * time.Millisecond})
	b.queue()
	lease := submitter.DefaultConfig().Lease
	_, err := b.st.ClaimQueuedBatches(b.ctx, b.clock.Now(), b.clock.Now().Add(lease), 10) // …and the submitter dies
	require.NoError(t, err)

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
func TestSubmitterCrash_ClaimedBatchTheLedgerHasBecomesPendingAndIsFollowedUp(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	id := b.postBatches("a", 1)[0]
	l := sim.New(sim.Config{Seed: 1, Clock: b.clock, CommitDelay: 2 * time.Minute})
	b.queue()
	lease := submitter.DefaultConfig().Lease
	claimed, err := b.st.ClaimQueuedBatches(b.ctx, b.clock.Now(), b.clock.Now().Add(lease), 10)
	require.NoError(t, err)
	perBatch, err := l.SubmitBatches(b.ctx, []ledger.Batch{{ID: claimed[0].ID, Payload: claimed[0].Payload}})
	require.NoError(t, err)
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

// Every round is index-driven: with many terminal batches in the table, no
// round's plan scans the table.
func TestBatchRounds_AreIndexDrivenAndNeverScanTerminalRows(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	_, err := b.st.Pool().Exec(b.ctx, `
		INSERT INTO ledgerq.batches (id, service_id, payload, created_at, submitted, status, attempts,
			last_submitted_at, finished_at, received_at, updated_at)
		SELECT 'done-' || g, 'svc-' || (g % 500), '\x00', $1, true, 'committed', 1, $1, $1, $1, $1
		FROM generate_series(1, 50000) g`, t0)
	require.NoError(t, err)
	b.put(row{id: "a1", service: "a"}, row{id: "p1", service: "p", submitted: true, status: "pending"})
	_, err = b.st.Pool().Exec(b.ctx, `ANALYZE ledgerq.batches`)
	require.NoError(t, err)

	src, err := os.ReadFile("../../internal/store/internal/dbsqlc/batches.sql.go")
	require.NoError(t, err)
	for name, args := range map[string][]any{
		"batchQueue":                {t0, 15.0, 300.0},
		"batchClaimQueued":          {t0, t0, 100},
		"batchClaimPendingForCheck": {t0, t0, 100},
		"batchClaimExpiredHeld":     {t0, t0, 100},
	} {
		m := regexp.MustCompile("(?s)const " + name + " = `-- name: \\w+ :\\w+\\n(.*?)`").FindSubmatch(src)
		require.NotNil(t, m, "query %s not found in the generated code", name)
		rows, err := b.st.Pool().Query(b.ctx, "EXPLAIN "+string(m[1]), args...)
		require.NoError(t, err, name)
		var plan []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan = append(plan, line)
		}
		require.NoError(t, rows.Err())
		text := strings.Join(plan, "\n")
		t.Logf("EXPLAIN %s:\n%s", name, text)
		require.NotContains(t, text, "Seq Scan on batches", "%s scans the table", name)
	}
}
