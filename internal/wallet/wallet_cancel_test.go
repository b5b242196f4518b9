package wallet_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// stalledTask sets up a chain that mines no tip below 5 gwei (the lane's
// transactions offer about 1 gwei) and no gas bump within the test, and
// returns a task of wallet 0 whose transaction is sent and stalls there.
func stalledTask(t *testing.T) (*env, store.Task) {
	t.Helper()
	e := setup(t, options{sim: evmsim.Config{MinTip: 5 * params.GWei}, cfg: func(c *wallet.Config) { c.StallTimeout = time.Hour }})
	task := e.post(t, 0, 0, 1000, nil)
	for range 3 {
		e.drive1(t)
		e.clk.Advance(blockPeriod)
	}
	got := e.task(t, task)
	require.Equal(t, store.TaskExecuting, got.Status)
	atts := e.attempts(t, task)
	require.Len(t, atts, 1)
	require.Equal(t, store.AttemptSent, atts[0].State, "the transaction is out, and stalls")
	return e, got
}

func (e *env) requestCancel(t *testing.T, task store.Task) {
	t.Helper()
	_, outcome, err := e.st.TaskRequestCancel(t.Context(), store.TaskCancelParams{Now: e.clk.Now(), Wallet: task.Wallet, ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, store.CancelRequested, outcome)
}

// cancelNoop returns the task's one cancel attempt.
func (e *env) cancelNoop(t *testing.T, task store.Task) store.Attempt {
	t.Helper()
	var out []store.Attempt
	for _, a := range e.attempts(t, task) {
		if a.Kind == store.AttemptCancel {
			out = append(out, a)
		}
	}
	require.Len(t, out, 1, "one no-op was signed and stored for the cancel")
	return out[0]
}

// minedAt returns the hash of wallet w's transaction the chain holds at
// nonce ("" when none).
func (e *env) minedAt(t *testing.T, w int, nonce int64) string {
	t.Helper()
	txs, ok, err := e.chain.TxsAtNonce(t.Context(), e.wallets[w].Address(), uint64(nonce))
	require.NoError(t, err)
	require.True(t, ok)
	for _, tx := range txs {
		if tx.Nonce == uint64(nonce) {
			return common.Hash(tx.Hash).Hex()
		}
	}
	return ""
}

// A cancel that wins: the no-op (0 value to the wallet itself, the live
// attempt's fees raised as a gas bump's) replaces the stalled transaction at
// its nonce, the chain mines it, and the task ends cancelled: in error,
// its recipient never paid.
func TestWallet_ACancelWhoseNoopIsMinedEndsTheTaskCancelled(t *testing.T) {
	t.Parallel()
	e, task := stalledTask(t)
	orig := e.attempts(t, task)[0]
	e.requestCancel(t, task)
	e.drive1(t)
	noop := e.cancelNoop(t, task)
	require.Equal(t, orig.Nonce, noop.Nonce)
	var tx types.Transaction
	require.NoError(t, tx.UnmarshalBinary(noop.Raw))
	require.Equal(t, e.addr(0), *tx.To(), "to the wallet itself")
	require.Zero(t, tx.Value().Sign())
	least := new(big.Int).Quo(new(big.Int).Mul(orig.MaxPriorityFeePerGas, big.NewInt(120)), big.NewInt(100))
	require.GreaterOrEqual(t, tx.GasTipCap().Cmp(least), 0, "tip raised by the bump percent")

	e.chain.SetMinTip(tx.GasTipCap().Int64())
	e.drive(t, e.pool, 20, task)
	got := e.task(t, task)
	require.Equal(t, store.TaskError, got.Status)
	require.True(t, got.Cancelled)
	require.Equal(t, noop.TxHash, e.minedAt(t, 0, noop.Nonce), "the chain holds the no-op at the nonce")
	rc, err := e.chain.TransactionReceipt(t.Context(), ledger.TxHash(common.HexToHash(orig.TxHash)))
	require.NoError(t, err)
	require.False(t, rc.Found, "the task's transaction never ran")
	bal, err := e.chain.BalanceAt(t.Context(), ledger.Address(common.HexToAddress(got.Request.To)))
	require.NoError(t, err)
	require.Zero(t, bal.Sign())
	require.Zero(t, got.Bumps, "a cancel is no gas bump")
}

// A cancel that loses the race: the task's own transaction is mined just
// before the no-op reaches the node. The task ends done with its own hash,
// and the no-op is never mined.
func TestWallet_ACancelThatLosesTheRaceLeavesTheTaskDone(t *testing.T) {
	t.Parallel()
	e, task := stalledTask(t)
	orig := e.attempts(t, task)[0]
	e.led.MinedIsNonceTooLow = true
	e.led.BeforeSend = func(tx *types.Transaction) {
		if tx.To() != nil && *tx.To() == e.addr(0) {
			e.chain.SetMinTip(0)
			e.chain.Mine()
		}
	}
	e.requestCancel(t, task)
	e.drive(t, e.pool, 20, task)
	e.requireDoneOnce(t, task)
	got := e.task(t, task)
	require.Equal(t, orig.TxHash, got.TxHash)
	require.False(t, got.Cancelled)
	noop := e.cancelNoop(t, task)
	require.Equal(t, store.AttemptDropped, noop.State)
	require.Equal(t, orig.TxHash, e.minedAt(t, 0, orig.Nonce), "the chain holds the task's transaction at the nonce")
}

// A speed-up replaces the stalled transaction at its nonce with the same
// content and the fees asked for; the chain mines it and the task is done
// with its hash.
func TestWallet_ASpeedUpIsMinedWithTheFeesAskedFor(t *testing.T) {
	t.Parallel()
	e, task := stalledTask(t)
	orig := e.attempts(t, task)[0]
	fees := store.SpeedUpFees{FeeCap: big.NewInt(50 * params.GWei), TipCap: big.NewInt(6 * params.GWei)}
	_, err := e.st.TaskRequestSpeedUp(t.Context(), store.TaskSpeedUpParams{Now: e.clk.Now(), Wallet: task.Wallet, ID: task.ID, Fees: fees})
	require.NoError(t, err)
	e.drive(t, e.pool, 20, task)
	e.requireDoneOnce(t, task)
	got := e.task(t, task)
	require.Equal(t, 1, got.Bumps)
	require.Nil(t, got.SpeedUp, "the request is done")
	atts := e.attempts(t, task)
	require.Len(t, atts, 2)
	sped := atts[1]
	require.Equal(t, store.AttemptSpeedUp, sped.Kind)
	require.Equal(t, got.TxHash, sped.TxHash)
	require.Equal(t, sped.TxHash, e.minedAt(t, 0, orig.Nonce))
	var before, after types.Transaction
	require.NoError(t, before.UnmarshalBinary(orig.Raw))
	require.NoError(t, after.UnmarshalBinary(sped.Raw))
	require.Equal(t, before.Nonce(), after.Nonce())
	require.Equal(t, *before.To(), *after.To())
	require.Equal(t, before.Value(), after.Value())
	require.Equal(t, before.Data(), after.Data())
	require.Equal(t, 0, after.GasTipCap().Cmp(fees.TipCap))
	require.Equal(t, 0, after.GasFeeCap().Cmp(fees.FeeCap))
}

// The cancel's write-ahead: a process that dies after signing the no-op and
// before storing it stored nothing (the next run signs it again, and only
// the stored one is ever broadcast); one that dies after storing it and
// before broadcasting it leaves the stored bytes, which the next process
// broadcasts, the same hash. Either way one no-op is stored, and the task
// ends cancelled once.
func TestWallet_ACrashAtTheCancelsWriteAheadSendsOneNoop(t *testing.T) {
	t.Parallel()
	for _, stored := range []bool{false, true} {
		t.Run(map[bool]string{false: "signed, not stored", true: "stored, not broadcast"}[stored], func(t *testing.T) {
			t.Parallel()
			e, task := stalledTask(t)
			e.requestCancel(t, task)
			crashed, _ := e.newProcess(t, e.led)
			committed := false
			e.crashedRun(t, crashed, 0, func(cyc workers.Cycle, step string) bool {
				if isCycle(cyc, "*monitor.requestCycle") && step == "commit" {
					committed = true
					return !stored
				}
				return committed && isCycle(cyc, "*submitter.broadcastCycle")
			})
			atts := e.attempts(t, task)
			var storedNoop *store.Attempt
			if stored {
				require.Len(t, atts, 2)
				storedNoop = &atts[1]
				require.Equal(t, store.AttemptSigned, storedNoop.State, "stored before any broadcast")
			} else {
				require.Len(t, atts, 1, "nothing stored before the crash")
			}
			for _, s := range e.led.Sends() {
				require.NotEqual(t, e.addr(0), *decode(t, s.Raw).To(), "no no-op broadcast before the crash")
			}

			e.expireLeases(t)
			_, pool := e.newProcess(t, e.led)
			var noopTip *big.Int
			for range 20 {
				_, err := e.follower.RunOnce(t.Context())
				require.NoError(t, err)
				runPool(t, pool)
				if noopTip == nil {
					for _, a := range e.attempts(t, task) {
						if a.Kind == store.AttemptCancel {
							noopTip = a.MaxPriorityFeePerGas
							e.chain.SetMinTip(noopTip.Int64())
						}
					}
				}
				if e.task(t, task).Status.Terminal() {
					break
				}
				e.clk.Advance(blockPeriod)
			}
			got := e.task(t, task)
			require.Equal(t, store.TaskError, got.Status)
			require.True(t, got.Cancelled)
			noop := e.cancelNoop(t, task)
			if storedNoop != nil {
				require.Equal(t, storedNoop.TxHash, noop.TxHash, "the stored bytes, not a new signature")
			}
			var noopSends []string
			for _, s := range e.led.Sends() {
				if *decode(t, s.Raw).To() == e.addr(0) {
					noopSends = append(noopSends, s.Hash)
				}
			}
			require.NotEmpty(t, noopSends)
			for _, h := range noopSends {
				require.Equal(t, common.HexToHash(noop.TxHash), common.HexToHash(h), "only the stored no-op is broadcast")
			}
			require.Equal(t, noop.TxHash, e.minedAt(t, 0, noop.Nonce))
		})
	}
}

func decode(t *testing.T, raw []byte) *types.Transaction {
	t.Helper()
	var tx types.Transaction
	require.NoError(t, tx.UnmarshalBinary(raw))
	return &tx
}
