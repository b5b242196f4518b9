package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/policy"
	"github.com/ledgerq/ledgerq/internal/store"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ledgerq.yaml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

func TestConfigCheck_TheExampleFileIsValid(t *testing.T) {
	var out strings.Builder
	require.NoError(t, configCheck([]string{"--config", "../../deploy/ledgerq.example.yaml"}, &out))
	require.Contains(t, out.String(), "ledger-url: http://sawtooth-rest-api:8008")
	require.Contains(t, out.String(), "delay-window: 15s")
	require.Contains(t, out.String(), "api:\n  enabled: true\n  addr: 0.0.0.0:8080\n")
	require.Contains(t, out.String(), "  chain: name=mainnet,chain-id=1,node=***,node=***,confirmations=12;name=base,chain-id=8453,node=***,send-only=***,min-tip=1000000\n",
		"the chains as declared, their nodes' URLs (which may hold keys) hidden")
}

func TestConfigCheck_PrintsTheEffectiveConfigurationWithSecretsRedacted(t *testing.T) {
	file := writeFile(t, "database-url: postgres://ledgerq:hunter2@db/ledgerq\nbatch:\n  delay-window: 20s\n")
	var out strings.Builder
	require.NoError(t, configCheck([]string{"--config", file}, &out))
	require.NotContains(t, out.String(), "hunter2")
	require.Contains(t, out.String(), "database-url: postgres://ledgerq:xxxxx@db/ledgerq")
	require.Contains(t, out.String(), "batch:\n")
	require.Contains(t, out.String(), "  delay-window: 20s\n")
	require.Contains(t, out.String(), "  claim-lease: 1m0s\n", "every setting, defaults too")

	// What it prints is a configuration file that gives the same settings.
	var again strings.Builder
	require.NoError(t, configCheck([]string{"--config", writeFile(t, out.String())}, &again))
	require.Equal(t, out.String(), again.String())
}

func TestConfigCheck_RefusesAnInvalidFileSayingWhy(t *testing.T) {
	for text, want := range map[string]string{
		"batch:\n  delay-windw: 20s\n":        ":2: unknown setting batch.delay-windw",
		"batch:\n  delay-window: soon\n":      ":2: batch.delay-window",
		"batch:\n  delay-cap: 1s\n":           "--batch-delay-window must be positive and --batch-delay-cap at least as long",
		"batch: 3\n":                          "batch: want a mapping",
		"nosuch: 1\n":                         ":1: unknown setting nosuch",
		"loops:\n  queuer: [true, false\n":    "yaml",
		"api:\n  rate-limit-scope: [x=1/s]\n": "rate-limit-scope",
	} {
		err := configCheck([]string{"--config", writeFile(t, text)}, &strings.Builder{})
		require.ErrorContains(t, err, want, text)
	}
}

// defaults < file < environment < command line.
func TestParse_TheFileIsOverriddenByTheEnvironmentAndTheCommandLine(t *testing.T) {
	file := writeFile(t, "loops:\n  poll-interval: 2s\n  db-timeout: 3s\nbatch:\n  delay-window: 4s\n  claim-lease: 5m\n  first-check: 6s\n")
	t.Setenv("LEDGERQ_DB_TIMEOUT", "7s")
	t.Setenv("LEDGERQ_CLAIM_LEASE", "8m") // an old name still works
	cfg := node.Defaults()
	require.NoError(t, parseServe(&cfg, []string{"--batch-delay-window=9s"}, file))
	require.Equal(t, 2*time.Second, cfg.Loops.PollInterval, "file")
	require.Equal(t, 6*time.Second, cfg.Batch.FirstCheck, "file")
	require.Equal(t, 7*time.Second, cfg.Loops.DBTimeout, "environment over file")
	require.Equal(t, 8*time.Minute, cfg.Batch.ClaimLease, "environment (old name) over file")
	require.Equal(t, 9*time.Second, cfg.Batch.DelayWindow, "command line over file")
}

// Every batch-lane flag took the prefix --batch-; its old name still sets
// it, on the command line and in the environment, and says once that it
// is deprecated.
func TestParse_OldBatchNamesAreDeprecatedAliases(t *testing.T) {
	t.Setenv("LEDGERQ_RETENTION_AGE", "1h")
	cfg := node.Defaults()
	fs := newFlagSet("serve", "summary")
	reg := registerConfig(fs, &cfg, flagParts{api: true, roles: true, ledger: true})
	require.NoError(t, reg.Parse([]string{"--delay-window=20s", "--delay-window=21s", "--sim-verify=false"}, func() string { return "" }))
	require.Equal(t, 21*time.Second, cfg.Batch.DelayWindow)
	require.True(t, cfg.Batch.Ledger.Sim.SkipVerify)
	require.Equal(t, time.Hour, cfg.Batch.RetentionAge)
	require.ElementsMatch(t, []string{
		"flag --delay-window is deprecated: use --batch-delay-window",
		"flag --sim-verify is deprecated: use --batch-sim-verify",
		"environment variable LEDGERQ_RETENTION_AGE is deprecated: use LEDGERQ_BATCH_RETENTION_AGE",
	}, reg.Deprecations())
	// The new environment variable wins over the old one.
	t.Setenv("LEDGERQ_BATCH_RETENTION_AGE", "2h")
	cfg = node.Defaults()
	require.NoError(t, parseServe(&cfg, nil, ""))
	require.Equal(t, 2*time.Hour, cfg.Batch.RetentionAge)

	var usage strings.Builder
	fs.SetOutput(&usage)
	fs.Usage()
	require.Contains(t, usage.String(), "--batch-delay-window")
	require.NotContains(t, usage.String(), "--delay-window", "usage lists the new names only")
}

