package submitter_test

// A submitter round on a chain the test moves (ledgertest.BundleLedger):
// each submit happens inside the submission window, even when the round
// itself outlasts it.

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// A round claims only inside the submission window, a bundle for every free
// core, and then sends the claimed packages side by side: a slow chain call
// (a loaded database or chain) that ends after the window closed does not
// hold back the other core's package, which was claimed inside the window,
// and a round that starts after the close claims nothing — its package
// would reach the chain in the next slot, where its anchor, picked for this
// one, could leave the recent blocks before its guarantee.
func TestBundleSubmitter_ClaimsOnlyInsideTheWindowAndSendsTheClaimedSideBySide(t *testing.T) {
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
	var slow sync.Once
	chain.Submit = func(ledger.WorkPackage) error {
		slow.Do(func() { clk.Advance(2*time.Second + time.Millisecond) }) // past the close, 1 s before slot 11
		return nil
	}
	rows := testfactory.New(t, st, clk)
	rows.AddPoolTxs(testfactory.PoolTx(1, 0, 10, 10), testfactory.PoolTx(1, 1, 10, 10), testfactory.PoolTx(1, 2, 10, 10))
	require.Len(t, rows.CutBundles(store.BundleCutParams{MaxQueued: 3}), 3)
	require.NoError(t, st.BundleEnsureCores(t.Context(), testfactory.PoolChainID, 3, clk.Now()))
	s, err := submitter.NewBundleSubmitter(st, chain, loop.Deps{Clock: clk, Logger: slog.New(slog.DiscardHandler)}, builder.Config{
		Pool: builder.PoolConfig{ChainID: testfactory.PoolChainID}, Ledger: builder.LedgerConfig{Timeout: 10 * time.Second},
		Cores: 2, SubmitBackoff: time.Second, SubmitBackoffMax: time.Minute,
	})
	require.NoError(t, err)
	n, err := s.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, n, "both cores' bundles were claimed inside the window, then sent")
	require.Len(t, chain.Submitted(), 2)

	// The window closed during the sends; a core freed now waits.
	_, err = st.DB().Exec(t.Context(), `UPDATE ledgerq.cores SET bundle_id = NULL WHERE core = 0`)
	require.NoError(t, err)
	_, err = st.DB().Exec(t.Context(), `UPDATE ledgerq.bundles SET state = 'guaranteed', core = NULL, guaranteed_hash = '0x' || repeat('1', 64), guaranteed_version = 1, guaranteed_at = now() WHERE number = 1`)
	require.NoError(t, err)
	n, err = s.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "after the window closed, the third bundle waits for the next window")
	require.Len(t, chain.Submitted(), 2)

	clk.Advance(slot - 2*time.Second) // inside the next window
	n, err = s.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, chain.Submitted(), 3)
}
