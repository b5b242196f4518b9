package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// Write-ahead (DESIGN §2.3, seed 003): consecutive nonces from the wallet's
// next nonce, stored with the raw bytes, the next nonce advanced past them,
// and the tasks executing, all in one transaction.
func TestAttempts_WriteAheadStoresConsecutiveNoncesAdvancesTheNextNonceAndStartsTheTasks(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	_, err := st.WalletNonceGet(ctx, taskChain, taskSender)
	require.ErrorIs(t, err, store.ErrNotFound, "no nonce before the first attempt")
	a := insertTask(t, st, newTask(now, 0, ""))
	b := insertTask(t, st, newTask(now, 0, ""))
	stored := storeAttempts(t, st, now.Add(time.Second), 7, a, b)
	require.Equal(t, []int64{7, 8}, []int64{stored[0].Nonce, stored[1].Nonce})
	next, err := st.WalletNonceGet(ctx, taskChain, taskSender)
	require.NoError(t, err)
	require.Equal(t, int64(9), next)
	for i, task := range []store.Task{a, b} {
		got, err := st.TaskGet(ctx, "main", task.ID)
		require.NoError(t, err)
		require.Equal(t, store.TaskExecuting, got.Status)
		require.Equal(t, now.Add(time.Second), *got.StartedAt)
		atts, err := st.AttemptListByTask(ctx, task.ID)
		require.NoError(t, err)
		require.Len(t, atts, 1)
		require.Equal(t, store.AttemptSigned, atts[0].State)
		require.Equal(t, stored[i].Raw, atts[0].Raw, "the signed bytes are kept for recover")
		require.Equal(t, 0, stored[i].MaxFeePerGas.Cmp(atts[0].MaxFeePerGas))
	}

	// The next round continues from 9; signing with 8 again is refused.
	c := insertTask(t, st, newTask(now, 0, ""))
	_, err = st.AttemptsStore(ctx, store.AttemptsStoreParams{
		Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 8, Attempts: []store.SignedTx{fakeSigned(c.ID, 8)},
	})
	var moved *store.NonceMovedError
	require.ErrorAs(t, err, &moved)
	// Nonces that are not consecutive are refused before anything is written.
	d := insertTask(t, st, newTask(now, 0, ""))
	_, err = st.AttemptsStore(ctx, store.AttemptsStoreParams{
		Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 9,
		Attempts: []store.SignedTx{fakeSigned(c.ID, 9), fakeSigned(d.ID, 11)},
	})
	require.ErrorContains(t, err, "consecutive")
	storeAttempts(t, st, now, 9, c, d)
}

// The unique index over live attempts: a second transaction for a nonce that
// a live attempt holds cannot be stored, even by a writer that bypasses the
// next nonce (a reset to a lower nonce, a bug); it surfaces as a typed error
// and nothing of the round is stored.
func TestAttempts_TwoAttemptsForOneLiveNonceCannotBeStored(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	a := insertTask(t, st, newTask(now, 0, ""))
	b := insertTask(t, st, newTask(now, 0, ""))
	storeAttempts(t, st, now, 0, a)
	// Someone moves the next nonce back under the live attempt.
	_, err := st.DB().Exec(ctx, `UPDATE ledgerq.wallet_nonces SET next_nonce = 0`)
	require.NoError(t, err)
	_, err = st.AttemptsStore(ctx, store.AttemptsStoreParams{
		Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 0, Attempts: []store.SignedTx{fakeSigned(b.ID, 0)},
	})
	var taken *store.NonceTakenError
	require.ErrorAs(t, err, &taken)
	got, err := st.TaskGet(ctx, "main", b.ID)
	require.NoError(t, err)
	require.Equal(t, store.TaskWaiting, got.Status, "the task did not start without its attempt")
	next, err := st.WalletNonceGet(ctx, taskChain, taskSender)
	require.NoError(t, err)
	require.Equal(t, int64(0), next, "the next nonce did not move either")

	// Once the live attempt is dropped (its task failed), the nonce is free.
	_, err = st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: a.ID, Reason: "insufficient funds"})
	require.NoError(t, err)
	storeAttempts(t, st, now, 0, b)
}

