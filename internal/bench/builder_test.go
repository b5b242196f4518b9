package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/bench"
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
	cfg, progress := builderSetup(t, 3, 20) // 20 > the pool's 16 per sender: back-pressure
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

func TestBuilderConfig_ValidateRefusesWhatCannotRun(t *testing.T) {
	cfg := bench.DefaultBuilderConfig()
	cfg.Senders = 0
	require.ErrorContains(t, cfg.Validate(), "--senders")
	cfg = bench.DefaultBuilderConfig()
	cfg.Chain.SlotLength = 0
	require.ErrorContains(t, cfg.Validate(), "--slot-length")
}
