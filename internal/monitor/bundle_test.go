package monitor_test

// BundleMonitor rules of the builder lane (jamduna's bundle queue): what one
// round makes of the chain's blocks, of a guarantee that does not come, and
// of the pool's expired transactions, on a chain the test moves
// (ledgertest.BundleLedger). Each test runs in a rolled-back transaction
// with a fake clock.

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

const bundleCores = 2

// bundleSetup is what a BundleMonitor rule test needs: a chain with ten
// blocks and a monitor with jamduna's guarantee timeout and a finality depth of 2,
// counting its OnCoresFreed and OnDropped calls.
type bundleSetup struct {
	t              *testing.T
	st             *store.Store
	clock          *clock.Fake
	rows           *testfactory.Factory
	chain          *ledgertest.BundleLedger
	cfg            builder.Config
	m              *monitor.BundleMonitor
	freed, dropped int
}

func bundleSetupTx(t *testing.T) *bundleSetup {
	t.Helper()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	chain := &ledgertest.BundleLedger{}
	for range 10 {
		chain.AddBlock(ledger.JAMBlock{})
	}
	s := &bundleSetup{t: t, st: st, clock: clk, rows: testfactory.New(t, st, clk), chain: chain, cfg: builder.Config{
		Pool: builder.PoolConfig{ChainID: testfactory.PoolChainID}, Ledger: builder.LedgerConfig{Timeout: 10 * time.Second},
		FinalityDepth: 2, GuaranteeTimeout: 18 * time.Second, MaxVersions: 3,
	}}
	deps := loop.Deps{Clock: clk, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))}
	m, err := monitor.NewBundleMonitor(st, chain, deps, s.cfg)
	require.NoError(t, err)
	s.m = m
	s.m.OnCoresFreed = func() { s.freed++ }
	s.m.OnDropped = func() { s.dropped++ }
	require.NoError(t, st.BundleEnsureCores(t.Context(), testfactory.PoolChainID, bundleCores, clk.Now()))
	return s
}

// submitted makes one bundle of one transaction and submits it, as the
// bundler and a submitter do; it returns the submitted package's hash.
func (s *bundleSetup) submitted() ledger.Hash {
	s.t.Helper()
	recent, err := s.chain.RecentBlocks(s.t.Context())
	require.NoError(s.t, err)
	s.rows.AddPoolTxs(testfactory.PoolTx(1, 0, 20, 10))
	require.Len(s.t, s.rows.CutBundles(store.BundleCutParams{Recent: recent, Cores: bundleCores}), 1)
	c, err := s.st.BundleClaim(s.t.Context(), store.BundleClaimParams{ChainID: testfactory.PoolChainID, Recent: recent, Cores: bundleCores, Now: s.clock.Now()})
	require.NoError(s.t, err)
	require.NotNil(s.t, c)
	require.NoError(s.t, s.st.BundleSubmitResult(s.t.Context(), store.BundleSubmitResultParams{
		ChainID: testfactory.PoolChainID, PackageHash: c.PackageHash(), Now: s.clock.Now(), MinBackoff: time.Second, MaxBackoff: time.Minute,
	}))
	return c.PackageHash()
}

func (s *bundleSetup) bundle() store.Bundle {
	s.t.Helper()
	b, err := s.st.BundleGet(s.t.Context(), testfactory.PoolChainID, 1)
	require.NoError(s.t, err)
	return b
}

func (s *bundleSetup) runOnce() int {
	s.t.Helper()
	return s.rows.Run("bundle monitor", s.m.RunOnce)
}

