package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// The wallet tests' chain, sender and recipient: those of a testfactory.Task
// that names none.
const (
	taskChain  = testfactory.WalletChainID
	taskSender = testfactory.WalletSender
	taskTo     = testfactory.WalletTo
)

// newTask is a task of wallet "main" on taskChain/taskSender with a body of
// its own, for the tests of TaskInsert itself (idempotency compares bodies);
// other tests post their tasks with testfactory.
func newTask(now time.Time, priority int32, key string) store.TaskInsertParams {
	return store.TaskInsertParams{
		Now: now, Wallet: "main", ChainID: taskChain, Sender: taskSender, Priority: priority,
		Request:        store.TaskRequest{To: taskTo, Value: big.NewInt(1), Data: []byte{0xca, 0xfe}},
		IdempotencyKey: key,
	}
}

func insertTask(t *testing.T, st *store.Store, p store.TaskInsertParams) store.Task {
	t.Helper()
	task, created, err := st.TaskInsert(t.Context(), p)
	require.NoError(t, err)
	require.True(t, created)
	return task
}

func taskIDs(tasks []store.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

func TestTask_InsertStoresAWaitingTaskAndSchedulesItsWalletShard(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	p := newTask(now, 5, "")
	p.Sender = "0x00000000000000000000000000000000000000A1" // checksummed: stored lower-case
	gas := uint64(21000)
	p.Request.GasLimit = &gas
	p.Request.Value, _ = new(big.Int).SetString("115792089237316195423570985008687907853269984665640564039457584007913129639935", 10)
	task := insertTask(t, st, p)
	require.Equal(t, store.TaskWaiting, task.Status)
	require.Equal(t, taskSender, task.Sender)
	require.Equal(t, 0, p.Request.Value.Cmp(task.Request.Value), "a uint256 survives the round trip")
	require.Equal(t, gas, *task.Request.GasLimit)
	got, err := st.TaskGet(ctx, "main", task.ID)
	require.NoError(t, err)
	require.Equal(t, task, got)

	shard, err := st.ShardGet(ctx, store.WalletShardKey(taskChain, taskSender))
	require.NoError(t, err)
	require.Equal(t, "wallet:1337:"+taskSender, shard.Key)
	require.Equal(t, store.ShardPending, shard.State, "the task's shard is scheduled once the task is stored")
}

func TestTask_IdempotencyReplayWithTheSameBodyReturnsTheSameTask(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	now := testfactory.Start()
	first := insertTask(t, st, newTask(now, 1, "k1"))
	again, created, err := st.TaskInsert(t.Context(), newTask(now.Add(time.Second), 1, "k1"))
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, first, again)

	// The key is per wallet: another wallet may use it.
	other := newTask(now, 1, "k1")
	other.Wallet = "other"
	_, created, err = st.TaskInsert(t.Context(), other)
	require.NoError(t, err)
	require.True(t, created)
}

func TestTask_IdempotencySameKeyWithADifferentBodyIsAConflict(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	now := testfactory.Start()
	first := insertTask(t, st, newTask(now, 1, "k1"))
	for name, change := range map[string]func(*store.TaskInsertParams){
		"priority": func(p *store.TaskInsertParams) { p.Priority = 2 },
		"value":    func(p *store.TaskInsertParams) { p.Request.Value = big.NewInt(2) },
		"data":     func(p *store.TaskInsertParams) { p.Request.Data = []byte{0xca} },
		"to":       func(p *store.TaskInsertParams) { p.Request.To = taskSender },
		"gas": func(p *store.TaskInsertParams) {
			g := uint64(1)
			p.Request.GasLimit = &g
		},
	} {
		p := newTask(now, 1, "k1")
		change(&p)
		_, _, err := st.TaskInsert(t.Context(), p)
		var conflict *store.IdempotencyConflictError
		require.ErrorAs(t, err, &conflict, name)
		require.Equal(t, first.ID, conflict.TaskID, name)
	}
	tasks, err := st.TaskList(t.Context(), store.TaskListParams{Wallet: "main", Limit: 10})
	require.NoError(t, err)
	require.Len(t, tasks, 1)
}

