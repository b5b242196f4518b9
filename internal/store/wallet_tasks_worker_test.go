package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// Seed 003's recycled nonces: a nonce whose attempt was dropped (a
// deterministic rejection) is free again, from the chain's nonce up to the
// next nonce, lowest first; a live or confirmed attempt's nonce is not.
func TestAttempts_FreedNoncesAreTheDroppedOnesBetweenTheChainNonceAndTheNextNonce(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	freed := func(from int64) []int64 {
		t.Helper()
		out, err := st.WalletNoncesFreed(ctx, store.WalletNoncesFreedParams{ChainID: taskChain, Sender: taskSender, From: from, Max: 10})
		require.NoError(t, err)
		return out
	}
	require.Empty(t, freed(0), "no nonce is freed before the first attempt")
	var tasks []store.Task
	for range 5 {
		tasks = append(tasks, insertTask(t, st, newTask(now, 0, "")))
	}
	stored := storeAttempts(t, st, now, 2, tasks...) // nonces 2..6
	require.Empty(t, freed(2))
	for _, i := range []int{1, 3} { // nonces 3 and 5
		_, err := st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: tasks[i].ID, Reason: "insufficient funds"})
		require.NoError(t, err)
	}
	_, err := st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash, Final: true})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 5}, freed(2))
	require.Equal(t, []int64{5}, freed(4), "nonces below the chain's nonce are used")
	out, err := st.WalletNoncesFreed(ctx, store.WalletNoncesFreedParams{ChainID: taskChain, Sender: taskSender, From: 2, Max: 1})
	require.NoError(t, err)
	require.Equal(t, []int64{3}, out, "lowest first, up to Max")
}

// The next send fills freed nonces before new ones, in the same write-ahead
// transaction; a reused nonce must be below the next nonce and free, and
// does not move the next nonce.
func TestAttempts_WriteAheadReusesFreedNoncesBelowTheNextNonce(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	a := insertTask(t, st, newTask(now, 0, ""))
	b := insertTask(t, st, newTask(now, 0, ""))
	storeAttempts(t, st, now, 0, a, b)
	_, err := st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: a.ID, Reason: "insufficient funds"})
	require.NoError(t, err)

	c := insertTask(t, st, newTask(now, 0, ""))
	d := insertTask(t, st, newTask(now, 0, ""))
	storeParams := func(reusedNonce int64) store.AttemptsStoreParams {
		return store.AttemptsStoreParams{
			Now: now, ChainID: taskChain, Sender: taskSender, FirstNonce: 2,
			Reused: []store.SignedTx{fakeSigned(c.ID, reusedNonce)}, Attempts: []store.SignedTx{fakeSigned(d.ID, 2)},
		}
	}
	_, err = st.AttemptsStore(ctx, storeParams(2))
	require.ErrorContains(t, err, "not below the next nonce")
	_, err = st.AttemptsStore(ctx, storeParams(1))
	var taken *store.NonceTakenError
	require.ErrorAs(t, err, &taken, "nonce 1 is held by b's live attempt")
	got, err := st.TaskGet(ctx, "main", c.ID)
	require.NoError(t, err)
	require.Equal(t, store.TaskWaiting, got.Status, "a refused store stores nothing")

	out, err := st.AttemptsStore(ctx, storeParams(0))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 2}, nonces(out), "reused first, then new")
	next, err := st.WalletNonceGet(ctx, taskChain, taskSender)
	require.NoError(t, err)
	require.Equal(t, int64(3), next, "only the new attempt moved the next nonce")

	// Reusing needs a next nonce: none was ever assigned on another sender.
	other := "0x00000000000000000000000000000000000000c3"
	p := newTask(now, 0, "")
	p.Sender = other
	e := insertTask(t, st, p)
	_, err = st.AttemptsStore(ctx, store.AttemptsStoreParams{
		Now: now, ChainID: taskChain, Sender: other, FirstNonce: 5, Reused: []store.SignedTx{fakeSigned(e.ID, 1)},
	})
	var moved *store.NonceMovedError
	require.ErrorAs(t, err, &moved)
}

