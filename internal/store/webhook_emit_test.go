package store_test

// The outbox rule: every real transition of a task writes its
// webhook event in the transaction of the change — once, and never when the
// change rolls back.

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// outboxRow is one stored delivery, as a test compares it.
type outboxRow struct {
	Endpoint string
	Type     store.WebhookEventType
	TaskID   string
	TxHash   string
	Nonce    *int64
	Status   string
}

// outbox returns the stored deliveries in the order they were written.
func outbox(t *testing.T, st *store.Store) []outboxRow {
	t.Helper()
	rows, err := st.DB().Query(t.Context(), `
		SELECT endpoint_id, event_type, task_id, payload FROM ledgerq.webhook_deliveries ORDER BY created_at, ctid`)
	require.NoError(t, err)
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		var payload []byte
		require.NoError(t, rows.Scan(&r.Endpoint, &r.Type, &r.TaskID, &payload))
		var data store.WebhookTaskData
		require.NoError(t, json.Unmarshal(payload, &data))
		require.Equal(t, r.TaskID, data.TaskID)
		r.TxHash, r.Nonce, r.Status = data.TxHash, data.Nonce, data.Status
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// emitSetup is a wallet "main" with one endpoint subscribed to every event
// and one to confirmed only.
type emitSetup struct {
	st            *store.Store
	rows          *testfactory.Factory
	all           string
	confirmedOnly string
}

func newEmitSetup(t *testing.T) emitSetup {
	t.Helper()
	st := testdb.NewTx(t)
	rows := testfactory.New(t, st, testfactory.NewClock())
	return emitSetup{
		st: st, rows: rows,
		all:           rows.CreateWebhookEndpoint(testfactory.WebhookEndpoint{}).ID,
		confirmedOnly: rows.CreateWebhookEndpoint(testfactory.WebhookEndpoint{EventTypes: []store.WebhookEventType{store.WebhookConfirmed}}).ID,
	}
}

func (e emitSetup) markSent(t *testing.T, now time.Time, hashes ...string) int64 {
	t.Helper()
	n, err := e.st.AttemptMarkSent(t.Context(), store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: hashes})
	require.NoError(t, err)
	return n
}

// clearOutbox empties the outbox, so that a test sees only the events of
// the transitions after it.
func (e emitSetup) clearOutbox(t *testing.T) {
	t.Helper()
	_, err := e.st.DB().Exec(t.Context(), `DELETE FROM ledgerq.webhook_deliveries`)
	require.NoError(t, err)
}

func nonce(n int64) *int64 { return &n }

// confirmedOutbox is the outbox after tasks a (nonce 0) and b (nonce 1) were
// confirmed with the given hashes: a confirmed event of each to both
// endpoints subscribed to it, as sortedByTypeThenEndpoint orders them.
func (e emitSetup) confirmedOutbox(a, aHash, b, bHash string) []outboxRow {
	var out []outboxRow
	for i, task := range []struct{ id, hash string }{{a, aHash}, {b, bHash}} {
		for _, ep := range []string{e.all, e.confirmedOnly} {
			out = append(out, outboxRow{Endpoint: ep, Type: store.WebhookConfirmed, TaskID: task.id, TxHash: task.hash, Nonce: nonce(int64(i)), Status: "Done"})
		}
	}
	return out
}

// submitted: an attempt of a task moving signed -> sent emits once, with
// its hash and nonce; marking it sent again, recording a new broadcast of
// it, or sending a no-op emits nothing.
func TestWebhookEmit_SubmittedOnceWhenAnAttemptOfATaskMovesToSent(t *testing.T) {
	t.Parallel()
	e := newEmitSetup(t)
	ctx := t.Context()
	now := testfactory.Start()
	a := e.rows.PostTask(testfactory.Task{})
	b := e.rows.PostTask(testfactory.Task{})
	c := e.rows.PostTask(testfactory.Task{})
	stored := e.rows.StartTasks(0, a, b, c)
	require.Empty(t, outbox(t, e.st), "storing attempts is not a broadcast")

	require.EqualValues(t, 2, e.markSent(t, now, stored[1].TxHash, stored[0].TxHash))
	want := []outboxRow{
		{Endpoint: e.all, Type: store.WebhookSubmitted, TaskID: a.ID, TxHash: stored[0].TxHash, Nonce: nonce(0), Status: "Executing"},
		{Endpoint: e.all, Type: store.WebhookSubmitted, TaskID: b.ID, TxHash: stored[1].TxHash, Nonce: nonce(1), Status: "Executing"},
	}
	require.Equal(t, want, outbox(t, e.st), "one per task, in nonce order; none to the confirmed-only endpoint")

	require.EqualValues(t, 0, e.markSent(t, now.Add(time.Second), stored[0].TxHash, stored[1].TxHash))
	_, err := e.st.AttemptRecordBroadcast(ctx, store.AttemptRecordBroadcastParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash})
	require.NoError(t, err)
	require.Equal(t, want, outbox(t, e.st), "a re-broadcast emits nothing")

	// A no-op at c's freed nonce: sent, it tells no one.
	_, err = e.st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: c.ID, Reason: "intrinsic gas too low"})
	require.NoError(t, err)
	before := len(outbox(t, e.st))
	noop := testfactory.SignedTx("", 2)
	require.NoError(t, e.st.AttemptStoreNoop(ctx, store.AttemptStoreNoopParams{Now: now, ChainID: taskChain, Sender: taskSender, Tx: noop}))
	require.EqualValues(t, 1, e.markSent(t, now, noop.TxHash))
	require.Len(t, outbox(t, e.st), before, "a no-op emits nothing")
}

