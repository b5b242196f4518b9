package main

import (
	"flag"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/ratelimit"
	"github.com/ledgerq/ledgerq/internal/store"
)

func serveFlags(cfg *node.Config) *flag.FlagSet {
	fs := newFlagSet("serve", "summary")
	registerConfig(fs, cfg, flagParts{api: true, roles: true, ledger: true})
	return fs
}

// parseServe parses args (and the environment, and file when set) into
// cfg as serve does.
func parseServe(cfg *node.Config, args []string, file string) error {
	reg := registerConfig(newFlagSet("serve", "summary"), cfg, flagParts{api: true, roles: true, ledger: true})
	return reg.Parse(args, func() string { return file })
}

func TestParseFlags_EnvironmentFillsFlagsNotGivenAndTheCommandLineWins(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://from-env/db")
	t.Setenv("LEDGERQ_POLL_INTERVAL", "3s")
	t.Setenv("LEDGERQ_BATCH_DELAY_WINDOW", "7s")
	cfg := node.Defaults()
	require.NoError(t, parseServe(&cfg, []string{"--batch-delay-window", "9s"}, ""))
	require.Equal(t, "postgres://from-env/db", cfg.DatabaseURL)
	require.Equal(t, 3*time.Second, cfg.Loops.PollInterval)
	require.Equal(t, 9*time.Second, cfg.Batch.DelayWindow)
}

func TestParseFlags_BadEnvironmentValueNamesTheVariable(t *testing.T) {
	t.Setenv("LEDGERQ_POLL_INTERVAL", "soon")
	cfg := node.Defaults()
	err := parseServe(&cfg, nil, "")
	require.ErrorContains(t, err, "LEDGERQ_POLL_INTERVAL")
}

