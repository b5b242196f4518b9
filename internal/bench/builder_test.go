package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/bench"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

func builderSetup(t *testing.T, senders, perSender int) (bench.BuilderConfig, *lockedBuffer) {
	t.Helper()
	cfg := bench.DefaultBuilderConfig()
	cfg.Node.DatabaseURL = testdb.New(t).URL
	cfg.Senders, cfg.TxsPerSender, cfg.Clients = senders, perSender, senders
	cfg.Chain.SlotLength = 200 * time.Millisecond
	cfg.Node.Builder.GuaranteeTimeout = 600 * time.Millisecond
	cfg.Node.Loops.PollInterval = 50 * time.Millisecond
	cfg.Grace = time.Minute
	progress := &lockedBuffer{}
	cfg.Progress, cfg.ProgressInterval = progress, 100*time.Millisecond
	return cfg, progress
}

func TestRunBuilder_TinyRunExecutesEveryTransactionOnceInNonceOrder(t *testing.T) {
	t.Parallel()
	cfg, progress := builderSetup(t, 3, 20)
	cfg.Node.Builder.Pool.Limits.MaxPerSender = 16 // 20 > 16 per sender: back-pressure
	rep, err := bench.RunBuilder(context.Background(), cfg)
	require.NoError(t, err)
	require.EqualValues(t, 60, rep.Accepted)
	require.EqualValues(t, 60, rep.FinalizedTxs, "every accepted transaction reached a finalized bundle")
	require.Positive(t, rep.Bundles)
	require.EqualValues(t, rep.Bundles, rep.Chain.Executed, "each finalized bundle executed once on the chain")
	require.Zero(t, rep.Chain.NonceGaps)
	require.Empty(t, rep.Problems)
	require.Contains(t, progress.String(), "accepted 60/60")
}

func TestRunBuilder_WithChainFaultsStillExecutesEveryTransactionOnce(t *testing.T) {
	t.Parallel()
	cfg, _ := builderSetup(t, 4, 10)
	cfg.Chain.NoGuarantee, cfg.Chain.LostResponse, cfg.Chain.TransientError, cfg.Chain.LateGuarantee = 0.15, 0.15, 0.15, 0.15
	cfg.Chain.Seed = 3
	rep, err := bench.RunBuilder(context.Background(), cfg)
	require.NoError(t, err)
	require.EqualValues(t, 40, rep.FinalizedTxs)
	require.Zero(t, rep.Chain.NonceGaps)
	f := rep.Chain.Faults
	require.Positive(t, f.Transient+f.LostResponse+f.NoGuarantee+f.LateGuarantee, "the run met faults")
	require.GreaterOrEqual(t, rep.Versions, rep.Bundles)
}

func TestRunBuilder_ProgressReadsTheFinalizedCountOnceEveryFiveLinesWhileSending(t *testing.T) {
	t.Parallel()
	cfg, progress := builderSetup(t, 3, 20)
	cfg.ProgressInterval = 5 * time.Millisecond
	rep, err := bench.RunBuilder(context.Background(), cfg)
	require.NoError(t, err)
	var sending, after int
	for _, l := range strings.Split(progress.String(), "\n") {
		switch {
		case !strings.Contains(l, " accepted "):
		case strings.Contains(l, "accepted 60/60"):
			after++
		default:
			sending++
		}
	}
	require.GreaterOrEqual(t, sending, 10, "progress:\n%s", progress)
	// The lines before the last acceptance read the count once every five;
	// the later ones may each read it (every line does once the clients
	// are done: the count ends the wait).
	first := (sending + 4) / 5
	require.True(t, rep.ProgressQueries >= first && rep.ProgressQueries <= first+after,
		"%d reads for %d lines while sending and %d after", rep.ProgressQueries, sending, after)
}

func TestBuilderConfig_ValidateRefusesWhatCannotRun(t *testing.T) {
	cfg := bench.DefaultBuilderConfig()
	cfg.Senders = 0
	require.ErrorContains(t, cfg.Validate(), "--senders")
	cfg = bench.DefaultBuilderConfig()
	cfg.Chain.SlotLength = 0
	require.ErrorContains(t, cfg.Validate(), "--slot-length")
}

func TestRunBuilder_BacklogFinishedSeedsFinishedRowsAndTheRunStillExecutesEachOnce(t *testing.T) {
	t.Parallel()
	cfg, _ := builderSetup(t, 3, 10)
	cfg.BacklogFinished = 250
	cfg.Node.Builder.BundleSize = 4
	rep, err := bench.RunBuilder(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, 250, rep.Seeded)
	require.EqualValues(t, 30, rep.FinalizedTxs, "the run's own transactions, not the seeded ones")
	require.Empty(t, rep.Problems)
	st, err := store.Open(t.Context(), cfg.Node.DatabaseURL)
	require.NoError(t, err)
	defer st.Close()
	var seeded, bundles int
	require.NoError(t, st.DB().QueryRow(t.Context(), `
		SELECT count(*), count(DISTINCT t.bundle_id) FROM ledgerq.pool_txs t JOIN ledgerq.bundles b ON b.id = t.bundle_id
		WHERE t.chain_id = $1 AND b.chain_id = $1 + 1 AND t.state = 'included' AND b.state = 'finalized'`,
		cfg.Node.Builder.Pool.ChainID).Scan(&seeded, &bundles))
	require.Equal(t, 250, seeded, "included in finalized bundles, on the run's chain")
	require.Equal(t, 63, bundles, "bundles of --builder-bundle-size")
}

func TestRunBuilder_CountsTheCoreWindowsOfTheBacklog(t *testing.T) {
	t.Parallel()
	cfg, _ := builderSetup(t, 8, 16)
	cfg.Node.Builder.BundleSize = 10
	rep, err := bench.RunBuilder(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, cfg.Node.Builder.Cores, rep.Cores)
	require.Positive(t, rep.Windows, "128 transactions in bundles of 10 are more than a window takes")
	require.Equal(t, rep.Windows*rep.Cores, rep.Submitted+rep.IdleCoreWindows)
	require.LessOrEqual(t, int64(rep.Submitted), rep.Versions)
}

func TestRunBuilder_BaselineGethSendsTheSameTransactionsToGeth(t *testing.T) {
	if _, err := bench.GethBinary(""); err != nil {
		t.Skipf("no geth: %v", err)
	}
	t.Parallel()
	cfg, _ := builderSetup(t, 4, 5)
	cfg.Baseline = bench.BaselineGeth
	rep, err := bench.RunBuilder(context.Background(), cfg)
	require.NoError(t, err)
	require.NotNil(t, rep.Geth)
	require.EqualValues(t, 20, rep.Geth.Accepted, "geth took every transaction")
	require.Zero(t, rep.Geth.Refused)
	require.Positive(t, rep.Geth.SendTime)
	var out strings.Builder
	require.NoError(t, rep.WriteSummary(&out))
	require.Contains(t, out.String(), "ratio:")
}
