package batch_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
)

// A zero Config is a working one: every setting whose zero means nothing
// takes its default, and those are today's values.
func TestConfig_AZeroConfigTakesTheDefaultsAndIsValid(t *testing.T) {
	t.Parallel()
	c := batch.Config{}.WithDefaults()
	require.NoError(t, c.Validate())
	require.Equal(t, batch.Config{
		Ledger:      batch.LedgerConfig{Kind: batch.LedgerSim, Timeout: 30 * time.Second},
		DelayWindow: 15 * time.Second, DelayCap: 5 * time.Minute, SubmitBatchSize: 100, ClaimLease: time.Minute,
		CheckInterval: time.Second, CheckBatchSize: 500, RetentionBatchSize: 1000, RetentionInterval: time.Minute,
		TrackGrace: 10 * time.Second, ReconcileInterval: 30 * time.Second,
		Submitters: 1, VerifyWorkers: runtime.GOMAXPROCS(0), ReconcileMax: 1000, TrackMax: 100000, RecordsInFlight: 2,
	}, c)
	d := batch.Defaults()
	require.Equal(t, 500*time.Millisecond, d.FirstCheck)
	require.Equal(t, 7*24*time.Hour, d.RetentionAge)
	require.Equal(t, sim.Config{Seed: 1, CommitDelay: 500 * time.Millisecond, MaxEvents: 10000}, d.Ledger.Sim)
}

// WithDefaults keeps what is set.
func TestConfig_WithDefaultsKeepsWhatIsSet(t *testing.T) {
	t.Parallel()
	c := batch.Config{DelayWindow: time.Second, RecordsInFlight: 1}.WithDefaults()
	require.Equal(t, time.Second, c.DelayWindow)
	require.Equal(t, 1, c.RecordsInFlight)
}

func TestConfig_ValidateRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*batch.Config){
		"unknown ledger":             func(c *batch.Config) { c.Ledger.Kind = "bitcoin" },
		"sawtooth without url":       func(c *batch.Config) { c.Ledger.Kind = batch.LedgerSawtooth },
		"ledger url not http":        func(c *batch.Config) { c.Ledger.URL = "ftp://x" },
		"lease shorter than timeout": func(c *batch.Config) { c.ClaimLease = time.Second; c.Ledger.Timeout = 2 * time.Second },
		"cap below window":           func(c *batch.Config) { c.DelayCap = time.Second },
		"negative first check":       func(c *batch.Config) { c.FirstCheck = -1 },
		"negative retention":         func(c *batch.Config) { c.RetentionAge = -1 },
		"negative verify workers":    func(c *batch.Config) { c.VerifyWorkers = -1 },
	} {
		c := batch.Defaults()
		mutate(&c)
		require.Error(t, c.Validate(), name)
	}
}
