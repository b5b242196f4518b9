package integration

// One test per row of seed 001's "Queue now", "Queue later" and "Don't queue"
// lists and per step 1-6 of its algorithm, plus DESIGN §2.1's held-batch
// exclusion. Each drives time with the fake clock and calls the queuer's
// round directly.

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// Queue now: {submitted = false, batch_status = None}, no pending, unknown or
// delayed batch with this service_id.
func TestQueueNow_NotSubmittedNoStatusWithNoBusyBatchInItsService(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(row{id: "a1", service: "a"})
	require.Equal(t, []string{"a1"}, b.queue())
	got := b.get("a1")
	require.NotNil(t, got.QueuedAt)
	require.Equal(t, t0, *got.QueuedAt)
	require.False(t, got.Submitted)
}

// Queue now: {submitted = false, batch_status = Unknown}.
func TestQueueNow_NotSubmittedUnknown(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(row{id: "a1", service: "a", status: "unknown", lastSubmit: t0})
	require.Equal(t, []string{"a1"}, b.queue(), "unknown is queued at once, with no delay window")
}

// Queue now: {submitted = false, batch_status = Delayed, last_submitted_at <= now - 15 s}.
func TestQueueNow_NotSubmittedDelayedOutsideTheDelayWindow(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(row{id: "a1", service: "a", status: "delayed", attempts: 1, lastSubmit: t0.Add(-15 * time.Second)})
	require.Equal(t, []string{"a1"}, b.queue())
}

// Queue later: {submitted = false, batch_status = Delayed, last_submitted_at > now - 15 s}.
func TestQueueLater_NotSubmittedDelayedInsideTheDelayWindow(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(row{id: "a1", service: "a", status: "delayed", attempts: 1, lastSubmit: t0.Add(-14 * time.Second)})
	require.Empty(t, b.queue())
	b.clock.Advance(time.Second)
	require.Equal(t, []string{"a1"}, b.queue(), "queued once the window has passed")
}

// Queue later: {submitted = false, batch_status = None, service_id = (service
// of a pending, unknown or delayed batch)}.
func TestQueueLater_NewBatchOfAServiceWithAPendingUnknownOrDelayedBatch(t *testing.T) {
	t.Parallel()
	for _, busy := range []row{
		{id: "a0", service: "a", submitted: true, status: "pending"},
		{id: "a0", service: "a", status: "unknown", queued: true},
		{id: "a0", service: "a", status: "delayed", lastSubmit: t0},
	} {
		t.Run(busy.status, func(t *testing.T) {
			t.Parallel()
			b := setupBatchLane(t)
			busy.createdAt = t0.Add(-2 * time.Hour)
			b.put(busy, row{id: "a1", service: "a"})
			require.NotContains(t, b.queue(), "a1")
			require.Nil(t, b.get("a1").QueuedAt)
		})
	}
}

// Don't queue: {submitted = true, batch_status = Pending}.
func TestDontQueue_SubmittedPending(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(row{id: "a1", service: "a", submitted: true, status: "pending"})
	require.Empty(t, b.queue())
}

// Don't queue: {submitted = true, batch_status = Invalid | Valid | Committed}.
func TestDontQueue_SubmittedInvalidValidOrCommitted(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"invalid", "valid", "committed"} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			b := setupBatchLane(t)
			b.put(row{id: "a1", service: "a", submitted: true, status: status})
			require.Empty(t, b.queue())
			require.Nil(t, b.get("a1").QueuedAt)
		})
	}
}

// Don't queue: {submitted = true, batch_status = None}: the submitter has it.
func TestDontQueue_SubmittedWithNoStatusIsBeingSubmitted(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(row{id: "a1", service: "a", submitted: true, attempts: 1, lastSubmit: t0, leaseExpiry: t0.Add(time.Minute)})
	require.Empty(t, b.queue())
}

