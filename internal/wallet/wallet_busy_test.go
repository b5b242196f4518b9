package wallet_test

import (
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// Rule 4, busy: a node whose pool is full or whose provider rate-limits did
// not take the transaction and said so. The lane keeps the attempt as sent
// and its nonce taken, as for an indeterminate send (never an error, never
// a no-op), and the same bytes go out again until the node takes them.
func TestWallet_ABusyNodeKeepsTheAttemptAndItsNonceUntilItTakesTheBytes(t *testing.T) {
	t.Parallel()
	e := setup(t, options{sim: evmsim.Config{BlockPeriod: time.Hour}, cfg: func(c *wallet.Config) { c.StallTimeout = time.Hour }})
	a := e.post(t, 0, 0, 1, nil)
	busy := 0
	e.led.Refuse = func(tx *types.Transaction) error {
		busy++
		return ledger.NewSendError(ledger.SendBusy, "txpool is full", nil)
	}
	for range 3 {
		e.drive1(t)
		e.clk.Advance(time.Minute)
	}
	require.Positive(t, busy)
	require.Empty(t, e.noops(t), "a busy send frees nothing")
	attempts := e.attempts(t, a)
	require.Len(t, attempts, 1)
	require.Equal(t, store.AttemptSent, attempts[0].State)
	require.Equal(t, store.TaskExecuting, e.task(t, a).Status)

	e.led.Refuse = nil
	e.drive1(t)
	e.chain.Mine()
	e.drive(t, e.pool, 5, a)
	require.Equal(t, []int64{0}, e.requireDoneOnce(t, a))
	e.requireContiguous(t, 0, 0, []int64{0})
}
