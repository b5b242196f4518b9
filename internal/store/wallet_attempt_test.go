package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// Write-ahead: consecutive nonces from the wallet's
// next nonce, stored with the raw bytes, the next nonce advanced past them,
// and the tasks executing, all in one transaction.
func TestAttempt_WriteAheadStoresConsecutiveNoncesAdvancesTheNextNonceAndStartsTheTasks(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	_, err := st.WalletNonceGet(ctx, taskChain, taskSender)
	require.ErrorIs(t, err, store.ErrNotFound, "no nonce before the first attempt")
	a := rows.PostTask(testfactory.Task{})
	b := rows.PostTask(testfactory.Task{})
	clk.Advance(time.Second)
	stored := rows.StartTasks(7, a, b)
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
	c := rows.PostTask(testfactory.Task{})
	_, err = st.AttemptStoreMany(ctx, store.AttemptStoreManyParams{
		Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 8, Attempts: []store.SignedTx{testfactory.SignedTx(c.ID, 8)},
	})
	var moved *store.NonceMovedError
	require.ErrorAs(t, err, &moved)
	// Nonces that are not consecutive are refused before anything is written.
	d := rows.PostTask(testfactory.Task{})
	_, err = st.AttemptStoreMany(ctx, store.AttemptStoreManyParams{
		Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 9,
		Attempts: []store.SignedTx{testfactory.SignedTx(c.ID, 9), testfactory.SignedTx(d.ID, 11)},
	})
	require.ErrorContains(t, err, "consecutive")
	rows.StartTasks(9, c, d)
}

// The unique index over live attempts: a second transaction for a nonce that
// a live attempt holds cannot be stored, even by a writer that bypasses the
// next nonce (a reset to a lower nonce, a bug); it surfaces as a typed error
// and nothing of the round is stored.
func TestAttempt_TwoAttemptsForOneLiveNonceCannotBeStored(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	a := rows.PostTask(testfactory.Task{})
	b := rows.PostTask(testfactory.Task{})
	rows.StartTasks(0, a)
	// Someone moves the next nonce back under the live attempt.
	_, err := st.DB().Exec(ctx, `UPDATE ledgerq.wallet_nonces SET next_nonce = 0`)
	require.NoError(t, err)
	_, err = st.AttemptStoreMany(ctx, store.AttemptStoreManyParams{
		Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 0, Attempts: []store.SignedTx{testfactory.SignedTx(b.ID, 0)},
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
	rows.StartTasks(0, b)
}

// A task moves to executing only with its attempt: a task cancelled between
// the worker's read of the queue and its store makes the whole store fail,
// so no transaction is stored for a cancelled task and no nonce is used.
func TestAttempt_ATaskMovesToExecutingOnlyWithItsAttempt(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	a := rows.PostTask(testfactory.Task{})
	b := rows.PostTask(testfactory.Task{})
	next, err := st.TaskNextWaiting(ctx, store.TaskNextWaitingParams{ChainID: taskChain, Sender: taskSender, Queue: store.QueueFIFO, Max: 10})
	require.NoError(t, err)
	require.Len(t, next, 2)
	_, ok, err := st.TaskCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: b.ID})
	require.NoError(t, err)
	require.True(t, ok)

	_, err = st.AttemptStoreMany(ctx, store.AttemptStoreManyParams{
		Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 0,
		Attempts: []store.SignedTx{testfactory.SignedTx(a.ID, 0), testfactory.SignedTx(b.ID, 1)},
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
	o := rows.PostTask(testfactory.Task{Sender: taskTo})
	_, err = st.AttemptStoreMany(ctx, store.AttemptStoreManyParams{
		Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 0, Attempts: []store.SignedTx{testfactory.SignedTx(o.ID, 0)},
	})
	require.ErrorAs(t, err, &notWaiting)
}

// The next send fills freed nonces before new ones, in the same write-ahead
// transaction; a reused nonce must be below the next nonce and free, and
// does not move the next nonce.
func TestAttempt_WriteAheadReusesFreedNoncesBelowTheNextNonce(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	a := rows.PostTask(testfactory.Task{})
	b := rows.PostTask(testfactory.Task{})
	rows.StartTasks(0, a, b)
	_, err := st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: a.ID, Reason: "insufficient funds"})
	require.NoError(t, err)

	c := rows.PostTask(testfactory.Task{})
	d := rows.PostTask(testfactory.Task{})
	storeParams := func(reusedNonce int64) store.AttemptStoreManyParams {
		return store.AttemptStoreManyParams{
			Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 2,
			Reused: []store.SignedTx{testfactory.SignedTx(c.ID, reusedNonce)}, Attempts: []store.SignedTx{testfactory.SignedTx(d.ID, 2)},
		}
	}
	_, err = st.AttemptStoreMany(ctx, storeParams(2))
	require.ErrorContains(t, err, "not below the next nonce")
	_, err = st.AttemptStoreMany(ctx, storeParams(1))
	var taken *store.NonceTakenError
	require.ErrorAs(t, err, &taken, "nonce 1 is held by b's live attempt")
	got, err := st.TaskGet(ctx, "main", c.ID)
	require.NoError(t, err)
	require.Equal(t, store.TaskWaiting, got.Status, "a refused store stores nothing")

	out, err := st.AttemptStoreMany(ctx, storeParams(0))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 2}, nonces(out), "reused first, then new")
	next, err := st.WalletNonceGet(ctx, taskChain, taskSender)
	require.NoError(t, err)
	require.Equal(t, int64(3), next, "only the new attempt moved the next nonce")

	// Reusing needs a next nonce: none was ever assigned on another sender.
	other := "0x00000000000000000000000000000000000000c3"
	e := rows.PostTask(testfactory.Task{Sender: other})
	_, err = st.AttemptStoreMany(ctx, store.AttemptStoreManyParams{
		Now: now, ChainID: taskChain, Sender: other, FirstNonce: 5, Reused: []store.SignedTx{testfactory.SignedTx(e.ID, 1)},
	})
	var moved *store.NonceMovedError
	require.ErrorAs(t, err, &moved)
}