// A gas bump is a new attempt: sent, it emits submitted again with the new
// hash; the task then confirms once, with the hash that was mined.
func TestWebhookEmit_AGasBumpSentEmitsSubmittedAgainWithTheNewHash(t *testing.T) {
	t.Parallel()
	e := newEmitSetup(t)
	ctx := t.Context()
	now := testfactory.Start()
	task := e.rows.PostTask(testfactory.Task{})
	old := e.rows.StartTasks(0, task)[0]
	e.markSent(t, now, old.TxHash)
	bump := testfactory.SignedTx(task.ID, 0)
	require.NoError(t, e.st.AttemptBump(ctx, store.AttemptBumpParams{Now: now, ChainID: taskChain, Sender: taskSender, Old: old.TxHash, New: bump}))
	require.Len(t, outbox(t, e.st), 1, "storing the bump is not a broadcast")
	e.markSent(t, now.Add(time.Second), bump.TxHash)
	e.markSent(t, now.Add(2*time.Second), bump.TxHash)
	_, err := e.st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now.Add(3 * time.Second), ChainID: taskChain, TxHash: bump.TxHash, Final: true})
	require.NoError(t, err)
	require.Equal(t, []outboxRow{
		{Endpoint: e.all, Type: store.WebhookSubmitted, TaskID: task.ID, TxHash: old.TxHash, Nonce: nonce(0), Status: "Executing"},
		{Endpoint: e.all, Type: store.WebhookSubmitted, TaskID: task.ID, TxHash: bump.TxHash, Nonce: nonce(0), Status: "Executing"},
		{Endpoint: e.all, Type: store.WebhookConfirmed, TaskID: task.ID, TxHash: bump.TxHash, Nonce: nonce(0), Status: "Done"},
		{Endpoint: e.confirmedOnly, Type: store.WebhookConfirmed, TaskID: task.ID, TxHash: bump.TxHash, Nonce: nonce(0), Status: "Done"},
	}, sortedByTypeThenEndpoint(outbox(t, e.st), e))
}

// sortedByTypeThenEndpoint keeps the write order but puts the deliveries of
// one event (written by one statement) in a fixed endpoint order: e.all
// first.
func sortedByTypeThenEndpoint(rows []outboxRow, e emitSetup) []outboxRow {
	out := make([]outboxRow, 0, len(rows))
	for i := 0; i < len(rows); {
		j := i
		for j < len(rows) && rows[j].Type == rows[i].Type && rows[j].TxHash == rows[i].TxHash && rows[j].TaskID == rows[i].TaskID {
			j++
		}
		for _, ep := range []string{e.all, e.confirmedOnly} {
			for _, r := range rows[i:j] {
				if r.Endpoint == ep {
					out = append(out, r)
				}
			}
		}
		i = j
	}
	return out
}

