package queuer_test

// Bundler rules of the builder lane (jamduna's EVM builder): what one round
// of the bundler makes of the pool, on a chain the test moves
// (ledgertest.BundleLedger). Each test runs in a rolled-back transaction.

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// bundlerSetup is what a Bundler rule test needs: a chain whose builder
// service executed block 41, with ten blocks, and a bundler of size 2 on two
// cores that counts its OnCut calls.
type bundlerSetup struct {
	t     *testing.T
	st    *store.Store
	rows  *testfactory.Factory
	chain *ledgertest.BundleLedger
	b     *queuer.Bundler
	cuts  int
}

func bundlerSetupTx(t *testing.T) *bundlerSetup {
	t.Helper()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	chain := &ledgertest.BundleLedger{}
	chain.SetInfo(ledger.ChainInfo{Genesis: clk.Now(), SlotLength: 6 * time.Second, Cores: 2, Executed: ledger.BlockRef{Number: 41, Hash: ledger.Hash{41}}})
	for range 10 {
		chain.AddBlock(ledger.JAMBlock{})
	}
	s := &bundlerSetup{t: t, st: st, rows: testfactory.New(t, st, clk), chain: chain}
	deps := loop.Deps{Clock: clk, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	b, err := queuer.NewBundler(st, chain, deps, builder.Config{
		Pool: builder.PoolConfig{ChainID: testfactory.PoolChainID}, Ledger: builder.LedgerConfig{Timeout: 10 * time.Second},
		BundleSize: 2, MaxQueued: 10, MaxBundles: 10, Cores: 2,
	})
	require.NoError(t, err)
	s.b = b
	s.b.OnCut = func() { s.cuts++ }
	return s
}

func (s *bundlerSetup) bundles() []store.Bundle {
	s.t.Helper()
	bs, err := s.st.BundleList(s.t.Context(), store.BundleListParams{ChainID: testfactory.PoolChainID, Limit: 100})
	require.NoError(s.t, err)
	return bs
}

func TestBundler_CutsPendingTxsIntoBundlesAfterTheExecutedBlockAnchoredOnRecentBlocks(t *testing.T) {
	t.Parallel()
	s := bundlerSetupTx(t)
	txs := s.rows.AddPoolTxs(testfactory.PoolTx(1, 0, 20, 10), testfactory.PoolTx(1, 1, 20, 10), testfactory.PoolTx(2, 0, 20, 10))
	require.Equal(t, 2, s.rows.Run("bundler", s.b.RunOnce))
	require.Equal(t, 1, s.cuts, "the submitters are told once")

	bs := s.bundles()
	require.Len(t, bs, 2)
	require.Equal(t, []uint64{42, 43}, []uint64{bs[0].Number, bs[1].Number}, "the blocks after the chain's executed one")
	require.Equal(t, ledger.Hash{41}, bs[0].Parent)
	require.Equal(t, bs[0].Hash, bs[1].Parent)
	require.Equal(t, []int{2, 1}, []int{bs[0].TxCount, bs[1].TxCount})
	recent, err := s.chain.RecentBlocks(t.Context())
	require.NoError(t, err)
	for i, b := range bs {
		want, _ := ledger.PickAnchor(recent, ledger.AnchorOffset(i, 2))
		require.Equal(t, &want, b.Anchor, "bundle %d is anchored by jamduna's dynamic anchor offset", b.Number)
	}
	for _, tx := range txs {
		got, err := s.st.PoolGet(t.Context(), testfactory.PoolChainID, tx.Hash)
		require.NoError(t, err)
		require.Equal(t, store.PoolIncluded, got.State)
	}

	require.Zero(t, s.rows.Run("bundler", s.b.RunOnce), "nothing pending: nothing cut")
	require.Equal(t, 1, s.cuts, "and nobody told")
}

func TestBundler_ARoundThatCannotReadTheChainCutsNothing(t *testing.T) {
	t.Parallel()
	s := bundlerSetupTx(t)
	tx := s.rows.AddPoolTxs(testfactory.PoolTx(1, 0, 20, 10))[0]
	down := errors.New("connection refused")
	s.chain.SetError(down)
	n, err := s.b.RunOnce(t.Context())
	require.ErrorIs(t, err, down)
	require.ErrorContains(t, err, "reading the chain's info")
	require.Zero(t, n)
	require.Empty(t, s.bundles())
	require.Zero(t, s.cuts)
	got, err := s.st.PoolGet(t.Context(), testfactory.PoolChainID, tx.Hash)
	require.NoError(t, err)
	require.Equal(t, store.PoolPending, got.State, "still in the pool")

	s.chain.SetError(nil)
	require.Equal(t, 1, s.rows.Run("bundler", s.b.RunOnce), "cut once the chain answers")
}
