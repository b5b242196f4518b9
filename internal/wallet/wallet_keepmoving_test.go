package wallet_test

import (
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// The rules that keep a wallet moving (issue 11; from engine-core's EOA
// executor: gas bumps, recycled nonces, nonce resets, balance health).

const testStall = 10 * time.Second

func (e *env) health(t *testing.T) store.WalletHealth {
	t.Helper()
	h, err := e.st.WalletHealthGet(t.Context(), chainID, e.wallets[0].Address().Hex())
	require.NoError(t, err)
	return h
}

// noops returns wallet 0's no-op attempts (attempts of no task): nonce and
// state.
func (e *env) noops(t *testing.T) map[int64]string {
	t.Helper()
	rows, err := e.st.DB().Query(t.Context(), `SELECT nonce, state::text FROM ledgerq.tx_attempts WHERE task_id IS NULL AND sender = $1`,
		strings.ToLower(e.wallets[0].Address().Hex()))
	require.NoError(t, err)
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var n int64
		var s string
		require.NoError(t, rows.Scan(&n, &s))
		out[n] = s
	}
	require.NoError(t, rows.Err())
	return out
}

func (e *env) setNextNonce(t *testing.T, n int64) {
	t.Helper()
	_, err := e.st.DB().Exec(t.Context(), `UPDATE ledgerq.wallet_nonces SET next_nonce = $1`, n)
	require.NoError(t, err)
}

func (e *env) nextNonce(t *testing.T) int64 {
	t.Helper()
	n, err := e.st.WalletNonceGet(t.Context(), chainID, e.wallets[0].Address().Hex())
	require.NoError(t, err)
	return n
}

func minedTip(t *testing.T, a store.Attempt) *big.Int {
	t.Helper()
	var tx types.Transaction
	require.NoError(t, tx.UnmarshalBinary(a.Raw))
	return tx.GasTipCap()
}

// Rule 1: a nonce the chain has not moved past for StallTimeout, held by
// our sent attempt, is bumped — signed again with fee cap and tip at least
// 1.2 × the previous, stored as a new attempt (the old one superseded) —
// until a block takes it; the bump count is on the task.
func TestWallet_AStalledNonceIsBumpedUntilMinedWithTheBumpCountOnTheTask(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	e := setup(t, options{sim: evmsim.Config{MinTip: 5 * params.GWei}, cfg: func(c *wallet.Config) { c.StallTimeout, c.Metrics = testStall, m }})
	tasks := e.postN(t, 2)
	e.drive(t, e.pool, 400, tasks...)
	nonces := e.requireDoneOnce(t, tasks...)
	e.requireContiguous(t, 0, 0, nonces)
	bumps := 0
	defer func() {
		require.EqualValues(t, bumps, m.TransitionCount("wallet", "bumped"), "every bump is counted in /metrics")
	}()
	for i, task := range tasks {
		got := e.task(t, task)
		bumps += got.Bumps
		require.Positive(t, got.Bumps, "task %d was bumped", i)
		atts := e.attempts(t, task)
		require.Len(t, atts, got.Bumps+1, "each bump is a new attempt")
		var prev *big.Int
		for _, a := range atts {
			if prev != nil {
				least := new(big.Int).Quo(new(big.Int).Mul(prev, big.NewInt(12)), big.NewInt(10))
				require.GreaterOrEqual(t, a.MaxPriorityFeePerGas.Cmp(least), 0, "tip × 1.2 at least")
			}
			prev = a.MaxPriorityFeePerGas
			if a.State == store.AttemptConfirmed {
				require.GreaterOrEqual(t, minedTip(t, a).Int64(), int64(5*params.GWei))
			} else {
				require.Equal(t, store.AttemptDropped, a.State)
				require.NotEmpty(t, a.SupersededBy)
			}
		}
	}
}

// Rule 1, the cap: a bump that wallet.Config.PriceCap stops leaves the task
// executing, marks it (PriceCappedAt) and calls OnPriceCapped once; when
// the chain takes the transaction after all, the task is done.
func TestWallet_ABumpStoppedByThePriceCapLeavesTheTaskAndTellsTheOperator(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var told []wallet.PriceCapped
	e := setup(t, options{sim: evmsim.Config{MinTip: 5 * params.GWei}, cfg: func(c *wallet.Config) {
		c.StallTimeout = testStall
		c.PriceCap = big.NewInt(4 * params.GWei)
		c.OnPriceCapped = func(p wallet.PriceCapped) { mu.Lock(); told = append(told, p); mu.Unlock() }
	}})
	task := e.post(t, 0, 0, 1, nil)
	for range 100 {
		e.drive1(t)
		e.clk.Advance(blockPeriod)
	}
	got := e.task(t, task)
	require.Equal(t, store.TaskExecuting, got.Status)
	require.NotNil(t, got.PriceCappedAt, "the operator is told on the task")
	require.Positive(t, got.Bumps)
	for _, a := range e.attempts(t, task) {
		require.LessOrEqual(t, a.MaxFeePerGas.Int64(), int64(4*params.GWei), "never above the cap")
	}
	mu.Lock()
	require.Len(t, told, 1, "told once")
	require.Equal(t, task.ID, told[0].TaskID)
	mu.Unlock()

	e.chain.SetMinTip(0)
	e.drive(t, e.pool, 10, task)
	e.requireDoneOnce(t, task)
}