// DESIGN §2.1: a service whose batch the submitter holds gets nothing queued;
// the seed's step 6 would queue the next one, breaking seriality.
func TestQueuer_ServiceWithAHeldBatchGetsNothingQueued(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(
		row{id: "a1", service: "a", createdAt: t0.Add(-2 * time.Hour), submitted: true, attempts: 1, lastSubmit: t0, leaseExpiry: t0.Add(time.Minute)},
		row{id: "a2", service: "a"},
		row{id: "b1", service: "b"},
	)
	require.Equal(t, []string{"b1"}, b.queue())
}

// Step 1: batches with status Committed, Valid or Invalid are left out; they
// are never queued and do not hold their service back.
func TestStep1_TerminalBatchesAreLeftOut(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(
		row{id: "a1", service: "a", createdAt: t0.Add(-3 * time.Hour), submitted: true, status: "committed"},
		row{id: "a2", service: "a", createdAt: t0.Add(-2 * time.Hour), submitted: true, status: "valid"},
		row{id: "a3", service: "a", createdAt: t0.Add(-90 * time.Minute), submitted: true, status: "invalid"},
		row{id: "a4", service: "a"},
	)
	require.Equal(t, []string{"a4"}, b.queue())
}

// Step 2: the round builds one queue and marks exactly it: what the round
// returns is what is now queued, and a second round adds nothing.
func TestStep2_TheRoundMarksExactlyTheQueueItBuilt(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(
		row{id: "a1", service: "a"},
		row{id: "b1", service: "b", status: "unknown"},
		row{id: "c1", service: "c", status: "delayed", lastSubmit: t0.Add(-time.Hour)},
		row{id: "d1", service: "d", submitted: true, status: "pending"},
	)
	require.Equal(t, []string{"a1", "b1", "c1"}, b.queue())
	for _, id := range []string{"a1", "b1", "c1"} {
		require.NotNil(t, b.get(id).QueuedAt, id)
	}
	require.Nil(t, b.get("d1").QueuedAt)
	require.Empty(t, b.queue(), "an already queued batch is not queued again")
}

// Step 3: every Unknown batch is queued, whatever its service.
func TestStep3_EveryUnknownBatchIsQueued(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(
		row{id: "a1", service: "a", status: "unknown"},
		row{id: "b1", service: "b", status: "unknown"},
		row{id: "b2", service: "b"}, // waits: its service has an unknown batch
	)
	require.Equal(t, []string{"a1", "b1"}, b.queue())
}

// Step 4: Delayed batches are queued only outside the delay window, which
// grows with attempts (15 s, 30 s, 60 s, …) up to its cap.
func TestStep4_DelayedBatchesWaitOutADelayWindowThatGrowsWithAttempts(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(
		row{id: "a1", service: "a", status: "delayed", attempts: 1, lastSubmit: t0},
		row{id: "b1", service: "b", status: "delayed", attempts: 2, lastSubmit: t0},
		row{id: "c1", service: "c", status: "delayed", attempts: 3, lastSubmit: t0},
		row{id: "d1", service: "d", status: "delayed", attempts: 60, lastSubmit: t0},
	)
	require.Empty(t, b.queue())
	b.clock.Advance(15 * time.Second)
	require.Equal(t, []string{"a1"}, b.queue())
	b.clock.Advance(15 * time.Second)
	require.Equal(t, []string{"b1"}, b.queue())
	b.clock.Advance(30 * time.Second)
	require.Equal(t, []string{"c1"}, b.queue())
	b.clock.Set(t0.Add(5*time.Minute - time.Second))
	require.Empty(t, b.queue())
	b.clock.Set(t0.Add(5 * time.Minute))
	require.Equal(t, []string{"d1"}, b.queue(), "the window is capped (default 5 min)")
}

