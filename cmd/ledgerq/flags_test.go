package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseFlags_EnvironmentFillsFlagsNotGivenAndTheCommandLineWins(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://from-env/db")
	t.Setenv("LEDGERQ_POLL_INTERVAL", "3s")
	t.Setenv("LEDGERQ_LOG_LEVEL", "debug")
	var o options
	fs := newFlagSet("serve", "")
	o.register(fs, true)
	require.NoError(t, parseFlags(fs, []string{"--log-level", "warn"}))
	require.Equal(t, "postgres://from-env/db", o.databaseURL)
	require.Equal(t, 3*time.Second, o.pollInterval)
	require.Equal(t, "warn", o.logLevel)
}

func TestParseFlags_BadEnvironmentValueNamesTheVariable(t *testing.T) {
	t.Setenv("LEDGERQ_POLL_INTERVAL", "soon")
	var o options
	fs := newFlagSet("serve", "")
	o.register(fs, true)
	err := parseFlags(fs, nil)
	require.ErrorContains(t, err, "LEDGERQ_POLL_INTERVAL")
}

func TestOptions_ValidateRefusesUnsafeCombinations(t *testing.T) {
	base := func() options {
		var o options
		fs := newFlagSet("serve", "")
		o.register(fs, true)
		require.NoError(t, fs.Parse(nil))
		return o
	}
	o := base()
	require.NoError(t, o.validate())
	for name, mutate := range map[string]func(*options){
		"unknown ledger":             func(o *options) { o.ledgerKind = "bitcoin" },
		"sawtooth without url":       func(o *options) { o.ledgerKind = "sawtooth" },
		"lease shorter than timeout": func(o *options) { o.claimLease = time.Second; o.ledgerTimeout = 2 * time.Second },
		"cap below window":           func(o *options) { o.delayCap = time.Second },
		"zero batch size":            func(o *options) { o.submitBatch = 0 },
	} {
		o := base()
		mutate(&o)
		require.Error(t, o.validate(), name)
	}
}

func TestUsage_ListsEveryFlagWithItsEnvironmentVariable(t *testing.T) {
	var o options
	fs := newFlagSet("serve", "summary")
	o.register(fs, true)
	var b strings.Builder
	fs.SetOutput(&b)
	fs.Usage()
	require.Contains(t, b.String(), "--database-url")
	require.Contains(t, b.String(), "DATABASE_URL or LEDGERQ_DATABASE_URL")
	require.Contains(t, b.String(), "LEDGERQ_DELAY_WINDOW")
}
