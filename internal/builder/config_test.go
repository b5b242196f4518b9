package builder_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/store"
)

// A zero Config is a working one: every setting whose zero means nothing
// takes its default, and those are today's values.
func TestConfig_AZeroConfigTakesTheDefaultsAndIsValid(t *testing.T) {
	t.Parallel()
	c := builder.Config{}.WithDefaults()
	require.NoError(t, c.Validate())
	require.Equal(t, builder.Config{
		Ledger: builder.LedgerConfig{Kind: builder.LedgerJAM, Timeout: 5 * time.Second},
		Pool: builder.PoolConfig{
			ChainID: 1337, Limits: store.PoolLimits{MaxPending: 5120, AccountQueue: 64, TTL: time.Hour},
			MaxTxSize: 32 << 10, MinTip: big.NewInt(1_000_000_000), BlockGasLimit: 30_000_000, RPCBatchLimit: 100,
		},
		BundleSize: 100, MaxQueued: 16, Cores: 2, GuaranteeTimeout: 18 * time.Second, MaxVersions: 3,
		SubmitBackoff: time.Second, SubmitBackoffMax: 30 * time.Second, BlocksPerRound: 64, SweepSenders: 100,
		RetentionBatchSize: 1000, RetentionInterval: time.Minute,
	}, c)
	require.Equal(t, 2, c.BundlesPerRound(), "a round cuts one bundle per core")
	d := builder.Defaults()
	require.Equal(t, 1024, d.Pool.Limits.MaxQueued, "geth's global queue")
	require.Zero(t, d.Pool.Limits.MaxPerSender, "no cap on a sender's pending and queued together")
	require.Equal(t, uint64(2), d.FinalityDepth)
	require.Equal(t, jam.Config{FundDevAccounts: true}, d.Ledger.Sim)
	require.Zero(t, d.MaxBundles, "Cores, whatever it is set to")
	require.Zero(t, c.RetentionAge, "a zero age keeps bundles and pool transactions forever")
	require.Equal(t, 7*24*time.Hour, d.RetentionAge)
}

// WithDefaults keeps what is set, and zeros that are settings of their own.
func TestConfig_WithDefaultsKeepsWhatIsSet(t *testing.T) {
	t.Parallel()
	d := builder.Defaults()
	d.Pool.MinTip, d.Pool.Limits.MaxQueued, d.FinalityDepth = new(big.Int), 0, 0
	d.Pool.Limits.MaxPerSender = 16
	d.Cores, d.BundleSize = 5, 7
	c := d.WithDefaults()
	require.Zero(t, c.Pool.MinTip.Sign())
	require.Zero(t, c.Pool.Limits.MaxQueued)
	require.Equal(t, 16, c.Pool.Limits.MaxPerSender, "the builder-queue document's cap stays expressible")
	require.Zero(t, c.FinalityDepth)
	require.Equal(t, 7, c.BundleSize)
	require.Equal(t, 5, c.BundlesPerRound())
	require.NoError(t, c.Validate())
}

func TestConfig_ValidateRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*builder.Config){
		"no chain id":               func(c *builder.Config) { c.Pool.ChainID = -1 },
		"window closes after open":  func(c *builder.Config) { c.WindowOpen, c.WindowClose = time.Second, 2*time.Second },
		"backoff max below backoff": func(c *builder.Config) { c.SubmitBackoffMax = time.Millisecond },
		"negative min tip":          func(c *builder.Config) { c.Pool.MinTip = big.NewInt(-1) },
		"transaction too large":     func(c *builder.Config) { c.Pool.MaxTxSize = builder.MaxPoolTxSize + 1 },
		"negative max queued":       func(c *builder.Config) { c.Pool.Limits.MaxQueued = -1 },
		"negative max per sender":   func(c *builder.Config) { c.Pool.Limits.MaxPerSender = -1 },
		"negative account slots":    func(c *builder.Config) { c.Pool.Limits.AccountSlots = -1 },
		"no account queue":          func(c *builder.Config) { c.Pool.Limits.AccountQueue = 0 },
		"block gas limit too low":   func(c *builder.Config) { c.Pool.BlockGasLimit = 20999 },
		"negative max bundles":      func(c *builder.Config) { c.MaxBundles = -1 },
		"negative retention age":    func(c *builder.Config) { c.RetentionAge = -time.Second },
		"retention without batch":   func(c *builder.Config) { c.RetentionBatchSize = 0 },
	} {
		c := builder.Defaults()
		mutate(&c)
		require.Error(t, c.Validate(), name)
	}
	for name, mutate := range map[string]func(*builder.LedgerConfig){
		"unknown chain":        func(l *builder.LedgerConfig) { l.Kind = "bitcoin" },
		"jam without url":      func(l *builder.LedgerConfig) {},
		"ledger url not http":  func(l *builder.LedgerConfig) { l.URL = "ftp://x" },
		"evm rpc url not http": func(l *builder.LedgerConfig) { l.URL, l.EVMURL = "http://jam", "ws://evm" },
	} {
		l := builder.Defaults().Ledger
		mutate(&l)
		require.Error(t, l.Validate(), name)
	}
	l := builder.Defaults().Ledger
	l.Kind = builder.LedgerSim
	require.NoError(t, l.Validate(), "the simulated chain needs no URL")
}