// Recover: attempts signed and stored but not known sent come back
// in nonce order with their bytes; once marked sent they are awaiting
// confirmation instead.
func TestAttempt_RecoverReturnsSignedButUnsentAttemptsInNonceOrder(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	tasks := rows.PostTasks(make([]testfactory.Task, 4)...)
	stored := rows.StartTasks(3, tasks...)
	n, err := st.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{stored[1].TxHash}})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	unsent, err := st.AttemptListUnsent(ctx, store.AttemptListParams{ChainID: taskChain, Sender: taskSender, Max: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 5, 6}, nonces(unsent))
	require.Equal(t, stored[0].Raw, unsent[0].Raw)

	sent, err := st.AttemptListSentBelow(ctx, store.AttemptListParams{ChainID: taskChain, Sender: taskSender, Below: 100, Max: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{4}, nonces(sent))
	sent, err = st.AttemptListSentBelow(ctx, store.AttemptListParams{ChainID: taskChain, Sender: taskSender, Below: 4, Max: 10})
	require.NoError(t, err)
	require.Empty(t, sent, "the chain's nonce has not passed it")

	n, err = st.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{stored[1].TxHash}})
	require.NoError(t, err)
	require.Zero(t, n, "marking twice changes nothing")
}

// The in-flight budget counts signed and sent attempts, not confirmed or
// dropped ones; uncertain sent attempts (indeterminate broadcast) are listed
// for a new broadcast until one is recorded as taken.
func TestAttempt_InFlightCountAndUncertainBroadcasts(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	tasks := rows.PostTasks(make([]testfactory.Task, 4)...)
	stored := rows.StartTasks(0, tasks...)
	inFlight := func() int {
		t.Helper()
		n, err := st.AttemptCountLive(ctx, taskChain, taskSender)
		require.NoError(t, err)
		return n.InFlight
	}
	require.Equal(t, 4, inFlight())
	_, err := st.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{stored[1].TxHash, stored[2].TxHash}, Error: "timeout"})
	require.NoError(t, err)
	_, err = st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash, Final: true})
	require.NoError(t, err)
	_, err = st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: tasks[3].ID, Reason: "insufficient funds"})
	require.NoError(t, err)
	require.Equal(t, 2, inFlight())

	uncertain := func(from int64) []int64 {
		t.Helper()
		out, err := st.AttemptListUncertain(ctx, store.AttemptListFromParams{ChainID: taskChain, Sender: taskSender, From: from, Max: 10})
		require.NoError(t, err)
		return nonces(out)
	}
	require.Equal(t, []int64{1, 2}, uncertain(0))
	require.Equal(t, []int64{2}, uncertain(2))
	ok, err := st.AttemptRecordBroadcast(ctx, store.AttemptRecordBroadcastParams{Now: now, ChainID: taskChain, TxHash: stored[1].TxHash})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []int64{2}, uncertain(0), "taken: certain now")
	ok, err = st.AttemptRecordBroadcast(ctx, store.AttemptRecordBroadcastParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash})
	require.NoError(t, err)
	require.False(t, ok, "a confirmed attempt is not sent")
}

