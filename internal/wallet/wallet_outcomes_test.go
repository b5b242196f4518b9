package wallet_test

import (
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// engine-core's confirm: a reverted transaction is mined, used its nonce and
// paid for gas: its task is done with reverted set, not an error.
func TestWallet_ARevertedTransactionIsDoneWithReverted(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	var called sync.Map
	e.led.CallErr = func(m ledger.CallMsg, block *uint64) error {
		if block == nil { // a preflight, not a replay
			called.Store(string(m.Data), true)
		}
		return nil
	}
	ok := e.post(t, 0, 0, 1000, nil)
	// Without its preflight: the call reverts at the pending state too.
	rev := e.postRequest(t, 0, store.TaskRequest{Value: big.NewInt(1000), Data: append(append([]byte(nil), evmsim.RevertMarker...), 1, 2), SkipPreflight: true})
	e.drive(t, e.pool, 10, ok, rev)
	nonces := e.requireDoneOnce(t, ok, rev)
	e.requireContiguous(t, 0, 0, nonces)
	require.False(t, e.task(t, ok).Reverted)
	got := e.task(t, rev)
	require.True(t, got.Reverted)
	require.Empty(t, got.Error)
	// Its revert was replayed at its block and decoded before the confirm
	// that ended it done, and recorded with it: read as soon as it is
	// done; the other task has its (empty) logs.
	require.JSONEq(t, `{"kind":"raw","data":"0x0102","problem":"shorter than a selector"}`, string(e.task(t, rev).Revert))
	require.JSONEq(t, `{"logs":[],"count":0}`, string(e.task(t, ok).Logs))
	require.Empty(t, e.task(t, ok).Revert)
	_, preflighted := called.Load(string(rev.Request.Data))
	require.False(t, preflighted, "a task without its preflight runs no call before it is sent")
	_, preflighted = called.Load("")
	require.True(t, preflighted, "the other task's call was run")
}

// Send results: a deterministic rejection (insufficient funds): the task ends
// in error with the node's reason and its attempt is dropped; the tasks
// after it are still done, and its nonce is not left as a gap: the next send
// fills freed nonces before it takes new ones.
func TestWallet_ARejectedTaskEndsInErrorAndItsNonceIsReusedSoTheChainHasNoGap(t *testing.T) {
	t.Parallel()
	e := setup(t, options{fund: ether})
	first := e.post(t, 0, 0, 1000, nil)
	tooMuch := e.post(t, 0, 0, 0, nil)
	_, err := e.st.DB().Exec(t.Context(), `UPDATE ledgerq.wallet_tasks SET value_wei = $1 WHERE id = $2`, "5000000000000000000", tooMuch.ID)
	require.NoError(t, err)
	later := e.postN(t, 3)
	e.drive(t, e.pool, 10, append([]store.Task{first, tooMuch}, later...)...)

	failed := e.task(t, tooMuch)
	require.Equal(t, store.TaskError, failed.Status)
	require.True(t, strings.HasPrefix(failed.Error, "insufficient funds"), failed.Error)
	for _, a := range e.attempts(t, tooMuch) {
		require.Equal(t, store.AttemptDropped, a.State)
	}
	done := append([]store.Task{first}, later...)
	nonces := e.requireDoneOnce(t, done...)
	e.requireContiguous(t, 0, 0, nonces)
	require.Equal(t, []int64{0, 1, 2, 3}, nonces, "the later tasks took the freed nonce, in queue order")

	// Nonce 4 was assigned before and freed: the next task takes it.
	next := e.post(t, 0, 0, 1, nil)
	e.drive(t, e.pool, 10, next)
	require.Equal(t, []int64{4}, e.requireDoneOnce(t, next))
	stored, err := e.st.WalletNonceGet(t.Context(), chainID, e.wallets[0].Address().Hex())
	require.NoError(t, err)
	require.Equal(t, int64(5), stored)
}

// Send results: `nonce too low` when someone else used the nonce (a
// transaction sent with the wallet's key outside ledgerq, mined between the
// signing and the broadcast): no hash of ours has a receipt, so it is not a
// success. The attempt is dropped, the task goes back to waiting (its
// transaction never ran) and is sent with a new nonce, and the next nonce
// moves up to the chain's: everything is done, with no gap.
func TestWallet_NonceTooLowFromAnotherSenderRequeuesTheTaskAndRaisesTheNextNonce(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	tasks := e.postN(t, 3)
	var once sync.Once
	var outside string
	e.led.BeforeSend = func(tx *types.Transaction) {
		if tx.Nonce() == 1 {
			once.Do(func() {
				outside = e.sendOutside(t, 0, 1)
				e.chain.Mine()
			})
		}
	}
	e.drive(t, e.pool, 10, tasks...)
	nonces := e.requireDoneOnce(t, tasks...)
	require.NotEmpty(t, outside)
	require.Equal(t, []int64{0, 3, 2}, nonces, "the second task was sent again after the nonces in flight")
	e.requireContiguous(t, 0, 0, append(nonces, 1))
	atts := e.attempts(t, tasks[1])
	require.Len(t, atts, 2)
	for _, a := range atts {
		if a.Nonce == 1 {
			require.Equal(t, store.AttemptDropped, a.State)
			require.Contains(t, a.LastError, "used by another transaction")
		}
	}

	// The chain passes the next nonce (4 is used outside ledgerq): the
	// next task starts at the chain's nonce, with no round trip.
	e.sendOutside(t, 0, 4)
	e.chain.Mine()
	next := e.post(t, 0, 0, 1, nil)
	e.drive(t, e.pool, 10, next)
	require.Equal(t, []int64{5}, e.requireDoneOnce(t, next))
	require.Equal(t, 1, len(e.attempts(t, next)))
	stored, err := e.st.WalletNonceGet(t.Context(), chainID, e.wallets[0].Address().Hex())
	require.NoError(t, err)
	require.Equal(t, int64(6), stored)
}

// Engine-core counted a failed receipt lookup as a replacement and sent the
// transaction again: a transaction the chain passed is replaced only when
// the chain's own blocks show another transaction at its nonce, for
// wallet.Config.ReplacedAfter; failed lookups mean "ask again later", and a block
// read that finds ours makes it mined even when every receipt lookup fails.
func TestWallet_ReplacedOnlyWhenTheChainsBlocksShowAnotherTransactionNeverOnAFailedLookup(t *testing.T) {
	t.Parallel()
	t.Run("failed lookups", func(t *testing.T) {
		t.Parallel()
		e := setup(t, options{})
		task := e.post(t, 0, 0, 1000, nil)
		e.led.FailReceipt = func(string) bool { return true }
		e.led.FailBlocks = true
		for range 5 {
			e.drive1(t)
			e.clk.Advance(e.cfg.ReplacedAfter)
		}
		require.Equal(t, store.TaskExecuting, e.task(t, task).Status, "still waiting for an answer")
		require.Equal(t, 1, len(e.attempts(t, task)), "never sent again")
		e.led.FailBlocks = false
		e.drive(t, e.pool, 3, task)
		e.requireDoneOnce(t, task)
		require.Equal(t, 1, len(e.led.Sends()))
		require.Positive(t, e.led.Calls("TxsAtNonce"), "found by the block that holds its nonce, every receipt lookup failing")
	})
	t.Run("replaced", func(t *testing.T) {
		t.Parallel()
		e := setup(t, options{sim: evmsim.Config{BlockPeriod: time.Hour}})
		task := e.post(t, 0, 0, 1000, nil)
		e.drive1(t)
		require.Equal(t, 1, len(e.led.Sends()))
		// Someone replaces our pooled transaction with their own for nonce 0.
		e.sendOutside(t, 0, 0)
		e.chain.Mine()
		e.drive1(t)
		require.Equal(t, 1, len(e.attempts(t, task)), "absent once is not replaced")
		e.clk.Advance(e.cfg.ReplacedAfter - time.Second)
		e.drive1(t)
		require.Equal(t, 1, len(e.attempts(t, task)), "not yet past the grace")
		e.clk.Advance(time.Second)
		e.drive1(t)
		e.chain.Mine()
		e.drive1(t)
		require.Equal(t, []int64{1}, e.requireDoneOnce(t, task), "sent again with the next nonce")
		e.requireContiguous(t, 0, 0, []int64{0, 1})
	})
}

// drive1 runs one follower round and the pool until no shard waits.
func (e *env) drive1(t *testing.T) {
	t.Helper()
	_, err := e.follower.RunOnce(t.Context())
	require.NoError(t, err)
	runPool(t, e.pool)
}

// engine-core's in-flight budget: a wallet never has more than wallet.Config.InFlight
// transactions signed or sent and not yet confirmed; the rest wait.
func TestWallet_TheInFlightBudgetIsRespected(t *testing.T) {
	t.Parallel()
	e := setup(t, options{cfg: func(c *wallet.Config) { c.InFlight = 3 }})
	var mu sync.Mutex
	most := 0
	e.led.BeforeSend = func(tx *types.Transaction) {
		confirmed, err := e.chain.NonceAt(t.Context(), e.wallets[0].Address())
		require.NoError(t, err)
		var done int
		require.NoError(t, e.st.DB().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.wallet_tasks WHERE status = 3`).Scan(&done))
		mu.Lock()
		most = max(most, int(tx.Nonce())+1-done)
		mu.Unlock()
		require.Less(t, tx.Nonce(), confirmed+3)
	}
	tasks := e.postN(t, 10)
	runPool(t, e.pool)
	var executing int
	require.NoError(t, e.st.DB().QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.wallet_tasks WHERE status = 1`).Scan(&executing))
	require.Equal(t, 3, executing, "three in flight, seven waiting")
	e.drive(t, e.pool, 20, tasks...)
	nonces := e.requireDoneOnce(t, tasks...)
	e.requireContiguous(t, 0, 0, nonces)
	require.Equal(t, 3, most, "the budget was used, never exceeded")
}

// katana's "an empty collect ends the run" for the wallet: a run whose
// attempts the chain has not reached asks for the chain's nonce once and
// ends (the Follower brings it back), and a wallet with nothing to do ends
// its run without a ledger call.
func TestWallet_ACollectWithNothingToDoNowEndsTheRun(t *testing.T) {
	t.Parallel()
	e := setup(t, options{sim: evmsim.Config{BlockPeriod: time.Hour}})
	tasks := e.postN(t, 2)
	runPool(t, e.pool)
	require.Equal(t, 1, e.led.Calls("NonceAt"))
	require.Equal(t, 2, len(e.led.Sends()))

	queued, err := e.follower.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, queued, "attempts in flight: the shard is brought back")
	ran, err := e.pool.RunOnce(t.Context())
	require.NoError(t, err)
	require.True(t, ran)
	require.Equal(t, 2, e.led.Calls("NonceAt"), "one confirm per run")
	shard, err := e.st.ShardGet(t.Context(), e.key(0))
	require.NoError(t, err)
	require.Equal(t, store.ShardIdle, shard.State, "the run ended")

	e.chain.Mine()
	e.drive(t, e.pool, 3, tasks...)
	// Its chain nonce moved a moment ago: it is watched a while longer,
	// one confirm a run (the chain's nonce and head), in case the chain
	// loses its transactions.
	queued, err = e.follower.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, queued, "watched after its last transaction")
	nonces := e.led.Calls("NonceAt")
	runPool(t, e.pool)
	require.Equal(t, nonces+1, e.led.Calls("NonceAt"), "a watched wallet: one confirm")
	e.clk.Advance(e.cfg.WatchAfter)
	calls := e.led.TotalCalls()
	_, err = e.st.ShardSchedule(t.Context(), store.ShardScheduleParams{Now: e.clk.Now(), Key: e.key(0)})
	require.NoError(t, err)
	ran, err = e.pool.RunOnce(t.Context())
	require.NoError(t, err)
	require.True(t, ran)
	require.Equal(t, calls, e.led.TotalCalls(), "nothing to do: no ledger call")
	queued, err = e.follower.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, queued, "nothing in flight: the shard stays idle")
}

