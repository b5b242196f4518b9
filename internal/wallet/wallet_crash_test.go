package wallet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// postN posts n tasks of wallet 0 with values 1000+i.
func (e *env) postN(t *testing.T, n int) []store.Task {
	t.Helper()
	tasks := make([]store.Task, n)
	for i := range tasks {
		tasks[i] = e.post(t, 0, 0, int64(1000+i), nil)
	}
	return tasks
}

// storedAttempts returns each task's attempts as stored now.
func (e *env) storedAttempts(t *testing.T, tasks []store.Task) map[string]store.Attempt {
	t.Helper()
	out := map[string]store.Attempt{}
	for _, task := range tasks {
		atts := e.attempts(t, task)
		require.Len(t, atts, 1)
		out[task.ID] = atts[0]
	}
	return out
}

// engine-core's recover (crash point a): the process dies after the attempts are
// stored and before anything is broadcast. A new process broadcasts the
// stored bytes — it does not sign again — and every task ends done once.
func TestWallet_RecoverAfterACrashBeforeBroadcastSendsTheStoredBytes(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	tasks := e.postN(t, 5)
	crashed, _ := e.newProcess(t, e.led)
	e.crashedRun(t, crashed, 0, func(cyc workers.Cycle, _ string) bool {
		broadcast := isCycle(cyc, "*submitter.broadcastCycle")
		return broadcast
	})
	require.Empty(t, e.led.Sends(), "nothing was broadcast before the crash")
	stored := e.storedAttempts(t, tasks)

	e.expireLeases(t)
	_, pool := e.newProcess(t, e.led)
	e.drive(t, pool, 20, tasks...)
	e.requireDoneOnce(t, tasks...)
	for _, task := range tasks {
		require.Equal(t, stored[task.ID].TxHash, e.task(t, task).TxHash, "the stored transaction was the one mined")
	}
	for _, r := range e.led.Sends() {
		var found bool
		for _, a := range stored {
			if a.TxHash == r.Hash {
				require.Equal(t, a.Raw, r.Raw, "the same bytes")
				found = true
			}
		}
		require.True(t, found, "only stored transactions are broadcast")
	}
	e.requireOneTxPerNonce(t, 0)
}

// engine-core's recover (crash point b): the process dies after the broadcast
// and before its result is recorded. The new process broadcasts the same
// bytes again: `already known` (still in the pool) or `nonce too low` with
// our receipt (mined meanwhile, as geth answers) are successes, and no nonce
// gets a second transaction.
func TestWallet_RecoverAfterACrashAfterBroadcastSendsNoSecondTransaction(t *testing.T) {
	t.Parallel()
	for _, mined := range []bool{false, true} {
		name := "already known"
		if mined {
			name = "nonce too low with our receipt"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{sim: evmsim.Config{BlockPeriod: time.Hour}})
			e.led.MinedIsNonceTooLow = true
			tasks := e.postN(t, 5)
			crashed, _ := e.newProcess(t, e.led)
			e.crashedRun(t, crashed, 0, func(cyc workers.Cycle, step string) bool {
				broadcast := isCycle(cyc, "*submitter.broadcastCycle")
				return broadcast && step == "commit"
			})
			require.Equal(t, 5, len(e.led.Sends()), "broadcast before the crash")
			for _, task := range tasks {
				require.Equal(t, store.AttemptSigned, e.attempts(t, task)[0].State, "the broadcast was not recorded")
			}
			if mined {
				e.chain.Mine()
			}

			e.expireLeases(t)
			_, pool := e.newProcess(t, e.led)
			runPool(t, pool)
			again := e.led.Sends()[5:]
			require.Equal(t, 5, len(again), "recover broadcast each once more")
			for _, r := range again {
				if mined {
					require.ErrorContains(t, r.Err, "nonce too low")
				} else {
					require.NoError(t, r.Err, "already known is a success")
				}
			}
			for range 3 {
				e.chain.Mine()
				e.drive1(t)
			}
			nonces := e.requireDoneOnce(t, tasks...)
			e.requireContiguous(t, 0, 0, nonces)
			e.requireOneTxPerNonce(t, 0)
			require.Equal(t, 10, len(e.led.Sends()), "nothing was sent a third time")
		})
	}
}

// engine-core's confirm (crash point c): the transactions are mined and the
// process dies before it records the confirmation. The new process confirms
// each task once; the dead process's late commit is fenced and changes
// nothing.
func TestWallet_ConfirmAfterACrashBeforeConfirmationMarksDoneOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	tasks := e.postN(t, 5)
	crashed, _ := e.newProcess(t, e.led)
	// The first run sends; the chain mines; the second run's confirm reads
	// the receipts and dies before it records them.
	runPool(t, e.pool)
	e.chain.Mine()
	_, err := e.follower.RunOnce(t.Context())
	require.NoError(t, err)
	var late workers.Cycle
	lookups := e.led.Calls("TransactionReceipt")
	e.crashedRun(t, crashed, 0, func(cyc workers.Cycle, step string) bool {
		if isCycle(cyc, "*monitor.confirmCycle") && step == "commit" {
			late = cyc
			return true
		}
		return false
	})
	require.GreaterOrEqual(t, e.led.Calls("TransactionReceipt")-lookups, 5, "the dead process had found the receipts")
	for _, task := range tasks {
		require.Equal(t, store.TaskExecuting, e.task(t, task).Status)
	}

	e.expireLeases(t)
	_, pool := e.newProcess(t, e.led)
	e.drive(t, pool, 5, tasks...)
	nonces := e.requireDoneOnce(t, tasks...)
	e.requireContiguous(t, 0, 0, nonces)
	finished := map[string]store.Task{}
	for _, task := range tasks {
		finished[task.ID] = e.task(t, task)
	}

	e.clk.Advance(blockPeriod)
	require.ErrorIs(t, late.Commit(t.Context()), workers.ErrLeaseLost, "the dead process's commit is fenced")
	for _, task := range tasks {
		require.Equal(t, finished[task.ID], e.task(t, task), "confirmed once")
	}
	require.Equal(t, 5, len(e.led.Sends()), "nothing was sent again")
}
