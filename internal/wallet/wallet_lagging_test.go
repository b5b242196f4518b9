package wallet_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// laggingEnv is a wallet on a simulated chain whose blocks come on demand,
// one confirmation, with its metrics; more sets other settings.
func laggingEnv(t *testing.T, more func(*wallet.Config)) (*env, *metrics.Metrics) {
	t.Helper()
	m := metrics.New()
	e := setup(t, options{sim: evmsim.Config{BlockPeriod: time.Hour}, cfg: func(c *wallet.Config) {
		c.Confirmations, c.Metrics = 1, m
		if more != nil {
			more(c)
		}
	}})
	return e, m
}

// requireStillDone checks that every task in done is done, never reorged.
func (e *env) requireStillDone(t *testing.T, done map[string]store.Task) {
	t.Helper()
	for _, task := range done {
		got := e.task(t, task)
		require.Equal(t, store.TaskDone, got.Status, "task %s was done and must stay done: %s", task.ID, got.Error)
		require.Zero(t, got.Reorgs, "task %s", task.ID)
	}
}

// A node a few blocks behind the others answers the confirm step (behind a
// load balancer: an older head, an older nonce, no receipt yet for a mined
// transaction, no block yet at its height): the chain never went back, so
// no done task goes back to executing and no reorg is counted — first with
// every read of a run lagging, then with half the reads lagging while the
// wallet keeps sending; the tasks all end done once each.
func TestWallet_ADoneTaskNeverGoesBackToExecutingWhileReadsLag(t *testing.T) {
	t.Parallel()
	e, m := laggingEnv(t, nil)
	e.subscribeAll(t, 0)
	all := append(e.sendAndMine(t, 3), e.sendAndMine(t, 3)...)
	e.requireDoneOnce(t, all...)
	done := map[string]store.Task{}
	for _, task := range all {
		done[task.ID] = task
	}

	e.led.SetLag(ledgertest.Lag{Blocks: 2, Next: 1_000})
	e.clk.Advance(time.Second)
	e.drive1(t)
	require.Positive(t, e.led.Lagged(), "the run's reads lagged")
	e.requireStillDone(t, done)

	e.led.SetLag(ledgertest.Lag{Blocks: 2, Share: 0.5, Seed: 7})
	for round := range 30 {
		if round%2 == 0 {
			all = append(all, e.post(t, 0, 0, int64(2000+round), nil))
		}
		e.mineAndFollow(t)
		for _, task := range all {
			if got := e.task(t, task); got.Status == store.TaskDone {
				done[task.ID] = task
			}
		}
		e.requireStillDone(t, done)
	}
	e.led.SetLag(ledgertest.Lag{})
	for range 3 {
		e.mineAndFollow(t)
	}
	e.requireContiguous(t, 0, 0, e.requireDoneOnce(t, all...))
	e.requireOneTxPerNonce(t, 0)
	e.requireStillDone(t, done)
	require.Zero(t, m.TransitionCount("wallet", "reorged"))
	for _, task := range all {
		for _, ev := range e.outboxOf(t, task) {
			require.NotEqual(t, store.WebhookReorged, ev.Type, "no receiver is told a done task left the chain")
		}
	}
}

// A receipt can come from a node ahead of every head the lane has read
// (with one confirmation it makes its task done at once): the chain holds
// that block, so a head read below it later is a lagging node's, not the
// chain gone back, although no head read ever reached it. Reads lagging one
// block behind then find no receipt and no block at the receipt's height,
// and the done task stays done.
func TestWallet_AReceiptAboveEveryHeadReadIsNotTakenBackByReadsBelowIt(t *testing.T) {
	t.Parallel()
	e, m := laggingEnv(t, nil)
	e.requireDoneOnce(t, e.sendAndMine(t, 1)...)
	e.clk.Advance(time.Minute) // the lane has watched the chain for longer than RewindAfter

	e.led.SetLag(ledgertest.Lag{Blocks: 1, Next: 1_000_000, Only: []string{"HeadBlock"}})
	ahead := e.sendAndMine(t, 1)
	e.requireDoneOnce(t, ahead...)
	head, err := e.chain.HeadBlock(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, head.Number, *e.attempts(t, ahead[0])[0].MinedBlock, "mined in the block no head read has reached")

	e.led.SetLag(ledgertest.Lag{Blocks: 1, Next: 1_000_000})
	e.post(t, 0, 0, 2, nil)
	e.clk.Advance(time.Second)
	e.drive1(t)
	require.Positive(t, e.led.Lagged())
	e.requireStillDone(t, map[string]store.Task{ahead[0].ID: ahead[0]})
	require.Zero(t, m.TransitionCount("wallet", "reorged"))
}