// Rule 1, underpriced: a bump the node refuses as `replacement transaction
// underpriced` is raised again at the next run, without waiting another
// StallTimeout.
func TestWallet_ABumpRefusedAsUnderpricedIsRaisedAgainInTheNextRun(t *testing.T) {
	t.Parallel()
	e := setup(t, options{sim: evmsim.Config{MinTip: 5 * params.GWei}, cfg: func(c *wallet.Config) { c.StallTimeout = testStall }})
	task := e.post(t, 0, 0, 1, nil)
	e.drive1(t)
	first := e.attempts(t, task)[0].TxHash
	refused := ""
	e.led.Refuse = func(tx *types.Transaction) error {
		if h := tx.Hash().Hex(); h != first && (refused == "" || refused == h) {
			refused = h
			return ledger.NewSendError(ledger.SendUnderpriced, "replacement transaction underpriced", nil)
		}
		return nil
	}
	e.clk.Advance(testStall)
	e.drive1(t)
	require.NotEmpty(t, refused)
	require.Equal(t, 1, e.task(t, task).Bumps)
	e.clk.Advance(blockPeriod)
	e.drive1(t)
	require.Equal(t, 2, e.task(t, task).Bumps, "raised again one run later, not one stall timeout later")
}

// Rule 1, confirm: any of a nonce's hashes mined makes its task done — here
// the original, whose bump never reached the chain — with that hash, and
// the task is not sent again (a flaw of engine-core's that ledgerq closes).
func TestWallet_AnyMinedHashOfANonceMakesItsTaskDoneNotReplaced(t *testing.T) {
	t.Parallel()
	e, task, first := bumpedWithTheBumpLost(t)
	e.chain.SetMinTip(0)
	e.chain.Mine()
	e.drive(t, e.pool, 5, task)
	e.requireDoneOnce(t, task)
	require.Equal(t, strings.ToLower(first), e.task(t, task).TxHash, "done with the hash that was mined")
	require.Equal(t, 1, len(e.attempts(t, task))-e.task(t, task).Bumps, "never sent again")
}

// Rule 3, engine-core's flaw closed: a transport error never frees a nonce (no no-op, no
// other transaction for it); a deterministic refusal does, and a freed nonce
// no waiting task fills gets a no-op, so the later nonces are mined.
func TestWallet_ATransportErrorNeverFreesANonceAndAFreedNonceNoTaskFillsGetsANoop(t *testing.T) {
	t.Parallel()
	// No stall: the no-op comes from the freed-nonce rule alone (a stall
	// past its timeout would fill the gap too).
	e := setup(t, options{sim: evmsim.Config{BlockPeriod: time.Hour}, cfg: func(c *wallet.Config) { c.StallTimeout = time.Hour }})
	a := e.post(t, 0, 0, 1, nil)
	b := e.post(t, 0, 0, 1, nil)
	var refusal error = ledger.NewSendError(ledger.SendIndeterminate, "i/o timeout", nil)
	e.led.Refuse = func(tx *types.Transaction) error {
		if tx.Nonce() == 0 {
			return refusal
		}
		return nil
	}
	for range 5 {
		e.drive1(t)
		e.clk.Advance(time.Minute)
	}
	require.Empty(t, e.noops(t), "an indeterminate send frees nothing")
	require.Len(t, e.attempts(t, a), 1)
	require.Equal(t, store.AttemptSent, e.attempts(t, a)[0].State)
	require.Equal(t, store.TaskExecuting, e.task(t, a).Status)

	refusal = ledger.NewSendError(ledger.SendRejected, "intrinsic gas too low", nil)
	e.drive1(t)
	require.Equal(t, store.TaskError, e.task(t, a).Status)
	e.led.Refuse = nil
	e.drive1(t)
	require.Equal(t, map[int64]string{0: string(store.AttemptSent)}, e.noops(t), "the freed nonce got a no-op")
	e.chain.Mine()
	e.drive(t, e.pool, 5, b)
	require.Equal(t, []int64{1}, e.requireDoneOnce(t, b))
	require.Equal(t, map[int64]string{0: string(store.AttemptConfirmed)}, e.noops(t))
	e.requireContiguous(t, 0, 0, []int64{0, 1})
}

