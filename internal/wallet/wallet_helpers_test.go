package wallet_test

import (
	"crypto/ecdsa"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// testLogger discards logs unless LEDGERQ_TEST_LOG is set (then: stderr).
func testLogger() *slog.Logger {
	if os.Getenv("LEDGERQ_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

const (
	chainID     = int64(1337)
	blockPeriod = time.Second
)

var ether = big.NewInt(params.Ether)

// newRecLedger is the simulated chain behind a recording ledger whose fee
// suggestions rise by a wei each time, so that a transaction signed again
// never has the bytes of the first.
func newRecLedger(chain *evmsim.Ledger) *ledgertest.WalletLedger {
	l := ledgertest.NewWalletLedger(chain)
	l.RaiseFees = true
	return l
}

// isCycle reports whether cyc is of the role's cycle type named (as %T
// prints it).
func isCycle(cyc workers.Cycle, name string) bool { return fmt.Sprintf("%T", cyc) == name }

// walletSteps are the roles' steps on st and led, as node wires them.
func walletSteps(t *testing.T, st *store.Store, led ledger.WalletLedger, cfg wallet.Config) wallet.Steps {
	t.Helper()
	broadcast, err := submitter.NewWalletBroadcaster(st, cfg)
	require.NoError(t, err)
	confirm, err := monitor.NewWalletConfirmer(st, led, cfg)
	require.NoError(t, err)
	keep, err := monitor.NewWalletKeeper(st, led, cfg)
	require.NoError(t, err)
	send, err := queuer.NewWalletSender(st, led, cfg)
	require.NoError(t, err)
	return wallet.Steps{Recover: broadcast, Confirm: confirm, KeepMoving: keep, Send: send}
}

type env struct {
	db       *testdb.DB
	st       *store.Store
	clk      *clock.Fake
	rows     *testfactory.Factory
	chain    *evmsim.Ledger
	led      *ledgertest.WalletLedger
	keys     []*ecdsa.PrivateKey
	wallets  []keystore.Wallet
	reg      *keystore.Registry
	cfg      wallet.Config
	wcfg     workers.Config
	job      *wallet.Job
	pool     *workers.Scheduler
	follower *monitor.WalletFollower
	rescuer  *workers.Rescuer
	// recipients counts the tasks posted, for unique recipients.
	recipients int
}

type options struct {
	wallets int
	sim     evmsim.Config
	cfg     func(*wallet.Config)
	fund    *big.Int
	// signer, when set, wraps each wallet's key signer.
	signer func(keystore.Signer) keystore.Signer
}

func setup(t *testing.T, o options) *env {
	t.Helper()
	if o.wallets == 0 {
		o.wallets = 1
	}
	if o.fund == nil {
		o.fund = new(big.Int).Mul(big.NewInt(1000), ether)
	}
	e := &env{db: testdb.New(t), clk: testfactory.NewClock()}
	e.st = e.db.Store
	e.rows = testfactory.New(t, e.st, e.clk)
	o.sim.Clock = e.clk
	o.sim.ChainID = chainID
	if o.sim.BlockPeriod == 0 {
		o.sim.BlockPeriod = blockPeriod
	}
	o.sim.Alloc = map[common.Address]*big.Int{}
	for i := range o.wallets {
		key, err := crypto.GenerateKey()
		require.NoError(t, err)
		signer, err := keystore.NewKeySigner(key)
		require.NoError(t, err)
		e.keys = append(e.keys, key)
		var s keystore.Signer = signer
		if o.signer != nil {
			s = o.signer(signer)
		}
		e.wallets = append(e.wallets, keystore.Wallet{ID: fmt.Sprintf("w%d", i), ChainID: chainID, Signer: s})
		o.sim.Alloc[common.Address(signer.Address())] = o.fund
	}
	var err error
	e.reg, err = keystore.NewRegistry(e.wallets...)
	require.NoError(t, err)
	e.chain = evmsim.New(o.sim)
	e.led = newRecLedger(e.chain)
	e.cfg = wallet.Defaults()
	e.cfg.Clock = e.clk
	e.cfg.Logger = testLogger()
	// The rules' tests send at once; TestWallet_ASendThatWouldNotFillTheBudgetWaitsForMoreTasks
	// covers the linger.
	e.cfg.SendLinger = 0
	if o.cfg != nil {
		o.cfg(&e.cfg)
	}
	e.wcfg = workers.Defaults()
	e.wcfg.Workers = 1
	e.job, e.pool = e.newProcess(t, e.led)
	e.follower, err = monitor.NewWalletFollower(e.st, e.reg, e.cfg)
	require.NoError(t, err)
	e.rescuer = workers.NewRescuer(e.st, loop.Deps{Clock: e.clk}, e.wcfg)
	return e
}

// newProcess returns a new Job and Pool on the same database and chain: a
// restarted or second ledgerq process.
func (e *env) newProcess(t *testing.T, led ledger.WalletLedger) (*wallet.Job, *workers.Scheduler) {
	t.Helper()
	return e.newProcessOn(t, led, e.clk)
}

func (e *env) newProcessOn(t *testing.T, led ledger.WalletLedger, clk clock.Clock) (*wallet.Job, *workers.Scheduler) {
	t.Helper()
	job, err := wallet.NewJob(e.st, led, e.reg, e.cfg, walletSteps(t, e.st, led, e.cfg))
	require.NoError(t, err)
	pool, err := workers.NewScheduler(e.st, loop.Deps{Clock: clk, Logger: testLogger()}, e.wcfg, map[string]workers.Job{wallet.Kind: job})
	require.NoError(t, err)
	return job, pool
}

func (e *env) addr(w int) common.Address { return common.Address(e.wallets[w].Address()) }

func (e *env) key(w int) string { return store.WalletShardKey(chainID, e.wallets[w].Address().Hex()) }

// post stores a task of wallet w to a recipient of its own, one
// microsecond after the previous one.
func (e *env) post(t *testing.T, w int, priority int32, value int64, data []byte) store.Task {
	t.Helper()
	e.clk.Advance(time.Microsecond)
	return e.insert(t, w, e.clk.Now(), priority, value, data)
}

// postAt stores a task of wallet w at now.
func (e *env) postAt(t *testing.T, w int, now time.Time, value int64) store.Task {
	t.Helper()
	return e.insert(t, w, now.UTC().Truncate(time.Microsecond), 0, value, nil)
}

func (e *env) insert(t *testing.T, w int, now time.Time, priority int32, value int64, data []byte) store.Task {
	t.Helper()
	return e.insertRequest(t, w, now, priority, store.TaskRequest{Value: big.NewInt(value), Data: data})
}

// postRequest stores a task of wallet w asking for r (to a new recipient).
func (e *env) postRequest(t *testing.T, w int, r store.TaskRequest) store.Task {
	t.Helper()
	e.clk.Advance(time.Microsecond)
	return e.insertRequest(t, w, e.clk.Now(), 0, r)
}

func (e *env) insertRequest(t *testing.T, w int, now time.Time, priority int32, r store.TaskRequest) store.Task {
	t.Helper()
	e.recipients++
	r.To = common.BigToAddress(big.NewInt(int64(0x10000 + e.recipients))).Hex()
	return e.rows.PostTask(testfactory.Task{
		Wallet: e.wallets[w].ID, ChainID: chainID, Sender: e.wallets[w].Address().Hex(), Priority: priority,
		Request: r, CreatedAt: now,
	})
}

func (e *env) task(t *testing.T, task store.Task) store.Task {
	t.Helper()
	got, err := e.st.TaskGet(t.Context(), task.Wallet, task.ID)
	require.NoError(t, err)
	return got
}

func (e *env) attempts(t *testing.T, task store.Task) []store.Attempt {
	t.Helper()
	atts, err := e.st.AttemptListByTask(t.Context(), task.ID)
	require.NoError(t, err)
	return atts
}

// runPool runs pool until no shard is waiting.
func runPool(t *testing.T, pool *workers.Scheduler) {
	t.Helper()
	for range 10_000 {
		ran, err := pool.RunOnce(t.Context())
		require.NoError(t, err)
		if !ran {
			return
		}
	}
	t.Fatal("the pool never ran out of shards")
}

// runEverySecond runs the follower and the pool rounds times, the clock a
// second on after each, and hands afterRun the first wallet's shard after
// each round in which the pool ran it.
func (e *env) runEverySecond(t *testing.T, rounds int, afterRun func(store.Shard)) {
	t.Helper()
	for range rounds {
		_, err := e.follower.RunOnce(t.Context())
		require.NoError(t, err)
		ran, err := e.pool.RunOnce(t.Context())
		require.NoError(t, err)
		if ran {
			s, err := e.st.ShardGet(t.Context(), e.key(0))
			require.NoError(t, err)
			afterRun(s)
		}
		e.clk.Advance(time.Second)
	}
}

// drive runs rounds of follower, pool and one block period until every task
// has ended, at most rounds times.
func (e *env) drive(t *testing.T, pool *workers.Scheduler, rounds int, tasks ...store.Task) {
	t.Helper()
	for range rounds {
		if e.allEnded(t, tasks) {
			return
		}
		_, err := e.follower.RunOnce(t.Context())
		require.NoError(t, err)
		runPool(t, pool)
		e.clk.Advance(blockPeriod)
	}
	if !e.allEnded(t, tasks) {
		t.Fatalf("tasks still running after %d rounds", rounds)
	}
}

func (e *env) allEnded(t *testing.T, tasks []store.Task) bool {
	t.Helper()
	for _, task := range tasks {
		if !e.task(t, task).Status.Terminal() {
			return false
		}
	}
	return true
}

// requireDoneOnce checks that every task is done exactly once: done with
// the hash of its one confirmed attempt, mined on the chain, its recipient
// paid its value exactly once (a second execution would pay twice). It
// returns the nonce of each task's transaction.
func (e *env) requireDoneOnce(t *testing.T, tasks ...store.Task) []int64 {
	t.Helper()
	ctx := t.Context()
	nonces := make([]int64, len(tasks))
	for i, task := range tasks {
		got := e.task(t, task)
		require.Equal(t, store.TaskDone, got.Status, "task %d: %s", i, got.Error)
		var confirmed []store.Attempt
		for _, a := range e.attempts(t, task) {
			if a.State == store.AttemptConfirmed {
				confirmed = append(confirmed, a)
			}
		}
		require.Len(t, confirmed, 1, "task %d has one confirmed attempt", i)
		require.Equal(t, confirmed[0].TxHash, got.TxHash)
		rc, err := e.chain.TransactionReceipt(ctx, ledger.TxHash(common.HexToHash(got.TxHash)))
		require.NoError(t, err)
		require.True(t, rc.Found, "task %d's transaction is mined", i)
		if rc.Status == ledger.ReceiptSuccess {
			bal, err := e.chain.BalanceAt(ctx, ledger.Address(common.HexToAddress(got.Request.To)))
			require.NoError(t, err)
			require.Equal(t, 0, bal.Cmp(got.Request.Value), "task %d's recipient was paid once", i)
		}
		var tx types.Transaction
		require.NoError(t, tx.UnmarshalBinary(confirmed[0].Raw))
		require.Equal(t, confirmed[0].Nonce, int64(tx.Nonce()))
		nonces[i] = confirmed[0].Nonce
	}
	return nonces
}

// requireContiguous checks that nonces are exactly from..from+len-1 and that
// the chain's nonce of wallet w is right after them: no nonce skipped, none
// used twice.
func (e *env) requireContiguous(t *testing.T, w int, from int64, nonces []int64) {
	t.Helper()
	sorted := append([]int64(nil), nonces...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	for i, n := range sorted {
		require.Equal(t, from+int64(i), n, "nonces are contiguous from %d: %v", from, sorted)
	}
	chainNonce, err := e.chain.NonceAt(t.Context(), e.wallets[w].Address())
	require.NoError(t, err)
	require.Equal(t, uint64(from+int64(len(nonces))), chainNonce, "the chain's nonce is right after the tasks'")
}

// requireOneTxPerNonce checks that no nonce of wallet w was ever broadcast
// with two different transactions.
func (e *env) requireOneTxPerNonce(t *testing.T, w int) {
	t.Helper()
	for nonce, hashes := range e.led.HashesPerNonce()[e.addr(w)] {
		require.Len(t, hashes, 1, "nonce %d was broadcast as %d different transactions", nonce, len(hashes))
	}
}

// crashedRun claims the wallet's shard as a process that then dies: it runs
// cycles of job until stop says the next step is not to happen, and leaves
// the shard running under its claim. stop gets the cycle and the step
// ("execute" or "commit") about to run.
func (e *env) crashedRun(t *testing.T, job *wallet.Job, w int, stop func(cyc workers.Cycle, step string) bool) workers.Claim {
	t.Helper()
	ctx := t.Context()
	now := e.clk.Now()
	c, err := e.st.ShardClaim(ctx, store.ShardClaimParams{Now: now, Owner: "crashed/0", LeaseUntil: now.Add(e.wcfg.Lease), Kinds: []string{wallet.Kind}})
	require.NoError(t, err)
	require.Equal(t, e.key(w), c.Key)
	for range 100 {
		cyc, err := job.Collect(ctx, c)
		require.NoError(t, err)
		require.NotNil(t, cyc, "the run ended before its crash point")
		if stop(cyc, "execute") {
			return c
		}
		require.NoError(t, cyc.Execute(ctx))
		if stop(cyc, "commit") {
			return c
		}
		require.NoError(t, cyc.Commit(ctx))
	}
	t.Fatal("no crash point reached")
	return c
}

// expireLeases moves time past the lease and lets the rescuer put the dead
// process's shards back in the queue.
func (e *env) expireLeases(t *testing.T) {
	t.Helper()
	e.clk.Advance(e.wcfg.Lease + time.Second)
	_, err := e.rescuer.RunOnce(t.Context())
	require.NoError(t, err)
}

// sendOutside sends a transaction from wallet w with nonce, signed with its
// key outside ledgerq (an operator's wallet app), with 10 gwei fees so that
// it replaces what the pool holds for the nonce.
func (e *env) sendOutside(t *testing.T, w int, nonce uint64) string {
	t.Helper()
	id := big.NewInt(chainID)
	to := common.Address{0xee}
	tx, err := types.SignNewTx(e.keys[w], types.LatestSignerForChainID(id), &types.DynamicFeeTx{
		ChainID: id, Nonce: nonce, GasTipCap: big.NewInt(10 * params.GWei), GasFeeCap: big.NewInt(20 * params.GWei),
		Gas: params.TxGas, To: &to, Value: big.NewInt(1),
	})
	require.NoError(t, err)
	raw, err := tx.MarshalBinary()
	require.NoError(t, err)
	require.NoError(t, e.chain.SendRawTransaction(t.Context(), raw))
	return tx.Hash().Hex()
}

// queueOrder returns the ids of tasks in the order queue sends them.
func queueOrder(tasks []store.Task, queue store.QueueType) []string {
	sorted := append([]store.Task(nil), tasks...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if queue == store.QueuePriority && a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return a.ID < b.ID
	})
	ids := make([]string, len(sorted))
	for i, task := range sorted {
		ids[i] = task.ID
	}
	return ids
}