// A node whose nonce lags (its head read from a node caught up) answers a
// chain nonce below the one already read, while the chain never went back.
// The nonces below the chain's whose attempts retention deleted are not
// taken for free again: no no-op is sent for them, no task is signed at
// them, the next nonce is not reset, and the next task goes out at the
// chain's nonce.
func TestWallet_ALaggingNonceReadNeverFreesANonceNorSendsANoop(t *testing.T) {
	t.Parallel()
	e, m := laggingEnv(t, nil)
	for range 3 {
		e.requireDoneOnce(t, e.sendAndMine(t, 1)...) // nonces 0, 1 and 2, one block each
	}
	e.clk.Advance(time.Second)
	deleted, err := e.st.TaskDeleteFinished(t.Context(), store.TaskDeleteFinishedParams{Before: e.clk.Now(), Max: 10})
	require.NoError(t, err)
	require.EqualValues(t, 3, deleted, "retention deleted the done tasks and their attempts")

	sent := len(e.led.Sends())
	e.led.SetLag(ledgertest.Lag{Blocks: 2, Next: 1_000, Only: []string{"NonceAt"}})
	e.drive1(t) // nothing waits: a freed nonce would get a no-op
	later := e.post(t, 0, 0, 2, nil)
	e.drive1(t) // a task waits: a freed nonce would be signed for it
	require.Positive(t, e.led.Lagged(), "the nonce reads lagged")
	for _, s := range e.led.Sends()[sent:] {
		require.GreaterOrEqual(t, s.Nonce, uint64(3), "nothing is sent at a nonce the chain passed")
	}
	for _, a := range e.attempts(t, later) {
		require.EqualValues(t, 3, a.Nonce)
	}
	require.EqualValues(t, 4, e.nextNonce(t))
	e.led.SetLag(ledgertest.Lag{})
	e.mineAndFollow(t)
	e.requireContiguous(t, 0, 3, e.requireDoneOnce(t, later))
	require.Zero(t, e.task(t, later).Replacements)
	require.Zero(t, m.TransitionCount("wallet", "noop"))
	require.Zero(t, m.TransitionCount("wallet", "nonce_reset"))
	require.Empty(t, e.noops(t), "no no-op stored")
}

// A node behind the others that is still on a chain they left (another
// transaction took the wallet's nonce there) answers the confirm step: its
// head is below the best seen, so the task whose transaction the chain
// holds is not counted replaced, nor sent again with another nonce; once
// the reads are caught up it is done, paid once.
func TestWallet_ATaskIsNeverCountedReplacedOnALaggingRead(t *testing.T) {
	t.Parallel()
	e, m := laggingEnv(t, func(c *wallet.Config) { c.ReplacedAfter = 0 })
	e.chain.Mine()
	e.chain.Mine()
	task := e.post(t, 0, 0, 1, nil)
	e.drive1(t) // reads head 2, sends nonce 0

	// The lagging node: the same accounts, one block, in which another
	// transaction of the wallet took nonce 0.
	fork := evmsim.New(evmsim.Config{ChainID: chainID, Clock: e.clk, BlockPeriod: time.Hour,
		Alloc: map[common.Address]*big.Int{e.addr(0): new(big.Int).Mul(big.NewInt(1000), ether)}})
	id := big.NewInt(chainID)
	to := common.Address{0xee}
	other, err := types.SignNewTx(e.keys[0], types.LatestSignerForChainID(id), &types.DynamicFeeTx{
		ChainID: id, Nonce: 0, GasTipCap: big.NewInt(10 * params.GWei), GasFeeCap: big.NewInt(20 * params.GWei),
		Gas: params.TxGas, To: &to, Value: big.NewInt(1),
	})
	require.NoError(t, err)
	raw, err := other.MarshalBinary()
	require.NoError(t, err)
	require.NoError(t, fork.SendRawTransaction(t.Context(), raw))
	fork.Mine()

	e.chain.Mine() // the chain mines the task's transaction
	e.led.SetLag(ledgertest.Lag{From: fork, Next: 1_000})
	for range 3 {
		e.clk.Advance(time.Second)
		e.drive1(t)
		require.Zero(t, e.task(t, task).Replacements, "not replaced on a lagging node's word")
		require.Len(t, e.attempts(t, task), 1, "not signed again")
	}
	require.Positive(t, e.led.Lagged())
	e.led.SetLag(ledgertest.Lag{})
	e.mineAndFollow(t)
	e.requireDoneOnce(t, task)
	e.requireOneTxPerNonce(t, 0)
	require.Zero(t, m.TransitionCount("wallet", "replaced"))
}
