package wallet_test

import (
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// pgDump and pgRestore back up and restore the test database.
func pgDump(t *testing.T, dbURL string) string { return testdb.Dump(t, dbURL) }

func pgRestore(t *testing.T, dump string) *store.Store { return testdb.Restore(t, dump).Store }

// restart points the environment at st as a new ledgerq process would be:
// a new job, scheduler, follower and rescuer, with nothing in memory.
func (e *env) restart(t *testing.T, st *store.Store) *workers.Scheduler {
	t.Helper()
	e.st = st
	e.rows = testfactory.New(t, st, e.clk)
	var err error
	e.follower, err = monitor.NewWalletFollower(e.st, e.reg, e.cfg)
	require.NoError(t, err)
	e.rescuer = workers.NewRescuer(e.st, loop.Deps{Clock: e.clk}, e.wcfg)
	var pool *workers.Scheduler
	e.job, pool = e.newProcess(t, e.led)
	return pool
}

// chainTransfer is one transaction of a wallet as the chain's blocks hold
// it.
type chainTransfer struct {
	nonce uint64
	hash  string
	to    common.Address
	value *big.Int
}

// chainTransfers reads every block of the simulated chain and returns
// wallet w's transactions, in chain order, recovering each sender from its
// signature.
func (e *env) chainTransfers(t *testing.T, w int) []chainTransfer {
	t.Helper()
	signer := types.LatestSignerForChainID(big.NewInt(chainID))
	var out []chainTransfer
	head := e.chain.Head().Number
	for n := uint64(0); n <= head; n++ {
		for _, tx := range e.chain.TransactionsIn(n) {
			from, err := types.Sender(signer, tx)
			require.NoError(t, err)
			if from != e.addr(w) {
				continue
			}
			ct := chainTransfer{nonce: tx.Nonce(), hash: tx.Hash().Hex(), value: tx.Value()}
			if tx.To() != nil {
				ct.to = *tx.To()
			}
			out = append(out, ct)
		}
	}
	return out
}

// requireEachOnceOnChain checks, by the chain's blocks alone, that each
// task's transfer (its recipient and value) is there exactly once, that
// nothing else was sent from the wallet, and that its nonces are contiguous
// from 0. It returns the hash that carried each task, by task id.
func (e *env) requireEachOnceOnChain(t *testing.T, w int, tasks []store.Task) map[string]string {
	t.Helper()
	txs := e.chainTransfers(t, w)
	for i, tx := range txs {
		require.Equal(t, uint64(i), tx.nonce, "the wallet's nonces on the chain are contiguous from 0")
	}
	carried := map[string]string{}
	duplicates := 0
	for _, task := range tasks {
		n := 0
		for _, tx := range txs {
			if tx.to == common.HexToAddress(task.Request.To) && tx.value.Cmp(task.Request.Value) == 0 {
				n++
				carried[task.ID] = tx.hash
			}
		}
		require.NotZero(t, n, "task %s's transfer is on the chain", task.ID)
		duplicates += n - 1
	}
	t.Logf("chain: %d transactions of the wallet for %d tasks; duplicates found on chain: %d", len(txs), len(tasks), duplicates)
	require.Zero(t, duplicates, "a task's transfer is on the chain more than once")
	require.Len(t, txs, len(tasks), "the wallet sent nothing but the tasks' transfers")
	return carried
}

// backupBehind has wallet 0 do nDone tasks, accept one waiting task of each
// value, back the database up and then do the waiting tasks too: the backup
// is behind the chain by the waiting tasks' transactions.
func (e *env) backupBehind(t *testing.T, nDone int, values ...int64) (done, waiting []store.Task, dump string) {
	t.Helper()
	done = e.postN(t, nDone)
	e.drive(t, e.pool, 20, done...)
	for _, v := range values {
		waiting = append(waiting, e.post(t, 0, 0, v, nil))
	}
	dump = pgDump(t, e.db.URL)
	e.drive(t, e.pool, 20, waiting...)
	return done, waiting, dump
}

// requireHeld runs rounds of follower and pool (with a block period between
// them if advance) and checks that nothing was sent and that wallet 0's
// health row says it is held, for a reason that contains reason.
func (e *env) requireHeld(t *testing.T, pool *workers.Scheduler, rounds int, advance bool, reason string) {
	t.Helper()
	sendsBefore := len(e.led.Sends())
	for range rounds {
		_, err := e.follower.RunOnce(t.Context())
		require.NoError(t, err)
		runPool(t, pool)
		if advance {
			e.clk.Advance(blockPeriod)
		}
	}
	require.Len(t, e.led.Sends(), sendsBefore, "nothing is sent for a held wallet")
	h := e.health(t)
	require.NotNil(t, h.RecoveryReason, "the health row says why the wallet is held")
	require.Contains(t, *h.RecoveryReason, reason)
	t.Logf("held: %s", *h.RecoveryReason)
}

// requireDoneAsOnChain drives the waiting tasks on pool, checks by the
// chain's blocks that done's and waiting's transfers are each there once,
// that the waiting tasks are done with the transactions the chain holds and
// that wallet 0 is no longer held; it returns the wallet's health row.
func (e *env) requireDoneAsOnChain(t *testing.T, pool *workers.Scheduler, rounds int, done, waiting []store.Task) store.WalletHealth {
	t.Helper()
	e.drive(t, pool, rounds, waiting...)
	carried := e.requireEachOnceOnChain(t, 0, append(append([]store.Task(nil), done...), waiting...))
	for _, task := range waiting {
		require.Equal(t, carried[task.ID], e.task(t, task).TxHash)
	}
	h := e.health(t)
	require.Nil(t, h.RecoveryReason)
	return h
}

// A restore behind the chain: the database is backed up with pg_dump while
// the wallet lane works (tasks done, tasks sent and not yet mined, tasks
// waiting), the lane goes on (everything in the backup is mined, and more
// tasks are accepted and mined), then the older copy is restored and a new
// ledgerq process starts on it. Judged by the chain's blocks: every task's
// transfer is there exactly once and the wallet's nonces are contiguous;
// the tasks the backup knows end done with the transaction the chain holds;
// the tasks accepted after the backup are gone from the database (their
// transactions stay on the chain).
func TestWalletRestoreBehindTheChainSendsNothingTwice(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	ctx := t.Context()

	done := e.postN(t, 3)
	e.drive(t, e.pool, 20, done...)
	// Sent at the backup, not mined yet.
	inFlight := []store.Task{e.post(t, 0, 0, 2001, nil), e.post(t, 0, 0, 2002, nil)}
	_, err := e.follower.RunOnce(ctx)
	require.NoError(t, err)
	runPool(t, e.pool)
	for _, task := range inFlight {
		require.Equal(t, store.TaskExecuting, e.task(t, task).Status)
	}
	// Waiting at the backup: sent and mined after it.
	waiting := []store.Task{
		e.post(t, 0, 0, 3001, nil), e.post(t, 0, 5, 3002, []byte{0xca, 0xfe}), e.post(t, 0, 0, 3003, nil), e.post(t, 0, 0, 3004, nil),
	}
	dump := pgDump(t, e.db.URL)

	e.drive(t, e.pool, 20, append(append([]store.Task(nil), inFlight...), waiting...)...)
	// Accepted after the backup: lost by the restore.
	lost := []store.Task{e.post(t, 0, 0, 4001, nil), e.post(t, 0, 0, 4002, nil)}
	e.drive(t, e.pool, 20, lost...)
	chainNonceAtRestore, err := e.chain.NonceAt(ctx, e.wallets[0].Address())
	require.NoError(t, err)

	// Restore the older copy and start a new process on it.
	pool := e.restart(t, pgRestore(t, dump))
	for _, task := range lost {
		_, err := e.st.TaskGet(ctx, task.Wallet, task.ID)
		require.True(t, errors.Is(err, store.ErrNotFound), "a task accepted after the backup is gone: %v", err)
	}
	for _, task := range waiting {
		require.Equal(t, store.TaskWaiting, e.task(t, task).Status, "waiting in the backup")
	}
	known := append(append(append([]store.Task(nil), done...), inFlight...), waiting...)
	e.drive(t, pool, 30, known...)
	// And the lane keeps working on the restored database.
	next := []store.Task{e.post(t, 0, 0, 5001, nil), e.post(t, 0, 0, 5002, nil)}
	e.drive(t, pool, 30, next...)

	all := append(append(append([]store.Task(nil), known...), lost...), next...)
	carried := e.requireEachOnceOnChain(t, 0, all)
	for _, task := range append(append([]store.Task(nil), known...), next...) {
		got := e.task(t, task)
		require.Equal(t, store.TaskDone, got.Status, "task %s: %s", task.ID, got.Error)
		require.Equal(t, carried[task.ID], got.TxHash, "task %s is done with the transaction the chain holds", task.ID)
	}
	chainNonce, err := e.chain.NonceAt(ctx, e.wallets[0].Address())
	require.NoError(t, err)
	require.Equal(t, chainNonceAtRestore+uint64(len(next)), chainNonce, "the restored lane used no nonce but the new tasks'")
	require.Nil(t, e.health(t).RecoveryReason, "the wallet is not held once every nonce is known")
	e.requireOneTxPerNonce(t, 0)
}

// A restore behind the chain while the node cannot show the wallet's
// transactions at the nonces the database forgot: the wallet is held, with
// the reason in its health row, and nothing is signed for it; once the
// blocks can be read, the tasks end done with the chain's transactions.
func TestWalletRestoreBehindTheChainHoldsTheWalletWhileItsBlocksCannotBeRead(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})

	done, waiting, dump := e.backupBehind(t, 2, 3001, 3002)

	pool := e.restart(t, pgRestore(t, dump))
	e.led.FailBlocks = true
	e.requireHeld(t, pool, 5, true, "no transaction in this database holds")
	for _, task := range waiting {
		require.Equal(t, store.TaskWaiting, e.task(t, task).Status)
	}

	e.led.FailBlocks = false
	e.requireDoneAsOnChain(t, pool, 30, done, waiting)
}