// Every setting has one flag, and the flag reaches the one field it names:
// each flag below changes exactly the field beside it and nothing else.
func TestRegisterConfig_EachFlagSetsItsOneField(t *testing.T) {
	for flagArgs, want := range map[string]func(c *node.Config){
		"--batch-claim-lease=2m":           func(c *node.Config) { c.Batch.ClaimLease = 2 * time.Minute },
		"--batch-first-check=3s":           func(c *node.Config) { c.Batch.FirstCheck = 3 * time.Second },
		"--batch-delay-window=20s":         func(c *node.Config) { c.Batch.DelayWindow = 20 * time.Second },
		"--batch-ledger=sawtooth":          func(c *node.Config) { c.Batch.Ledger.Kind = "sawtooth" },
		"--batch-ledger-url=http://x":      func(c *node.Config) { c.Batch.Ledger.URL = "http://x" },
		"--batch-ledger-timeout=5s":        func(c *node.Config) { c.Batch.Ledger.Timeout = 5 * time.Second },
		"--batch-submit-batch-size=7":      func(c *node.Config) { c.Batch.SubmitBatchSize = 7 },
		"--batch-check-batch-size=8":       func(c *node.Config) { c.Batch.CheckBatchSize = 8 },
		"--poll-interval=2s":               func(c *node.Config) { c.Loops.PollInterval = 2 * time.Second },
		"--monitor=false":                  func(c *node.Config) { c.Loops.Monitor = false },
		"--batch-sim-commit-delay=1s":      func(c *node.Config) { c.Batch.Ledger.Sim.CommitDelay = time.Second },
		"--api-max-batches-per-request=3":  func(c *node.Config) { c.API.MaxBatchesPerRequest = 3 },
		"--shutdown-timeout=1s":            func(c *node.Config) { c.ShutdownTimeout = time.Second },
		"--api-addr=127.0.0.1:9":           func(c *node.Config) { c.API.Addr = "127.0.0.1:9" },
		"--api-request-timeout=2s":         func(c *node.Config) { c.API.RequestTimeout = 2 * time.Second },
		"--api-read-header-timeout=3s":     func(c *node.Config) { c.API.ReadHeaderTimeout = 3 * time.Second },
		"--api-read-timeout=4s":            func(c *node.Config) { c.API.ReadTimeout = 4 * time.Second },
		"--api-write-timeout=6s":           func(c *node.Config) { c.API.WriteTimeout = 6 * time.Second },
		"--api-idle-timeout=7s":            func(c *node.Config) { c.API.IdleTimeout = 7 * time.Second },
		"--api-max-connections=9":          func(c *node.Config) { c.API.MaxConnections = 9 },
		"--database-url=postgres://db":     func(c *node.Config) { c.DatabaseURL = "postgres://db" },
		"--database-min-conns=3":           func(c *node.Config) { c.DBMinConns = 3 },
		"--database-migrate=false":         func(c *node.Config) { c.Migrate = false },
		"--api-enabled=false":              func(c *node.Config) { c.API.Enabled = false },
		"--db-timeout=3s":                  func(c *node.Config) { c.Loops.DBTimeout = 3 * time.Second },
		"--wallet-keystore=a=a.json":       func(c *node.Config) { c.Wallet.Keystores = keystore.KeystoreSpecs{{Name: "a", Path: "a.json"}} },
		"--wallet-passphrase-file=p":       func(c *node.Config) { _ = c.Wallet.PassphraseFiles.Set("p") },
		"--wallet-ledger=sim":              func(c *node.Config) { c.Wallet.Ledger.Kind = "sim" },
		"--wallet-ledger-url=http://n":     func(c *node.Config) { c.Wallet.Ledger.URL = "http://n" },
		"--wallet-queue-type=fifo":         func(c *node.Config) { c.Wallet.Lane.QueueType = store.QueueFIFO },
		"--wallet-in-flight=7":             func(c *node.Config) { c.Wallet.Lane.InFlight = 7 },
		"--wallet-send-linger=0":           func(c *node.Config) { c.Wallet.Lane.SendLinger = 0 },
		"--wallet-price-cap=5":             func(c *node.Config) { c.Wallet.Lane.PriceCap = big.NewInt(5) },
		"--wallet-restore-lookback=9":      func(c *node.Config) { c.Wallet.Lane.RestoreLookback = 9 },
		"--wallet-send-tx-max-wait=2s":     func(c *node.Config) { c.API.TaskMaxWait = 2 * time.Second },
		"--wallet-max-fee-per-gas=9":       func(c *node.Config) { c.API.MaxFeePerGas = big.NewInt(9) },
		"--wallet-retention-age=1h":        func(c *node.Config) { c.Wallet.RetentionAge = time.Hour },
		"--wallet-webhook-backoff=2s":      func(c *node.Config) { c.Wallet.Webhooks.BackoffBase = 2 * time.Second },
		"--wallet-webhook-timeout=3s":      func(c *node.Config) { c.Wallet.Webhooks.RequestTimeout = 3 * time.Second },
		"--shard-workers=3":                func(c *node.Config) { c.Wallet.Shards.Workers = 3 },
		"--shard-rescue-interval=2s":       func(c *node.Config) { c.Wallet.Shards.RescueInterval = 2 * time.Second },
		"--shard-backoff=2s":               func(c *node.Config) { c.Wallet.Shards.Backoff = 2 * time.Second },
		"--shard-max-backoff=2m":           func(c *node.Config) { c.Wallet.Shards.MaxBackoff = 2 * time.Minute },
		"--shard-unavailable-backoff=5s":   func(c *node.Config) { c.Wallet.Shards.UnavailableBackoff = 5 * time.Second },
		"--wallet-webhook-allow-private":   func(c *node.Config) { c.Wallet.Webhooks.AllowPrivate = true },
		"--wallet-webhook-max-endpoints=7": func(c *node.Config) { c.API.Webhooks.MaxEndpoints = 7 },
		"--api-insecure-open":              func(c *node.Config) { c.API.Access.Open = true },
		"--api-metrics-open":               func(c *node.Config) { c.API.Access.MetricsOpen = true },
		"--api-sawtooth-require-key":       func(c *node.Config) { c.API.Access.SawtoothRequireKey = true },
		"--api-rpc-require-key":            func(c *node.Config) { c.API.Access.RPCRequireKey = true },
		"--api-tls-cert-file=c.pem":        func(c *node.Config) { c.API.TLSCertFile = "c.pem" },
		"--api-tls-key-file=k.pem":         func(c *node.Config) { c.API.TLSKeyFile = "k.pem" },
		"--api-rate-limit=5/s:10": func(c *node.Config) {
			c.API.Access.RateLimits.Key = ratelimit.Rate{Count: 5, Period: time.Second, Burst: 10}
		},
		"--api-rate-limit-anonymous=0": func(c *node.Config) { c.API.Access.RateLimits.Anonymous = ratelimit.Rate{} },
		"--api-rate-limit-scope=read=60/m:5": func(c *node.Config) {
			c.API.Access.RateLimits.Scopes = map[string]ratelimit.Rate{"read": {Count: 60, Period: time.Minute, Burst: 5}}
		},
	} {
		got, expected := node.Defaults(), node.Defaults()
		require.NoError(t, parseServe(&got, []string{flagArgs}, ""), flagArgs)
		want(&expected)
		require.Equal(t, expected, got, flagArgs)
	}
}