// Reconciliation: the next nonce moves up to the chain's nonce, never down,
// and not before the first attempt.
func TestAttempts_NextNonceIsRaisedToTheChainNonceAndNeverLowered(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	raise := func(to int64) bool {
		t.Helper()
		moved, err := st.WalletNonceRaise(ctx, store.WalletNonceRaiseParams{Now: now, ChainID: taskChain, Sender: taskSender, AtLeast: to})
		require.NoError(t, err)
		return moved
	}
	require.False(t, raise(4), "no row before the first attempt")
	storeAttempts(t, st, now, 0, insertTask(t, st, newTask(now, 0, "")))
	require.True(t, raise(4))
	require.False(t, raise(2))
	next, err := st.WalletNonceGet(ctx, taskChain, taskSender)
	require.NoError(t, err)
	require.Equal(t, int64(4), next)
}

// The in-flight budget counts signed and sent attempts, not confirmed or
// dropped ones; uncertain sent attempts (indeterminate broadcast) are listed
// for a new broadcast until one is recorded as taken.
func TestAttempts_InFlightCountAndUncertainBroadcasts(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	var tasks []store.Task
	for range 4 {
		tasks = append(tasks, insertTask(t, st, newTask(now, 0, "")))
	}
	stored := storeAttempts(t, st, now, 0, tasks...)
	inFlight := func() int {
		t.Helper()
		n, err := st.AttemptsInFlight(ctx, taskChain, taskSender)
		require.NoError(t, err)
		return n.InFlight
	}
	require.Equal(t, 4, inFlight())
	_, err := st.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{stored[1].TxHash, stored[2].TxHash}, Error: "timeout"})
	require.NoError(t, err)
	_, err = st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash, Final: true})
	require.NoError(t, err)
	_, err = st.TaskFail(ctx, store.TaskFailParams{Now: now, ID: tasks[3].ID, Reason: "insufficient funds"})
	require.NoError(t, err)
	require.Equal(t, 2, inFlight())

	uncertain := func(from int64) []int64 {
		t.Helper()
		out, err := st.AttemptsSentUncertain(ctx, store.AttemptsSentUncertainParams{ChainID: taskChain, Sender: taskSender, From: from, Max: 10})
		require.NoError(t, err)
		return nonces(out)
	}
	require.Equal(t, []int64{1, 2}, uncertain(0))
	require.Equal(t, []int64{2}, uncertain(2))
	ok, err := st.AttemptRecordBroadcast(ctx, store.AttemptRecordBroadcastParams{Now: now, ChainID: taskChain, TxHash: stored[1].TxHash})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []int64{2}, uncertain(0), "taken: certain now")
	ok, err = st.AttemptRecordBroadcast(ctx, store.AttemptRecordBroadcastParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash})
	require.NoError(t, err)
	require.False(t, ok, "a confirmed attempt is not sent")
}

// An attempt that will never be mined (its nonce went to another
// transaction) is dropped and its task goes back to waiting, in one
// transaction; only a live attempt of an executing task.
func TestAttempts_RequeueDropsTheAttemptAndPutsItsTaskBackToWaiting(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	task := insertTask(t, st, newTask(now, 0, ""))
	stored := storeAttempts(t, st, now, 0, task)
	back, err := st.AttemptRequeue(ctx, store.AttemptRequeueParams{Now: now.Add(time.Second), ChainID: taskChain, TxHash: stored[0].TxHash, Reason: "nonce too low"})
	require.NoError(t, err)
	require.Equal(t, store.TaskWaiting, back.Status)
	require.Nil(t, back.StartedAt)
	atts, err := st.AttemptListByTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, store.AttemptDropped, atts[0].State)
	require.Equal(t, "nonce too low", atts[0].LastError)
	_, err = st.AttemptRequeue(ctx, store.AttemptRequeueParams{Now: now, ChainID: taskChain, TxHash: stored[0].TxHash, Reason: "again"})
	require.ErrorIs(t, err, store.ErrNotFound)
	next, err := st.TaskNextWaiting(ctx, store.TaskNextWaitingParams{ChainID: taskChain, Sender: taskSender, Queue: store.QueueFIFO, Max: 10})
	require.NoError(t, err)
	require.Equal(t, []string{task.ID}, taskIDs(next))
}

