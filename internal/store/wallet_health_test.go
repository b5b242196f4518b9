package store_test

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// Balance health: the threshold is set with each read (what a plain
// transfer costs then), so it falls as well as rises; a read below it pauses,
// one at or above it resumes, and a refusal for funds asks for a new read.
func TestWalletHealth_SendingPausesWhileTheBalanceIsBelowTheThresholdOfItsRead(t *testing.T) {
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
	require.NoError(t, st.WalletHealthMarkBalanceStale(ctx, now, taskChain, taskSender))
	h, err = st.WalletHealthGet(ctx, taskChain, taskSender)
	require.NoError(t, err)
	require.Nil(t, h.BalanceAt, "read again before the next send")
	require.Equal(t, int64(100), h.Threshold.Int64(), "a refusal does not raise it")
}

// The follower's list: every wallet with attempts in flight or waiting
// tasks, once, in (chain, sender) order, by pages; wallets whose work is all
// finished are not listed.
func TestWallet_WithWorkListsWalletsWithAttemptsInFlightOrWaitingTasks(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	sender := func(n byte) string {
		return "0x00000000000000000000000000000000000000" + string("0123456789abcdef"[n>>4]) + string("0123456789abcdef"[n&15])
	}
	rows := testfactory.New(t, st, testfactory.NewClock())
	task := func(s string) store.Task { return rows.PostTask(testfactory.Task{Sender: s}) }
	task(sender(0x10))                 // waiting
	task(sender(0x10))                 // waiting, same wallet
	rows.StartTask(task(sender(0x20))) // signed
	sent := rows.StartTask(task(sender(0x30)))
	_, err := st.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{sent.TxHash}})
	require.NoError(t, err)
	rows.FinishTask(task(sender(0x40))) // done

	all, err := st.WalletListWithWork(ctx, store.WalletListWithWorkParams{Max: 10})
	require.NoError(t, err)
	want := []store.WalletKey{{taskChain, sender(0x10)}, {taskChain, sender(0x20)}, {taskChain, sender(0x30)}}
	require.Equal(t, want, all)
	page, err := st.WalletListWithWork(ctx, store.WalletListWithWorkParams{Max: 2})
	require.NoError(t, err)
	require.Equal(t, want[:2], page)
	page, err = st.WalletListWithWork(ctx, store.WalletListWithWorkParams{After: page[1], Max: 2})
	require.NoError(t, err)
	require.Equal(t, want[2:], page)
}
