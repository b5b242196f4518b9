package main

import (
	"flag"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/ledgerq/ledgerq/internal/config"
	"github.com/ledgerq/ledgerq/internal/node"
)

// flagParts says which groups of node.Config flags a command takes.
type flagParts struct {
	api    bool // the HTTP API and the drain timeout (serve, dev)
	roles  bool // --queuer, --submitter, --monitor (serve, once, dev)
	ledger bool // --batch-ledger and --batch-ledger-url (serve, once)
	// lane, when set, keeps only that lane's flags ("batch", "wallet" or
	// "builder"): a bench of one lane takes no other lane's settings.
	lane string
	// own are flags the command defines itself, which no deprecated name
	// of a setting may take (ledgerq wallet audit's --wallet, the old
	// name of --wallet-keystore).
	own []string
}

// The parts of serve, once (no API) and dev (which chooses its own
// ledgers and wallets).
var (
	serveParts = flagParts{api: true, roles: true, ledger: true}
	onceParts  = flagParts{roles: true, ledger: true}
	devParts   = flagParts{api: true, roles: true}
)

// has reports whether the command takes lane's flags.
func (p flagParts) has(lane string) bool { return p.lane == "" || p.lane == lane }

// registerConfig registers the settings that fill c, with c's current
// values as defaults, and returns their registry: each from the tags of the
// Config that owns it (top-level: the database and the shutdown; then the
// sections loops, access, api, batch, wallet and shards). Every command that builds
// a node (serve, once, dev, bench) registers through here, so a setting has
// one flag everywhere.
func registerConfig(fs *flag.FlagSet, c *node.Config, parts flagParts) *config.Registry {
	reg := config.New(fs, flagEnvNames)
	in := map[string]bool{"api": parts.api, "roles": parts.roles, "ledger": parts.ledger}
	section := func(name, prefix string) config.Options {
		return config.Options{Section: name, Prefix: prefix, Parts: in, Alias: func(key string) string {
			if a := renamed[prefix+key]; !slices.Contains(parts.own, a) {
				return a
			}
			return ""
		}}
	}
	reg.Struct(c, section("", ""))
	reg.Struct(&c.Loops, section("loops", ""))
	reg.Struct(&c.Access, section("access", ""))
	if parts.api {
		reg.Struct(&c.API, section("api", "api-"))
	}
	if parts.has("batch") {
		reg.Struct(&c.Batch, config.Options{Section: "batch", Prefix: "batch-", Alias: batchAlias, Parts: in})
	}
	if parts.has("wallet") {
		reg.Struct(&c.Wallet, section("wallet", "wallet-"))
		reg.Struct(&c.API.SendTxConfig, section("wallet", "wallet-"))
		reg.Struct(&c.API.Webhooks, section("wallet", "wallet-"))
		reg.Struct(&c.Wallet.Shards, section("shards", "shard-"))
	}
	if parts.has("builder") {
		if parts.ledger {
			// The lane's switch, not one of its settings: builder.builder in
			// the file.
			fs.BoolVar(&c.Builder.Enabled, "builder", c.Builder.Enabled, "run the builder lane: the transaction pool behind POST /rpc (eth_sendRawTransaction) and /v1/pool/txs, and its bundles on a JAM chain")
			reg.Adopt("builder", "builder-", "builder")
		}
		reg.Struct(&c.Builder, config.Options{Section: "builder", Prefix: "builder-", Alias: builderAlias, Parts: in})
	}
	return reg
}

// batchAlias is the deprecated name of the batch lane's setting key: its
// flag before the lane's flags took the prefix --batch- (--delay-window,
// --sim-seed); --batch-ledger, --batch-ledger-url and --batch-ledger-timeout
// had it already.
func batchAlias(key string) string {
	if key == "ledger" || strings.HasPrefix(key, "ledger-") {
		return ""
	}
	return key
}

// builderAlias is the deprecated name of the builder lane's setting key:
// its flag before all of the lane's flags took the prefix --builder-
// (--bundle-size, --pool-ttl, --guarantee-timeout, --submit-backoff); the
// chain's settings and --builder-cores had it already, and the pool's
// per-account limits and the lane's retention came after it.
func builderAlias(key string) string {
	if key == "ledger" || strings.HasPrefix(key, "ledger-") || strings.HasPrefix(key, "sim-") ||
		key == "evm-rpc-url" || key == "chain-id" || key == "cores" ||
		key == "pool-account-slots" || key == "pool-account-queue" || strings.HasPrefix(key, "retention-") {
		return ""
	}
	return key
}

// renamed are the flags (other than the batch lane's) that took their
// section's prefix, or a name that says what they are, by their new name:
// the old name is a deprecated alias, on the command line and in the
// environment.
var renamed = map[string]string{
	"database-min-conns":           "db-min-conns",
	"database-migrate":             "migrate",
	"api-enabled":                  "api",
	"api-addr":                     "http-addr",
	"api-max-body-bytes":           "max-body-bytes",
	"api-max-batches-per-request":  "max-batches-per-request",
	"api-max-payload-bytes":        "max-payload-bytes",
	"api-insecure-open":            "insecure-open",
	"api-metrics-open":             "metrics-open",
	"api-sawtooth-require-key":     "sawtooth-require-key",
	"api-rpc-require-key":          "rpc-require-key",
	"api-rate-limit":               "rate-limit",
	"api-rate-limit-anonymous":     "rate-limit-anonymous",
	"api-rate-limit-scope":         "rate-limit-scope",
	"api-tls-cert-file":            "tls-cert-file",
	"api-tls-key-file":             "tls-key-file",
	"wallet-keystore":              "wallet",
	"wallet-queue-type":            "send-tx-queue-type",
	"wallet-send-tx-max-wait":      "send-tx-max-wait",
	"wallet-webhook-max-endpoints": "webhook-max-endpoints",
	"wallet-webhook-max-attempts":  "webhook-max-attempts",
	"wallet-webhook-backoff":       "webhook-backoff",
	"wallet-webhook-backoff-max":   "webhook-backoff-max",
	"wallet-webhook-timeout":       "webhook-timeout",
	"wallet-webhook-lease":         "webhook-lease",
	"wallet-webhook-interval":      "webhook-interval",
	"wallet-webhook-allow-private": "webhook-allow-private",
}

// newFlagName is the flag named old at commit 3b1e0c4.
func newFlagName(old string) string {
	for n, o := range renamed {
		if o == old {
			return n
		}
	}
	switch {
	case batchAlias(old) != "" && batchKeys[old]:
		return "batch-" + old
	case builderAlias(old) != "" && builderKeys[old]:
		return "builder-" + old
	}
	return old
}

// batchKeys and builderKeys are the batch and builder lanes' setting keys.
var (
	batchKeys   = settingKeys(func(c *node.Config) any { return &c.Batch })
	builderKeys = settingKeys(func(c *node.Config) any { return &c.Builder })
)

// settingKeys are the setting keys of a lane's Config (registered on a
// scratch FlagSet).
func settingKeys(lane func(*node.Config) any) map[string]bool {
	c := node.Defaults()
	reg := config.New(flag.NewFlagSet("", flag.ContinueOnError), flagEnvNames)
	reg.Struct(lane(&c), config.Options{Parts: map[string]bool{"ledger": true}})
	keys := map[string]bool{}
	for _, s := range reg.Settings() {
		keys[s.Key] = true
	}
	return keys
}

func setupLogger(level string) (*slog.Logger, error) {
	return newLogger(os.Stderr, level)
}