// The follower's list: every wallet with attempts in flight or waiting
// tasks, once, in (chain, sender) order, by pages; wallets whose work is all
// finished are not listed.
func TestWallets_WithWorkListsWalletsWithAttemptsInFlightOrWaitingTasks(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	now := testfactory.Start()
	sender := func(n byte) string {
		return "0x00000000000000000000000000000000000000" + string("0123456789abcdef"[n>>4]) + string("0123456789abcdef"[n&15])
	}
	task := func(s string) store.Task {
		p := newTask(now, 0, "")
		p.Sender = s
		return insertTask(t, st, p)
	}
	store1 := func(s string, tk store.Task) store.Attempt {
		out, err := st.AttemptsStore(ctx, store.AttemptsStoreParams{Now: now, ChainID: taskChain, Sender: s, FirstNonce: 0, Attempts: []store.SignedTx{fakeSigned(tk.ID, 0)}})
		require.NoError(t, err)
		return out[0]
	}
	task(sender(0x10))                       // waiting
	task(sender(0x10))                       // waiting, same wallet
	store1(sender(0x20), task(sender(0x20))) // signed
	sent := store1(sender(0x30), task(sender(0x30)))
	_, err := st.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: taskChain, TxHashes: []string{sent.TxHash}})
	require.NoError(t, err)
	done := store1(sender(0x40), task(sender(0x40)))
	_, err = st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: taskChain, TxHash: done.TxHash, Final: true})
	require.NoError(t, err)

	all, err := st.WalletsWithWork(ctx, store.WalletsWithWorkParams{Max: 10})
	require.NoError(t, err)
	want := []store.WalletKey{{taskChain, sender(0x10)}, {taskChain, sender(0x20)}, {taskChain, sender(0x30)}}
	require.Equal(t, want, all)
	page, err := st.WalletsWithWork(ctx, store.WalletsWithWorkParams{Max: 2})
	require.NoError(t, err)
	require.Equal(t, want[:2], page)
	page, err = st.WalletsWithWork(ctx, store.WalletsWithWorkParams{After: page[1], Max: 2})
	require.NoError(t, err)
	require.Equal(t, want[2:], page)
}

