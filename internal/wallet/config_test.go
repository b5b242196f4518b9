package wallet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

func TestConfig_DefaultsAreTheLanesDefaultsAndValid(t *testing.T) {
	t.Parallel()
	c := wallet.Defaults()
	require.NoError(t, c.Validate())
	require.Equal(t, 100, c.InFlight)
	require.Equal(t, store.QueuePriority, c.QueueType)
	require.Equal(t, 10*time.Second, c.LedgerTimeout)
	require.Equal(t, 5*time.Second, c.DBTimeout)
	require.Equal(t, 5*time.Second, c.CycleBudget)
	require.Equal(t, time.Minute, c.ReplacedAfter)
	require.Equal(t, 10, c.MaxFailures)
	require.Equal(t, time.Second, c.FollowInterval)
	require.Equal(t, 250*time.Millisecond, c.HeadInterval)
	require.Equal(t, 50*time.Millisecond, c.SendLinger)
	require.Equal(t, 15*time.Second, c.RebroadcastAfter)
	require.Equal(t, time.Minute, c.WatchAfter)
	require.Equal(t, 5*time.Minute, c.StallTimeout)
	require.Equal(t, 50, c.MaxRecycled)
	require.Equal(t, 5*time.Minute, c.BalanceMaxAge)
	require.Equal(t, 3, c.MaxReplacements)
	require.Equal(t, uint64(50_000), c.RestoreLookback)
	require.Zero(t, c.ResetGap, "0: InFlight, whatever InFlight is set to later")
	require.Zero(t, c.Confirmations, "0: by chain")
	require.Nil(t, c.PriceCap)
	require.Equal(t, clock.Real{}, c.Clock)
	require.NotNil(t, c.Logger)
}

// WithDefaults fills only the settings whose zero cannot work; a zero that
// means something (off, at once, none) keeps its meaning, in a zero Config
// and in one set to zero after Defaults (a flag, a file, a test).
func TestConfig_WithDefaultsKeepsAZeroThatMeansSomething(t *testing.T) {
	t.Parallel()
	zero := wallet.Config{}.WithDefaults()
	c := wallet.Defaults()
	c.SendLinger, c.HeadInterval, c.WatchAfter, c.ReplacedAfter = 0, 0, 0, 0
	c.RestoreLookback, c.MaxRecycled, c.MaxReplacements = 0, 0, 0
	c.InFlight, c.StallTimeout = 0, 0
	c = c.WithDefaults()
	require.Equal(t, zero, c, "a zero Config and Defaults with its meaningful zeros set read the same")
	require.NoError(t, c.Validate())
	require.Zero(t, c.SendLinger, "0: every send at once")
	require.Zero(t, c.HeadInterval, "0: no head watcher")
	require.Zero(t, c.WatchAfter, "0: only while it has work")
	require.Zero(t, c.ReplacedAfter, "0: replaced at once")
	require.Zero(t, c.RestoreLookback, "0: never read blocks one by one")
	require.Zero(t, c.MaxRecycled)
	require.Zero(t, c.MaxReplacements, "0: a replaced task ends in error at once")
	require.Equal(t, 100, c.InFlight, "a zero that cannot work takes the default")
	require.Equal(t, 5*time.Minute, c.StallTimeout)
}

func TestConfig_TheJobAndTheRoleStepsBuildFromAZeroConfig(t *testing.T) {
	t.Parallel()
	st := &store.Store{}
	led := evmsim.New(evmsim.Config{ChainID: chainID})
	reg, err := keystore.NewRegistry()
	require.NoError(t, err)
	_, err = wallet.NewJob(st, led, reg, wallet.Config{}, walletSteps(t, st, led, wallet.Config{}))
	require.NoError(t, err)

	_, err = wallet.NewJob(st, led, reg, wallet.Config{InFlight: -1}, walletSteps(t, st, led, wallet.Config{}))
	require.Error(t, err, "WithDefaults fills zeros only: Validate still refuses what cannot work")
}
