package store_test

// Issue 8, defect 5: the batch lane's transactions must not deadlock each
// other. Three "processes" (a store, so a pool, each) run every round of the
// lane at once on a handful of services, for several seconds, in the shapes
// that overlap most: leases that expire at once (so monitors take held
// batches over while their submitter records them), checks due at once,
// delay windows of zero (so a delayed batch is queued again while other
// queuers look at it), outcomes recorded in reverse key (seq) order by
// submitters and in key order by monitors. No call may fail, PostgreSQL must
// have seen no deadlock (pg_stat_database.deadlocks: the store retries a deadlock victim,
// so a clean run of calls alone would not prove the lock order), and the
// lane's invariants must hold afterwards.

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// stressErrors collects the errors of the concurrent rounds, by SQLSTATE.
type stressErrors struct {
	mu     sync.Mutex
	counts map[string]int
	first  []string
}

func (e *stressErrors) add(actor string, err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	code := "other"
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		code = pgErr.Code
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.counts == nil {
		e.counts = map[string]int{}
	}
	e.counts[code]++
	if len(e.first) < 10 {
		e.first = append(e.first, actor+": "+err.Error())
	}
}

func randomID(t *testing.T) string {
	var b [12]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

func TestBatchLane_ConcurrentRoundsNeverDeadlock(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	const (
		processes = 3
		services  = 12
		runFor    = 6 * time.Second
		roundMax  = 20
	)
	deadlocksBefore := databaseDeadlocks(t, db)

	stores := make([]*store.Store, processes)
	for i := range stores {
		st, err := store.Open(t.Context(), db.URL)
		require.NoError(t, err)
		stores[i] = st
	}
	// The rounds start while running is open; each call runs to its end.
	running, stop := context.WithTimeout(t.Context(), runFor)
	defer stop()
	ctx := t.Context()
	var errs stressErrors
	var wg sync.WaitGroup
	// now is the wall clock: every lease and check time below is "now", so
	// another process may take the rows over at once.
	now := func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

	// Intake: each service has one writer, which stores its batches in
	// created_at order, so the order check below is exact. It stores about
	// as many as the lane sends one at a time per service, so that the
	// drain at the end stays short.
	for s := range services {
		st := stores[s%processes]
		service := fmt.Sprintf("svc-%d", s)
		wg.Go(func() {
			pace := time.NewTicker(100 * time.Millisecond)
			defer pace.Stop()
			for running.Err() == nil {
				select {
				case <-running.Done():
					return
				case <-pace.C:
				}
				n := 1 + mrand.IntN(2)
				at := now()
				nbs := make([]store.NewBatch, n)
				for i := range nbs {
					nbs[i] = store.NewBatch{ID: randomID(t), ServiceID: service, Payload: []byte{byte(i)}, CreatedAt: at.Add(time.Duration(i) * time.Microsecond)}
				}
				_, err := st.BatchInsert(ctx, store.BatchInsertParams{Now: at, Batches: nbs})
				errs.add("intake", err)
			}
		})
	}
	for _, st := range stores {
		// Queuer: delayed batches are due at once; every round reconciles.
		wg.Go(func() {
			for running.Err() == nil {
				_, err := st.BatchQueue(ctx, store.BatchQueueParams{Now: now(), Reconcile: true, ReconcileMax: services})
				errs.add("queuer", err)
			}
		})
		// Submitter: claims with a lease that has already expired, so the
		// monitors take the batches over while it records them; outcomes in
		// reverse key order.
		wg.Go(func() {
			for running.Err() == nil {
				at := now()
				claimed, err := st.BatchClaimQueued(ctx, store.BatchClaimQueuedParams{Now: at, LeaseUntil: at, Max: roundMax})
				errs.add("submitter claim", err)
				if len(claimed) == 0 {
					continue
				}
				out := make([]store.SubmitOutcome, len(claimed))
				for i, c := range claimed {
					r := store.SubmitAccepted
					switch x := mrand.IntN(20); {
					case x < 5:
						r = store.SubmitDelayed
					case x < 7:
						r = store.SubmitRejected
					}
					out[i] = store.SubmitOutcome{Seq: c.Seq, Attempt: c.Attempt, Result: r, Reason: "stress"}
				}
				slices.SortFunc(out, func(a, b store.SubmitOutcome) int { return cmp.Compare(b.Seq, a.Seq) })
				_, err = st.BatchRecordSubmit(ctx, store.BatchRecordSubmitParams{Now: now(), NextCheckAt: now(), Outcomes: out})
				errs.add("submitter record", err)
			}
		})
		// Monitor: takes over expired held batches and due pending ones;
		// outcomes in key order.
		wg.Go(func() {
			for running.Err() == nil {
				at := now()
				due, err := st.BatchClaimForCheck(ctx, store.BatchClaimForCheckParams{Now: at, LeaseUntil: at, NextCheckAt: at, Max: roundMax})
				errs.add("monitor claim", err)
				if len(due) == 0 {
					continue
				}
				out := make([]store.StatusOutcome, len(due))
				for i, d := range due {
					s := store.BatchStatusCommitted
					switch x := mrand.IntN(20); {
					case x < 6:
						s = store.BatchStatusPending
					case x < 9:
						s = store.BatchStatusUnknown
					case x < 10:
						s = store.BatchStatusInvalid
					}
					out[i] = store.StatusOutcome{Seq: d.Seq, ServiceID: d.ServiceID, Attempt: d.Attempt, Status: s, Reason: "stress"}
				}
				slices.SortFunc(out, func(a, b store.StatusOutcome) int { return cmp.Compare(a.Seq, b.Seq) })
				_, err = st.BatchRecordStatuses(ctx, store.BatchRecordStatusesParams{Now: now(), NextCheckAt: now(), Outcomes: out})
				errs.add("monitor record", err)
			}
		})
	}
	wg.Wait()
	deadlocks := databaseDeadlocks(t, db, stores...) - deadlocksBefore
	for _, st := range stores {
		st.Close()
	}
	t.Logf("errors by SQLSTATE: %v; deadlocks detected: %d", errs.counts, deadlocks)
	require.Empty(t, errs.counts, "no round may fail; the first failures:\n%s", strings.Join(errs.first, "\n"))
	require.Zero(t, deadlocks, "PostgreSQL detected deadlocks between the lane's transactions")

	states, err := db.Store.BatchCountByState(ctx)
	require.NoError(t, err)
	t.Logf("batches by state after the concurrent rounds: %v", states)
	requireLaneInvariants(t, db)
	drainLane(t, db.Store)
	requireLaneInvariants(t, db)
}

// databaseDeadlocks returns how many deadlocks PostgreSQL has detected in the
// test's database. A backend reports its statistics at most once a second,
// so every idle connection of the given stores first forces its report
// (pg_stat_force_next_flush, PostgreSQL 15: the report is made before the
// statement's answer).
func databaseDeadlocks(t *testing.T, db *testdb.DB, stores ...*store.Store) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, st := range append(stores, db.Store) {
		for _, c := range st.Conns().AcquireAllIdle(ctx) {
			_, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
			c.Release()
			require.NoError(t, err)
		}
	}
	var n int64
	err := pgx.BeginFunc(ctx, db.Store.Conns(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	})
	require.NoError(t, err)
	return n
}