func TestBundleMonitor_ANewDatabaseStartsAtTheOldestRecentBlockAndImportsEachBlockOnce(t *testing.T) {
	t.Parallel()
	s := bundleSetupTx(t)
	require.Equal(t, ledger.RecentHistorySize, s.runOnce(), "blocks 3..10: no older block can hold a package of ours")
	slot, ok, err := s.st.BundleProcessedSlot(t.Context(), testfactory.PoolChainID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(10), slot)
	require.Zero(t, s.runOnce(), "no new block")
	s.chain.AddBlock(ledger.JAMBlock{})
	s.chain.AddBlock(ledger.JAMBlock{})
	require.Equal(t, 2, s.runOnce(), "every block since the last one, not only the head")
}

func TestBundleMonitor_FollowsAGuaranteeAnAccumulationAndFinality(t *testing.T) {
	t.Parallel()
	s := bundleSetupTx(t)
	s.runOnce()
	pkg := s.submitted()
	require.Equal(t, store.BundleSubmitted, s.bundle().State)

	s.chain.AddBlock(ledger.JAMBlock{Guarantees: []ledger.Hash{pkg}})
	require.Equal(t, 1, s.runOnce())
	b := s.bundle()
	require.Equal(t, store.BundleGuaranteed, b.State)
	require.Nil(t, b.Core, "its core is free")
	require.Equal(t, 1, s.freed, "the submitters are told")

	acc := s.chain.AddBlock(ledger.JAMBlock{Accumulations: []ledger.Hash{pkg}})
	s.runOnce()
	b = s.bundle()
	require.Equal(t, store.BundleAccumulated, b.State)
	require.Equal(t, acc.Slot, *b.AccumulatedSlot)
	s.chain.AddBlock(ledger.JAMBlock{})
	s.runOnce()
	require.Equal(t, store.BundleAccumulated, s.bundle().State, "one block deep")
	s.chain.AddBlock(ledger.JAMBlock{})
	s.runOnce()
	require.Equal(t, store.BundleFinalized, s.bundle().State, "the finality depth deep")
	require.Equal(t, 1, s.freed)
}

func TestBundleMonitor_ABundleWithoutAGuaranteeIsRequeuedAfterTheTimeout(t *testing.T) {
	t.Parallel()
	s := bundleSetupTx(t)
	s.runOnce()
	s.submitted()
	s.clock.Advance(s.cfg.GuaranteeTimeout - time.Second)
	s.runOnce()
	require.Equal(t, store.BundleSubmitted, s.bundle().State, "still within the timeout")
	require.Zero(t, s.freed)

	s.clock.Advance(time.Second)
	s.runOnce()
	b := s.bundle()
	require.Equal(t, store.BundleQueued, b.State)
	require.Equal(t, 2, b.Version, "requeued as the next version")
	require.Equal(t, 1, s.freed, "its core is free for the submitters")
	require.Zero(t, s.dropped)
}

func TestBundleMonitor_SweepsThePoolsExpiredTransactions(t *testing.T) {
	t.Parallel()
	s := bundleSetupTx(t)
	tx := s.rows.AddPoolTxs(testfactory.PoolTx(1, 0, 20, 10))[0]
	s.clock.Set(tx.ExpiresAt)
	s.runOnce()
	got, err := s.st.PoolGet(t.Context(), testfactory.PoolChainID, tx.Hash)
	require.NoError(t, err)
	require.Equal(t, store.PoolDropped, got.State)
	require.Equal(t, store.PoolDropExpired, got.DropReason)
}

func TestBundleMonitor_ARoundThatCannotReadTheChainAppliesNothing(t *testing.T) {
	t.Parallel()
	s := bundleSetupTx(t)
	down := errors.New("connection refused")
	s.chain.SetError(down)
	n, err := s.m.RunOnce(t.Context())
	require.ErrorIs(t, err, down)
	require.Zero(t, n)
	_, ok, err := s.st.BundleProcessedSlot(t.Context(), testfactory.PoolChainID)
	require.NoError(t, err)
	require.False(t, ok, "no block was processed")
}