// A restore behind a gas bump: the backup holds a task's first attempt,
// sent and stalled (its tip is below what blocks include); after the backup
// the lane bumps it and the bump is mined. The restored database knows only
// the first attempt, and the chain's block holds, at its nonce, a
// transaction it never saw. It is the wallet's own, sending the task's
// recipient, value and data: the task is done with it, not counted as
// replaced and sent again.
func TestWalletRestoreBehindAGasBumpCountsTheBumpAsTheTasks(t *testing.T) {
	t.Parallel()
	e := setup(t, options{sim: evmsim.Config{MinTip: 5 * params.GWei}, cfg: func(c *wallet.Config) {
		c.StallTimeout = testStall
		c.ReplacedAfter = 0 // a transaction that is not ours would count at once
	}})
	task := e.post(t, 0, 0, 7001, nil)
	e.drive1(t)
	atts := e.attempts(t, task)
	require.Len(t, atts, 1)
	require.Equal(t, store.AttemptSent, atts[0].State)
	dump := pgDump(t, e.db.URL)

	e.drive(t, e.pool, 400, task)
	require.Positive(t, e.task(t, task).Bumps, "mined after a bump")

	pool := e.restart(t, pgRestore(t, dump))
	require.Equal(t, store.TaskExecuting, e.task(t, task).Status)
	require.Zero(t, e.task(t, task).Bumps, "the backup knows no bump")
	e.drive(t, pool, 30, task)
	carried := e.requireEachOnceOnChain(t, 0, []store.Task{task})
	got := e.task(t, task)
	require.Equal(t, store.TaskDone, got.Status, got.Error)
	require.Equal(t, carried[task.ID], got.TxHash)
	require.Zero(t, got.Replacements, "not counted as replaced")
}