// requireLaneInvariants checks the batch lane's rules on the rows: at most one
// active batch per service, and no batch sent while an older batch of its
// service was never sent.
func requireLaneInvariants(t *testing.T, db *testdb.DB) {
	t.Helper()
	ctx := t.Context()
	rows, err := db.Store.DB().Query(ctx, `
		SELECT service_id || ': ' || count(*) FROM ledgerq.batches
		WHERE status IN ('pending', 'unknown', 'delayed') OR (status IS NULL AND (submitted OR queued_at IS NOT NULL))
		GROUP BY service_id HAVING count(*) > 1`)
	require.NoError(t, err)
	busy, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, busy, "services with more than one active batch")

	rows, err = db.Store.DB().Query(ctx, `
		SELECT sp.id || ' sent before the older ' || np.id
		FROM ledgerq.batches s JOIN ledgerq.batch_payloads sp ON sp.seq = s.seq
		JOIN ledgerq.batches n ON n.service_id = s.service_id JOIN ledgerq.batch_payloads np ON np.seq = n.seq
		WHERE s.attempts > 0 AND n.attempts = 0 AND n.status IS NULL
		  AND (n.created_at, np.id) < (s.created_at, sp.id)`)
	require.NoError(t, err)
	order, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, order, "batches sent out of their service's order")
}

