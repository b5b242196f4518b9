package wallet_test

import (
	"encoding/json"
	"math/big"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/calldata"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// errorString is Error(message)'s revert data.
func errorString(t *testing.T, message string) []byte {
	t.Helper()
	ty, err := abi.NewType("string", "", nil)
	require.NoError(t, err)
	packed, err := abi.Arguments{{Type: ty}}.Pack(message)
	require.NoError(t, err)
	return append(common.FromHex("0x08c379a0"), packed...)
}

func revertOf(t *testing.T, task store.Task) calldata.Revert {
	t.Helper()
	var r calldata.Revert
	require.NotEmpty(t, task.Revert, "the task has its revert")
	require.NoError(t, json.Unmarshal(task.Revert, &r))
	return r
}

// The preflight: a task whose call reverts at the pending state, with
// nothing of its wallet ahead of it, ends in error at once (in its first
// run, with wallet.Config.MaxFailures far away) with the decoded reason,
// and nothing is signed or sent: its nonce goes to the next task.
func TestWallet_ACallThatRevertsAtThePendingStateEndsInErrorAtOnceAndSpendsNoNonce(t *testing.T) {
	t.Parallel()
	e := setup(t, options{cfg: func(c *wallet.Config) { c.MaxFailures = 100 }})
	data := append(append([]byte(nil), evmsim.RevertMarker...), errorString(t, "nope")...)
	refused := e.postRequest(t, 0, store.TaskRequest{Value: big.NewInt(1000), Data: data})
	e.drive(t, e.pool, 2, refused)

	got := e.task(t, refused)
	require.Equal(t, store.TaskError, got.Status)
	require.Equal(t, "preflight: execution reverted: nope", got.Error)
	r := revertOf(t, got)
	require.Equal(t, calldata.RevertError, r.Kind)
	require.Equal(t, "nope", r.Message)
	require.Empty(t, e.led.Sends(), "nothing was sent")
	s, err := e.st.ShardGet(t.Context(), e.key(0))
	require.NoError(t, err)
	require.Zero(t, s.Failures, "a refusal is the task's outcome, not a failed run")

	next := e.post(t, 0, 0, 1000, nil)
	e.drive(t, e.pool, 10, next)
	nonces := e.requireDoneOnce(t, next)
	require.Equal(t, []int64{0}, nonces, "the refused task took no nonce")
}

// The wait rule: a call that reverts at the pending state while a
// transaction of its wallet is ahead of it unmined — an earlier task of the
// same send, or one sent in an earlier run — may depend on it (approve,
// then transferFrom), and the pending state may not hold it: the task
// waits and is checked again, and is sent once what is ahead is mined.
func TestWallet_ARevertingCallWithTheWalletsTransactionsAheadWaitsAndIsCheckedAgain(t *testing.T) {
	t.Parallel()
	for _, together := range []bool{true, false} {
		e := setup(t, options{})
		dependent := []byte{0x42}
		// The dependent call reverts until the wallet's first transaction
		// is mined.
		e.led.CallErr = func(m ledger.CallMsg, _ *uint64) error {
			n, err := e.chain.NonceAt(t.Context(), m.From)
			require.NoError(t, err)
			if len(m.Data) == 1 && m.Data[0] == 0x42 && n == 0 {
				return evmsim.CallReverted(errorString(t, "not yet"))
			}
			return nil
		}
		first := e.post(t, 0, 0, 1000, nil)
		if !together {
			runPool(t, e.pool) // first is sent, not mined: the clock has not moved
			require.Equal(t, store.TaskExecuting, e.task(t, first).Status)
		}
		second := e.post(t, 0, 0, 1000, dependent)
		runPool(t, e.pool)
		require.Equal(t, store.TaskWaiting, e.task(t, second).Status, "together %v: it waits for what is ahead", together)
		require.Empty(t, e.task(t, second).Revert)

		e.drive(t, e.pool, 20, first, second)
		nonces := e.requireDoneOnce(t, first, second)
		e.requireContiguous(t, 0, 0, nonces)
		require.GreaterOrEqual(t, e.led.Calls("Call"), 3, "together %v: the dependent call was checked again", together)
	}
}

// The write-ahead across signers: a task whose nonce is pinned (a signer
// outside the process was asked for its transaction, and the process died
// before the attempt was stored) is never preflighted nor ended by what a
// call answers: its content is fixed at that nonce, and it goes out.
func TestWallet_APinnedTaskIsNeverEndedByItsPreflight(t *testing.T) {
	t.Parallel()
	e := setup(t, options{signer: func(s keystore.Signer) keystore.Signer { return &remoteSigner{Signer: s} }})
	task := e.post(t, 0, 0, 1000, nil)
	crashed, _ := e.newProcess(t, e.led)
	e.crashedRun(t, crashed, 0, func(cyc workers.Cycle, step string) bool {
		return isCycle(cyc, "*queuer.sendCycle") && step == "commit"
	})
	require.Len(t, e.signRequests(t), 1, "its nonce is pinned")

	// From now on its call reverts at the pending state.
	var preflighted atomic.Int32
	e.led.CallErr = func(m ledger.CallMsg, block *uint64) error {
		if block == nil {
			preflighted.Add(1)
		}
		return evmsim.CallReverted(errorString(t, "state changed"))
	}
	e.expireLeases(t)
	_, pool := e.newProcess(t, e.led)
	e.drive(t, pool, 20, task)
	e.requireDoneOnce(t, task)
	require.Zero(t, preflighted.Load(), "a pinned task runs no preflight")
}