// The Follower schedules the shard of every configured wallet with attempts
// in flight or waiting tasks; a wallet ledgerq does not sign for is left
// alone.
func TestFollower_SchedulesConfiguredWalletsWithAttemptsInFlightOrWaitingTasks(t *testing.T) {
	t.Parallel()
	e := setup(t, options{wallets: 3, sim: evmsim.Config{BlockPeriod: time.Hour}})
	e.post(t, 0, 0, 1, nil)
	e.post(t, 1, 0, 1, nil)
	runPool(t, e.pool) // both sent, not mined: shards idle
	e.rows.PostTask(testfactory.Task{
		Wallet: "gone", ChainID: chainID, Sender: "0x00000000000000000000000000000000000000aa",
		Request: store.TaskRequest{To: "0x00000000000000000000000000000000000000bb", Value: big.NewInt(1)},
	})
	runPool(t, e.pool) // the unknown wallet's run ends at once
	for _, k := range []string{e.key(0), e.key(1)} {
		s, err := e.st.ShardGet(t.Context(), k)
		require.NoError(t, err)
		require.Equal(t, store.ShardIdle, s.State)
	}
	pokes := 0
	e.follower.OnScheduled = func() { pokes++ }
	queued, err := e.follower.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, queued)
	require.Equal(t, 1, pokes)
	for _, k := range []string{e.key(0), e.key(1)} {
		s, err := e.st.ShardGet(t.Context(), k)
		require.NoError(t, err)
		require.Equal(t, store.ShardPending, s.State)
	}
	gone, err := e.st.ShardGet(t.Context(), store.WalletShardKey(chainID, "0x00000000000000000000000000000000000000aa"))
	require.NoError(t, err)
	require.Equal(t, store.ShardIdle, gone.State, "not a configured wallet")
	_, err = e.st.ShardGet(t.Context(), e.key(2))
	require.ErrorIs(t, err, store.ErrNotFound, "no work, never scheduled")
}
