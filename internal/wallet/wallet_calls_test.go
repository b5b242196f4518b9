package wallet_test

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// postTo stores n tasks of wallet 0 that send value wei to to.
func (e *env) postTo(t *testing.T, n int, to common.Address, value int64) []store.Task {
	t.Helper()
	var out []store.Task
	for range n {
		e.clk.Advance(1000)
		out = append(out, e.rows.PostTask(testfactory.Task{
			Wallet: e.wallets[0].ID, ChainID: chainID, Sender: e.wallets[0].Address().Hex(),
			Request: store.TaskRequest{To: to.Hex(), Value: big.NewInt(value)}, CreatedAt: e.clk.Now(),
		}))
	}
	return out
}

func TestWallet_ASendEstimatesEachDistinctCallOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	a, b := common.HexToAddress("0xaa00000000000000000000000000000000000001"), common.HexToAddress("0xbb00000000000000000000000000000000000002")
	tasks := append(e.postTo(t, 5, a, 1), e.postTo(t, 3, b, 1)...)
	tasks = append(tasks, e.postTo(t, 2, a, 2)...)

	runPool(t, e.pool)
	require.Equal(t, 3, e.led.Calls("EstimateGas"), "one estimate per distinct recipient and value, not one per task")
	e.drive(t, e.pool, 20, tasks...)
	var nonces []int64
	for _, task := range tasks {
		require.Equal(t, store.TaskDone, e.task(t, task).Status)
		atts := e.attempts(t, task)
		require.Len(t, atts, 1)
		require.Equal(t, uint64(21000), atts[0].GasLimit)
		nonces = append(nonces, atts[0].Nonce)
	}
	e.requireContiguous(t, 0, 0, nonces)
}

func TestWallet_AConfirmReadsEachMinedAttemptsReceiptOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	tasks := e.postN(t, 20)
	runPool(t, e.pool) // signed, stored, broadcast
	require.Zero(t, e.led.Calls("TransactionReceipt"))
	e.drive(t, e.pool, 20, tasks...)
	nonces := e.requireDoneOnce(t, tasks...)
	e.requireContiguous(t, 0, 0, nonces)
	require.Equal(t, 20, e.led.Calls("TransactionReceipt"), "the prefetched receipt is the one lookUp uses")
}

func TestWallet_TheHeadWatcherRunsTheFollowerWhenANewBlockIsMined(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	pokes := 0
	heads, err := monitor.NewWalletHeadWatcher(e.led, e.cfg, func() { pokes++ })
	require.NoError(t, err)

	n, err := heads.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "the first read only learns the head")
	n, err = heads.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "no new block, no round")
	require.Zero(t, pokes)

	e.chain.Mine()
	n, err = heads.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, pokes, "a new block runs the follower at once")
	n, err = heads.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, 1, pokes)

	cfg := e.cfg
	cfg.HeadInterval = 0
	_, err = monitor.NewWalletHeadWatcher(e.led, cfg, func() {})
	require.Error(t, err, "0 turns the watcher off: the node does not build one")
}
