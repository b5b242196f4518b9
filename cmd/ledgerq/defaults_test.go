package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/node"
)

// todaysDefaults are the effective defaults of serve's settings, by the flag
// name each had before the flags took their lane's prefix (commit 3b1e0c4):
// registering the flags from the Configs, and renaming them, changed no
// default.
var todaysDefaults = map[string]string{
	"api":                           "true",
	"api-idle-timeout":              "2m0s",
	"api-max-connections":           "1024",
	"api-read-header-timeout":       "10s",
	"api-read-timeout":              "30s",
	"api-request-timeout":           "5s",
	"api-write-timeout":             "30s",
	"batch-ledger":                  "sim",
	"batch-ledger-timeout":          "30s",
	"batch-ledger-url":              "",
	"builder":                       "false",
	"builder-chain-id":              "1337",
	"builder-cores":                 "2",
	"builder-evm-rpc-url":           "",
	"builder-ledger":                "jam",
	"builder-ledger-timeout":        "5s",
	"builder-ledger-url":            "",
	"builder-pool-account-queue":    "64",
	"builder-pool-account-slots":    "16",
	"builder-sim-fund-dev-accounts": "true",
	"builder-sim-journal":           "",
	"builder-sim-slot-length":       "0s",
	"bundle-finality-depth":         "2",
	"bundle-max-versions":           "3",
	"bundle-queue-size":             "16",
	"bundle-size":                   "100",
	"check-batch-size":              "500", // 100 until a monitor round of 500 measured 1.26–1.92 × the committed/s (issue 43)
	"check-interval":                "1s",
	"claim-lease":                   "1m0s",
	"database-url":                  "",
	"db-min-conns":                  "0",
	"db-timeout":                    "10s",
	"delay-cap":                     "5m0s",
	"delay-window":                  "15s",
	"first-check":                   "500ms",
	"guarantee-timeout":             "18s",
	"http-addr":                     "127.0.0.1:8080",
	"insecure-open":                 "false",
	"max-batches-per-request":       "100",
	"max-body-bytes":                "8388608",
	"max-payload-bytes":             "1048576",
	"metrics-open":                  "false",
	"migrate":                       "true",
	"monitor":                       "true",
	"poll-interval":                 "1s",
	"pool-max-pending":              "5120",
	"pool-max-per-sender":           "0",
	"pool-max-queued":               "1024",
	"pool-max-tx-size":              "32768",
	"pool-min-tip":                  "1000000000",
	"pool-ttl":                      "1h0m0s",
	"queuer":                        "true",
	"rate-limit":                    "1000/s:2000",
	"rate-limit-anonymous":          "1000/s:2000",
	"rate-limit-scope":              "",
	"reconcile-interval":            "30s",
	"retention-age":                 "168h0m0s",
	"retention-batch-size":          "1000",
	"retention-interval":            "1m0s",
	"rpc-require-key":               "false",
	"sawtooth-require-key":          "false",
	"send-tx-max-wait":              "50s",
	"send-tx-queue-type":            "priority",
	"shard-backoff":                 "1s",
	"shard-lease":                   "30s",
	"shard-max-backoff":             "1m0s",
	"shard-quantum":                 "100ms",
	"shard-rescue-interval":         "1s",
	"shard-unavailable-backoff":     "2s",
	"shard-workers":                 "16",
	"shutdown-timeout":              "30s",
	"sim-commit-delay":              "500ms",
	"sim-drop-response-rate":        "0",
	"sim-latency":                   "0s",
	"sim-lost-rate":                 "0",
	"sim-max-events":                "10000",
	"sim-reject-rate":               "0",
	"sim-seed":                      "1",
	"sim-transient-rate":            "0",
	"sim-verify":                    "true",
	"submit-backoff":                "1s",
	"submit-backoff-max":            "30s",
	"submit-batch-size":             "100",
	"submit-window-close":           "0s",
	"submit-window-open":            "0s",
	"submitter":                     "true",
	"tls-cert-file":                 "",
	"tls-key-file":                  "",
	"track-grace":                   "10s",
	"wallet":                        "",
	"wallet-balance-max-age":        "5m0s",
	"wallet-confirmations":          "0",
	"wallet-cycle-budget":           "5s",
	"wallet-follow-interval":        "1s",
	"wallet-head-interval":          "250ms",
	"wallet-in-flight":              "100",
	"wallet-ledger":                 "evm",
	"wallet-ledger-timeout":         "10s",
	"wallet-ledger-url":             "",
	"wallet-max-fee-per-gas":        "10000000000000",
	"wallet-max-recycled":           "50",
	"wallet-max-replacements":       "3",
	"wallet-passphrase-file":        "",
	"wallet-price-cap":              "0",
	"wallet-rebroadcast-after":      "15s",
	"wallet-replaced-after":         "1m0s",
	"wallet-reset-gap":              "0",
	"wallet-restore-lookback":       "50000",
	"wallet-retention-age":          "168h0m0s",
	"wallet-retention-batch-size":   "1000",
	"wallet-retention-interval":     "1m0s",
	"wallet-send-linger":            "50ms",
	"wallet-stall-timeout":          "5m0s",
	"wallet-watch-after":            "1m0s",
	"webhook-allow-private":         "false",
	"webhook-backoff":               "5s",
	"webhook-backoff-max":           "1h0m0s",
	"webhook-interval":              "1s",
	"webhook-lease":                 "1m0s",
	"webhook-max-attempts":          "12",
	"webhook-max-endpoints":         "25",
	"webhook-timeout":               "10s",
}

func TestDefaults_EverySettingKeepsTodaysDefault(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   node.Config
		parts flagParts
		diff  map[string]string // where the command's default differs from serve's
	}{
		{"serve", node.Defaults(), flagParts{api: true, roles: true, ledger: true}, nil},
		{"dev", devDefaults(), flagParts{api: true, roles: true}, map[string]string{"webhook-allow-private": "true"}},
	} {
		cfg := tc.cfg
		fs := newFlagSet(tc.name, "summary")
		reg := registerConfig(fs, &cfg, tc.parts)
		require.NoError(t, reg.Parse(nil, func() string { return "" }), tc.name)
		for old, want := range todaysDefaults {
			if d, ok := tc.diff[old]; ok {
				want = d
			}
			name := newFlagName(old)
			f := fs.Lookup(name)
			if f == nil {
				require.False(t, tc.parts.ledger, "%s: --%s is not registered", tc.name, name)
				continue
			}
			require.Equal(t, want, f.Value.String(), "%s: the default of --%s (formerly --%s)", tc.name, name, old)
		}
	}
}
