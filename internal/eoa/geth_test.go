package eoa

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testgeth"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"

	"github.com/ethereum/go-ethereum/crypto"
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
func TestSeed003_OnAStallingGethLowTipTasksAreBumpedUntilMined(t *testing.T) {
	t.Parallel()
	node := testgeth.Start(t, testgeth.Stalling())
	ctx := t.Context()
	db := testdb.New(t)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	signer, err := wallet.NewKeySigner(key)
	require.NoError(t, err)
	w := wallet.Wallet{ID: "geth", ChainID: testgeth.DevChainID, Signer: signer}
	addr := common.Address(w.Address())
	node.Fund(t, addr, big.NewInt(params.Ether))
	reg, err := wallet.NewRegistry(w)
	require.NoError(t, err)
	led, err := evm.Dial(ctx, node.URL, evm.Config{})
	require.NoError(t, err)

	cfg := Defaults()
	cfg.StallTimeout = time.Second
	cfg.Logger = testLogger()
	job, err := NewJob(db.Store, lowTip{led}, reg, cfg)
	require.NoError(t, err)
	wcfg := workers.Defaults()
	wcfg.Workers = 1
	pool, err := workers.NewPool(db.Store, loop.Deps{Clock: clock.Real{}, Logger: testLogger()}, wcfg, map[string]workers.Job{Kind: job})
	require.NoError(t, err)
	follower, err := NewFollower(db.Store, reg, cfg)
	require.NoError(t, err)

	var tasks []store.Task
	for i := range 3 {
		task, _, err := db.Store.TaskInsert(ctx, store.TaskInsertParams{
			Now: time.Now(), Wallet: w.ID, ChainID: testgeth.DevChainID, Sender: addr.Hex(),
			Request: store.TaskRequest{To: common.BigToAddress(big.NewInt(int64(0x5000 + i))).Hex(), Value: big.NewInt(int64(1000 + i))},
		})
		require.NoError(t, err)
		tasks = append(tasks, task)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		done := 0
		for _, task := range tasks {
			got, err := db.Store.TaskGet(ctx, task.Wallet, task.ID)
			require.NoError(t, err)
			require.NotEqual(t, store.TaskError, got.Status, got.Error)
			if got.Status == store.TaskDone {
				done++
			}
		}
		if done == len(tasks) {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of %d tasks done after two minutes", done, len(tasks))
		_, err := follower.RunOnce(ctx)
		require.NoError(t, err)
		runPool(t, pool)
		time.Sleep(300 * time.Millisecond)
	}

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
}
