package wallet_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/audit"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/testgeth"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// lowTip suggests a 1 gwei tip whatever the node says: below a stalling
// node's 5 gwei, so every first attempt stalls.
type lowTip struct{ ledger.WalletLedger }

func (l lowTip) SuggestFees(ctx context.Context) (ledger.Fees, error) {
	f, err := l.WalletLedger.SuggestFees(ctx)
	if err != nil {
		return f, err
	}
	tip := big.NewInt(params.GWei)
	base := new(big.Int).Sub(f.FeeCap, f.TipCap) // 2 × base fee
	return ledger.Fees{TipCap: tip, FeeCap: base.Add(base, tip)}, nil
}

// Rule 1 end to end, on a real geth that mines only tips of 5 gwei or more
// (--miner.gasprice 5000000000): tasks signed with a 1 gwei tip stall, and
// the worker bumps them until they are mined; each task is done after one or
// more bumps, with the count on the task, and the chain shows one mined
// transaction per task at contiguous nonces.
func TestWallet_OnAStallingGethLowTipTasksAreBumpedUntilMined(t *testing.T) {
	t.Parallel()
	node := testgeth.Start(t, testgeth.Stalling())
	ctx := t.Context()
	db := testdb.New(t)
	w, addr, reg, led := fundedGethWallet(t, node, evm.Config{})
	cfg := wallet.Defaults()
	cfg.StallTimeout = time.Second
	cfg.Logger = testLogger()
	job, err := wallet.NewJob(db.Store, lowTip{led}, reg, cfg, walletSteps(t, db.Store, lowTip{led}, cfg))
	require.NoError(t, err)
	wcfg := workers.Defaults()
	wcfg.Workers = 1
	pool, follower := gethLane(t, db.Store, job, reg, cfg, wcfg)

	var tasks []store.Task
	rows := testfactory.New(t, db.Store, clock.Real{})
	for i := range 3 {
		tasks = append(tasks, rows.PostTask(testfactory.Task{
			Wallet: w.ID, ChainID: testgeth.DevChainID, Sender: addr.Hex(),
			Request: store.TaskRequest{To: common.BigToAddress(big.NewInt(int64(0x5000 + i))).Hex(), Value: big.NewInt(int64(1000 + i))},
		}))
	}
	driveGethUntilDone(t, node, db.Store, follower, pool, tasks, 2*time.Minute)

	mined, err := testgeth.MinedFrom(ctx, node.URL, addr)
	require.NoError(t, err)
	require.NoError(t, testgeth.CheckNonces(mined))
	require.Len(t, mined, len(tasks), "one mined transaction per task")
	byHash, err := testgeth.ByHash(mined)
	require.NoError(t, err)
	for i, task := range tasks {
		got, err := db.Store.TaskGet(ctx, task.Wallet, task.ID)
		require.NoError(t, err)
		require.Positive(t, got.Bumps, "task %d was bumped", i)
		_, ok := byHash[common.HexToHash(got.TxHash)]
		require.True(t, ok, "task %d's hash is the mined one", i)
		t.Logf("task %d: done after %d bumps", i, got.Bumps)
	}
	rep := requireAudit(t, db.Store, led, addr)
	require.Equal(t, len(tasks), rep.Bumps, "every transaction mined is a gas bump of a task's")
	require.Equal(t, len(tasks), rep.DoneChecked)
}

// requireAudit audits the wallet at addr against the chain's blocks (what
// ledgerq wallet audit runs), from block 0, and fails on any exception.
func requireAudit(t *testing.T, st *store.Store, led ledger.WalletLedger, addr common.Address) audit.Report {
	t.Helper()
	rep := auditWallet(t, st, led, addr)
	require.True(t, rep.OK(), rep.Text())
	return rep
}