// confirmed: a task done, by its own hash or by a superseded one, emits
// confirmed once with the mined hash and nonce, to every endpoint subscribed
// to it; a confirmed no-op emits nothing.
func TestWebhookEmit_ConfirmedOnceWhenATaskIsDone(t *testing.T) {
	t.Parallel()
	e := newEmitSetup(t)
	ctx := t.Context()
	now := testfactory.Start()
	a := e.rows.PostTask(testfactory.Task{})
	b := e.rows.PostTask(testfactory.Task{})
	stored := e.rows.StartTasks(0, a, b)
	e.markSent(t, now, stored[0].TxHash, stored[1].TxHash)
	// b's attempt is bumped and the superseded one is mined.
	bump := testfactory.SignedTx(b.ID, 1)
	require.NoError(t, e.st.AttemptBump(ctx, store.AttemptBumpParams{Now: now, ChainID: taskChain, Sender: taskSender, Old: stored[1].TxHash, New: bump}))
	e.clearOutbox(t)

	_, err := e.st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash, Reverted: true, Final: true})
	require.NoError(t, err)
	_, err = e.st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now.Add(time.Second), ChainID: taskChain, TxHash: stored[1].TxHash, Live: bump.TxHash, Final: true})
	require.NoError(t, err)
	_, err = e.st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash, Final: true})
	require.ErrorIs(t, err, store.ErrNotFound, "confirmed already: nothing changes")
	require.Equal(t, e.confirmedOutbox(a.ID, stored[0].TxHash, b.ID, stored[1].TxHash), sortedByTypeThenEndpoint(outbox(t, e.st), e))

	// A mined no-op has no task to tell about.
	c := e.rows.PostTask(testfactory.Task{})
	cs := e.rows.StartTasks(2, c)
	_, err = e.st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: c.ID, Reason: "rejected"})
	require.NoError(t, err)
	before := len(outbox(t, e.st))
	noop := testfactory.SignedTx("", cs[0].Nonce)
	require.NoError(t, e.st.AttemptStoreNoop(ctx, store.AttemptStoreNoopParams{Now: now, ChainID: taskChain, Sender: taskSender, Tx: noop}))
	_, err = e.st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: noop.TxHash, Final: true})
	require.NoError(t, err)
	require.Len(t, outbox(t, e.st), before)
}

// failed: a task ended in error (a deterministic failure, naming its
// dropped attempt, or a cancelled waiting task) emits failed once; a task
// that could not be cancelled emits nothing.
func TestWebhookEmit_FailedOnceWhenATaskEndsInError(t *testing.T) {
	t.Parallel()
	e := newEmitSetup(t)
	ctx := t.Context()
	now := testfactory.Start()
	a := e.rows.PostTask(testfactory.Task{})
	b := e.rows.PostTask(testfactory.Task{})
	stored := e.rows.StartTasks(0, a)
	_, err := e.st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: a.ID, Reason: "insufficient funds"})
	require.NoError(t, err)
	_, err = e.st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: a.ID, Reason: "again"})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, ok, err := e.st.TaskCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: b.ID})
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = e.st.TaskCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: b.ID})
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = e.st.TaskCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: a.ID})
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, []outboxRow{
		{Endpoint: e.all, Type: store.WebhookFailed, TaskID: a.ID, TxHash: stored[0].TxHash, Nonce: nonce(0), Status: "Error"},
		{Endpoint: e.all, Type: store.WebhookFailed, TaskID: b.ID, Status: "Error"},
	}, outbox(t, e.st))
}

// replaced: a task whose nonce another transaction took emits replaced
// (with the hash passed over) when it goes back to waiting, and replaced
// then failed when that ends it in error; a requeue that is no replacement
// (a released attempt) emits nothing.
func TestWebhookEmit_ReplacedWhenAnotherTransactionTookTheNonceAndFailedTooPastTheLimit(t *testing.T) {
	t.Parallel()
	e := newEmitSetup(t)
	ctx := t.Context()
	now := testfactory.Start()
	a := e.rows.PostTask(testfactory.Task{})
	b := e.rows.PostTask(testfactory.Task{})
	c := e.rows.PostTask(testfactory.Task{})
	stored := e.rows.StartTasks(0, a, b, c)
	e.markSent(t, now, stored[0].TxHash, stored[1].TxHash)
	e.clearOutbox(t)

	back, err := e.st.AttemptRequeue(ctx, store.AttemptRequeueParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash,
		Reason: "replaced", Replaced: true, MaxReplacements: 1})
	require.NoError(t, err)
	require.Equal(t, store.TaskWaiting, back.Status)
	ended, err := e.st.AttemptRequeue(ctx, store.AttemptRequeueParams{Now: now, ChainID: taskChain, TxHash: stored[1].TxHash,
		Reason: "replaced", Replaced: true, MaxReplacements: 0})
	require.NoError(t, err)
	require.Equal(t, store.TaskError, ended.Status)
	_, err = e.st.AttemptRequeue(ctx, store.AttemptRequeueParams{Now: now, ChainID: taskChain, TxHash: stored[2].TxHash, Reason: "released"})
	require.NoError(t, err)
	require.Equal(t, []outboxRow{
		{Endpoint: e.all, Type: store.WebhookReplaced, TaskID: a.ID, TxHash: stored[0].TxHash, Nonce: nonce(0), Status: "Waiting"},
		{Endpoint: e.all, Type: store.WebhookReplaced, TaskID: b.ID, TxHash: stored[1].TxHash, Nonce: nonce(1), Status: "Error"},
		{Endpoint: e.all, Type: store.WebhookFailed, TaskID: b.ID, TxHash: stored[1].TxHash, Nonce: nonce(1), Status: "Error"},
	}, outbox(t, e.st))
}