// A task moves to executing only with its attempt: a task cancelled between
// the worker's read of the queue and its store makes the whole store fail,
// so no transaction is stored for a cancelled task and no nonce is used.
func TestAttempts_ATaskMovesToExecutingOnlyWithItsAttempt(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	a := insertTask(t, st, newTask(now, 0, ""))
	b := insertTask(t, st, newTask(now, 0, ""))
	next, err := st.TaskNextWaiting(ctx, store.TaskNextWaitingParams{ChainID: taskChain, Sender: taskSender, Queue: store.QueueFIFO, Max: 10})
	require.NoError(t, err)
	require.Len(t, next, 2)
	_, ok, err := st.TaskCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: b.ID})
	require.NoError(t, err)
	require.True(t, ok)

	_, err = st.AttemptsStore(ctx, store.AttemptsStoreParams{
		Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 0,
		Attempts: []store.SignedTx{fakeSigned(a.ID, 0), fakeSigned(b.ID, 1)},
	})
	var notWaiting *store.TaskNotWaitingError
	require.ErrorAs(t, err, &notWaiting)
	got, err := st.TaskGet(ctx, "main", a.ID)
	require.NoError(t, err)
	require.Equal(t, store.TaskWaiting, got.Status)
	atts, err := st.AttemptListByTask(ctx, a.ID)
	require.NoError(t, err)
	require.Empty(t, atts)
	_, err = st.WalletNonceGet(ctx, taskChain, taskSender)
	require.ErrorIs(t, err, store.ErrNotFound, "no nonce was used")

	// And the database refuses an attempt for a task of another wallet's queue.
	other := newTask(now, 0, "")
	other.Sender = taskTo
	o := insertTask(t, st, other)
	_, err = st.AttemptsStore(ctx, store.AttemptsStoreParams{
		Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 0, Attempts: []store.SignedTx{fakeSigned(o.ID, 0)},
	})
	require.ErrorAs(t, err, &notWaiting)
}

// Seed 003, recover: attempts signed and stored but not known sent come back
// in nonce order with their bytes; once marked sent they are awaiting
// confirmation instead.
func TestAttempts_RecoverReturnsSignedButUnsentAttemptsInNonceOrder(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	var tasks []store.Task
	for range 4 {
		tasks = append(tasks, insertTask(t, st, newTask(now, 0, "")))
	}
	stored := storeAttempts(t, st, now, 3, tasks...)
	n, err := st.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{stored[1].TxHash}})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	unsent, err := st.AttemptsUnsent(ctx, store.AttemptsListParams{ChainID: taskChain, Sender: taskSender, Max: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 5, 6}, nonces(unsent))
	require.Equal(t, stored[0].Raw, unsent[0].Raw)

	sent, err := st.AttemptsSentBelow(ctx, store.AttemptsListParams{ChainID: taskChain, Sender: taskSender, Below: 100, Max: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{4}, nonces(sent))
	sent, err = st.AttemptsSentBelow(ctx, store.AttemptsListParams{ChainID: taskChain, Sender: taskSender, Below: 4, Max: 10})
	require.NoError(t, err)
	require.Empty(t, sent, "the chain's nonce has not passed it")

	n, err = st.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{stored[1].TxHash}})
	require.NoError(t, err)
	require.Zero(t, n, "marking twice changes nothing")
}