// skipSetup is bundleSetupTx with a monitor whose metrics and warnings the
// test reads.
func skipSetup(t *testing.T) (*bundleSetup, *metrics.Metrics, *bytes.Buffer) {
	t.Helper()
	s := bundleSetupTx(t)
	met, logs := metrics.New(), &bytes.Buffer{}
	deps := loop.Deps{Clock: s.clock, Metrics: met, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	m, err := monitor.NewBundleMonitor(s.st, s.chain, deps, s.cfg)
	require.NoError(t, err)
	m.OnCoresFreed = func() { s.freed++ }
	m.OnDropped = func() { s.dropped++ }
	s.m = m
	return s, met, logs
}

// A transaction the chain left out of its executed bundle is dropped with
// the chain's reason, logged at warn with its sender, nonce and the reason,
// and counted as a pool transition "skipped"; its bundle still finalizes.
func TestBundleMonitor_ATransactionTheChainSkippedIsDroppedLoggedAndCounted(t *testing.T) {
	t.Parallel()
	s, met, logs := skipSetup(t)
	s.runOnce()
	pkg := s.submitted()
	tx := testfactory.PoolTx(1, 0, 20, 10)
	h, _ := ledger.ParseHash(tx.Hash)
	const reason = "insufficient funds for gas * price + value: address 0x000000000000000000000000000000000000a001 have 0 want 420001"
	s.chain.AddBlock(ledger.JAMBlock{Guarantees: []ledger.Hash{pkg}})
	s.chain.AddBlock(ledger.JAMBlock{Accumulations: []ledger.Hash{pkg}, Skipped: []ledger.SkippedTx{{Package: pkg, Tx: h, Reason: reason}}})
	require.Equal(t, 2, s.runOnce())

	got, err := s.st.PoolGet(t.Context(), testfactory.PoolChainID, tx.Hash)
	require.NoError(t, err)
	require.Equal(t, store.PoolDropped, got.State)
	require.Equal(t, store.PoolDropSkipped, got.DropReason)
	require.Equal(t, reason, got.ChainReason)
	require.Equal(t, int64(1), met.TransitionCount("pool", "skipped"))
	for _, want := range []string{"level=WARN", "the chain skipped a pool transaction", "tx_hash=" + tx.Hash, "sender=" + tx.Sender, "nonce=0", reason} {
		require.Contains(t, logs.String(), want)
	}
	require.Zero(t, s.dropped, "nothing went back to the pool")
	s.chain.AddBlock(ledger.JAMBlock{})
	s.chain.AddBlock(ledger.JAMBlock{})
	s.runOnce()
	require.Equal(t, store.BundleFinalized, s.bundle().State)
}

// One skipped for a nonce gap goes back to the pool and the bundler is
// woken; it is not counted as dropped. (Nothing below its nonce is missing
// in the pool's view, so it is pending again at once.)
func TestBundleMonitor_ATransactionSkippedForANonceGapGoesBackToThePoolAndTheBundlerIsWoken(t *testing.T) {
	t.Parallel()
	s, met, _ := skipSetup(t)
	s.runOnce()
	pkg := s.submitted()
	tx := testfactory.PoolTx(1, 0, 20, 10)
	h, _ := ledger.ParseHash(tx.Hash)
	s.chain.AddBlock(ledger.JAMBlock{Guarantees: []ledger.Hash{pkg}})
	s.chain.AddBlock(ledger.JAMBlock{Accumulations: []ledger.Hash{pkg}, Skipped: []ledger.SkippedTx{{Package: pkg, Tx: h, Reason: "nonce too high", NonceGap: true}}})
	s.runOnce()
	got, err := s.st.PoolGet(t.Context(), testfactory.PoolChainID, tx.Hash)
	require.NoError(t, err)
	require.Equal(t, store.PoolPending, got.State)
	require.Nil(t, got.BundleBlock)
	require.Equal(t, 1, s.dropped, "the bundler is told")
	require.Zero(t, met.TransitionCount("pool", "skipped"))
}