// A restore behind the chain on a node that cannot search past state (not an
// archive node): the wallet's transactions at the nonces the database forgot
// are found by reading the chain's blocks one by one from the wallet's last
// mined block, a few per cycle, going on where the last run stopped; nothing
// is sent twice. With a lookback shorter than the way back, the wallet is
// held with the reason and nothing is signed.
func TestWalletRestoreBehindTheChainOnAPrunedNodeReadsTheBlocksOneByOne(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})

	done, waiting, dump := e.backupBehind(t, 2, 3001, 3002, 3003)
	// Blocks go by with nothing of the wallet's in them.
	e.clk.Advance(40 * blockPeriod)
	e.chain.Head()

	e.led.FailNonceSearch = true
	// A lookback shorter than the way back: held.
	e.cfg.RestoreLookback = 5
	pool := e.restart(t, pgRestore(t, dump))
	e.requireHeld(t, pool, 3, false, "--wallet-restore-lookback")

	// Lookback enough, and a cycle budget of one block read: the read goes
	// on across runs from where it stopped.
	e.cfg.RestoreLookback = 1000
	e.cfg.CycleBudget = time.Nanosecond
	pool = e.restart(t, e.st)
	h := e.requireDoneAsOnChain(t, pool, 200, done, waiting)
	require.Nil(t, h.ScanBlock)
	require.Positive(t, e.led.Calls("TxsInBlock"), "the blocks were read one by one")
}