// drainLane runs the lane to the end with a ledger that accepts and commits
// everything: every batch must finish, or admission lost a service.
func drainLane(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := t.Context()
	for range 10000 {
		now := time.Now().UTC().Truncate(time.Microsecond)
		_, err := st.BatchQueue(ctx, store.BatchQueueParams{Now: now, Reconcile: true, ReconcileMax: 1000})
		require.NoError(t, err)
		claimed, err := st.BatchClaimQueued(ctx, store.BatchClaimQueuedParams{Now: now, LeaseUntil: now.Add(time.Hour), Max: 1000})
		require.NoError(t, err)
		var sub []store.SubmitOutcome
		for _, c := range claimed {
			sub = append(sub, store.SubmitOutcome{Seq: c.Seq, Attempt: c.Attempt, Result: store.SubmitAccepted})
		}
		_, err = st.BatchRecordSubmit(ctx, store.BatchRecordSubmitParams{Now: now, NextCheckAt: now, Outcomes: sub})
		require.NoError(t, err)
		due, err := st.BatchClaimForCheck(ctx, store.BatchClaimForCheckParams{Now: now, LeaseUntil: now.Add(time.Hour), NextCheckAt: now.Add(time.Hour), Max: 1000})
		require.NoError(t, err)
		var fin []store.StatusOutcome
		for _, d := range due {
			fin = append(fin, store.StatusOutcome{Seq: d.Seq, ServiceID: d.ServiceID, Attempt: d.Attempt, Status: store.BatchStatusCommitted})
		}
		_, err = st.BatchRecordStatuses(ctx, store.BatchRecordStatusesParams{Now: now, NextCheckAt: now, Outcomes: fin})
		require.NoError(t, err)
		states, err := st.BatchCountByState(ctx)
		require.NoError(t, err)
		var waiting []string
		for s, n := range states {
			if !store.BatchStatus(s).Terminal() {
				waiting = append(waiting, fmt.Sprintf("%s=%d", s, n))
			}
		}
		if len(waiting) == 0 {
			return
		}
		sort.Strings(waiting)
		if len(claimed) == 0 && len(due) == 0 {
			t.Fatalf("the lane is stuck with batches waiting: %v", waiting)
		}
	}
	t.Fatal("the lane did not drain in 10000 rounds")
}

