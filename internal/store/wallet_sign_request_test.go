package store_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// signRequest is task's request at nonce, with the task's call.
func signRequest(task store.Task, nonce int64) store.SignRequest {
	r := task.Request
	return store.SignRequest{TaskID: task.ID, Nonce: nonce, To: r.To, Value: r.Value, Data: r.Data, GasLimit: 21000}
}

func recordRequests(t *testing.T, st *store.Store, now time.Time, below int64, reqs ...store.SignRequest) error {
	t.Helper()
	return st.SignRequestRecord(t.Context(), store.SignRequestRecordParams{Now: now, ChainID: taskChain, Sender: taskSender, Below: below, Requests: reqs})
}

func pinnedNonces(t *testing.T, st *store.Store) map[int64]string {
	t.Helper()
	pins, err := st.SignRequestListPinned(t.Context(), taskChain, taskSender, 0)
	require.NoError(t, err)
	out := map[int64]string{}
	for _, p := range pins {
		out[p.Nonce] = p.TaskID
	}
	return out
}

// The write-ahead across signers: a nonce requested of a signer outside the
// process is pinned to its content. The same request again passes (a send
// after a crash repeats it); another task, or the same task with another
// call, at that nonce is refused and records nothing.
func TestSignRequest_ANoncePinnedToItsContentRefusesOtherContent(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	now := clk.Now()
	a := rows.PostTask(testfactory.Task{})
	b := rows.PostTask(testfactory.Task{})
	require.NoError(t, recordRequests(t, st, now, 0, signRequest(a, 0), signRequest(b, 1)))
	require.NoError(t, recordRequests(t, st, now.Add(time.Second), 0, signRequest(a, 0), signRequest(b, 1)), "the same content again")

	var pinned *store.SignRequestPinnedError
	err := recordRequests(t, st, now, 0, signRequest(b, 0), signRequest(a, 1))
	require.ErrorAs(t, err, &pinned, "another task at a pinned nonce")
	require.Equal(t, []int64{0, 1}, pinned.Nonces)
	other := signRequest(a, 0)
	other.Value = big.NewInt(999)
	require.ErrorAs(t, recordRequests(t, st, now, 0, other), &pinned, "another call of the same task")
	noop := store.SignRequest{Nonce: 1, To: taskSender, Value: new(big.Int), GasLimit: 21000}
	require.ErrorAs(t, recordRequests(t, st, now, 0, noop), &pinned, "a no-op at a task's nonce")
	fees := signRequest(a, 0)
	fees.GasLimit = 50000
	require.NoError(t, recordRequests(t, st, now, 0, fees), "the gas limit is not content")

	c := rows.PostTask(testfactory.Task{})
	require.ErrorAs(t, recordRequests(t, st, now, 0, signRequest(c, 2), signRequest(b, 0)), &pinned)
	require.Equal(t, map[int64]string{0: a.ID, 1: b.ID}, pinnedNonces(t, st), "a refused round records nothing")
	pins, err := st.SignRequestListPinned(t.Context(), taskChain, taskSender, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(21000), pins[0].GasLimit, "the first request's gas limit stays")
	require.Equal(t, now, pins[0].RequestedAt)
}

// The requests are recorded in a transaction fenced by the shard's claim,
// as the attempts are: a worker whose claim was rescued records nothing.
func TestSignRequest_AStaleClaimRecordsNothing(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	a := rows.PostTask(testfactory.Task{})
	c, err := st.ShardClaim(ctx, store.ShardClaimParams{Now: now, Owner: "p/1", LeaseUntil: now.Add(time.Minute), Kinds: []string{"wallet"}})
	require.NoError(t, err)
	stale := c
	stale.Run--
	err = st.ShardFenced(ctx, stale, func(tx *store.Store) error {
		return tx.SignRequestRecord(ctx, store.SignRequestRecordParams{Now: now, ChainID: taskChain, Sender: taskSender, Requests: []store.SignRequest{signRequest(a, 0)}})
	})
	require.ErrorIs(t, err, store.ErrShardLeaseLost)
	require.Empty(t, pinnedNonces(t, st))
	require.NoError(t, st.ShardFenced(ctx, c, func(tx *store.Store) error {
		return tx.SignRequestRecord(ctx, store.SignRequestRecordParams{Now: now, ChainID: taskChain, Sender: taskSender, Requests: []store.SignRequest{signRequest(a, 0)}})
	}))
	require.Equal(t, map[int64]string{0: a.ID}, pinnedNonces(t, st))
}