// The outbox rule: a transition that rolls back emits nothing.
func TestWebhookEmit_ATransitionThatRollsBackEmitsNothing(t *testing.T) {
	t.Parallel()
	e := newEmitSetup(t)
	ctx := t.Context()
	now := testfactory.Start()
	a := e.rows.PostTask(testfactory.Task{})
	b := e.rows.PostTask(testfactory.Task{})
	c := e.rows.PostTask(testfactory.Task{})
	w := e.rows.PostTask(testfactory.Task{})
	stored := e.rows.StartTasks(0, a, b, c)
	e.markSent(t, now, stored[1].TxHash, stored[2].TxHash)
	e.clearOutbox(t)

	steps := map[string]func(tx *store.Store) error{
		"submitted": func(tx *store.Store) error {
			_, err := tx.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{stored[0].TxHash}})
			return err
		},
		"confirmed": func(tx *store.Store) error {
			_, err := tx.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[1].TxHash, Final: true})
			return err
		},
		"failed": func(tx *store.Store) error {
			_, err := tx.TaskFail(ctx, store.TaskFailParams{Now: now, ID: c.ID, Reason: "rejected"})
			return err
		},
		"cancelled": func(tx *store.Store) error {
			_, _, err := tx.TaskCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: w.ID})
			return err
		},
		"replaced": func(tx *store.Store) error {
			_, err := tx.AttemptRequeue(ctx, store.AttemptRequeueParams{Now: now, ChainID: taskChain, TxHash: stored[2].TxHash,
				Reason: "replaced", Replaced: true, MaxReplacements: 0})
			return err
		},
	}
	for name, step := range steps {
		tx, err := e.st.DB().Begin(ctx)
		require.NoError(t, err)
		txs := store.NewTx(tx)
		require.NoError(t, step(txs), name)
		require.NotEmpty(t, outbox(t, txs), "%s: emitted inside the transaction", name)
		require.NoError(t, tx.Rollback(context.WithoutCancel(ctx)))
		require.Empty(t, outbox(t, e.st), "%s: rolled back with the change", name)
	}
}

// A confirm round's final receipts are recorded at once: every attempt
// confirmed in its block, every task done (reverted as its receipt says),
// and one confirmed event each. A round with one attempt that is no longer
// live records none of them, so the caller can record them one at a time.
func TestWebhookEmit_ConfirmManyRecordsEveryReceiptOfARoundOrNone(t *testing.T) {
	t.Parallel()
	e := newEmitSetup(t)
	ctx := t.Context()
	now := testfactory.Start()
	a, b, c := e.rows.PostTask(testfactory.Task{}), e.rows.PostTask(testfactory.Task{}), e.rows.PostTask(testfactory.Task{})
	stored := e.rows.StartTasks(0, a, b, c)
	e.markSent(t, now, stored[0].TxHash, stored[1].TxHash, stored[2].TxHash)
	e.clearOutbox(t)
	receipt := func(i int, reverted bool) store.AttemptConfirmParams {
		return store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[i].TxHash, Live: stored[i].TxHash,
			Block: uint64(10 + i), BlockHash: fmt.Sprintf("0x%064x", 10+i), Final: true, Reverted: reverted}
	}

	// c is confirmed alone first: the round that still names it records nothing.
	_, err := e.st.AttemptConfirm(ctx, receipt(2, false))
	require.NoError(t, err)
	e.clearOutbox(t)
	_, err = e.st.AttemptConfirmMany(ctx, []store.AttemptConfirmParams{receipt(0, false), receipt(1, true), receipt(2, false)})
	require.ErrorIs(t, err, store.ErrNotFound)
	for _, task := range []store.Task{a, b} {
		got, err := e.st.TaskGet(ctx, task.Wallet, task.ID)
		require.NoError(t, err)
		require.Equal(t, store.TaskExecuting, got.Status, "a round with a stale receipt changed %s", task.ID)
	}
	require.Empty(t, outbox(t, e.st))

	done, err := e.st.AttemptConfirmMany(ctx, []store.AttemptConfirmParams{receipt(0, false), receipt(1, true)})
	require.NoError(t, err)
	require.Len(t, done, 2)
	for i, task := range done {
		require.Equal(t, store.TaskDone, task.Status)
		require.Equal(t, stored[i].TxHash, task.TxHash)
		require.Equal(t, i == 1, task.Reverted)
		atts, err := e.st.AttemptListByTask(ctx, task.ID)
		require.NoError(t, err)
		require.Equal(t, store.AttemptConfirmed, atts[0].State)
		require.Equal(t, int64(10+i), *atts[0].MinedBlock)
	}
	require.Equal(t, e.confirmedOutbox(a.ID, stored[0].TxHash, b.ID, stored[1].TxHash), sortedByTypeThenEndpoint(outbox(t, e.st), e))
}
