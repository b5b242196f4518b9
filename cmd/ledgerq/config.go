package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"slices"
	"strconv"
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
// sections loops, api, batch, wallet and shards). Every command that builds
// a node (serve, once, dev, bench) registers through here, so a setting has
// one flag everywhere.
func registerConfig(fs *flag.FlagSet, c *node.Config, parts flagParts) *config.Registry {
	reg := config.New(fs, flagEnvNames)
	in := map[string]bool{"api": parts.api, "roles": parts.roles, "ledger": parts.ledger}
	section := func(name, prefix string) config.Options {
		return config.Options{Section: name, Prefix: prefix, Parts: in, Alias: func(key string) string { return renamed[prefix+key] }}
	}
	reg.Struct(c, section("", ""))
	reg.Struct(&c.Loops, section("loops", ""))
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
		var before []string
		fs.VisitAll(func(f *flag.Flag) { before = append(before, f.Name) })
		registerBuilder(fs, &c.Builder, parts)
		var builder []string
		fs.VisitAll(func(f *flag.Flag) {
			if !slices.Contains(before, f.Name) {
				builder = append(builder, f.Name)
			}
		})
		reg.Adopt("builder", "builder-", builder...)
	}
	reg.MarkSecret("url", "database-url", "builder-ledger-url", "builder-evm-rpc-url", "wallet-ledger-url")
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
	if batchAlias(old) == "" || !batchKeys[old] {
		return old
	}
	return "batch-" + old
}

// batchKeys are the batch lane's setting keys (registered on a scratch
// FlagSet).
var batchKeys = func() map[string]bool {
	c := node.Defaults()
	reg := config.New(flag.NewFlagSet("", flag.ContinueOnError), flagEnvNames)
	reg.Struct(&c.Batch, config.Options{Section: "batch", Prefix: "batch-", Parts: map[string]bool{"ledger": true}})
	keys := map[string]bool{}
	for _, s := range reg.Settings() {
		keys[s.Key] = true
	}
	return keys
}()

