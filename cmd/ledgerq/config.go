package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ledgerq/ledgerq/internal/config"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/ratelimit"
	"github.com/ledgerq/ledgerq/internal/store"
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

// has reports whether the command takes lane's flags.
func (p flagParts) has(lane string) bool { return p.lane == "" || p.lane == lane }

// registerConfig registers the settings that fill c, with c's current
// values as defaults, and returns their registry: the batch lane's from its
// Config's declarations, the rest by hand until their Configs declare them
// (each adopted into its section of the configuration file). Every command
// that builds a node (serve, once, dev, bench) registers through here, so a
// setting has one flag everywhere.
func registerConfig(fs *flag.FlagSet, c *node.Config, parts flagParts) *config.Registry {
	reg := config.New(fs, flagEnvNames)
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "PostgreSQL connection URL")
	fs.BoolVar(&c.Migrate, "migrate", c.Migrate, "apply pending schema migrations at start")
	fs.IntVar(&c.DBMinConns, "db-min-conns", c.DBMinConns, "size the database connection pool to at least this many connections (0: the larger of 4 and the CPUs)")
	if parts.api {
		fs.BoolVar(&c.API.Enabled, "api", c.API.Enabled, "run the HTTP API")
		fs.StringVar(&c.API.Addr, "http-addr", c.API.Addr, "address the HTTP API listens on")
		fs.Int64Var(&c.API.MaxBodyBytes, "max-body-bytes", c.API.MaxBodyBytes, "largest request body the API accepts")
		fs.IntVar(&c.API.MaxBatchesPerRequest, "max-batches-per-request", c.API.MaxBatchesPerRequest, "most batches in one POST /v1/batches")
		fs.IntVar(&c.API.MaxPayloadBytes, "max-payload-bytes", c.API.MaxPayloadBytes, "largest batch payload the API accepts")
		fs.DurationVar(&c.API.RequestTimeout, "api-request-timeout", c.API.RequestTimeout, "a request whose database work takes longer answers 503 (long-polls bound each database call with it)")
		fs.DurationVar(&c.API.TaskMaxWait, "send-tx-max-wait", c.API.TaskMaxWait, "wallet lane: the longest POST /v1/wallets/{wallet}/send-tx waits for its task to end before answering 202 with it (the client then polls)")
		fs.DurationVar(&c.API.ReadHeaderTimeout, "api-read-header-timeout", c.API.ReadHeaderTimeout, "time a client has to send a request's headers")
		fs.DurationVar(&c.API.ReadTimeout, "api-read-timeout", c.API.ReadTimeout, "time a client has to send a whole request, headers and body (408 past it)")
		fs.DurationVar(&c.API.WriteTimeout, "api-write-timeout", c.API.WriteTimeout, "time a client has to read a response, from its first byte (a long-poll's wait does not count)")
		fs.DurationVar(&c.API.IdleTimeout, "api-idle-timeout", c.API.IdleTimeout, "close a keep-alive connection that waits longer for its next request")
		fs.IntVar(&c.API.MaxConnections, "api-max-connections", c.API.MaxConnections, "most connections the API holds open; at the cap a new one closes the longest-idle keep-alive connection or waits")
		fs.BoolVar(&c.API.Access.Open, "insecure-open", c.API.Access.Open, "serve every /v1 route, /metrics and the console without an API key (each request acts as an anonymous admin): for a trusted network only")
		fs.BoolVar(&c.API.Access.MetricsOpen, "metrics-open", c.API.Access.MetricsOpen, "serve /metrics without an API key (for scrapers that send none); the rest still needs one")
		fs.BoolVar(&c.API.Access.SawtoothRequireKey, "sawtooth-require-key", c.API.Access.SawtoothRequireKey, "batch lane: the Sawtooth drop-in (POST /batches, /batch_statuses) needs an API key: posting one with the batches' service scope (service:ID or service:*)")
		fs.BoolVar(&c.API.Access.RPCRequireKey, "rpc-require-key", c.API.Access.RPCRequireKey, "builder lane: POST /rpc needs an API key with pool:write")
		fs.Var(&c.API.Access.RateLimits.Key, "rate-limit", "each API key's request rate, COUNT/UNIT:BURST (UNIT s, m or h; 0: unlimited); past it a request is 429 with Retry-After")
		fs.Var(&c.API.Access.RateLimits.Anonymous, "rate-limit-anonymous", "each client address's request rate on the routes that need no key (the Sawtooth drop-in, /rpc; every route with --insecure-open), COUNT/UNIT:BURST (0: unlimited)")
		fs.Var(scopeRates{&c.API.Access.RateLimits.Scopes}, "rate-limit-scope", "a rate for the keys holding a kind of scope, KIND=COUNT/UNIT:BURST with KIND one of "+strings.Join(httpapi.ScopeKinds, ", ")+" (repeatable); a key's rate is the most generous of its scopes'")
		fs.StringVar(&c.API.TLSCertFile, "tls-cert-file", c.API.TLSCertFile, "serve HTTPS with this certificate (PEM, with its chain), reloaded when the file changes; needs --tls-key-file")
		fs.StringVar(&c.API.TLSKeyFile, "tls-key-file", c.API.TLSKeyFile, "the private key of --tls-cert-file (PEM)")
		fs.IntVar(&c.API.Webhooks.MaxEndpoints, "webhook-max-endpoints", c.API.Webhooks.MaxEndpoints, "wallet lane: most webhook endpoints one wallet may have (one more is refused with 409)")
		fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "on SIGTERM, how long to let in-flight work finish before cancelling it")
	}
	if parts.roles {
		fs.BoolVar(&c.Loops.Queuer, "queuer", c.Loops.Queuer, "run the queuer loops")
		fs.BoolVar(&c.Loops.Submitter, "submitter", c.Loops.Submitter, "run the submitter loops")
		fs.BoolVar(&c.Loops.Monitor, "monitor", c.Loops.Monitor, "run the monitor loops")
	}
	fs.DurationVar(&c.Loops.PollInterval, "poll-interval", c.Loops.PollInterval, "how often each loop runs when no notification wakes it")
	fs.DurationVar(&c.Loops.DBTimeout, "db-timeout", c.Loops.DBTimeout, "timeout of one database call from a loop")

	reg.Adopt("", "", "database-url", "migrate", "db-min-conns", "shutdown-timeout")
	reg.Adopt("loops", "", "queuer", "submitter", "monitor", "poll-interval", "db-timeout")
	var api []string
	fs.VisitAll(func(f *flag.Flag) {
		if reg.Lookup(f.Name) == nil {
			api = append(api, f.Name)
		}
	})
	reg.Adopt("api", "api-", api...)

	if parts.has("batch") {
		reg.Struct(&c.Batch, config.Options{Section: "batch", Prefix: "batch-", Alias: batchAlias, Parts: map[string]bool{"ledger": parts.ledger}})
	}
	if parts.has("wallet") {
		registerWallet(fs, &c.Wallet, &c.API.Config, parts)
		var wallet, shards []string
		fs.VisitAll(func(f *flag.Flag) {
			switch {
			case reg.Lookup(f.Name) != nil:
			case strings.HasPrefix(f.Name, "shard-"):
				shards = append(shards, f.Name)
			default:
				wallet = append(wallet, f.Name)
			}
		})
		reg.Adopt("shards", "shard-", shards...)
		reg.Adopt("wallet", "wallet-", wallet...)
	}
	if parts.has("builder") {
		if parts.ledger {
			// The lane's switch, not one of its settings: builder.builder in
			// the file.
			fs.BoolVar(&c.Builder.Enabled, "builder", c.Builder.Enabled, "run the builder lane: the transaction pool behind POST /rpc (eth_sendRawTransaction) and /v1/pool/txs, and its bundles on a JAM chain")
			reg.Adopt("builder", "builder-", "builder")
		}
		reg.Struct(&c.Builder, config.Options{Section: "builder", Prefix: "builder-", Alias: builderAlias, Parts: map[string]bool{"ledger": parts.ledger}})
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

// builderAlias is the deprecated name of the builder lane's setting key:
// its flag before all of the lane's flags took the prefix --builder-
// (--bundle-size, --pool-ttl, --guarantee-timeout, --submit-backoff); the
// chain's settings and --builder-cores had it already.
func builderAlias(key string) string {
	if key == "ledger" || strings.HasPrefix(key, "ledger-") || strings.HasPrefix(key, "sim-") ||
		key == "evm-rpc-url" || key == "chain-id" || key == "cores" {
		return ""
	}
	return key
}

// newFlagName is the flag named old at commit 3b1e0c4.
func newFlagName(old string) string {
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

// registerWallet registers the wallet lane's flags.
func registerWallet(fs *flag.FlagSet, w *node.WalletConfig, api *httpapi.Config, parts flagParts) {
	if parts.ledger {
		fs.Var(&w.Keystores, "wallet", "wallet lane: a wallet ledgerq signs for, NAME=KEYSTORE_FILE (a go-ethereum keystore file); repeat or comma-separate for several. Its passphrase: --wallet-passphrase-file, else LEDGERQ_WALLET_PASSPHRASE_<NAME>, else LEDGERQ_WALLET_PASSPHRASE")
		fs.Var(&w.PassphraseFiles, "wallet-passphrase-file", "wallet lane: a file whose first line unlocks the wallets (FILE), or one wallet (NAME=FILE); repeatable")
		fs.StringVar(&w.Ledger.Kind, "wallet-ledger", w.Ledger.Kind, "wallet lane: evm (a node's JSON-RPC at --wallet-ledger-url) or sim (an in-process simulated EVM chain)")
		fs.StringVar(&w.Ledger.URL, "wallet-ledger-url", w.Ledger.URL, "wallet lane: the EVM node's JSON-RPC URL, for --wallet-ledger evm (for example http://127.0.0.1:8545)")
	}
	fs.DurationVar(&w.Lane.LedgerTimeout, "wallet-ledger-timeout", w.Lane.LedgerTimeout, "wallet lane: timeout of one call to the chain")
	fs.Var((*queueTypeFlag)(&w.Lane.QueueType), "send-tx-queue-type", "wallet lane: order of a wallet's waiting tasks: priority (highest first, then oldest) or fifo")
	fs.IntVar(&w.Lane.InFlight, "wallet-in-flight", w.Lane.InFlight, "wallet lane: most transactions a wallet has signed or sent and not yet confirmed")
	fs.DurationVar(&w.Lane.FollowInterval, "wallet-follow-interval", w.Lane.FollowInterval, "wallet lane: how often a wallet with transactions in flight is checked for receipts")
	fs.DurationVar(&w.Lane.HeadInterval, "wallet-head-interval", w.Lane.HeadInterval, "wallet lane: how often the chain's head is read; a new block checks the wallets with transactions in flight at once instead of at the next --wallet-follow-interval (0: off)")
	fs.DurationVar(&w.Lane.ReplacedAfter, "wallet-replaced-after", w.Lane.ReplacedAfter, "wallet lane: how long a nonce the chain passed, whose hashes have no receipt, waits before its transaction counts as replaced and its task is sent again")
	fs.DurationVar(&w.Lane.CycleBudget, "wallet-cycle-budget", w.Lane.CycleBudget, "wallet lane: a cycle of a wallet's run makes no new call to the chain past this; with --wallet-ledger-timeout it must fit twice in --shard-lease")
	fs.DurationVar(&w.Lane.StallTimeout, "wallet-stall-timeout", w.Lane.StallTimeout, "wallet lane: a wallet whose chain nonce has not moved for this long gets its stalled transaction re-sent with fees raised (max of 1.2x and the node's suggestion), or a no-op for a nonce none of ours holds")
	fs.Var(weiFlag{&w.Lane.PriceCap, weiZeroNone}, "wallet-price-cap", "wallet lane: the highest fee cap a gas bump may offer, in wei (0: no cap); at the cap the task stays and is marked price_capped_at")
	fs.IntVar(&w.Lane.ResetGap, "wallet-reset-gap", w.Lane.ResetGap, "wallet lane: a next nonce more than this above the chain's, with nothing in flight, is reset to the chain's (0: --wallet-in-flight)")
	fs.IntVar(&w.Lane.MaxRecycled, "wallet-max-recycled", w.Lane.MaxRecycled, "wallet lane: with more freed nonces than this, they are filled with no-ops at once instead of waiting for tasks")
	fs.DurationVar(&w.Lane.BalanceMaxAge, "wallet-balance-max-age", w.Lane.BalanceMaxAge, "wallet lane: a wallet's balance older than this is read again before sending; sending pauses while it is below the wallet's threshold")
	fs.IntVar(&w.Lane.MaxReplacements, "wallet-max-replacements", w.Lane.MaxReplacements, "wallet lane: times a task whose nonce another transaction took goes back to waiting before it ends in error")
	fs.IntVar(&w.Lane.Confirmations, "wallet-confirmations", w.Lane.Confirmations, "wallet lane: blocks deep (its own block counting as one) a transaction must be before its task is done; until then it is executing and a block that leaves the chain sends it again (0: by chain id: 1 on dev chains 1337 and 31337, 64 on Polygon, 15 on BNB Smart Chain, 12 elsewhere)")
	fs.DurationVar(&w.Lane.RebroadcastAfter, "wallet-rebroadcast-after", w.Lane.RebroadcastAfter, "wallet lane: while a wallet's chain nonce has not moved for this long, its sent transactions are broadcast again with the same bytes (a node that restarted forgets its pool)")
	fs.Uint64Var(&w.Lane.RestoreLookback, "wallet-restore-lookback", w.Lane.RestoreLookback, "wallet lane: when the chain used nonces the database does not know (restored from an older backup) and the node cannot search past state (not an archive node), read at most this many blocks back from the head for the wallet's transactions; further back the wallet is held (0: never read blocks one by one)")
	fs.DurationVar(&w.Lane.SendLinger, "wallet-send-linger", w.Lane.SendLinger, "wallet lane: while a wallet has fewer tasks waiting than --wallet-in-flight leaves room for, they are sent once this has passed since its last send, so that tasks arriving one by one go out in rounds; a full send, or the first after a quiet spell, goes at once; below --wallet-cycle-budget (0: every send at once)")
	fs.DurationVar(&w.Lane.WatchAfter, "wallet-watch-after", w.Lane.WatchAfter, "wallet lane: a wallet whose chain nonce moved within this is still checked with nothing in flight, so that final transactions a node then loses are sent again (0: only while it has work)")
	fs.Var(weiFlag{&api.MaxFeePerGas, weiZeroRefused}, "wallet-max-fee-per-gas", "wallet lane: the highest max_fee_per_gas or max_priority_fee_per_gas a send-tx may ask for, in wei (400 above it)")
	fs.IntVar(&w.Shards.Workers, "shard-workers", w.Shards.Workers, "shards: workers of this process (one shard each at a time)")
	fs.DurationVar(&w.Shards.Quantum, "shard-quantum", w.Shards.Quantum, "shards: longest a worker runs one shard before yielding it")
	fs.DurationVar(&w.Shards.Lease, "shard-lease", w.Shards.Lease, "shards: a claim's lease; a shard whose lease passed is rescued (the backstop: a shard whose holder's process died is rescued at once)")
	fs.DurationVar(&w.Shards.RescueInterval, "shard-rescue-interval", w.Shards.RescueInterval, "shards: time between two rescue rounds, which put back in the queue the shards of dead processes and of expired leases (monitor role)")
	fs.DurationVar(&w.RetentionAge, "wallet-retention-age", w.RetentionAge, "wallet lane: delete finished tasks (done, error) older than this (0: keep them forever); run by the monitor role")
	fs.IntVar(&w.RetentionBatchSize, "wallet-retention-batch-size", w.RetentionBatchSize, "wallet lane: most finished tasks deleted in one statement")
	fs.IntVar(&w.Webhooks.MaxAttempts, "webhook-max-attempts", w.Webhooks.MaxAttempts, "wallet lane: attempts to deliver one webhook event to one endpoint before it is given up (kept in ledgerq.webhook_deliveries with its last error)")
	fs.DurationVar(&w.Webhooks.BackoffBase, "webhook-backoff", w.Webhooks.BackoffBase, "wallet lane: wait after a failed webhook delivery; doubles with each failure")
	fs.DurationVar(&w.Webhooks.BackoffMax, "webhook-backoff-max", w.Webhooks.BackoffMax, "wallet lane: the longest wait between two attempts of a webhook delivery")
	fs.DurationVar(&w.Webhooks.RequestTimeout, "webhook-timeout", w.Webhooks.RequestTimeout, "wallet lane: timeout of one webhook POST; --webhook-lease must exceed it")
	fs.DurationVar(&w.Webhooks.Lease, "webhook-lease", w.Webhooks.Lease, "wallet lane: a claimed webhook delivery is held this long before another process may send it again (its sender died)")
	fs.DurationVar(&w.Webhooks.Interval, "webhook-interval", w.Webhooks.Interval, "wallet lane: how often due webhook deliveries are looked for")
	fs.BoolVar(&w.Webhooks.AllowPrivate, "webhook-allow-private", w.Webhooks.AllowPrivate, "wallet lane: let webhook endpoints be at loopback, private, link-local and other non-public addresses (receivers on this machine, in tests and development); off, such a URL is refused at registration and never connected to")
	fs.DurationVar(&w.RetentionInterval, "wallet-retention-interval", w.RetentionInterval, "wallet lane: wait after a retention round that found less than a full batch to delete")
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

// queueTypeFlag is a wallet's queue type as a flag (validated with the
// lane's Config).
type queueTypeFlag store.QueueType

func (f *queueTypeFlag) String() string { return string(*f) }

func (f *queueTypeFlag) Set(s string) error {
	*f = queueTypeFlag(s)
	return nil
}

// scopeRates is --rate-limit-scope: the rates of the keys holding a kind of
// scope, KIND=RATE, one a value (repeatable; a list in the file).
type scopeRates struct{ p *map[string]ratelimit.Rate }

// Strings are the rates as KIND=RATE, by kind.
func (f scopeRates) Strings() []string {
	if f.p == nil {
		return nil
	}
	var out []string
	for _, kind := range slices.Sorted(maps.Keys(*f.p)) {
		out = append(out, kind+"="+(*f.p)[kind].String())
	}
	return out
}

func (f scopeRates) String() string { return strings.Join(f.Strings(), ",") }

func (f scopeRates) Set(v string) error {
	if v == "" {
		return nil
	}
	kind, rate, ok := strings.Cut(v, "=")
	if !ok || !slices.Contains(httpapi.ScopeKinds, kind) {
		return fmt.Errorf("want KIND=RATE with KIND one of %s, got %q", strings.Join(httpapi.ScopeKinds, ", "), v)
	}
	r, err := ratelimit.ParseRate(rate)
	if err != nil {
		return err
	}
	if *f.p == nil {
		*f.p = map[string]ratelimit.Rate{}
	}
	(*f.p)[kind] = r
	return nil
}
