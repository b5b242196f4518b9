package monitor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// task posts a waiting send-tx task of wallet "w" at the clock's now.
func (r *retentionSetup) task() store.Task {
	r.t.Helper()
	return r.rows.PostTask(testfactory.Task{Wallet: "w"})
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
	old := r.task()
	waiting := r.task()
	r.rows.CancelTask(old)
	r.clock.Advance(20 * time.Hour)
	young := r.task()
	r.rows.CancelTask(young)
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
	for range 5 {
		r.rows.CancelTask(r.task())
	}
	r.clock.Advance(48 * time.Hour)
	ret := monitor.NewTaskRetention(r.st, r.deps, r.cfg)
	require.Equal(t, 2, r.rows.Run("task retention", ret.RunOnce))
	require.Equal(t, 2, r.rows.Run("task retention", ret.RunOnce))
	require.Equal(t, 1, r.rows.Run("task retention", ret.RunOnce))
	require.Equal(t, 0, r.rows.Run("task retention", ret.RunOnce))
}

// A wallet's policy refusals are kept as long as its finished tasks: the
// wallet lane's retention deletes those recorded longer than the age ago
// (a client refused again and again must not grow the table forever).
func TestTaskRetention_PolicyRefusalsOlderThanTheAgeAreDeleted(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	refuse := func() {
		t.Helper()
		_, err := r.st.DB().Exec(t.Context(), `
			INSERT INTO ledgerq.wallet_policy_refusals (wallet_id, at, rule, to_address, value_wei, detail)
			VALUES ('w', $1, 'max_value', '0x00000000000000000000000000000000000000ee', 5, '{}')`, r.clock.Now())
		require.NoError(t, err)
	}
	refusals := func() int {
		t.Helper()
		var n int
		require.NoError(t, r.st.DB().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.wallet_policy_refusals`).Scan(&n))
		return n
	}
	refuse()
	refuse()
	r.clock.Advance(20 * time.Hour)
	refuse()
	r.clock.Advance(5 * time.Hour) // two recorded 25h ago, one 5h ago

	n := r.rows.Run("task retention", monitor.NewTaskRetention(r.st, r.deps, r.cfg).RunOnce)
	require.Equal(t, 2, n)
	require.Equal(t, 1, refusals(), "the refusal younger than the age is kept")
}