// Confirm: a mined attempt makes its task done with its hash; a
// reverted receipt is done with reverted, not an error.
func TestAttempt_ConfirmEndsTheTaskDoneWithItsHashAndRevertedFlag(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	ok := rows.PostTask(testfactory.Task{})
	rev := rows.PostTask(testfactory.Task{})
	stored := rows.StartTasks(0, ok, rev)
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

// A gas bump is stored before it is broadcast: the old attempt leaves the
// live set (superseded, its hash kept for confirm), the new one is signed,
// the task counts the bump; a bump of an attempt that is not the nonce's
// live one stores nothing. Confirming a superseded hash drops the live bump
// and finishes the task with the hash that was mined.
func TestAttempt_ABumpSupersedesTheLiveAttemptAndAnyOfItsHashesConfirmsTheTask(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	task := rows.PostTask(testfactory.Task{})
	old := rows.StartTasks(0, task)[0]
	_, err := st.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{old.TxHash}})
	require.NoError(t, err)

	bump := testfactory.SignedTx(task.ID, 0)
	stale := testfactory.SignedTx(task.ID, 0)
	err = st.AttemptBump(ctx, store.AttemptBumpParams{Now: now, ChainID: taskChain, Sender: taskSender, Old: stale.TxHash, New: testfactory.SignedTx(task.ID, 0)})
	require.ErrorIs(t, err, store.ErrNotFound, "not the live attempt: nothing stored")
	require.NoError(t, st.AttemptBump(ctx, store.AttemptBumpParams{Now: now, ChainID: taskChain, Sender: taskSender, Old: old.TxHash, New: bump}))

	got, err := st.TaskGet(ctx, "main", task.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Bumps)
	live, err := st.AttemptGetLiveAt(ctx, taskChain, taskSender, 0)
	require.NoError(t, err)
	require.Equal(t, bump.TxHash, live.TxHash)
	require.Equal(t, store.AttemptSigned, live.State)
	hashes, err := st.AttemptListHashesOfNonce(ctx, live)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{old.TxHash, bump.TxHash}, hashes)

	done, err := st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now.Add(time.Second), ChainID: taskChain, TxHash: old.TxHash, Live: bump.TxHash, Final: true})
	require.NoError(t, err)
	require.Equal(t, store.TaskDone, done.Status)
	require.Equal(t, old.TxHash, done.TxHash)
	atts, err := st.AttemptListByTask(ctx, task.ID)
	require.NoError(t, err)
	states := map[string]store.AttemptState{}
	for _, a := range atts {
		states[a.TxHash] = a.State
	}
	require.Equal(t, map[string]store.AttemptState{old.TxHash: store.AttemptConfirmed, bump.TxHash: store.AttemptDropped}, states)
}

// A no-op is an attempt of no task, only for a nonce below the next one
// that no live attempt holds; confirming it finishes no task.
func TestAttempt_ANoopFillsOnlyAFreeNonceBelowTheNextOne(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	a := rows.PostTask(testfactory.Task{})
	rows.StartTasks(0, a)
	noop := func(n int64) store.SignedTx { s := testfactory.SignedTx("", n); s.TaskID = ""; return s }
	var taken *store.NonceTakenError
	require.ErrorAs(t, st.AttemptStoreNoop(ctx, store.AttemptStoreNoopParams{Now: now, ChainID: taskChain, Sender: taskSender, Tx: noop(0)}), &taken)
	var moved *store.NonceMovedError
	require.ErrorAs(t, st.AttemptStoreNoop(ctx, store.AttemptStoreNoopParams{Now: now, ChainID: taskChain, Sender: taskSender, Tx: noop(1)}), &moved)

	_, err := st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: a.ID, Reason: "intrinsic gas too low"})
	require.NoError(t, err)
	n := noop(0)
	require.NoError(t, st.AttemptStoreNoop(ctx, store.AttemptStoreNoopParams{Now: now, ChainID: taskChain, Sender: taskSender, Tx: n}))
	live, err := st.AttemptGetLiveAt(ctx, taskChain, taskSender, 0)
	require.NoError(t, err)
	require.True(t, live.Noop())
	got, err := st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: n.TxHash, Final: true})
	require.NoError(t, err)
	require.Empty(t, got.ID, "no task")
}

// A deterministic failure ends the task in error with its reason and drops
// its attempt; a done task cannot fail.
func TestAttempt_FailEndsTheTaskInErrorAndDropsItsAttempts(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	task := rows.PostTask(testfactory.Task{})
	rows.StartTasks(0, task)
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

// An attempt that will never be mined (its nonce went to another
// transaction) is dropped and its task goes back to waiting, in one
// transaction; only a live attempt of an executing task.
func TestAttempt_RequeueDropsTheAttemptAndPutsItsTaskBackToWaiting(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	task := rows.PostTask(testfactory.Task{})
	stored := rows.StartTasks(0, task)
	back, err := st.AttemptRequeue(ctx, store.AttemptRequeueParams{Now: now.Add(time.Second), ChainID: taskChain, TxHash: stored[0].TxHash, Reason: "nonce too low"})
	require.NoError(t, err)
	require.Equal(t, store.TaskWaiting, back.Status)
	require.Nil(t, back.StartedAt)
	atts, err := st.AttemptListByTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, store.AttemptDropped, atts[0].State)
	require.Equal(t, "nonce too low", atts[0].LastError)
	_, err = st.AttemptRequeue(ctx, store.AttemptRequeueParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash, Reason: "again"})
	require.ErrorIs(t, err, store.ErrNotFound)
	next, err := st.TaskNextWaiting(ctx, store.TaskNextWaitingParams{ChainID: taskChain, Sender: taskSender, Queue: store.QueueFIFO, Max: 10})
	require.NoError(t, err)
	require.Equal(t, []string{task.ID}, taskIDs(next))
}

func nonces(atts []store.Attempt) []int64 {
	out := make([]int64, len(atts))
	for i, a := range atts {
		out[i] = a.Nonce
	}
	return out
}
