package store_test

// Admission (done where a service is freed): the transaction that stores a batch for an idle service, or gives a
// service's batch its final status, queues the service's next batch, and two
// such transactions for one service never queue two batches.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func TestBatchInsert_AdmitsTheOldestBatchOfAnIdleServiceOnly(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	now := clk.Now()
	// One request, the newer batch first: created_at decides, not the order
	// in the request; a tie on created_at is broken by id.
	var nbs []store.NewBatch
	for _, at := range []time.Duration{2 * time.Second, time.Second, time.Second} {
		id, payload := testfactory.SignedBatch(t)
		nbs = append(nbs, store.NewBatch{ID: id, ServiceID: "s", Payload: payload, CreatedAt: now.Add(at)})
	}
	// The ids are real header signatures; order the tie by their ids.
	oldest := nbs[1].ID
	if nbs[2].ID < oldest {
		oldest = nbs[2].ID
	}
	out, err := st.BatchInsert(t.Context(), store.BatchInsertParams{Now: now, Batches: nbs})
	require.NoError(t, err)
	require.Equal(t, []string{oldest}, rows.QueuedIDs())
	for _, r := range out {
		require.Equal(t, r.Batch.ID == oldest, r.Batch.QueuedAt != nil, "the stored row says which batch was queued: %s", r.Batch.ID)
	}

	// The service is busy now: a later request queues nothing more.
	rows.PostBatches("s", 1)
	require.Equal(t, []string{oldest}, rows.QueuedIDs())
	// Another service is idle: its batch is queued.
	other := rows.PostBatches("t", 1)[0]
	require.Contains(t, rows.QueuedIDs(), other)
}

// Batches of one service created at the same time but posted in separate
// requests draw their seqs in the order they arrive, not in id order: when
// the service is freed, the tie is still broken by id.
func TestBatchAdmission_BreaksATieOfBatchesPostedApartByID(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx := t.Context()
	now := clk.Now()
	first := rows.PostBatches("s", 1)[0]
	low, lowPayload := testfactory.SignedBatch(t)
	high, highPayload := testfactory.SignedBatch(t)
	if high < low {
		low, lowPayload, high, highPayload = high, highPayload, low, lowPayload
	}
	at := now.Add(time.Hour)
	for _, nb := range []store.NewBatch{
		{ID: high, ServiceID: "s", Payload: highPayload, CreatedAt: at},
		{ID: low, ServiceID: "s", Payload: lowPayload, CreatedAt: at},
	} {
		_, err := st.BatchInsert(ctx, store.BatchInsertParams{Now: now, Batches: []store.NewBatch{nb}})
		require.NoError(t, err)
	}
	require.Equal(t, []string{first}, rows.QueuedIDs())

	// The first batch is refused by the ledger, which frees the service.
	claimed, err := st.BatchClaimQueued(ctx, store.BatchClaimQueuedParams{Now: now, LeaseUntil: now.Add(time.Minute), Max: 10})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = st.BatchRecordSubmit(ctx, store.BatchRecordSubmitParams{Now: now, NextCheckAt: now, Outcomes: []store.SubmitOutcome{
		{Seq: claimed[0].Seq, Attempt: claimed[0].Attempt, Result: store.SubmitRejected, Reason: "test"},
	}})
	require.NoError(t, err)
	require.Equal(t, []string{low}, rows.QueuedIDs(), "the tie at %s is broken by id, whatever the order the batches came in", at)
}

func TestBatchInsert_DoesNotAdmitIntoAServiceWithAnActiveBatch(t *testing.T) {
	t.Parallel()
	_, clk, rows := txRows(t)
	t0 := clk.Now()
	for i, active := range []testfactory.Batch{
		{ServiceID: "held", Submitted: true, Attempts: 1, LastSubmittedAt: t0, ClaimExpiresAt: t0.Add(time.Minute)},
		{ServiceID: "pending", Submitted: true, Status: store.BatchStatusPending},
		{ServiceID: "unknown", Status: store.BatchStatusUnknown},
		{ServiceID: "delayed", Status: store.BatchStatusDelayed, Attempts: 1},
	} {
		active.ID = fmt.Sprintf("active-%d", i)
		rows.PutBatches(active)
		id := rows.PostBatches(active.ServiceID, 1)[0]
		require.Nil(t, rows.Get(id).QueuedAt, "service %s has an active batch", active.ServiceID)
	}
}

