package submitter_test

// A submitter round on a chain the test moves (ledgertest.BundleLedger):
// each submit happens inside the submission window, even when the round
// itself outlasts it.

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// A slow first submit (a loaded database or chain) that ends after the
// window closed: the round stops there, and the second core's bundle waits
// for the next window instead of reaching the chain in the next slot, where
// its anchor — picked for this slot — would leave the recent blocks before
// its guarantee and it would be requeued after the guarantee timeout,
// though nothing failed.
func TestBundleSubmitter_ARoundStopsClaimingWhenTheWindowClosesUnderIt(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	g := testfactory.Start()
	slot := 6 * time.Second
	clk := clock.NewFake(g.Add(10*slot + 3*time.Second)) // the window before slot 11 opens
	chain := &ledgertest.BundleLedger{}
	chain.SetInfo(ledger.ChainInfo{Genesis: g, SlotLength: slot, Cores: 2})
	for range 10 {
		chain.AddBlock(ledger.JAMBlock{})
	}
	chain.Submit = func(ledger.WorkPackage) error {
		clk.Advance(2*time.Second + time.Millisecond) // past the close, 1 s before slot 11
		return nil
	}
	rows := testfactory.New(t, st, clk)
	rows.AddPoolTxs(testfactory.PoolTx(1, 0, 10, 10), testfactory.PoolTx(1, 1, 10, 10))
	require.Len(t, rows.CutBundles(store.BundleCutParams{}), 2)
	require.NoError(t, st.BundleEnsureCores(t.Context(), testfactory.PoolChainID, 2, clk.Now()))
	s := submitter.NewBundleSubmitter(st, chain, loop.Deps{Clock: clk, Logger: slog.New(slog.DiscardHandler)}, submitter.BundleConfig{
		ChainID: testfactory.PoolChainID, PollInterval: time.Second, DBTimeout: 10 * time.Second, LedgerTimeout: 10 * time.Second,
		Cores: 2, MinBackoff: time.Second, MaxBackoff: time.Minute,
	})
	n, err := s.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n, "the second bundle waits for the next window")
	require.Len(t, chain.Submitted(), 1)

	chain.Submit = nil
	clk.Advance(slot - 2*time.Second) // inside the next window
	n, err = s.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, chain.Submitted(), 2)
}