// Every builder-lane flag took the prefix --builder-; its old name still
// sets it, on the command line and in the environment, and says once that
// it is deprecated. The names that had the prefix and the file's keys are
// unchanged.
func TestParse_OldBuilderNamesAreDeprecatedAliases(t *testing.T) {
	t.Setenv("LEDGERQ_GUARANTEE_TIMEOUT", "20s")
	file := writeFile(t, "builder:\n  builder: true\n  ledger-url: http://jam:19800\n  pool-ttl: 2h\n  cores: 3\n")
	cfg := node.Defaults()
	fs := newFlagSet("serve", "summary")
	reg := registerConfig(fs, &cfg, flagParts{api: true, roles: true, ledger: true})
	require.NoError(t, reg.Parse([]string{"--bundle-size=8", "--bundle-size=9", "--pool-min-tip=0", "--builder-chain-id=4242"}, func() string { return file }))
	require.Equal(t, 9, cfg.Builder.BundleSize)
	require.Zero(t, cfg.Builder.Pool.MinTip.Sign())
	require.Equal(t, 20*time.Second, cfg.Builder.GuaranteeTimeout)
	require.Equal(t, int64(4242), cfg.Builder.Pool.ChainID)
	require.True(t, cfg.Builder.Enabled, "file")
	require.Equal(t, 2*time.Hour, cfg.Builder.Pool.Limits.TTL, "file")
	require.Equal(t, 3, cfg.Builder.Cores, "file")
	require.NoError(t, cfg.ValidateSettings())
	require.ElementsMatch(t, []string{
		"flag --bundle-size is deprecated: use --builder-bundle-size",
		"flag --pool-min-tip is deprecated: use --builder-pool-min-tip",
		"environment variable LEDGERQ_GUARANTEE_TIMEOUT is deprecated: use LEDGERQ_BUILDER_GUARANTEE_TIMEOUT",
	}, reg.Deprecations())

	var usage strings.Builder
	fs.SetOutput(&usage)
	fs.Usage()
	require.Contains(t, usage.String(), "--builder-pool-ttl")
	require.NotContains(t, usage.String(), "--pool-ttl", "usage lists the new names only")
}

// The shared parts' and the wallet lane's flags took their section's
// prefix (--api-*, --wallet-*, --database-*); each old name still sets its
// setting, on the command line and in the environment, and says once that
// it is deprecated.
func TestParse_OldNamesOfTheSharedPartsAndTheWalletLaneAreDeprecatedAliases(t *testing.T) {
	cfg := node.Defaults()
	reg := registerConfig(newFlagSet("serve", "summary"), &cfg, flagParts{api: true, roles: true, ledger: true})
	for n, old := range renamed {
		require.Equal(t, n, reg.Lookup(old).Flag, "--%s", old)
		require.True(t, reg.IsAlias(old), "--%s", old)
	}

	t.Setenv("LEDGERQ_HTTP_ADDR", "127.0.0.1:9")
	t.Setenv("LEDGERQ_WALLET", "a=a.json")
	cfg = node.Defaults()
	reg = registerConfig(newFlagSet("serve", "summary"), &cfg, flagParts{api: true, roles: true, ledger: true})
	require.NoError(t, reg.Parse([]string{"--send-tx-queue-type=fifo", "--webhook-timeout=3s", "--insecure-open", "--migrate=false"}, func() string { return "" }))
	require.Equal(t, "127.0.0.1:9", cfg.API.Addr)
	require.Equal(t, keystore.KeystoreSpecs{{Name: "a", Path: "a.json"}}, cfg.Wallet.Keystores)
	require.Equal(t, store.QueueFIFO, cfg.Wallet.Lane.QueueType)
	require.Equal(t, 3*time.Second, cfg.Wallet.Webhooks.RequestTimeout)
	require.True(t, cfg.API.Access.Open)
	require.False(t, cfg.Migrate)
	require.ElementsMatch(t, []string{
		"flag --send-tx-queue-type is deprecated: use --wallet-queue-type",
		"flag --webhook-timeout is deprecated: use --wallet-webhook-timeout",
		"flag --insecure-open is deprecated: use --api-insecure-open",
		"flag --migrate is deprecated: use --database-migrate",
		"environment variable LEDGERQ_HTTP_ADDR is deprecated: use LEDGERQ_API_ADDR",
		"environment variable LEDGERQ_WALLET is deprecated: use LEDGERQ_WALLET_KEYSTORE",
	}, reg.Deprecations())
}

