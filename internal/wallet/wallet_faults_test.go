package wallet_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// The send-result classes under faults: with 30% of sends refused before the
// chain saw them and 30% of answers lost after it took them (both
// indeterminate: treated as sent, never recycled, broadcast again with the
// same bytes), every task of several wallets ends done exactly once, no
// nonce carries two transactions and none is skipped.
func TestWallet_UnderTransientAndLostResponseFaultsEveryTaskIsDoneOnceWithNoNonceSkippedOrUsedTwice(t *testing.T) {
	t.Parallel()
	const wallets, perWallet = 4, 75
	e := setup(t, options{wallets: wallets, sim: evmsim.Config{Seed: 3, TransientRate: 0.3, LostResponseRate: 0.3},
		cfg: func(c *wallet.Config) { c.InFlight = 20 }})
	tasks := make([][]store.Task, wallets)
	var all []store.Task
	for i := range perWallet {
		for w := range wallets {
			task := e.post(t, w, int32(i%3), int64(1000+i), nil)
			tasks[w] = append(tasks[w], task)
			all = append(all, task)
		}
	}
	e.drive(t, e.pool, 200, all...)
	for w := range wallets {
		nonces := e.requireDoneOnce(t, tasks[w]...)
		e.requireContiguous(t, w, 0, nonces)
		e.requireOneTxPerNonce(t, w)
	}
	var indeterminate int
	for _, r := range e.led.Sends() {
		if r.Err != nil {
			indeterminate++
		}
	}
	require.Greater(t, indeterminate, wallets*perWallet/4, "the faults happened")
}