// Rule 3: freed nonces at or above the highest live attempt are discarded
// (the next nonce moves down to it), not filled with no-ops.
func TestWallet_FreedNoncesAboveTheHighestLiveAttemptAreDiscarded(t *testing.T) {
	t.Parallel()
	e := setup(t, options{sim: evmsim.Config{BlockPeriod: time.Hour}})
	first := e.postN(t, 2)
	e.drive1(t)
	e.setNextNonce(t, 5) // nonces 2, 3 and 4 freed at the top
	next := e.post(t, 0, 0, 1, nil)
	e.drive1(t)
	e.chain.Mine()
	all := append(first, next)
	e.drive(t, e.pool, 5, all...)
	require.Equal(t, []int64{0, 1, 2}, e.requireDoneOnce(t, all...))
	require.Empty(t, e.noops(t))
	require.Equal(t, int64(3), e.nextNonce(t))
	require.Zero(t, e.health(t).Resets, "a trim, not a reset")
}

// Rule 2: a next nonce below the chain's, or far above it with nothing in
// flight, is reset to the chain's; the reset is recorded on the wallet.
func TestWallet_ANextNonceThatCannotHealIsResetToTheChainsAndRecorded(t *testing.T) {
	t.Parallel()
	e := setup(t, options{cfg: func(c *wallet.Config) { c.ResetGap = 10 }})
	task := e.post(t, 0, 0, 1, nil)
	e.drive(t, e.pool, 5, task)
	e.setNextNonce(t, 500)
	far := e.post(t, 0, 0, 1, nil)
	e.drive(t, e.pool, 5, far)
	require.Equal(t, []int64{1}, e.requireDoneOnce(t, far))
	h := e.health(t)
	require.Equal(t, 1, h.Resets)
	require.Equal(t, int64(500), *h.LastResetFrom)
	require.Equal(t, int64(1), *h.LastResetTo)
	require.NotNil(t, h.LastResetAt)

	e.sendOutside(t, 0, 2)
	e.sendOutside(t, 0, 3)
	e.chain.Mine()
	below := e.post(t, 0, 0, 1, nil)
	e.drive(t, e.pool, 5, below)
	require.Equal(t, []int64{4}, e.requireDoneOnce(t, below))
	h = e.health(t)
	require.Equal(t, 2, h.Resets)
	require.Equal(t, int64(2), *h.LastResetFrom)
	require.Equal(t, int64(4), *h.LastResetTo)
}

// Balance health: a wallet that cannot pay for a plain transfer at the fees
// of the moment (21000 gas × the suggested fee cap) pauses: its tasks wait
// instead of each ending in error. The balance of a paused wallet is read
// again within seconds, so it goes on as soon as it is funded.
func TestWallet_SendingPausesWhileTheBalanceCannotPayAPlainTransferUntilItCan(t *testing.T) {
	t.Parallel()
	// 50 000 gwei is less than 21000 × a 3 gwei fee cap (63 000 gwei).
	e := setup(t, options{fund: big.NewInt(50_000 * params.GWei)})
	waiting := e.postN(t, 2)
	for range 5 {
		e.drive1(t)
		e.clk.Advance(blockPeriod)
	}
	require.Zero(t, e.led.Calls("SendRawTransaction"), "paused: no send")
	for _, task := range waiting {
		require.Equal(t, store.TaskWaiting, e.task(t, task).Status)
	}
	h := e.health(t)
	require.True(t, h.Paused)
	require.Equal(t, int64(50_000*params.GWei), h.Balance.Int64())
	require.Positive(t, h.Threshold.Cmp(h.Balance), "the threshold is above the balance: %s", h.Threshold)
	require.True(t, new(big.Int).Mul(big.NewInt(3*params.GWei), big.NewInt(21_000)).Cmp(h.Threshold) <= 0,
		"the threshold is a plain transfer's cost: %s", h.Threshold)

	e.chain.Credit(e.addr(0), ether)
	e.clk.Advance(10 * time.Second) // a paused wallet's balance is read again this often
	e.drive(t, e.pool, 5, waiting...)
	e.requireDoneOnce(t, waiting...)
	require.False(t, e.health(t).Paused)
}

// Rule 5: a task whose nonce another transaction took (every hash of ours
// definitively absent) goes back to waiting, counted, at most
// MaxReplacements times; the next time it ends in error.
func TestWallet_AReplacedTaskGoesBackToWaitingAtMostMaxReplacementsTimes(t *testing.T) {
	t.Parallel()
	e := setup(t, options{sim: evmsim.Config{BlockPeriod: time.Hour}, cfg: func(c *wallet.Config) {
		c.MaxReplacements = 1
		c.ReplacedAfter = 0
	}})
	task := e.post(t, 0, 0, 1000, nil)
	for nonce := range uint64(2) {
		e.drive1(t)
		require.Equal(t, store.TaskExecuting, e.task(t, task).Status)
		e.sendOutside(t, 0, nonce)
		e.chain.Mine()
		e.drive1(t)
	}
	got := e.task(t, task)
	require.Equal(t, store.TaskError, got.Status)
	require.Equal(t, 2, got.Replacements)
	require.Contains(t, got.Error, "replaced")
	for _, a := range e.attempts(t, task) {
		require.Equal(t, store.AttemptDropped, a.State)
	}
	require.Equal(t, big.NewInt(0).Int64(), mustBalance(t, e, common.HexToAddress(got.Request.To)).Int64(), "never paid")
}

