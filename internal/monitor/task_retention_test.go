package monitor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
)

// insertTask stores a waiting send-tx task of wallet "w" at the clock's now.
func (r *retentionSetup) insertTask(n int) store.Task {
	r.t.Helper()
	task, _, err := r.st.TaskInsert(r.t.Context(), store.TaskInsertParams{
		Now: r.clock.Now(), Wallet: "w", ChainID: 1337,
		Sender:  "0x00000000000000000000000000000000000000a1",
		Request: store.TaskRequest{To: fmt.Sprintf("0x%040x", n)},
	})
	require.NoError(r.t, err)
	return task
}

func (r *retentionSetup) cancelTask(id string) {
	r.t.Helper()
	_, ok, err := r.st.TaskCancel(r.t.Context(), store.TaskCancelParams{Now: r.clock.Now(), Wallet: "w", ID: id})
	require.NoError(r.t, err)
	require.True(r.t, ok)
}

func (r *retentionSetup) taskExists(id string) bool {
	r.t.Helper()
	_, err := r.st.TaskGet(r.t.Context(), "w", id)
	if err != nil {
		require.ErrorIs(r.t, err, store.ErrNotFound)
		return false
	}
	return true
}

func TestTaskRetention_FinishedTasksOlderThanTheAgeAreDeletedWaitingAndYoungerOnesKept(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	old := r.insertTask(1)
	waiting := r.insertTask(2)
	r.cancelTask(old.ID)
	r.clock.Advance(20 * time.Hour)
	young := r.insertTask(3)
	r.cancelTask(young.ID)
	r.clock.Advance(5 * time.Hour) // old finished 25h ago, young 5h ago, waiting created 25h ago

	n := r.rows.Run("task retention", monitor.NewTaskRetention(r.st, r.deps, r.cfg).RunOnce)
	require.Equal(t, 1, n)
	require.False(t, r.taskExists(old.ID), "a task finished longer than the age ago is deleted")
	require.True(t, r.taskExists(young.ID), "a task finished less than the age ago is kept")
	require.True(t, r.taskExists(waiting.ID), "a waiting task is kept whatever its age")
}

func TestTaskRetention_DeletesAtMostBatchSizePerRound(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	r.cfg.BatchSize = 2
	for i := range 5 {
		r.cancelTask(r.insertTask(i).ID)
	}
	r.clock.Advance(48 * time.Hour)
	ret := monitor.NewTaskRetention(r.st, r.deps, r.cfg)
	require.Equal(t, 2, r.rows.Run("task retention", ret.RunOnce))
	require.Equal(t, 2, r.rows.Run("task retention", ret.RunOnce))
	require.Equal(t, 1, r.rows.Run("task retention", ret.RunOnce))
	require.Equal(t, 0, r.rows.Run("task retention", ret.RunOnce))
}
