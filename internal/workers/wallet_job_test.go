package workers_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// Seed 003 with seed 004's queue: every task posted for a wallet ends done
// exactly once, one mined transaction per nonce, nonces contiguous from the
// chain's nonce and assigned in queue order (priority: highest first, then
// oldest; fifo: oldest first).
func TestSeed003_TasksEndDoneOnceWithContiguousNoncesInQueueOrder(t *testing.T) {
	t.Parallel()
	for _, queue := range []store.QueueType{store.QueuePriority, store.QueueFIFO} {
		t.Run(string(queue), func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{cfg: func(c *workers.WalletConfig) { c.QueueType = queue }})
			// The wallet has used nonces 0 and 1 before ledgerq.
			e.sendOutside(t, 0, 0)
			e.sendOutside(t, 0, 1)
			e.chain.Mine()
			priorities := []int32{0, 5, 0, 9, 5, 0, 9, 1}
			var tasks []store.Task
			for i, p := range priorities {
				tasks = append(tasks, e.post(t, 0, p, int64(1000+i), nil))
			}
			e.drive(t, e.pool, 20, tasks...)
			nonces := e.requireDoneOnce(t, tasks...)
			e.requireContiguous(t, 0, 2, nonces)
			e.requireOneTxPerNonce(t, 0)

			want := queueOrder(tasks, queue)
			got := make([]string, len(tasks))
			for i, task := range tasks {
				got[nonces[i]-2] = task.ID
			}
			require.Equal(t, want, got, "nonces follow the queue order")
		})
	}
}

// Seed 002's "a cycle fits well inside the lease" with a node that answers
// slowly: past workers.WalletConfig.CycleBudget a cycle makes no new ledger call and
// leaves the rest to the next cycle — yet every cycle makes one, so the work
// moves.
func TestSeed003_ACycleMakesNoLedgerCallPastItsBudget(t *testing.T) {
	t.Parallel()
	for _, gasGiven := range []bool{false, true} {
		t.Run(fmt.Sprintf("gas given %v", gasGiven), func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{cfg: func(c *workers.WalletConfig) { c.CycleBudget = time.Nanosecond }})
			tasks := e.postN(t, 4)
			if gasGiven {
				_, err := e.st.DB().Exec(t.Context(), `UPDATE ledgerq.wallet_tasks SET gas_limit = 21000`)
				require.NoError(t, err)
			}
			perCycle := map[string][]int{}
			e.crashedRun(t, e.job, 0, func(cyc workers.Cycle, step string) bool {
				kind := fmt.Sprintf("%T", cyc)
				switch step {
				case "execute":
					perCycle[kind] = append(perCycle[kind], e.led.TotalCalls())
				case "commit":
					last := len(perCycle[kind]) - 1
					perCycle[kind][last] = e.led.TotalCalls() - perCycle[kind][last]
				}
				isBroadcast := isCycle(cyc, "*submitter.broadcastCycle")
				return isBroadcast && step == "commit" && len(perCycle[kind]) == len(tasks)
			})
			if gasGiven {
				// One send signs all four (the fee suggestion only); each
				// broadcast cycle sends one.
				require.Equal(t, []int{1}, perCycle["*queuer.sendCycle"])
			} else {
				// Each send: the fee suggestion and one estimate.
				require.Equal(t, []int{2, 2, 2, 2}, perCycle["*queuer.sendCycle"])
			}
			require.Equal(t, []int{1, 1, 1, 1}, perCycle["*submitter.broadcastCycle"])
			require.Equal(t, len(tasks), len(e.led.Sends()))
		})
	}
}