// A request lives until the attempt at its nonce is stored: the write-ahead
// (AttemptStoreMany) deletes it in the same transaction. One the chain's
// nonce passed is dead and goes with the next round's record.
func TestSignRequest_StoringTheAttemptsDeletesTheirRequestsAndOnesTheChainPassedGo(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	a := rows.PostTask(testfactory.Task{})
	b := rows.PostTask(testfactory.Task{})
	c := rows.PostTask(testfactory.Task{})
	require.NoError(t, recordRequests(t, st, now, 0, signRequest(a, 0), signRequest(b, 1), signRequest(c, 2)))
	_, err := st.AttemptStoreMany(ctx, store.AttemptStoreManyParams{
		Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 0, SignRequests: true,
		Attempts: []store.SignedTx{testfactory.SignedTx(a.ID, 0), testfactory.SignedTx(b.ID, 1)},
	})
	require.NoError(t, err)
	require.Equal(t, map[int64]string{2: c.ID}, pinnedNonces(t, st), "the stored nonces' requests are done")

	require.NoError(t, recordRequests(t, st, now, 3))
	require.Empty(t, pinnedNonces(t, st), "the chain's nonce passed 2")
}

// A task whose transaction a signer outside the process was asked to sign
// is not cancelled: its nonce is pinned to it until the attempt is stored.
// A waiting task with no request is cancelled as before.
func TestSignRequest_ATaskWhoseTransactionIsBeingSignedIsNotCancelled(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	a := rows.PostTask(testfactory.Task{})
	b := rows.PostTask(testfactory.Task{})
	require.NoError(t, recordRequests(t, st, now, 0, signRequest(a, 0)))
	_, cancelled, err := st.TaskCancel(ctx, store.TaskCancelParams{Now: now, Wallet: a.Wallet, ID: a.ID})
	var signing *store.TaskBeingSignedError
	require.ErrorAs(t, err, &signing)
	require.False(t, cancelled)
	got, err := st.TaskGet(ctx, a.Wallet, a.ID)
	require.NoError(t, err)
	require.Equal(t, store.TaskWaiting, got.Status, "it waits for its signature")
	_, cancelled, err = st.TaskCancel(ctx, store.TaskCancelParams{Now: now, Wallet: b.Wallet, ID: b.ID})
	require.NoError(t, err)
	require.True(t, cancelled)

	// A cancelled task's request is not recorded: the round records nothing.
	var notWaiting *store.TaskNotWaitingError
	require.ErrorAs(t, recordRequests(t, st, now, 0, signRequest(b, 1)), &notWaiting)
	require.Equal(t, map[int64]string{0: a.ID}, pinnedNonces(t, st))
}

// A no-op never takes a nonce pinned to a task's request; its own request
// at a nonce is done when it is stored.
func TestSignRequest_ANoopIsNeverStoredAtANoncePinnedToATask(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	a := rows.PostTask(testfactory.Task{})
	b := rows.PostTask(testfactory.Task{})
	rows.StartTasks(0, b)
	_, err := st.DB().Exec(ctx, `UPDATE ledgerq.wallet_nonces SET next_nonce = 5`)
	require.NoError(t, err)
	noop := store.SignRequest{Nonce: 4, To: taskSender, Value: new(big.Int), GasLimit: 21000}
	require.NoError(t, recordRequests(t, st, now, 0, signRequest(a, 3), noop))

	var taken *store.NonceTakenError
	err = st.AttemptStoreNoop(ctx, store.AttemptStoreNoopParams{Now: now, ChainID: taskChain, Sender: taskSender, Tx: testfactory.SignedTx("", 3)})
	require.ErrorAs(t, err, &taken, "nonce 3 is pinned to task a")
	require.NoError(t, st.AttemptStoreNoop(ctx, store.AttemptStoreNoopParams{Now: now, ChainID: taskChain, Sender: taskSender, Tx: testfactory.SignedTx("", 4)}))
	require.Equal(t, map[int64]string{3: a.ID}, pinnedNonces(t, st), "the no-op's own request is done")
}
