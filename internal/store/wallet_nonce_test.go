package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// Recycled nonces: a nonce whose attempt was dropped (a
// deterministic rejection) is free again, from the chain's nonce up to the
// next nonce, lowest first; a live or confirmed attempt's nonce is not.
func TestWalletNonce_FreedNoncesAreTheDroppedOnesBetweenTheChainNonceAndTheNextNonce(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	freed := func(from int64) []int64 {
		t.Helper()
		out, err := st.WalletNonceListFreed(ctx, store.WalletNonceListFreedParams{ChainID: taskChain, Sender: taskSender, From: from, Max: 10})
		require.NoError(t, err)
		return out
	}
	require.Empty(t, freed(0), "no nonce is freed before the first attempt")
	tasks := rows.PostTasks(make([]testfactory.Task, 5)...)
	stored := rows.StartTasks(2, tasks...) // nonces 2..6
	require.Empty(t, freed(2))
	for _, i := range []int{1, 3} { // nonces 3 and 5
		_, err := st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: tasks[i].ID, Reason: "insufficient funds"})
		require.NoError(t, err)
	}
	_, err := st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash, Final: true})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 5}, freed(2))
	require.Equal(t, []int64{5}, freed(4), "nonces below the chain's nonce are used")
	out, err := st.WalletNonceListFreed(ctx, store.WalletNonceListFreedParams{ChainID: taskChain, Sender: taskSender, From: 2, Max: 1})
	require.NoError(t, err)
	require.Equal(t, []int64{3}, out, "lowest first, up to Max")
}

// Reconciliation: the next nonce moves up to the chain's nonce, never down,
// and not before the first attempt.
func TestWalletNonce_NextNonceIsRaisedToTheChainNonceAndNeverLowered(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	raise := func(to int64) bool {
		t.Helper()
		moved, err := st.WalletNonceRaise(ctx, store.WalletNonceRaiseParams{Now: now, ChainID: taskChain, Sender: taskSender, AtLeast: to})
		require.NoError(t, err)
		return moved
	}
	require.False(t, raise(4), "no row before the first attempt")
	rows.StartTasks(0, rows.PostTask(testfactory.Task{}))
	require.True(t, raise(4))
	require.False(t, raise(2))
	next, err := st.WalletNonceGet(ctx, taskChain, taskSender)
	require.NoError(t, err)
	require.Equal(t, int64(4), next)
}

// The next nonce moves down only when no live attempt sits at or above the
// new value, and only from the value read; a recorded reset is on the
// wallet's health row.
func TestWalletNonce_AResetNeverSkipsOrReusesALiveNonceAndIsRecorded(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	a := rows.PostTask(testfactory.Task{})
	rows.StartTasks(4, a) // next nonce 5, live at 4
	p := store.WalletNonceResetParams{Now: now, ChainID: taskChain, Sender: taskSender, From: 5, To: 2, Record: true}
	moved, err := st.WalletNonceReset(ctx, p)
	require.NoError(t, err)
	require.False(t, moved, "a live attempt at 4 is above 2")
	p.From, p.To = 9, 5
	moved, err = st.WalletNonceReset(ctx, p)
	require.NoError(t, err)
	require.False(t, moved, "not the value read")
	_, err = st.WalletHealthGet(ctx, taskChain, taskSender)
	require.ErrorIs(t, err, store.ErrNotFound)

	_, err = st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: a.ID, Reason: "insufficient funds"})
	require.NoError(t, err)
	p.From, p.To = 5, 2
	moved, err = st.WalletNonceReset(ctx, p)
	require.NoError(t, err)
	require.True(t, moved)
	h, err := st.WalletHealthGet(ctx, taskChain, taskSender)
	require.NoError(t, err)
	require.Equal(t, 1, h.Resets)
	require.Equal(t, int64(5), *h.LastResetFrom)
	require.Equal(t, int64(2), *h.LastResetTo)
}