func TestConfig_ValidateRefusesUnsafeCombinations(t *testing.T) {
	base := func() node.Config {
		c := node.Defaults()
		c.DatabaseURL = "postgres://db"
		return c
	}
	c := base()
	require.NoError(t, c.Validate())
	for name, mutate := range map[string]func(*node.Config){
		"no database":                func(c *node.Config) { c.DatabaseURL = "" },
		"unknown ledger":             func(c *node.Config) { c.Batch.Ledger.Kind = "bitcoin" },
		"sawtooth without url":       func(c *node.Config) { c.Batch.Ledger.Kind = "sawtooth" },
		"ledger url not http":        func(c *node.Config) { c.Batch.Ledger.URL = "ftp://x" },
		"lease shorter than timeout": func(c *node.Config) { c.Batch.ClaimLease = time.Second; c.Batch.Ledger.Timeout = 2 * time.Second },
		"cap below window":           func(c *node.Config) { c.Batch.DelayCap = time.Second },
		"zero batch size":            func(c *node.Config) { c.Batch.SubmitBatchSize = 0 },
		"zero poll interval":         func(c *node.Config) { c.Loops.PollInterval = 0 },
		"no submitter loop":          func(c *node.Config) { c.Batch.Submitters = 0 },
		"zero request timeout":       func(c *node.Config) { c.API.RequestTimeout = 0 },
		"zero idle timeout":          func(c *node.Config) { c.API.IdleTimeout = 0 },
		"header timeout over read":   func(c *node.Config) { c.API.ReadHeaderTimeout = time.Minute },
		"no connections":             func(c *node.Config) { c.API.MaxConnections = 0 },
		"certificate without key":    func(c *node.Config) { c.API.TLSCertFile = "cert.pem" },
		"key without certificate":    func(c *node.Config) { c.API.TLSKeyFile = "key.pem" },
	} {
		c := base()
		mutate(&c)
		require.Error(t, c.Validate(), name)
	}
}

func TestUsage_ListsEveryFlagWithItsEnvironmentVariable(t *testing.T) {
	cfg := node.Defaults()
	fs := serveFlags(&cfg)
	var b strings.Builder
	fs.SetOutput(&b)
	fs.Usage()
	require.Contains(t, b.String(), "--database-url")
	require.Contains(t, b.String(), "DATABASE_URL or LEDGERQ_DATABASE_URL")
	require.Contains(t, b.String(), "LEDGERQ_BATCH_DELAY_WINDOW")
	require.Contains(t, b.String(), "LEDGERQ_BATCH_LEDGER_URL")
}

// ledgerq dev's webhook receivers are on loopback: it allows non-public
// targets unless told otherwise; serve does not.
func TestDevConfig_AllowsPrivateWebhookTargetsByDefault(t *testing.T) {
	require.False(t, node.Defaults().Wallet.Webhooks.AllowPrivate, "serve refuses non-public webhook targets by default")
	cfg := devDefaults()
	require.True(t, cfg.Wallet.Webhooks.AllowPrivate)
	fs := newFlagSet("dev", "summary")
	reg := registerConfig(fs, &cfg, flagParts{api: true, roles: true})
	require.NoError(t, reg.Parse([]string{"--wallet-webhook-allow-private=false"}, func() string { return "" }))
	require.False(t, cfg.Wallet.Webhooks.AllowPrivate)
}