// The file takes the wallet lane's and the shards' settings under their
// sections, and config check prints them there.
func TestConfigCheck_TheWalletAndShardsSections(t *testing.T) {
	file := writeFile(t, "wallet:\n  ledger-url: http://u:secret@geth:8545\n  queue-type: fifo\n  price-cap: 7\n  webhook-max-endpoints: 3\nshards:\n  lease: 40s\n")
	var out strings.Builder
	require.NoError(t, configCheck([]string{"--config", file}, &out))
	require.Contains(t, out.String(), "wallet:\n  ledger: evm\n  ledger-url: http://u:xxxxx@geth:8545\n")
	require.Contains(t, out.String(), "  queue-type: fifo\n")
	require.Contains(t, out.String(), "  price-cap: 7\n")
	require.Contains(t, out.String(), "  webhook-max-endpoints: 3\n")
	require.Contains(t, out.String(), "shards:\n  workers: ")
	require.Contains(t, out.String(), "  lease: 40s\n")
	require.NotContains(t, out.String(), "secret")
}

// --wallet-policy is a list of mappings in the file, a signature's commas
// inside its parentheses, and reads into the policies the store writes.
func TestParse_WalletPoliciesFromTheFileAndTheCommandLine(t *testing.T) {
	file := writeFile(t, `wallet:
  ledger-url: http://geth:8545
  policy:
    - wallet: hot
      recipient: ["0x00000000000000000000000000000000000000C1", "0x00000000000000000000000000000000000000c2"]
      function: ["0x00000000000000000000000000000000000000d1:transfer(address, uint256)", "0x00000000000000000000000000000000000000d1:0x095EA7B3"]
      contract: "0x00000000000000000000000000000000000000d2"
      max-value: "1000"
      value-cap: [100000/24h, 10000/1h]
      fee-cap: 5000/24h
`)
	cfg := node.Defaults()
	require.NoError(t, parseServe(&cfg, nil, file))
	ps, err := cfg.Wallet.Policies.Policies()
	require.NoError(t, err)
	require.Len(t, ps, 1)
	hot := ps["hot"]
	require.Equal(t, []string{"0x00000000000000000000000000000000000000c1", "0x00000000000000000000000000000000000000c2"}, hot.Recipients)
	require.Equal(t, map[string]map[string]string{
		"0x00000000000000000000000000000000000000d1": {"0xa9059cbb": "transfer(address,uint256)", "0x095ea7b3": ""},
		"0x00000000000000000000000000000000000000d2": nil,
	}, hot.Contracts)
	require.Equal(t, "1000", hot.MaxValuePerTx.String())
	require.Len(t, hot.ValueCaps, 2)
	require.Equal(t, time.Hour, hot.ValueCaps[1].Window)
	require.Equal(t, "5000", hot.FeeCaps[0].Max.String())
	cfg = node.Defaults()
	require.NoError(t, parseServe(&cfg, []string{"--wallet-policy=wallet=cold,max-value=1,function=0x00000000000000000000000000000000000000d1:f(uint8,(bool,address))"}, ""))
	ps, err = cfg.Wallet.Policies.Policies()
	require.NoError(t, err)
	require.Equal(t, "1", ps["cold"].MaxValuePerTx.String())
	require.Equal(t, "f(uint8,(bool,address))", ps["cold"].Contracts["0x00000000000000000000000000000000000000d1"][selectorOf(t, "f(uint8,(bool,address))")])

	for text, want := range map[string]string{
		"wallet:\n  policy:\n    - wallet: hot\n      function: \"0x00000000000000000000000000000000000000d1:transfer(address\"\n": "contracts[0].functions[0]",
		"wallet:\n  policy:\n    - wallet: hot\n      value-cap: 5/forever\n":                                                      "value_caps[0].window",
		"wallet:\n  policy:\n    - wallet: hot\n      colour: red\n":                                                               "unknown key \"colour\"",
		"wallet:\n  policy:\n    - wallet: hot\n    - wallet: hot\n":                                                               "wallet hot has two policies",
		"wallet:\n  retention-age: 72h\n  policy:\n    - wallet: hot\n      fee-cap: 5/96h\n":                                      "longer than --wallet-retention-age",
	} {
		cfg := node.Defaults()
		err := parseServe(&cfg, []string{"--wallet-ledger-url=http://geth:8545", "--database-url=postgres://db/x"}, writeFile(t, text))
		if err == nil {
			err = cfg.Validate()
		}
		require.ErrorContains(t, err, want, text)
	}
}

func selectorOf(t *testing.T, sig string) string {
	t.Helper()
	sel, _, err := policy.Selector(sig)
	require.NoError(t, err)
	return sel
}
