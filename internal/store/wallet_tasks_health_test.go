package store_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// A gas bump is stored before it is broadcast: the old attempt leaves the
// live set (superseded, its hash kept for confirm), the new one is signed,
// the task counts the bump; a bump of an attempt that is not the nonce's
// live one stores nothing. Confirming a superseded hash drops the live bump
// and finishes the task with the hash that was mined.
func TestAttempts_ABumpSupersedesTheLiveAttemptAndAnyOfItsHashesConfirmsTheTask(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	task := insertTask(t, st, newTask(now, 0, ""))
	old := storeAttempts(t, st, now, 0, task)[0]
	_, err := st.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{old.TxHash}})
	require.NoError(t, err)

	bump := fakeSigned(task.ID, 0)
	stale := fakeSigned(task.ID, 0)
	err = st.AttemptBump(ctx, store.AttemptBumpParams{Now: now, ChainID: taskChain, Sender: taskSender, Old: stale.TxHash, New: fakeSigned(task.ID, 0)})
	require.ErrorIs(t, err, store.ErrNotFound, "not the live attempt: nothing stored")
	require.NoError(t, st.AttemptBump(ctx, store.AttemptBumpParams{Now: now, ChainID: taskChain, Sender: taskSender, Old: old.TxHash, New: bump}))

	got, err := st.TaskGet(ctx, "main", task.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Bumps)
	live, err := st.AttemptLiveAt(ctx, taskChain, taskSender, 0)
	require.NoError(t, err)
	require.Equal(t, bump.TxHash, live.TxHash)
	require.Equal(t, store.AttemptSigned, live.State)
	hashes, err := st.AttemptHashesOfNonce(ctx, live)
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
func TestAttempts_ANoopFillsOnlyAFreeNonceBelowTheNextOne(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	a := insertTask(t, st, newTask(now, 0, ""))
	storeAttempts(t, st, now, 0, a)
	noop := func(n int64) store.SignedTx { s := fakeSigned("", n); s.TaskID = ""; return s }
	var taken *store.NonceTakenError
	require.ErrorAs(t, st.AttemptStoreNoop(ctx, store.AttemptStoreNoopParams{Now: now, ChainID: taskChain, Sender: taskSender, Tx: noop(0)}), &taken)
	var moved *store.NonceMovedError
	require.ErrorAs(t, st.AttemptStoreNoop(ctx, store.AttemptStoreNoopParams{Now: now, ChainID: taskChain, Sender: taskSender, Tx: noop(1)}), &moved)

	_, err := st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: a.ID, Reason: "intrinsic gas too low"})
	require.NoError(t, err)
	n := noop(0)
	require.NoError(t, st.AttemptStoreNoop(ctx, store.AttemptStoreNoopParams{Now: now, ChainID: taskChain, Sender: taskSender, Tx: n}))
	live, err := st.AttemptLiveAt(ctx, taskChain, taskSender, 0)
	require.NoError(t, err)
	require.True(t, live.Noop())
	got, err := st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: n.TxHash, Final: true})
	require.NoError(t, err)
	require.Empty(t, got.ID, "no task")
}

// The next nonce moves down only when no live attempt sits at or above the
// new value, and only from the value read; a recorded reset is on the
// wallet's health row.
func TestWallet_ANonceResetNeverSkipsOrReusesALiveNonceAndIsRecorded(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	a := insertTask(t, st, newTask(now, 0, ""))
	storeAttempts(t, st, now, 4, a) // next nonce 5, live at 4
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

// Balance health: the threshold is set with each read (what a plain
// transfer costs then), so it falls as well as rises; a read below it pauses,
// one at or above it resumes, and a refusal for funds asks for a new read.
func TestWallet_SendingPausesWhileTheBalanceIsBelowTheThresholdOfItsRead(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	h, err := st.WalletHealthSetBalance(ctx, now, taskChain, taskSender, big.NewInt(100), big.NewInt(500))
	require.NoError(t, err)
	require.True(t, h.Paused)
	require.Equal(t, int64(500), h.Threshold.Int64())
	h, err = st.WalletHealthSetBalance(ctx, now, taskChain, taskSender, big.NewInt(100), big.NewInt(100))
	require.NoError(t, err)
	require.False(t, h.Paused, "fees fell: the threshold falls with them")
	require.Equal(t, int64(100), h.Threshold.Int64())
	require.NoError(t, st.WalletHealthBalanceStale(ctx, now, taskChain, taskSender))
	h, err = st.WalletHealthGet(ctx, taskChain, taskSender)
	require.NoError(t, err)
	require.Nil(t, h.BalanceAt, "read again before the next send")
	require.Equal(t, int64(100), h.Threshold.Int64(), "a refusal does not raise it")
}
