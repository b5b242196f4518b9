package store_test

import (
	"math/big"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// A wallet's signer state is recorded on its transitions only: the first
// state inserts the row, the same state again changes nothing (its time, its
// error and updated_at stay), unavailable keeps the error (cut to its bound
// at a character's boundary) and its time, and ok clears the error. The rows
// of unavailable signers are listed; a state the table does not know is
// refused.
func TestWalletHealth_SignerStateIsRecordedOnItsTransitionsOnly(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	t0 := testfactory.Start()
	set := func(at time.Time, state store.SignerState, msg string) bool {
		t.Helper()
		changed, err := st.WalletHealthSetSigner(ctx, store.WalletSignerParams{
			Now: at, ChainID: taskChain, Sender: taskSender, Backend: "pkcs11", State: state, Error: msg,
		})
		require.NoError(t, err)
		return changed
	}
	get := func() store.WalletHealth {
		t.Helper()
		h, err := st.WalletHealthGet(ctx, taskChain, taskSender)
		require.NoError(t, err)
		return h
	}
	unavailable := func() []store.WalletHealth {
		t.Helper()
		hs, err := st.WalletHealthListSignerUnavailable(ctx, 10)
		require.NoError(t, err)
		return hs
	}

	require.True(t, set(t0, store.SignerOK, ""), "the first state is written")
	h := get()
	require.Equal(t, store.SignerHealth{Backend: "pkcs11", State: store.SignerOK, Since: &t0}, h.Signer)
	require.False(t, set(t0.Add(time.Minute), store.SignerOK, ""), "ok again is no transition")
	require.Equal(t, t0, get().UpdatedAt, "and writes nothing")
	require.Empty(t, unavailable())

	t1 := t0.Add(time.Hour)
	long := strings.Repeat("é", store.MaxSignerError) // 2 bytes each
	require.True(t, set(t1, store.SignerUnavailable, "the pkcs11 signer is unavailable: "+long))
	h = get()
	require.Equal(t, store.SignerUnavailable, h.Signer.State)
	require.Equal(t, t1, *h.Signer.Since)
	require.Equal(t, t1, h.UpdatedAt)
	require.LessOrEqual(t, len(h.Signer.Error), store.MaxSignerError, "cut to the bound")
	require.True(t, utf8.ValidString(h.Signer.Error), "at a character's boundary")
	require.True(t, strings.HasPrefix(h.Signer.Error, "the pkcs11 signer is unavailable: éé"), h.Signer.Error)
	require.Len(t, unavailable(), 1)
	require.Equal(t, taskSender, unavailable()[0].Sender)

	require.False(t, set(t1.Add(time.Minute), store.SignerUnavailable, "another error"), "still unavailable: no transition")
	h = get()
	require.Equal(t, t1, *h.Signer.Since, "the state's time is when it began")
	require.True(t, strings.HasPrefix(h.Signer.Error, "the pkcs11 signer is unavailable"), "the error that made it unavailable")

	t2 := t1.Add(time.Hour)
	require.True(t, set(t2, store.SignerOK, ""), "signing again is a transition")
	require.Equal(t, store.SignerHealth{Backend: "pkcs11", State: store.SignerOK, Since: &t2}, get().Signer, "the error is cleared")
	require.Empty(t, unavailable())

	_, err := st.WalletHealthSetSigner(ctx, store.WalletSignerParams{Now: t2, ChainID: taskChain, Sender: taskSender, Backend: "pkcs11", State: "down"})
	require.ErrorContains(t, err, `state "down"`)
	err = execUndone(t, st, `UPDATE ledgerq.wallet_health SET signer_state = 'down' WHERE sender = $1`, taskSender)
	requireCheckViolation(t, err, "wallet_health_signer_state", "an unknown signer state")
	err = execUndone(t, st, `UPDATE ledgerq.wallet_health SET signer_state = 'unavailable' WHERE sender = $1`, taskSender)
	requireCheckViolation(t, err, "wallet_health_signer_error", "unavailable without an error")
	err = execUndone(t, st, `UPDATE ledgerq.wallet_health SET signer_state = 'unavailable', signer_error = $2 WHERE sender = $1`,
		taskSender, strings.Repeat("x", store.MaxSignerError+1))
	requireCheckViolation(t, err, "wallet_health_signer_error", "an error over its bound")
	err = execUndone(t, st, `UPDATE ledgerq.wallet_health SET signer_since = 'infinity' WHERE sender = $1`, taskSender)
	requireCheckViolation(t, err, "wallet_health_signer_state", "an infinite time")
}
