package eoa

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
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
			e := setup(t, options{cfg: func(c *Config) { c.QueueType = queue }})
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