// registerBuilder registers the builder lane's flags.
func registerBuilder(fs *flag.FlagSet, b *node.BuilderConfig, parts flagParts) {
	if parts.ledger {
		fs.BoolVar(&b.Enabled, "builder", b.Enabled, "run the builder lane: the transaction pool behind POST /rpc (eth_sendRawTransaction) and /v1/pool/txs, and its bundles on a JAM chain")
		fs.StringVar(&b.Ledger.Kind, "builder-ledger", b.Ledger.Kind, "builder lane: jam (a JAM chain at --builder-ledger-url, such as 'ledgerq simledger --kind jam') or sim (a simulated JAM chain in this process)")
		fs.StringVar(&b.Ledger.URL, "builder-ledger-url", b.Ledger.URL, "builder lane: the JAM chain's URL, for --builder-ledger jam (for example http://127.0.0.1:19800)")
		fs.StringVar(&b.Ledger.EVMURL, "builder-evm-rpc-url", b.Ledger.EVMURL, "builder lane: the JSON-RPC of the EVM that executes the bundles, which /rpc reads blocks, receipts, balances, calls, gas estimates and fees from (empty: --builder-ledger-url's /evm; with --builder-ledger sim, the simulated chain's own)")
	}
	fs.Int64Var(&b.Pool.ChainID, "builder-chain-id", b.Pool.ChainID, "builder lane: the EVM chain id transactions must be signed for (eth_chainId)")
	fs.DurationVar(&b.Ledger.Timeout, "builder-ledger-timeout", b.Ledger.Timeout, "builder lane: timeout of one call to the JAM chain")
	fs.IntVar(&b.Pool.Limits.MaxPending, "pool-max-pending", b.Pool.Limits.MaxPending, "builder lane: most pending transactions in the pool (a full pool answers 429 / txpool is full)")
	fs.IntVar(&b.Pool.Limits.MaxQueued, "pool-max-queued", b.Pool.Limits.MaxQueued, "builder lane: most queued (nonce-gapped) transactions in the pool")
	fs.IntVar(&b.Pool.Limits.MaxPerSender, "pool-max-per-sender", b.Pool.Limits.MaxPerSender, "builder lane: most pending and queued transactions of one sender")
	fs.DurationVar(&b.Pool.Limits.TTL, "pool-ttl", b.Pool.Limits.TTL, "builder lane: a transaction still pending or queued after this is dropped (reason expired)")
	fs.IntVar(&b.Pool.MaxTxSize, "pool-max-tx-size", b.Pool.MaxTxSize, "builder lane: largest transaction accepted, in bytes")
	fs.Var(weiFlag{&b.Pool.MinTip, weiZeroAllowed}, "pool-min-tip", "builder lane: minimum tip (a legacy transaction's gas price) in wei")
	fs.IntVar(&b.BundleSize, "bundle-size", b.BundleSize, "builder lane: most transactions in one bundle")
	fs.IntVar(&b.MaxQueued, "bundle-queue-size", b.MaxQueued, "builder lane: most bundles queued; while it is full, pending transactions wait")
	fs.IntVar(&b.Cores, "builder-cores", b.Cores, "builder lane: most bundles submitted at once (one per core), across every process")
	fs.DurationVar(&b.GuaranteeTimeout, "guarantee-timeout", b.GuaranteeTimeout, "builder lane: a submitted bundle without a guarantee after this is requeued with its next version")
	fs.IntVar(&b.MaxVersions, "bundle-max-versions", b.MaxVersions, "builder lane: versions a bundle is submitted in before it is dropped (its transactions return to pending)")
	fs.Uint64Var(&b.FinalityDepth, "bundle-finality-depth", b.FinalityDepth, "builder lane: JAM blocks after its accumulation that a bundle is finalized")
	fs.DurationVar(&b.WindowOpen, "submit-window-open", b.WindowOpen, "builder lane: the submission window opens this long before each timeslot (0: half the slot: jamduna's EVM builder opens it 3 s before a 6 s slot)")
	fs.DurationVar(&b.WindowClose, "submit-window-close", b.WindowClose, "builder lane: the submission window closes this long before each timeslot (0: a sixth of the slot: jamduna's EVM builder closes it 1 s before a 6 s slot)")
	fs.DurationVar(&b.SubmitBackoff, "submit-backoff", b.SubmitBackoff, "builder lane: wait after a refused submit; doubles with each refusal of the bundle")
	fs.DurationVar(&b.SubmitBackoffMax, "submit-backoff-max", b.SubmitBackoffMax, "builder lane: the longest wait after a refused submit")
	fs.DurationVar(&b.Ledger.Sim.SlotLength, "builder-sim-slot-length", b.Ledger.Sim.SlotLength, "builder lane: the simulated JAM chain's timeslot, for --builder-ledger sim (0: 6s)")
	fs.BoolVar(&b.Ledger.Sim.FundDevAccounts, "builder-sim-fund-dev-accounts", b.Ledger.Sim.FundDevAccounts, "builder lane: the simulated JAM chain's EVM funds the 20 accounts of the development mnemonic \"test test test test test test test test test test test junk\" (m/44'/60'/0'/0/0..19, as hardhat and anvil) with 10000 ether each, for --builder-ledger sim")
	fs.StringVar(&b.Ledger.Sim.Journal, "builder-sim-journal", b.Ledger.Sim.Journal, "builder lane: a file the simulated JAM chain records what it executed in and replays at start, so that it survives a restart as the database does (empty: kept in memory only), for --builder-ledger sim")
}

func setupLogger(level string) (*slog.Logger, error) {
	return newLogger(os.Stderr, level)
}

// weiFlag is a flag of a whole number of wei (a uint256, in decimal); zero
// says what 0 is.
type weiFlag struct {
	p    **big.Int
	zero weiZero
}

// weiZero is what a weiFlag makes of 0.
type weiZero int

const (
	// weiZeroRefused: 0 is an error (the amount must be positive).
	weiZeroRefused weiZero = iota
	// weiZeroNone: 0 or "" means none (nil).
	weiZeroNone
	// weiZeroAllowed: 0 is an amount like any other.
	weiZeroAllowed
)

func (f weiFlag) String() string {
	if f.p == nil || *f.p == nil {
		return "0"
	}
	return (*f.p).String()
}

func (f weiFlag) Set(s string) error {
	if f.zero == weiZeroNone && (s == "" || s == "0") {
		*f.p = nil
		return nil
	}
	v, ok := new(big.Int).SetString(s, 10)
	switch {
	case !ok || v.Sign() < 0 || v.BitLen() > 256:
		return fmt.Errorf("want a decimal amount of wei, got %q", s)
	case v.Sign() == 0 && f.zero == weiZeroRefused:
		return errors.New("want a positive amount of wei")
	}
	*f.p = v
	return nil
}

// negatedFlag is a boolean flag that sets the opposite of its value: a
// setting named for what it turns off, offered as what it turns on.
type negatedFlag struct{ p *bool }

func (f negatedFlag) String() string {
	if f.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*f.p)
}

func (f negatedFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*f.p = !v
	return nil
}

// IsBoolFlag lets --sim-verify stand alone for true.
func (negatedFlag) IsBoolFlag() bool { return true }