// auditWallet audits the wallet at addr from block 0.
func auditWallet(t *testing.T, st *store.Store, led ledger.WalletLedger, addr common.Address) audit.Report {
	t.Helper()
	from := uint64(0)
	rep, err := audit.Wallet(t.Context(), st, led, audit.Params{ChainID: testgeth.DevChainID, Address: ledger.Address(addr), FromBlock: &from})
	require.NoError(t, err)
	t.Log(rep.Summary())
	return rep
}

// gethWallet is one funded wallet served by a Job, Pool and Follower on
// the real clock against a real geth.
type gethWallet struct {
	node     *testgeth.Node
	st       *store.Store
	rows     *testfactory.Factory
	w        keystore.Wallet
	addr     common.Address
	led      *evm.Ledger
	pool     *workers.Scheduler
	follower *monitor.WalletFollower
	tasks    []store.Task
}

func newGethWallet(t *testing.T, node *testgeth.Node) *gethWallet {
	t.Helper()
	db := testdb.New(t)
	g := &gethWallet{node: node, st: db.Store, rows: testfactory.New(t, db.Store, clock.Real{})}
	var reg *keystore.Registry
	g.w, g.addr, reg, g.led = fundedGethWallet(t, node, evm.Config{CallTimeout: 2 * time.Second})
	cfg := wallet.Defaults()
	cfg.LedgerTimeout, cfg.CycleBudget = 2*time.Second, time.Second
	cfg.Logger = testLogger()
	job, err := wallet.NewJob(db.Store, g.led, reg, cfg, walletSteps(t, db.Store, g.led, cfg))
	require.NoError(t, err)
	wcfg := workers.Defaults()
	wcfg.Workers, wcfg.Backoff = 1, 100*time.Millisecond
	g.pool, g.follower = gethLane(t, db.Store, job, reg, cfg, wcfg)
	return g
}

// fundedGethWallet is a wallet of a new key, funded with one ether on node,
// the registry that holds it and a ledger dialed to node with lcfg (closed
// when the test ends).
func fundedGethWallet(t *testing.T, node *testgeth.Node, lcfg evm.Config) (keystore.Wallet, common.Address, *keystore.Registry, *evm.Ledger) {
	t.Helper()
	w := keystore.Wallet{ID: "geth", ChainID: testgeth.DevChainID, Signer: testfactory.NewSigner(t)}
	addr := common.Address(w.Address())
	node.Fund(t, addr, big.NewInt(params.Ether))
	reg, err := keystore.NewRegistry(w)
	require.NoError(t, err)
	led, err := evm.Dial(t.Context(), node.URL, lcfg)
	require.NoError(t, err)
	t.Cleanup(led.Close)
	return w, addr, reg, led
}

// gethLane is the pool and the follower that serve job's wallets on st, on
// the real clock.
func gethLane(t *testing.T, st *store.Store, job *wallet.Job, reg *keystore.Registry, cfg wallet.Config, wcfg workers.Config) (*workers.Scheduler, *monitor.WalletFollower) {
	t.Helper()
	pool, err := workers.NewScheduler(st, loop.Deps{Clock: clock.Real{}, Logger: testLogger()}, wcfg, map[string]workers.Job{wallet.Kind: job})
	require.NoError(t, err)
	follower, err := monitor.NewWalletFollower(st, reg, cfg)
	require.NoError(t, err)
	return pool, follower
}

// post stores n tasks, each paying its own amount to its own recipient.
func (g *gethWallet) post(t *testing.T, n int) []store.Task {
	t.Helper()
	var out []store.Task
	for range n {
		i := len(g.tasks)
		task := g.rows.PostTask(testfactory.Task{
			Wallet: g.w.ID, ChainID: testgeth.DevChainID, Sender: g.addr.Hex(),
			Request: store.TaskRequest{To: common.BigToAddress(big.NewInt(int64(0x6000 + i))).Hex(), Value: big.NewInt(int64(1000 + i))},
		})
		g.tasks = append(g.tasks, task)
		out = append(out, task)
	}
	return out
}