// Step 5: services with a Pending, Unknown or Delayed batch get no new batch.
func TestStep5_ServicesWithPendingUnknownOrDelayedBatchesAreExcluded(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	old := t0.Add(-2 * time.Hour)
	b.put(
		row{id: "p0", service: "p", createdAt: old, submitted: true, status: "pending"},
		row{id: "p1", service: "p"},
		row{id: "u0", service: "u", createdAt: old, status: "unknown", queued: true},
		row{id: "u1", service: "u"},
		row{id: "d0", service: "d", createdAt: old, status: "delayed", lastSubmit: t0},
		row{id: "d1", service: "d"},
		row{id: "z1", service: "z"},
	)
	require.Equal(t, []string{"z1"}, b.queue())
}

// Step 6: for each remaining service, its batch with the oldest created_at is
// queued, and only that one.
func TestStep6_OldestBatchOfEachServiceIsQueued(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(
		row{id: "a-newer", service: "a", createdAt: t0.Add(-time.Minute)},
		row{id: "a-oldest", service: "a", createdAt: t0.Add(-time.Hour)},
		row{id: "z-middle", service: "a", createdAt: t0.Add(-30 * time.Minute)},
		row{id: "b-only", service: "b", createdAt: t0.Add(-time.Second)},
	)
	require.Equal(t, []string{"a-oldest", "b-only"}, b.queue())
}

// Step 6: when several batches share the oldest created_at, the first by
// batch header (id) wins, so queuing is deterministic.
func TestStep6_TieOnCreatedAtIsBrokenByHeader(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	same := t0.Add(-time.Hour)
	b.put(
		row{id: "c", service: "s", createdAt: same},
		row{id: "a", service: "s", createdAt: same},
		row{id: "b", service: "s", createdAt: same},
	)
	require.Equal(t, []string{"a"}, b.queue())
}

// The table refuses states the seed says cannot exist.
func TestBatchesTable_RefusesStatesTheSeedRulesOut(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	for name, r := range map[string]row{
		"pending but not submitted":       {id: "x1", status: "pending"},
		"held without a lease":            {id: "x2", submitted: true, attempts: 1, lastSubmit: t0},
		"lease on a batch nobody holds":   {id: "x3", leaseExpiry: t0},
		"queued while held":               {id: "x4", submitted: true, queued: true, attempts: 1, lastSubmit: t0, leaseExpiry: t0},
		"queued while pending":            {id: "x5", submitted: true, status: "pending", queued: true},
		"queued after it was committed":   {id: "x6", submitted: true, status: "committed", queued: true},
		"lease on a committed batch":      {id: "x7", submitted: true, status: "committed", leaseExpiry: t0},
		"unknown but submitted, no lease": {id: "x8", submitted: true, status: "unknown"},
	} {
		err := b.insert(r)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: stored, want a CHECK violation (err %v)", name, err)
		require.Equal(t, "23514", pgErr.Code, "%s: %v", name, err)
	}
}

func TestBatchOverview_CountsBatchesPerServiceAndStateWithTheOldestWaiting(t *testing.T) {
	t.Parallel()
	b := setupBatchLane(t)
	b.put(
		row{id: "a1", service: "a", createdAt: t0.Add(-3 * time.Hour), submitted: true, status: "committed"},
		row{id: "a2", service: "a", createdAt: t0.Add(-2 * time.Hour), submitted: true, status: "pending"},
		row{id: "a3", service: "a", createdAt: t0.Add(-time.Hour)},
		row{id: "a4", service: "a", createdAt: t0.Add(-time.Minute)},
		row{id: "b1", service: "b", queued: true},
	)
	rows, err := b.st.Pool().Query(b.ctx, `SELECT service_id, state, batches, coalesce(oldest_waiting_id, '') FROM ledgerq.batch_overview ORDER BY 1, 2`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var svc, state, oldest string
		var n int
		require.NoError(t, rows.Scan(&svc, &state, &n, &oldest))
		got = append(got, fmt.Sprintf("%s/%s=%d:%s", svc, state, n, oldest))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"a/committed=1:", "a/new=2:a3", "a/pending=1:a2", "b/queued=1:b1"}, got)
}
