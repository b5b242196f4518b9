package wallet_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/audit"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/testgeth"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// The restore test on a real geth --dev (LEDGERQ_TEST_GETH): tasks done,
// tasks waiting, pg_dump; the waiting tasks are sent and mined; the older
// copy is restored and a new process runs on it. Judged by geth's blocks:
// one transaction per task, contiguous nonces, and every task the backup
// knows done with the hash geth mined.
func TestWalletRestoreBehindGethSendsNothingTwice(t *testing.T) {
	t.Parallel()
	node := testgeth.Start(t)
	ctx := t.Context()
	db := testdb.New(t)
	w, addr, reg, led := fundedGethWallet(t, node, evm.Config{})
	cfg := wallet.Defaults()
	cfg.Logger = testLogger()
	wcfg := workers.Defaults()
	wcfg.Workers = 1

	type process struct {
		st       *store.Store
		pool     *workers.Scheduler
		follower *monitor.WalletFollower
		rows     *testfactory.Factory
	}
	start := func(st *store.Store) process {
		job, err := wallet.NewJob(st, led, reg, cfg, walletSteps(t, st, led, cfg))
		require.NoError(t, err)
		pool, follower := gethLane(t, st, job, reg, cfg, wcfg)
		return process{st: st, pool: pool, follower: follower, rows: testfactory.New(t, st, clock.Real{})}
	}
	recipient := 0
	post := func(p process, n int) []store.Task {
		var out []store.Task
		for range n {
			recipient++
			out = append(out, p.rows.PostTask(testfactory.Task{
				Wallet: w.ID, ChainID: testgeth.DevChainID, Sender: addr.Hex(),
				Request: store.TaskRequest{To: common.BigToAddress(big.NewInt(int64(0x6000 + recipient))).Hex(), Value: big.NewInt(int64(1000 + recipient))},
			}))
		}
		return out
	}
	drive := func(p process, tasks []store.Task) {
		t.Helper()
		driveGethUntilDone(t, node, p.st, p.follower, p.pool, tasks, time.Minute)
	}

	first := start(db.Store)
	done := post(first, 2)
	drive(first, done)
	waiting := post(first, 3)
	dump := pgDump(t, db.URL)
	drive(first, waiting)
	lost := post(first, 2)
	drive(first, lost)

	second := start(pgRestore(t, dump))
	known := append(append([]store.Task(nil), done...), waiting...)
	drive(second, known)
	next := post(second, 2)
	drive(second, next)

	mined, err := testgeth.MinedFrom(ctx, node.URL, addr)
	require.NoError(t, err)
	require.NoError(t, testgeth.CheckNonces(mined))
	all := append(append(append([]store.Task(nil), known...), lost...), next...)
	duplicates := 0
	for _, task := range all {
		n := 0
		for _, m := range mined {
			if m.To != nil && *m.To == common.HexToAddress(task.Request.To) && m.Value.Cmp(task.Request.Value) == 0 {
				n++
			}
		}
		require.NotZero(t, n, "task %s's transfer is on the chain", task.ID)
		duplicates += n - 1
	}
	t.Logf("geth: %d transactions of the wallet for %d tasks; duplicates found on chain: %d", len(mined), len(all), duplicates)
	require.Zero(t, duplicates)
	require.Len(t, mined, len(all))
	byHash, err := testgeth.ByHash(mined)
	require.NoError(t, err)
	for _, task := range append(append([]store.Task(nil), known...), next...) {
		got, err := second.st.TaskGet(ctx, task.Wallet, task.ID)
		require.NoError(t, err)
		require.Equal(t, store.TaskDone, got.Status)
		_, ok := byHash[common.HexToHash(got.TxHash)]
		require.True(t, ok, "task %s is done with the hash geth mined", task.ID)
	}
	// The audit holds the restored database against geth's blocks: the
	// transactions of the tasks accepted after the backup are on the chain
	// and recorded by the restore recovery for no task, which is all it
	// finds.
	rep := auditWallet(t, second.st, led, addr)
	lostHashes := map[string]bool{}
	for _, task := range lost {
		got, err := first.st.TaskGet(ctx, task.Wallet, task.ID)
		require.NoError(t, err)
		lostHashes[got.TxHash] = true
	}
	require.Len(t, rep.Exceptions, len(lost), rep.Text())
	for _, f := range rep.Exceptions {
		require.Equal(t, audit.ForeignRecorded, f.Kind, rep.Text())
		require.True(t, lostHashes[f.TxHash], "exception %s is a lost task's transaction", f.TxHash)
	}
	require.Equal(t, len(known)+len(next), rep.DoneChecked)
	require.Equal(t, len(mined), rep.Transactions)
}