// driveUntilDone runs the follower and the pool until every task is done.
func (g *gethWallet) driveUntilDone(t *testing.T, within time.Duration) {
	t.Helper()
	driveGethUntilDone(t, g.node, g.st, g.follower, g.pool, g.tasks, within)
}

// driveGethUntilDone runs the follower and then the pool once per block of
// geth (which mines on its own clock) until every task is done, failing on
// a task in error or after within.
func driveGethUntilDone(t *testing.T, node *testgeth.Node, st *store.Store, follower *monitor.WalletFollower, pool *workers.Scheduler, tasks []store.Task, within time.Duration) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(within)
	head := node.WaitHead(t, 0)
	for {
		done := 0
		for _, task := range tasks {
			got, err := st.TaskGet(ctx, task.Wallet, task.ID)
			require.NoError(t, err)
			require.NotEqual(t, store.TaskError, got.Status, got.Error)
			if got.Status == store.TaskDone {
				done++
			}
		}
		if done == len(tasks) {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d of %d tasks done after %s", done, len(tasks), within)
		_, err := follower.RunOnce(ctx)
		require.NoError(t, err)
		runPool(t, pool)
		head = node.WaitHead(t, head+1)
	}
}

// A real geth crashes and comes back without its last blocks, which held
// three final transactions of ours (and without its pool): their tasks do
// not stay done with hashes the chain no longer has. They are executing
// again, their same bytes are sent again and mined again with the same
// hashes, the wallet's next nonce is not moved down, and the wallet goes on
// sending. The chain, read block by block, ends with one transaction per
// task at contiguous nonces.
func TestWallet_OnAGethThatLosesBlocksTheirTasksAreSentAgainAndTheWalletGoesOn(t *testing.T) {
	t.Parallel()
	node := testgeth.Start(t, testgeth.Crashable())
	g := newGethWallet(t, node)
	g.post(t, 3)
	g.driveUntilDone(t, time.Minute)
	saved := node.Checkpoint(t)
	lost := g.post(t, 3)
	g.driveUntilDone(t, time.Minute)
	hashes := map[string]string{}
	for _, task := range lost {
		got, err := g.st.TaskGet(t.Context(), task.Wallet, task.ID)
		require.NoError(t, err)
		hashes[task.ID] = got.TxHash
	}
	require.EqualValues(t, 6, node.Nonce(t, g.addr))

	node.Kill()
	head := node.Restart(t)
	require.Equal(t, saved, head)
	require.EqualValues(t, 3, node.Nonce(t, g.addr), "geth lost nonces 3 to 5")
	g.post(t, 2)
	g.driveUntilDone(t, 2*time.Minute)

	ctx := t.Context()
	mined, err := testgeth.MinedFrom(ctx, node.URL, g.addr)
	require.NoError(t, err)
	require.NoError(t, testgeth.CheckNonces(mined))
	require.Len(t, mined, len(g.tasks), "one mined transaction per task, nothing else")
	byHash, err := testgeth.ByHash(mined)
	require.NoError(t, err)
	for i, task := range g.tasks {
		got, err := g.st.TaskGet(ctx, task.Wallet, task.ID)
		require.NoError(t, err)
		tx, ok := byHash[common.HexToHash(got.TxHash)]
		require.True(t, ok, "task %d is done with a hash the chain has", i)
		require.EqualValues(t, i, tx.Nonce)
		atts, err := g.st.AttemptListByTask(ctx, task.ID)
		require.NoError(t, err)
		require.Len(t, atts, 1, "task %d: its nonce was never signed again", i)
		if want, ok := hashes[task.ID]; ok {
			require.Equal(t, want, got.TxHash, "task %d is done again with its same transaction", i)
			require.Equal(t, 1, got.Reorgs, "task %d", i)
		}
	}
	rep := requireAudit(t, g.st, g.led, g.addr)
	require.Equal(t, len(g.tasks), rep.TaskTxs, "every transaction on the chain is a task's first")
	require.Equal(t, len(g.tasks), rep.DoneChecked)
}