func TestTask_IdempotencyConcurrentInsertsWithOneKeyStoreOneTask(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	now := testfactory.Start()
	const n = 50
	// A connection per caller, so that the inserts really overlap.
	st, err := store.OpenPool(t.Context(), db.URL, n)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.Ping(t.Context()))
	var wg sync.WaitGroup
	ids := make([]string, n)
	created := make([]bool, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			task, c, err := st.TaskInsert(t.Context(), newTask(now, 1, "same"))
			ids[i], created[i], errs[i] = task.ID, c, err
		}()
	}
	close(start)
	wg.Wait()
	made := 0
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, ids[0], ids[i], "every caller gets the one task")
		if created[i] {
			made++
		}
	}
	require.Equal(t, 1, made, "exactly one insert created it")
	var rows int
	require.NoError(t, db.Store.DB().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.wallet_tasks`).Scan(&rows))
	require.Equal(t, 1, rows)
}

func TestTask_ATaskOfAnotherWalletIsNotFound(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	now := clk.Now()
	task := rows.PostTask(testfactory.Task{Priority: 1})
	_, err := st.TaskGet(t.Context(), "other", task.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.TaskGet(t.Context(), "main", "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, _, err = st.TaskCancel(t.Context(), store.TaskCancelParams{Now: now, Wallet: "other", ID: task.ID})
	require.ErrorIs(t, err, store.ErrNotFound)
	got, err := st.TaskGet(t.Context(), "main", task.ID)
	require.NoError(t, err)
	require.Equal(t, store.TaskWaiting, got.Status, "another wallet's cancel changed nothing")
	list, err := st.TaskList(t.Context(), store.TaskListParams{Wallet: "other", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestTask_ListPagesByIdAndFiltersByStatus(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	now := clk.Now()
	var all []string
	for i := range 5 {
		all = append(all, rows.PostTask(testfactory.Task{CreatedAt: now.Add(time.Duration(i) * time.Millisecond)}).ID)
	}
	_, ok, err := st.TaskCancel(t.Context(), store.TaskCancelParams{Now: now, Wallet: "main", ID: all[1]})
	require.NoError(t, err)
	require.True(t, ok)

	page1, err := st.TaskList(t.Context(), store.TaskListParams{Wallet: "main", Limit: 3})
	require.NoError(t, err)
	page2, err := st.TaskList(t.Context(), store.TaskListParams{Wallet: "main", Limit: 3, After: page1[2].ID})
	require.NoError(t, err)
	require.Equal(t, all, append(taskIDs(page1), taskIDs(page2)...), "UUIDv7 ids page in creation order")

	errStatus := store.TaskError
	failed, err := st.TaskList(t.Context(), store.TaskListParams{Wallet: "main", Limit: 10, Status: &errStatus})
	require.NoError(t, err)
	require.Equal(t, []string{all[1]}, taskIDs(failed))
}

// A waiting task is aborted when its client cancels (or
// disconnects), and ends in Error; one that is executing is not.
func TestTask_CancellationOfAWaitingTaskEndsItInErrorAndAStartedTaskIsNotCancelled(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	now := clk.Now()
	waiting := rows.PostTask(testfactory.Task{Priority: 1})
	started := rows.PostTask(testfactory.Task{Priority: 1})
	rows.StartTasks(0, started)

	got, ok, err := st.TaskCancel(t.Context(), store.TaskCancelParams{Now: now.Add(time.Second), Wallet: "main", ID: waiting.ID})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store.TaskError, got.Status)
	require.True(t, got.Cancelled)
	require.NotEmpty(t, got.Error)
	require.Equal(t, now.Add(time.Second), *got.FinishedAt)

	again, ok, err := st.TaskCancel(t.Context(), store.TaskCancelParams{Now: now.Add(2 * time.Second), Wallet: "main", ID: waiting.ID})
	require.NoError(t, err)
	require.False(t, ok, "cancelling twice changes nothing")
	require.Equal(t, got, again)

	cur, ok, err := st.TaskCancel(t.Context(), store.TaskCancelParams{Now: now, Wallet: "main", ID: started.ID})
	require.NoError(t, err)
	require.False(t, ok, "an executing task's transaction is signed: it is not cancelled")
	require.Equal(t, store.TaskExecuting, cur.Status)
}

// The priority queue: the next task is
// the one with the highest priority; ledgerq orders equal priorities oldest
// first, then by id, so the order is deterministic.
func TestTask_PriorityQueueTakesHighestPriorityFirstThenOldest(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	now := clk.Now()
	low := rows.PostTask(testfactory.Task{Priority: 1})
	highLate := rows.PostTask(testfactory.Task{Priority: 9, CreatedAt: now.Add(2 * time.Second)})
	highEarly := rows.PostTask(testfactory.Task{Priority: 9, CreatedAt: now.Add(time.Second)})
	mid := rows.PostTask(testfactory.Task{Priority: 5})
	tieA := rows.PostTask(testfactory.Task{CreatedAt: now.Add(3 * time.Second)})
	tieB := rows.PostTask(testfactory.Task{CreatedAt: now.Add(3 * time.Second)})
	ties := []string{tieA.ID, tieB.ID}
	if ties[1] < ties[0] {
		ties[0], ties[1] = ties[1], ties[0]
	}
	rows.PostTask(testfactory.Task{Priority: 100, Sender: taskTo}) // another wallet's queue

	next, err := st.TaskNextWaiting(t.Context(), store.TaskNextWaitingParams{ChainID: taskChain, Sender: taskSender, Queue: store.QueuePriority, Max: 10})
	require.NoError(t, err)
	require.Equal(t, []string{highEarly.ID, highLate.ID, mid.ID, low.ID, ties[0], ties[1]}, taskIDs(next))

	first2, err := st.TaskNextWaiting(t.Context(), store.TaskNextWaitingParams{ChainID: taskChain, Sender: taskSender, Queue: store.QueuePriority, Max: 2})
	require.NoError(t, err)
	require.Equal(t, []string{highEarly.ID, highLate.ID}, taskIDs(first2))
}

// The FIFO queue: first in, first out; priority is not relevant.
func TestTask_FIFOQueueTakesOldestFirstAndIgnoresPriority(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	now := clk.Now()
	a := rows.PostTask(testfactory.Task{})
	b := rows.PostTask(testfactory.Task{Priority: 9, CreatedAt: now.Add(time.Second)})
	c := rows.PostTask(testfactory.Task{Priority: 5, CreatedAt: now.Add(2 * time.Second)})
	rows.CancelTask(rows.PostTask(testfactory.Task{CreatedAt: now.Add(-time.Second)}))

	next, err := st.TaskNextWaiting(t.Context(), store.TaskNextWaitingParams{ChainID: taskChain, Sender: taskSender, Queue: store.QueueFIFO, Max: 10})
	require.NoError(t, err)
	require.Equal(t, []string{a.ID, b.ID, c.ID}, taskIDs(next), "only waiting tasks, oldest first")
}

// One worker at a time per wallet: the lock per wallet is its
// shard. Every task of one wallet schedules the same shard, and a shard is
// claimed by one worker at a time, so a second claim finds nothing while the
// first holds it, even with more tasks arriving (they set more_work).
func TestTask_LockOneWorkerAtATimePerWalletThroughItsShard(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	rows.PostTask(testfactory.Task{})
	rows.PostTask(testfactory.Task{})
	claim := func() (store.ShardClaim, error) {
		return st.ShardClaim(ctx, store.ShardClaimParams{Now: now, Owner: "p/1", LeaseUntil: now.Add(time.Minute), Kinds: []string{"wallet"}})
	}
	c, err := claim()
	require.NoError(t, err)
	require.Equal(t, store.WalletShardKey(taskChain, taskSender), c.Key)
	rows.PostTask(testfactory.Task{})
	_, err = claim()
	require.ErrorIs(t, err, store.ErrNotFound, "the wallet's shard is held: no second worker for it")
	shard, err := st.ShardGet(ctx, c.Key)
	require.NoError(t, err)
	require.True(t, shard.MoreWork, "a task stored during the run re-queues the shard at release")
}

// Impossible states are refused by the database itself, whatever the code
// that writes them.
func TestTask_CheckConstraintsRefuseImpossibleStates(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	rows := testfactory.New(t, db.Store, testfactory.NewClock())
	task := rows.PostTask(testfactory.Task{})
	hash := "0x" + fmt.Sprintf("%064x", 1)
	for _, c := range []struct{ constraint, set string }{
		{"wallet_tasks_status_code", `status = 4`},
		{"wallet_tasks_done_has_tx_hash", `status = 3, started_at = now(), finished_at = now()`},
		{"wallet_tasks_done_has_tx_hash", `tx_hash = '` + hash + `'`},
		{"wallet_tasks_error_iff_failed", `status = 2, finished_at = now()`},
		{"wallet_tasks_error_iff_failed", `error = 'x'`},
		{"wallet_tasks_finished_iff_terminal", `status = 2, error = 'x'`},
		{"wallet_tasks_finished_iff_terminal", `finished_at = now()`},
		{"wallet_tasks_started_iff_sent", `status = 1`},
		{"wallet_tasks_started_iff_sent", `started_at = now()`},
		{"wallet_tasks_reverted_only_done", `reverted = true`},
		{"wallet_tasks_cancelled_is_error", `cancelled = true`},
		{"wallet_tasks_sender_format", `sender = '0xABC'`},
		{"wallet_tasks_tx_hash_format", `status = 3, started_at = now(), finished_at = now(), tx_hash = 'abc'`},
		{"wallet_tasks_value_uint256", `value_wei = -1`},
		{"wallet_tasks_value_uint256", `value_wei = 2::numeric ^ 256`},
		{"wallet_tasks_call_shape", `call = '[]'`},
		{"wallet_tasks_call_shape", `call = '{"args":[]}'`},
		{"wallet_tasks_call_shape", `call = '{"function":"f()","args":{}}'`},
		{"wallet_tasks_call_shape", `call = '{"function":"f()","args":[],"method":1}'`},
		{"wallet_tasks_call_shape", `call = '{"function":"f()","args":[],"abi":{}}'`},
		{"wallet_tasks_call_size", `call = jsonb_build_object('function', 'f(string)', 'args', jsonb_build_array(repeat('x', 400000)))`},
	} {
		_, err := db.Store.DB().Exec(ctx, `UPDATE ledgerq.wallet_tasks SET `+c.set+` WHERE id = $1`, task.ID)
		requireCheckViolation(t, err, c.constraint, c.set)
	}
	rows.StartTasks(0, task)
	for _, c := range []struct{ constraint, set string }{
		{"tx_attempts_sent_at", `state = 'sent'`},
		{"tx_attempts_sent_at", `sent_at = now()`},
		{"tx_attempts_confirmed_iff_mined", `state = 'confirmed'`},
		{"tx_attempts_confirmed_iff_mined", `confirmed_at = now()`},
		{"tx_attempts_nonce_not_negative", `nonce = -1`},
		{"tx_attempts_fees_uint256", `max_priority_fee_per_gas = max_fee_per_gas + 1`},
	} {
		_, err := db.Store.DB().Exec(ctx, `UPDATE ledgerq.tx_attempts SET `+c.set+` WHERE task_id = $1`, task.ID)
		requireCheckViolation(t, err, c.constraint, c.set)
	}
	_, err := db.Store.DB().Exec(ctx, `UPDATE ledgerq.wallet_nonces SET next_nonce = -1`)
	requireCheckViolation(t, err, "wallet_nonces_next_nonce_not_negative", "next_nonce = -1")
}

func requireCheckViolation(t *testing.T, err error, constraint, what string) {
	t.Helper()
	var pgErr interface{ SQLState() string }
	require.Error(t, err, "%s must be refused", what)
	require.True(t, errors.As(err, &pgErr), "%s: %v", what, err)
	require.Equal(t, "23514", pgErr.SQLState(), "%s: %v", what, err)
	require.Contains(t, err.Error(), constraint, what)
}

// Retention: finished tasks older than the
// retention are deleted in small batches (with their attempts); waiting,
// executing and recent ones stay.
func TestTask_RetentionDeletesFinishedTasksOlderThanTheAgeInSmallBatches(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx, now := t.Context(), clk.Now()
	var old []store.Task
	for range 3 {
		old = append(old, rows.CancelTask(rows.PostTask(testfactory.Task{})))
	}
	doneOld := rows.PostTask(testfactory.Task{})
	rows.FinishTask(doneOld)
	waiting := rows.PostTask(testfactory.Task{})
	recent := rows.PostTask(testfactory.Task{})
	_, _, err := st.TaskCancel(ctx, store.TaskCancelParams{Now: now.Add(time.Hour), Wallet: "main", ID: recent.ID})
	require.NoError(t, err)

	before := now.Add(time.Minute)
	n, err := st.TaskDeleteFinished(ctx, store.TaskDeleteFinishedParams{Before: before, Max: 2})
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "one small batch at a time")
	n, err = st.TaskDeleteFinished(ctx, store.TaskDeleteFinishedParams{Before: before, Max: 2})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	n, err = st.TaskDeleteFinished(ctx, store.TaskDeleteFinishedParams{Before: before, Max: 2})
	require.NoError(t, err)
	require.Zero(t, n)
	for _, task := range append(old, doneOld) {
		_, err := st.TaskGet(ctx, "main", task.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	atts, err := st.AttemptListByTask(ctx, doneOld.ID)
	require.NoError(t, err)
	require.Empty(t, atts, "attempts go with their task")
	for _, task := range []store.Task{waiting, recent} {
		_, err := st.TaskGet(ctx, "main", task.ID)
		require.NoError(t, err)
	}
	next, err := st.WalletNonceGet(ctx, taskChain, taskSender)
	require.NoError(t, err)
	require.Equal(t, int64(1), next, "the next nonce outlives the attempts")
}

func TestTask_InsertOnAPendingShardTakesNoShardLock(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	st, ctx := db.Store, t.Context()
	now := testfactory.Start()
	insertTask(t, st, newTask(now, 0, "")) // the shard is now pending
	key := store.WalletShardKey(taskChain, taskSender)

	// Another transaction holds the shard's row lock (a claim, a schedule)
	// and does not let go while the next task is stored.
	holder, err := st.Conns().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(context.WithoutCancel(ctx)) }()
	var state string
	require.NoError(t, holder.QueryRow(ctx, `SELECT state FROM ledgerq.shards WHERE key = $1 FOR UPDATE`, key).Scan(&state))
	require.Equal(t, "pending", state)

	insCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, created, err := st.TaskInsert(insCtx, newTask(now.Add(time.Millisecond), 0, ""))
	require.NoError(t, err, "a pending shard's next run starts after this commit: no lock to wait for")
	require.True(t, created)

	// Idle again, the schedule takes the lock and queues the shard.
	require.NoError(t, holder.Rollback(ctx))
	_, err = st.Conns().Exec(ctx, `UPDATE ledgerq.shards SET state = 'idle', scheduled_at = NULL WHERE key = $1`, key)
	require.NoError(t, err)
	insertTask(t, st, newTask(now.Add(2*time.Millisecond), 0, ""))
	shard, err := st.ShardGet(ctx, key)
	require.NoError(t, err)
	require.Equal(t, store.ShardPending, shard.State)
}
