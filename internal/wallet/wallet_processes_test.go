package wallet_test

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// Shard fencing with the write-ahead: two processes on one database never
// sign two transactions for one nonce. Process A signs t1 for nonce 0 and
// stalls past its lease; process B takes the shard over and sends t0 (a
// higher priority, posted meanwhile) with nonce 0 and t1 with nonce 1. A's
// late write-ahead is fenced: nothing of it is stored or broadcast.
func TestWallet_TwoProcessesNeverSignTwoTransactionsForOneNonce(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	ledA := newRecLedger(e.chain)
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	ledA.OnSuggestFees = func() {
		if first {
			first = false
			close(entered)
			<-release
		}
	}
	_, poolA := e.newProcess(t, ledA)
	t1 := e.post(t, 0, 0, 1001, nil)
	done := make(chan error, 1)
	go func() {
		_, err := poolA.RunOnce(context.WithoutCancel(t.Context()))
		done <- err
	}()
	<-entered

	t0 := e.post(t, 0, 9, 1000, nil)
	e.expireLeases(t)
	runPool(t, e.pool) // process B
	close(release)
	require.NoError(t, <-done)

	require.Empty(t, ledA.Sends(), "A broadcast nothing")
	for _, task := range []store.Task{t0, t1} {
		require.Len(t, e.attempts(t, task), 1, "one attempt per task: A stored nothing")
	}
	e.drive(t, e.pool, 10, t0, t1)
	nonces := e.requireDoneOnce(t, t0, t1)
	require.Equal(t, []int64{0, 1}, nonces)
	e.requireOneTxPerNonce(t, 0)
}

// katana's "failed work is not retried forever", for a task the node will
// not estimate and that opted out of its preflight (which would end it at
// once: TestWallet_ACallThatRevertsAtThePendingStateEndsInErrorAtOnceAndSpendsNoNonce):
// the node's verdict on the gas estimate of the first task of a send (a
// revert, classed Deterministic as the evm adapter classes it) fails the
// run; after wallet.Config.MaxFailures such runs the task ends in
// error and the tasks behind it are sent. A failure to get an answer is no
// verdict: TestWallet_AGasEstimateTheProviderRateLimitsEndsNoTaskInErrorAndTheTasksGoOutWhenItStops.
func TestWallet_ATaskWhoseGasEstimateKeepsFailingEndsInErrorAfterMaxFailures(t *testing.T) {
	t.Parallel()
	e := setup(t, options{cfg: func(c *wallet.Config) { c.MaxFailures = 3 }})
	bad := e.postRequest(t, 0, store.TaskRequest{Value: big.NewInt(1000), SkipPreflight: true})
	badTo := ledger.Address(common.HexToAddress(bad.Request.To))
	e.led.EstimateErr = func(m ledger.CallMsg) error {
		if m.To != nil && *m.To == badTo {
			return ledger.NewError(ledger.Deterministic, "execution reverted", errors.New("execution reverted"))
		}
		return nil
	}
	later := e.postN(t, 2)
	runPool(t, e.pool)
	require.Equal(t, store.TaskWaiting, e.task(t, bad).Status, "one failed run is not enough")
	e.drive(t, e.pool, 30, append([]store.Task{bad}, later...)...)
	failed := e.task(t, bad)
	require.Equal(t, store.TaskError, failed.Status)
	require.Equal(t, "gas estimate failed in 3 consecutive runs: execution reverted", failed.Error)
	nonces := e.requireDoneOnce(t, later...)
	e.requireContiguous(t, 0, 0, nonces)
}

// The services as a process runs them, on the wall clock: a started Pool
// (two workers) and Follower send and confirm every task of three wallets,
// blocks coming every 20 ms; nothing drives them but their own loops.
func TestWallet_AStartedPoolAndFollowerFinishEveryTask(t *testing.T) {
	t.Parallel()
	e := setup(t, options{wallets: 3})
	e.cfg.Clock = clock.Real{}
	e.cfg.FollowInterval = 20 * time.Millisecond
	e.wcfg.Workers = 2
	e.wcfg.PollInterval = 20 * time.Millisecond
	// setup built the chain on the fake clock: build it again on the real one.
	alloc := map[common.Address]*big.Int{}
	for w := range e.wallets {
		alloc[e.addr(w)] = new(big.Int).Mul(big.NewInt(1000), ether)
	}
	e.chain = evmsim.New(evmsim.Config{Clock: clock.Real{}, ChainID: chainID, BlockPeriod: 20 * time.Millisecond, Alloc: alloc})
	e.led = newRecLedger(e.chain)
	_, pool := e.newProcessOn(t, e.led, clock.Real{})
	follower, err := monitor.NewWalletFollower(e.st, e.reg, e.cfg)
	require.NoError(t, err)
	follower.OnScheduled = pool.Poke

	var tasks [][]store.Task
	for w := range e.wallets {
		var ts []store.Task
		for i := range 30 {
			ts = append(ts, e.postAt(t, w, time.Now(), int64(1000+i)))
		}
		tasks = append(tasks, ts)
	}
	ctx := context.WithoutCancel(t.Context())
	require.NoError(t, pool.Start(ctx))
	require.NoError(t, follower.Start(ctx))
	defer pool.Stop()
	defer follower.Stop()
	require.Eventually(t, func() bool {
		for _, ts := range tasks {
			if !e.allEnded(t, ts) {
				return false
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond)
	for w, ts := range tasks {
		nonces := e.requireDoneOnce(t, ts...)
		e.requireContiguous(t, w, 0, nonces)
		e.requireOneTxPerNonce(t, w)
	}
}
