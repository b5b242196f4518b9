package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// Restore recovery: the nonces below the chain's that no attempt holds, from
// the one after the highest mined or confirmed attempt; a wallet with no
// history has none.
func TestAttempt_UnknownNoncesAreThoseBelowTheChainsNoAttemptHolds(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	got, err := st.AttemptListUnknownNonces(ctx, taskChain, taskSender, 10, 100)
	require.NoError(t, err)
	require.Empty(t, got, "nothing signed: nothing known, nothing unknown")

	a, b := rows.PostTask(testfactory.Task{}), rows.PostTask(testfactory.Task{})
	stored := rows.StartTasks(3, a, b) // nonces 3 and 4, signed
	got, err = st.AttemptListUnknownNonces(ctx, taskChain, taskSender, 8, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{5, 6, 7}, got, "from the lowest attempt, nonces no attempt holds")
	_, err = st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[1].TxHash, Final: true})
	require.NoError(t, err)
	got, err = st.AttemptListUnknownNonces(ctx, taskChain, taskSender, 8, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{5, 6}, got, "from the one after the highest confirmed attempt, at most max")
	got, err = st.AttemptListUnknownNonces(ctx, taskChain, taskSender, 5, 100)
	require.NoError(t, err)
	require.Empty(t, got)
}

// Restore recovery: a transaction found on the chain is stored as a sent
// attempt with its task executing (one without a task only takes its
// nonce); a task no longer waiting stores nothing.
func TestAttempt_AdoptStoresTheChainsTransactionsAndStartsTheirTasks(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	first := rows.PostTask(testfactory.Task{})
	rows.StartTasks(0, first)
	waiting, other := rows.PostTask(testfactory.Task{}), rows.PostTask(testfactory.Task{})
	carried := testfactory.SignedTx(waiting.ID, 1)
	foreign := testfactory.SignedTx("", 2)
	require.NoError(t, st.AttemptAdopt(ctx, store.AttemptAdoptParams{Now: now, ChainID: taskChain, Sender: taskSender, Txs: []store.SignedTx{carried, foreign}}))
	task, err := st.TaskGet(ctx, "main", waiting.ID)
	require.NoError(t, err)
	require.Equal(t, store.TaskExecuting, task.Status)
	atts, err := st.AttemptListByTask(ctx, waiting.ID)
	require.NoError(t, err)
	require.Len(t, atts, 1)
	require.Equal(t, store.AttemptSent, atts[0].State)
	require.Equal(t, int64(1), atts[0].Nonce)
	got, err := st.AttemptListUnknownNonces(ctx, taskChain, taskSender, 3, 100)
	require.NoError(t, err)
	require.Empty(t, got, "both nonces are known now")

	// A task that left the queue: nothing of the call is stored.
	_, cancelled, err := st.TaskCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: other.ID})
	require.NoError(t, err)
	require.True(t, cancelled)
	err = st.AttemptAdopt(ctx, store.AttemptAdoptParams{Now: now, ChainID: taskChain, Sender: taskSender,
		Txs: []store.SignedTx{testfactory.SignedTx("", 3), testfactory.SignedTx(other.ID, 4)}})
	var notWaiting *store.TaskNotWaitingError
	require.ErrorAs(t, err, &notWaiting)
	got, err = st.AttemptListUnknownNonces(ctx, taskChain, taskSender, 5, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 4}, got, "nothing stored")
}

// Nonces below the next one with no attempt at all (retention deleted
// them) are not unknown; a freed nonce (only dropped attempts) at or above
// the one after the highest confirmed attempt is, as are those from the
// next nonce on.
func TestAttempt_UnknownNoncesSkipWhatRetentionDeletedAndListFreedOnes(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	a, b, c := rows.PostTask(testfactory.Task{}), rows.PostTask(testfactory.Task{}), rows.PostTask(testfactory.Task{})
	stored := rows.StartTasks(0, a, b, c)
	_, err := st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[1].TxHash, Final: true})
	require.NoError(t, err)
	_, err = st.DB().Exec(ctx, `DELETE FROM ledgerq.tx_attempts WHERE nonce < 2`) // as retention does, with their tasks
	require.NoError(t, err)
	_, err = st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: c.ID, Reason: "refused"}) // nonce 2 freed
	require.NoError(t, err)
	got, err := st.AttemptListUnknownNonces(ctx, taskChain, taskSender, 5, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3, 4}, got)
}