// The wallet worker's queries run in every run of every wallet's shard (and
// the Follower's every second): each is index-driven on a busy wallet lane,
// and again with 50 000 finished tasks and their confirmed attempts.
func TestWallets_WorkerQueriesAreIndexDriven(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	t0 := testfactory.Start()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Store.DB().Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	// 100 wallets with waiting and executing tasks, their attempts signed
	// or sent; next nonces of 10 000 wallets.
	exec(`
		INSERT INTO ledgerq.wallet_tasks (id, wallet_id, chain_id, sender, status, to_address, request_hash,
			created_at, updated_at, started_at)
		SELECT md5('busy' || g)::uuid::text, 'w' || (g % 100), 1, '0x' || lpad(to_hex(g % 100), 40, '0'),
			g % 2, '0x' || lpad('b', 40, '0'), sha256(g::text::bytea), $1, $1, CASE WHEN g % 2 = 1 THEN $1::timestamptz END
		FROM generate_series(1, 6000) g`, t0)
	exec(`
		INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit,
			max_fee_per_gas, max_priority_fee_per_gas, state, created_at, updated_at, sent_at, last_error)
		SELECT 1, '0x' || lpad(to_hex(g), 64, '0'), md5('busy' || g)::uuid::text, '0x' || lpad(to_hex(g % 100), 40, '0'),
			g, '\x01', 21000, 2, 1, CASE WHEN g % 4 = 1 THEN 'signed' ELSE 'sent' END::ledgerq.tx_attempt_state,
			$1, $1, CASE WHEN g % 4 = 3 THEN $1::timestamptz END, CASE WHEN g % 8 = 3 THEN 'timeout' END
		FROM generate_series(1, 6000) g WHERE g % 2 = 1`, t0)
	exec(`
		INSERT INTO ledgerq.wallet_nonces (chain_id, sender, next_nonce, created_at, updated_at)
		SELECT 1, '0x' || lpad(to_hex(g), 40, '0'), 6000, $1, $1 FROM generate_series(0, 9999) g`, t0)
	// One health row per wallet, the chain nonce of 1 % of them moved a
	// moment ago (the Follower watches those).
	exec(`
		INSERT INTO ledgerq.wallet_health (chain_id, sender, chain_nonce, chain_nonce_since, created_at, updated_at)
		SELECT 1, '0x' || lpad(to_hex(g), 40, '0'), 6000, $1::timestamptz - CASE WHEN g % 100 = 0 THEN interval '1 second' ELSE interval '1 day' END, $1, $1
		FROM generate_series(0, 9999) g`, t0)
	exec(`ANALYZE ledgerq.wallet_tasks, ledgerq.tx_attempts, ledgerq.wallet_nonces, ledgerq.wallet_health`)

	generated := generatedSQL(t)
	conn, err := db.Store.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	explainAll := func(phase string) {
		t.Helper()
		for _, name := range []string{
			"WalletNonceGet", "WalletNonceRaise", "WalletNoncesFreed", "AttemptsInFlight", "AttemptsSentUncertain",
			"AttemptRecordBroadcast", "AttemptDrop", "TaskRequeue", "WalletsWithWork",
			"AttemptsMined", "AttemptsMinedFrom", "AttemptsSentFrom", "AttemptMaxHeldNonce", "AttemptReopen", "AttemptMarkMined",
		} {
			sql, ok := generated[name]
			require.True(t, ok, "query %s not found in the generated code (run sqlc generate)", name)
			desc, err := conn.Conn().Prepare(ctx, "", sql)
			require.NoError(t, err, name)
			args := make([]any, len(desc.ParamOIDs))
			for i, oid := range desc.ParamOIDs {
				args[i] = paramValue(t, name, i, oid, t0)
			}
			var plan []string
			rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
			require.NoError(t, err, name)
			for rows.Next() {
				var line string
				require.NoError(t, rows.Scan(&line))
				plan = append(plan, line)
			}
			require.NoError(t, rows.Err(), name)
			text := strings.Join(plan, "\n")
			t.Logf("EXPLAIN %s, %s:\n%s", phase, name, text)
			require.NotContains(t, text, "Seq Scan", "%s: %s scans a table", phase, name)
		}
	}
	explainAll("a busy wallet lane")
	exec(`
		INSERT INTO ledgerq.wallet_tasks (id, wallet_id, chain_id, sender, status, to_address, request_hash,
			tx_hash, created_at, updated_at, started_at, finished_at)
		SELECT md5('done' || g)::uuid::text, 'w' || (g % 100), 1, '0x' || lpad(to_hex(g % 100), 40, '0'),
			3, '0x' || lpad('b', 40, '0'), sha256(g::text::bytea), '0x' || lpad(to_hex(100000 + g), 64, '0'),
			$1, $1, $1, $1
		FROM generate_series(1, 50000) g`, t0)
	exec(`
		INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit,
			max_fee_per_gas, max_priority_fee_per_gas, state, created_at, updated_at, sent_at, confirmed_at)
		SELECT 1, '0x' || lpad(to_hex(100000 + g), 64, '0'), md5('done' || g)::uuid::text,
			'0x' || lpad(to_hex(g % 100), 40, '0'), 100000 + g, '\x01', 21000, 2, 1, 'confirmed', $1, $1, $1, $1
		FROM generate_series(1, 50000) g`, t0)
	exec(`ANALYZE ledgerq.wallet_tasks, ledgerq.tx_attempts`)
	explainAll("a busy wallet lane and 50 000 finished tasks")
}