// Concurrent requests for one idle service, and a final status racing them,
// never leave two batches of the service queued or in flight.
func TestBatchAdmission_ConcurrentTransactionsAdmitOneBatchPerService(t *testing.T) {
	t.Parallel()
	db, clk, rows := committedRows(t)
	const writers, perWriter = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				id, payload := testfactory.SignedBatch(t)
				_, err := db.Store.BatchInsert(t.Context(), store.BatchInsertParams{
					Now:     clk.Now(),
					Batches: []store.NewBatch{{ID: id, ServiceID: "s", Payload: payload, CreatedAt: clk.Now().Add(time.Duration(w*perWriter+i) * time.Millisecond)}},
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, rows.QueuedIDs(), 1, "one batch of the service is queued, whatever the interleaving")
}

// The payload is written once, in its own table: state changes rewrite a
// narrow row, a claim still hands the submitter the exact bytes stored, and
// deleting a batch deletes its payload.
func TestBatchPayload_IsStoredOnceAndClaimedAsStored(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	id, payload := testfactory.SignedBatch(t)
	_, err := st.BatchInsert(t.Context(), store.BatchInsertParams{Now: clk.Now(), Batches: []store.NewBatch{{ID: id, ServiceID: "s", Payload: payload}}})
	require.NoError(t, err)
	_, err = st.BatchInsert(t.Context(), store.BatchInsertParams{Now: clk.Now(), Batches: []store.NewBatch{{ID: id, ServiceID: "s", Payload: payload}}})
	require.NoError(t, err, "a re-post of the same batch")
	var rows int
	require.NoError(t, st.DB().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.batch_payloads WHERE id = $1`, id).Scan(&rows))
	require.Equal(t, 1, rows)

	claimed, err := st.BatchClaimQueued(t.Context(), store.BatchClaimQueuedParams{Now: clk.Now(), LeaseUntil: clk.Now().Add(time.Minute), Max: 10})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, payload, claimed[0].Payload)

	_, err = st.DB().Exec(t.Context(), `DELETE FROM ledgerq.batches WHERE seq = $1`, claimed[0].Seq)
	require.NoError(t, err)
	require.NoError(t, st.DB().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.batch_payloads WHERE id = $1`, id).Scan(&rows))
	require.Zero(t, rows, "the payload goes with its batch")
}

// An intake into a busy service takes the service's lock shared: it does not
// wait for another intake of the service (which holds it shared too), only
// for a transaction that frees the service (which holds it exclusively).
func TestBatchInsert_IntoABusyServiceDoesNotWaitForAnotherIntakeOfIt(t *testing.T) {
	t.Parallel()
	db, clk, rows := committedRows(t)
	rows.PutBatches(testfactory.Batch{ID: "active", ServiceID: "s", Submitted: true, Status: store.BatchStatusPending})

	// Another intake of s, in flight: it holds s's lock shared.
	other, err := db.Store.DB().Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = other.Rollback(t.Context()) }()
	_, err = other.Exec(t.Context(), `SELECT pg_advisory_xact_lock_shared(1818585457, hashtext('s'))`)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	id, payload := testfactory.SignedBatch(t)
	_, err = db.Store.BatchInsert(ctx, store.BatchInsertParams{Now: clk.Now(), Batches: []store.NewBatch{{ID: id, ServiceID: "s", Payload: payload}}})
	require.NoError(t, err, "the intake waited for the other intake of the busy service")
	require.Nil(t, rows.Get(id).QueuedAt, "the service is busy")
}

// The service's active batch gets its final status while an intake waits for
// the service's lock: the finisher's admission ran before the intake's batch
// was committed and found nothing to queue, and the intake, which saw the
// service busy, queues its batch after its own commit.
func TestBatchInsert_AdmitsItsBatchWhenTheServiceWasFreedWhileItWaitedForTheLock(t *testing.T) {
	t.Parallel()
	db, clk, rows := committedRows(t)
	rows.PutBatches(testfactory.Batch{ID: "active", ServiceID: "s", Submitted: true, Status: store.BatchStatusPending})
	active := rows.Get("active")

	// The finisher: the active batch committed, the service locked for its
	// admission, not yet committed.
	fin, err := db.Store.DB().Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = fin.Rollback(t.Context()) }()
	_, err = fin.Exec(t.Context(), `UPDATE ledgerq.batches SET status = 'committed', finished_at = $2, updated_at = $2
		WHERE seq = $1`, active.Seq, clk.Now())
	require.NoError(t, err)
	_, err = fin.Exec(t.Context(), `SELECT pg_advisory_xact_lock(1818585457, hashtext('s'))`)
	require.NoError(t, err)

	id, payload := testfactory.SignedBatch(t)
	type result struct {
		out []store.InsertedBatch
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := db.Store.BatchInsert(t.Context(), store.BatchInsertParams{Now: clk.Now(), Batches: []store.NewBatch{{ID: id, ServiceID: "s", Payload: payload}}})
		done <- result{out, err}
	}()
	// The intake saw the service busy and waits for its lock.
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, db.Store.DB().QueryRow(t.Context(),
			`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting))
		return waiting == 1
	}, 5*time.Second, 10*time.Millisecond)
	// The finisher's admission cannot see the intake's batch: it queues
	// nothing, and commits.
	require.NoError(t, fin.Commit(t.Context()))

	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the intake did not return")
	}
	require.NoError(t, r.err)
	require.Len(t, r.out, 1)
	require.NotNil(t, r.out[0].Batch.QueuedAt, "the intake reports its batch queued")
	require.Equal(t, []string{id}, rows.QueuedIDs(), "the freed service's next batch is queued")
}