// Seed 003, confirm: a mined attempt makes its task done with its hash; a
// reverted receipt is done with reverted, not an error.
func TestAttempts_ConfirmEndsTheTaskDoneWithItsHashAndRevertedFlag(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	ok := insertTask(t, st, newTask(now, 0, ""))
	rev := insertTask(t, st, newTask(now, 0, ""))
	stored := storeAttempts(t, st, now, 0, ok, rev)
	_, err := st.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{stored[0].TxHash}})
	require.NoError(t, err)

	done, err := st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now.Add(time.Minute), ChainID: taskChain, TxHash: stored[0].TxHash, Final: true})
	require.NoError(t, err)
	require.Equal(t, store.TaskDone, done.Status)
	require.Equal(t, stored[0].TxHash, done.TxHash)
	require.False(t, done.Reverted)
	require.Equal(t, now.Add(time.Minute), *done.FinishedAt)

	// A signed attempt found mined by recover is confirmed too.
	revDone, err := st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[1].TxHash, Reverted: true, Final: true})
	require.NoError(t, err)
	require.Equal(t, store.TaskDone, revDone.Status)
	require.True(t, revDone.Reverted)

	_, err = st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash, Final: true})
	require.ErrorIs(t, err, store.ErrNotFound, "confirming twice changes nothing")
	atts, err := st.AttemptListByTask(ctx, ok.ID)
	require.NoError(t, err)
	require.Equal(t, store.AttemptConfirmed, atts[0].State)
}

// A deterministic failure ends the task in error with its reason and drops
// its attempt; a done task cannot fail.
func TestAttempts_FailEndsTheTaskInErrorAndDropsItsAttempts(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	task := insertTask(t, st, newTask(now, 0, ""))
	storeAttempts(t, st, now, 0, task)
	failed, err := st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: task.ID, Reason: "intrinsic gas too low"})
	require.NoError(t, err)
	require.Equal(t, store.TaskError, failed.Status)
	require.Equal(t, "intrinsic gas too low", failed.Error)
	require.False(t, failed.Cancelled)
	atts, err := st.AttemptListByTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, store.AttemptDropped, atts[0].State)
	_, err = st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: task.ID, Reason: "again"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// Seed 004's cache cleanup, made durable: finished tasks older than the
// retention are deleted in small batches (with their attempts); waiting,
// executing and recent ones stay.
func TestTasks_RetentionDeletesFinishedTasksOlderThanTheAgeInSmallBatches(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	var old []store.Task
	for range 3 {
		task := insertTask(t, st, newTask(now, 0, ""))
		_, _, err := st.TaskCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: task.ID})
		require.NoError(t, err)
		old = append(old, task)
	}
	doneOld := insertTask(t, st, newTask(now, 0, ""))
	att := storeAttempts(t, st, now, 0, doneOld)
	_, err := st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: att[0].TxHash, Final: true})
	require.NoError(t, err)
	waiting := insertTask(t, st, newTask(now, 0, ""))
	recent := insertTask(t, st, newTask(now, 0, ""))
	_, _, err = st.TaskCancel(ctx, store.TaskCancelParams{Now: now.Add(time.Hour), Wallet: "main", ID: recent.ID})
	require.NoError(t, err)

	before := now.Add(time.Minute)
	n, err := st.TaskDeleteFinished(ctx, store.TaskDeleteFinishedParams{Before: before, Max: 2})
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "one small batch at a time")
	n, err = st.TaskDeleteFinished(ctx, store.TaskDeleteFinishedParams{Before: before, Max: 2})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	n, err = st.TaskDeleteFinished(ctx, store.TaskDeleteFinishedParams{Before: before, Max: 2})
	require.NoError(t, err)
	require.Zero(t, n)
	for _, task := range append(old, doneOld) {
		_, err := st.TaskGet(ctx, "main", task.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	atts, err := st.AttemptListByTask(ctx, doneOld.ID)
	require.NoError(t, err)
	require.Empty(t, atts, "attempts go with their task")
	for _, task := range []store.Task{waiting, recent} {
		_, err := st.TaskGet(ctx, "main", task.ID)
		require.NoError(t, err)
	}
	next, err := st.WalletNonceGet(ctx, taskChain, taskSender)
	require.NoError(t, err)
	require.Equal(t, int64(1), next, "the next nonce outlives the attempts")
}

func nonces(atts []store.Attempt) []int64 {
	out := make([]int64, len(atts))
	for i, a := range atts {
		out[i] = a.Nonce
	}
	return out
}