// A client that posts the same batches again before its first request ended
// (a retry after a timeout, to another ledgerq process), in another order,
// waits for the first request's rows; it must not deadlock with it.
func TestBatchInsert_ConcurrentRepostsInAnyOrderNeverDeadlock(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	deadlocksBefore := databaseDeadlocks(t, db)
	for range 30 {
		now := time.Now().UTC().Truncate(time.Microsecond)
		nbs := make([]store.NewBatch, 50)
		for i := range nbs {
			nbs[i] = store.NewBatch{ID: randomID(t), ServiceID: fmt.Sprintf("svc-%d", i%3), Payload: []byte{1}, CreatedAt: now}
		}
		reversed := slices.Clone(nbs)
		slices.Reverse(reversed)
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, batches := range [][]store.NewBatch{nbs, reversed} {
			wg.Go(func() {
				<-start
				_, errs[i] = db.Store.BatchInsert(ctx, store.BatchInsertParams{Now: now, Batches: batches})
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
	}
	require.Equal(t, deadlocksBefore, databaseDeadlocks(t, db), "PostgreSQL detected deadlocks between the requests")
}

// A claim skips the rows other transactions hold, but PostgreSQL can still
// make it wait: locking a row that was updated since the claim's snapshot,
// it follows the update chain and waits for a newer version's locker,
// whatever the wait policy. A claim waiting while it holds the rows it took
// can close a deadlock with an outcome statement (the stress test above
// caught one, in BatchClaimPendingForCheck), so the lane's claims are sent
// as sendClaim sends them: they give a lock wait up after a short timeout,
// run again, and after a few attempts report lock_not_available. That race
// cannot be staged from outside; a claim statement that waits for an
// advisory lock another session holds can, and it comes back with
// lock_not_available long before its deadline.
func TestBatchLane_AClaimGivesUpALockWaitInsteadOfQueueing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	holder, err := db.Store.Conns().Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock(7010)`)
	require.NoError(t, err)
	defer func() { _, _ = holder.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(7010)`) }()

	claimCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = db.Store.SendClaim(claimCtx, `SELECT pg_advisory_xact_lock(7010)`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "the claim waited for the lock until its deadline")
	require.Equal(t, "55P03", pgErr.Code)

	_, err = holder.Exec(ctx, `SELECT pg_advisory_unlock(7010)`)
	require.NoError(t, err)
	require.NoError(t, db.Store.SendClaim(ctx, `SELECT pg_advisory_xact_lock(7010)`), "the claim once the lock is free")
}

// A claim's LIMIT is a parameter, and PostgreSQL would plan a claim again on
// every call (no generic plan looks cheaper than one planned for its LIMIT),
// which cost more than running it when the submitter polls an empty queue.
// The claims run with generic plans: on the one connection they ran on,
// their prepared statements were never planned for their parameters.
func TestBatchLane_ClaimsAreNotPlannedAgainOnEveryCall(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	st := oneConnectionStore(t, db.URL)
	now := time.Now().UTC()
	for range 8 {
		_, err := st.BatchClaimQueued(ctx, store.BatchClaimQueuedParams{Now: now, LeaseUntil: now.Add(time.Minute), Max: 10})
		require.NoError(t, err)
		_, err = st.BatchClaimForCheck(ctx, store.BatchClaimForCheckParams{Now: now, LeaseUntil: now.Add(time.Minute), NextCheckAt: now.Add(time.Minute), Max: 10})
		require.NoError(t, err)
	}
	got := preparedPlans(t, st, "BatchClaim")
	require.Equal(t, map[string]plans{
		"BatchClaimQueued":          {generic: 8},
		"BatchClaimExpiredHeld":     {generic: 8},
		"BatchClaimPendingForCheck": {generic: 8},
	}, got)
}

// The wake-up at the end of a round's outcomes (BatchWakeIfQueued) runs
// with a generic plan: PostgreSQL found none cheaper than one planned for
// each call's services and planned it again every time (0.36 ms of
// planning for 0.05 ms of running, once per monitor round).
func TestBatchLane_AWakeUpIsNotPlannedAgainOnEveryCall(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	st := oneConnectionStore(t, db.URL)
	now := time.Now().UTC()
	for i := range 8 {
		_, err := st.BatchRecordStatuses(ctx, store.BatchRecordStatusesParams{
			Now: now, NextCheckAt: now.Add(time.Minute),
			Outcomes: []store.StatusOutcome{{Seq: int64(i + 1), Attempt: 1, ServiceID: fmt.Sprintf("svc-%d", i), Status: store.BatchStatusCommitted}},
		})
		require.NoError(t, err)
	}
	require.Equal(t, map[string]plans{"BatchWakeIfQueued": {generic: 8}}, preparedPlans(t, st, "BatchWakeIfQueued"))
}