func mustBalance(t *testing.T, e *env, a common.Address) *big.Int {
	t.Helper()
	b, err := e.chain.BalanceAt(t.Context(), ledger.Address(a))
	require.NoError(t, err)
	return b
}

// Rule 3, the limit: with more freed nonces than wallet.Config.MaxRecycled (here
// 0), they are filled with no-ops at once instead of waiting for tasks;
// the waiting task takes a new nonce.
func TestWallet_MoreFreedNoncesThanMaxRecycledAreFilledWithNoops(t *testing.T) {
	t.Parallel()
	e := setup(t, options{sim: evmsim.Config{BlockPeriod: time.Hour}, cfg: func(c *wallet.Config) {
		c.StallTimeout = time.Hour
		c.MaxRecycled = 0
	}})
	a := e.post(t, 0, 0, 1, nil)
	b := e.post(t, 0, 0, 1, nil)
	e.led.Refuse = func(tx *types.Transaction) error {
		if tx.Nonce() == 0 {
			return ledger.NewSendError(ledger.SendIndeterminate, "i/o timeout", nil)
		}
		return nil
	}
	e.drive1(t)
	e.led.Refuse = func(tx *types.Transaction) error {
		if tx.Nonce() == 0 && tx.To() != nil && *tx.To() != e.addr(0) {
			return ledger.NewSendError(ledger.SendRejected, "intrinsic gas too low", nil)
		}
		return nil
	}
	c := e.post(t, 0, 0, 1, nil)
	e.drive1(t)
	require.Equal(t, store.TaskError, e.task(t, a).Status)
	require.Equal(t, map[int64]string{0: string(store.AttemptSent)}, e.noops(t), "a no-op, not the waiting task")
	e.chain.Mine()
	e.drive(t, e.pool, 5, b, c)
	require.Equal(t, []int64{1, 2}, e.requireDoneOnce(t, b, c))
	e.requireContiguous(t, 0, 0, []int64{0, 1, 2})
}

// Rule 5 with bumps: a task whose nonce another transaction took is
// replaced only when that is definitive — the chain's blocks show another
// transaction at the nonce, none of the hashes we sent (bumps included) — a
// failed lookup of the superseded original and a failed read of the blocks
// are "ask again later", even while its bump answers "no receipt".
func TestWallet_ReplacedOnlyWhenEveryHashOfTheNonceBumpsIncludedIsDefinitivelyAbsent(t *testing.T) {
	t.Parallel()
	e, task, first := bumpedWithTheBumpLost(t)
	e.sendOutside(t, 0, 0)
	e.chain.Mine()

	e.led.FailReceipt = func(h string) bool { return strings.EqualFold(h, first) }
	e.led.FailBlocks = true
	for range 3 {
		e.drive1(t)
		e.clk.Advance(blockPeriod)
	}
	got := e.task(t, task)
	require.Equal(t, store.TaskExecuting, got.Status, "one hash unanswered, the blocks unread: not replaced")
	require.Zero(t, got.Replacements)

	e.led.FailBlocks = false
	e.drive1(t)
	require.Equal(t, 1, e.task(t, task).Replacements, "the block of the nonce holds another transaction: replaced")
}

// bumpedWithTheBumpLost posts a task whose tip is below the chain's minimum,
// lets it stall and be bumped once, the bump's send lost on the way (an
// indeterminate transport error: only the original reached the chain). It
// returns the task and its original hash.
func bumpedWithTheBumpLost(t *testing.T) (*env, store.Task, string) {
	t.Helper()
	e := setup(t, options{sim: evmsim.Config{MinTip: 5 * params.GWei}, cfg: func(c *wallet.Config) {
		c.StallTimeout = testStall
		c.ReplacedAfter = 0
	}})
	task := e.post(t, 0, 0, 1000, nil)
	e.drive1(t)
	first := e.attempts(t, task)[0].TxHash
	e.led.Refuse = func(tx *types.Transaction) error {
		if tx.Hash().Hex() != first {
			return ledger.NewSendError(ledger.SendIndeterminate, "connection reset by peer", nil)
		}
		return nil
	}
	e.clk.Advance(testStall)
	e.drive1(t)
	require.Equal(t, 1, e.task(t, task).Bumps)
	return e, task, first
}
