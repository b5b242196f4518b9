// Package builder holds the builder lane's configuration: the one Config
// its roles (the pool's intake, queuer.PoolIntake; the bundler,
// queuer.Bundler; submitter.BundleSubmitter; monitor.BundleMonitor) are
// built from, its defaults and its Validate. The lane is the transaction
// pool behind POST /rpc and /v1/pool/txs, and the bundles cut from it and
// followed on a JAM chain; docs/design.md ("The builder lane") tells it.
//
// A field with a flag tag is a setting: cmd/ledgerq registers it as the flag
// --builder-<name>, the environment variable LEDGERQ_BUILDER_<NAME> and the
// configuration file's key builder.<name> (internal/config reads the tags).
package builder

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Config configures the builder lane. The lane runs when Enabled.
type Config struct {
	// Enabled runs the lane (--builder, which cmd/ledgerq registers itself:
	// it is the lane's switch, not one of its settings).
	Enabled bool
	Ledger  LedgerConfig `group:""`
	Pool    PoolConfig   `group:""`
	// BundleSize is the most transactions in a bundle; MaxQueued the bundle
	// queue's size (pending transactions wait while it is full).
	BundleSize int `flag:"bundle-size" help:"builder lane: most transactions in one bundle"`
	MaxQueued  int `flag:"bundle-queue-size" help:"builder lane: most bundles queued; while it is full, pending transactions wait"`
	// Cores is the most bundles submitted at once, across every process
	// (one core row each).
	Cores int `flag:"cores" help:"builder lane: most bundles submitted at once (one per core), across every process"`
	// GuaranteeTimeout is how long a submitted bundle waits for a guarantee
	// before its next version is queued; MaxVersions the retry limit past
	// which it is dropped (its transactions return to pending).
	GuaranteeTimeout time.Duration `flag:"guarantee-timeout" help:"builder lane: a submitted bundle without a guarantee after this is requeued with its next version"`
	MaxVersions      int           `flag:"bundle-max-versions" help:"builder lane: versions a bundle is submitted in before it is dropped (its transactions return to pending)"`
	// FinalityDepth is how many JAM blocks after its accumulation a bundle
	// is finalized (0: at its accumulation).
	FinalityDepth uint64 `flag:"bundle-finality-depth" help:"builder lane: JAM blocks after its accumulation that a bundle is finalized"`
	// WindowOpen and WindowClose: the submission window, before each
	// timeslot (jamduna's EVM builder: 3 s to 1 s before a 6 s slot). Zero
	// scales that window to the chain's slot length.
	WindowOpen  time.Duration `flag:"submit-window-open" help:"builder lane: the submission window opens this long before each timeslot (0: half the slot: jamduna's EVM builder opens it 3 s before a 6 s slot)"`
	WindowClose time.Duration `flag:"submit-window-close" help:"builder lane: the submission window closes this long before each timeslot (0: a sixth of the slot: jamduna's EVM builder closes it 1 s before a 6 s slot)"`
	// SubmitBackoff and SubmitBackoffMax bound the wait after a refused
	// submit; it doubles with each refusal of the same bundle.
	SubmitBackoff    time.Duration `flag:"submit-backoff" help:"builder lane: wait after a refused submit; doubles with each refusal of the bundle"`
	SubmitBackoffMax time.Duration `flag:"submit-backoff-max" help:"builder lane: the longest wait after a refused submit"`
	// RetentionAge is how long bundles and pool transactions that ended
	// are kept; older ones are deleted, RetentionBatchSize rows at a time,
	// by the monitor role (monitor.NewBuilderRetention). 0 keeps them
	// forever.
	RetentionAge       time.Duration `flag:"retention-age" help:"builder lane: delete finalized bundles (with their work packages and transactions; a chain's newest finalized bundle is kept), dropped bundles and replaced or dropped pool transactions that ended longer ago than this (0: keep them forever); run by the monitor role"`
	RetentionBatchSize int           `flag:"retention-batch-size" help:"builder lane: most bundles, and most pool transactions, deleted in one statement"`
	// RetentionInterval is the wait after a retention round that found less
	// than a full batch to delete.
	RetentionInterval time.Duration `flag:"retention-interval" help:"builder lane: wait after a retention round that found less than a full batch to delete"`

	// MaxBundles is the most bundles one bundler round cuts; 0 is Cores
	// (whatever Cores is set to): a round cuts what one submission window takes (and runs again at once
	// when it cut that much), so the chain's lock it holds never keeps the
	// monitor's guarantees, and the cores they free, waiting for a long cut.
	MaxBundles int
	// BlocksPerRound is the most JAM blocks one monitor round imports.
	BlocksPerRound int
	// SweepSenders bounds the senders one pool TTL sweep handles.
	SweepSenders int
}

// LedgerConfig chooses the builder lane's JAM chain.
type LedgerConfig struct {
	// Kind is "jam" (a chain served over HTTP at URL, such as 'ledgerq
	// simledger --kind jam') or "sim" (the simulated JAM chain in this
	// process).
	Kind string `flag:"ledger" only:"ledger" help:"builder lane: jam (a JAM chain at --builder-ledger-url, such as 'ledgerq simledger --kind jam') or sim (a simulated JAM chain in this process)"`
	URL  string `flag:"ledger-url" only:"ledger" secret:"url" help:"builder lane: the JAM chain's URL, for --builder-ledger jam (for example http://127.0.0.1:19800)"`
	// EVMURL is the JSON-RPC of the EVM that executes the bundles, which
	// /rpc reads blocks, receipts, state and fees from; empty is URL's /evm
	// (what 'ledgerq simledger --kind jam' serves). Kind "sim" serves it in
	// this process.
	EVMURL string `flag:"evm-rpc-url" only:"ledger" secret:"url" help:"builder lane: the JSON-RPC of the EVM that executes the bundles, which /rpc reads blocks, receipts, balances, calls, gas estimates and fees from (empty: --builder-ledger-url's /evm; with --builder-ledger sim, the simulated chain's own)"`
	// Timeout bounds one call to the chain (its EVM JSON-RPC's and the
	// pool's nonce and balance reads included).
	Timeout time.Duration `flag:"ledger-timeout" help:"builder lane: timeout of one call to the JAM chain"`
	// Sim configures the simulated chain, for Kind "sim".
	Sim jam.Config `group:"sim-"`
	// Instance, when set, is used instead of building a chain from Kind;
	// PoolChain, when set, gives the pool its nonces instead of Instance,
	// and EVM, when set, is the EVM JSON-RPC instead of EVMURL's.
	Instance  ledger.BundleLedger
	PoolChain ledger.PoolChain
	EVM       ledger.EVMRPC
}

// Ledger kinds of the builder lane.
const (
	LedgerJAM = "jam"
	LedgerSim = "sim"
)

// PoolConfig configures the pool's intake: which transactions it takes
// (POST /rpc's eth_sendRawTransaction and POST /v1/pool/txs).
type PoolConfig struct {
	// ChainID is the chain the pool takes transactions for: eth_chainId,
	// and the only chain id a transaction may be signed for.
	ChainID int64 `flag:"chain-id" help:"builder lane: the EVM chain id transactions must be signed for (eth_chainId)"`
	// Limits are the pool's limits.
	Limits store.PoolLimits `group:"pool-"`
	// MaxTxSize is the largest transaction accepted, in bytes.
	MaxTxSize int `flag:"pool-max-tx-size" help:"builder lane: largest transaction accepted, in bytes"`
	// MinTip is the minimum price in wei (0 is a minimum like any other).
	// As in geth, it applies to the tip: a legacy transaction's gas price, a
	// dynamic-fee transaction's max priority fee per gas.
	MinTip *big.Int `flag:"pool-min-tip" value:"wei" help:"builder lane: minimum tip (a legacy transaction's gas price) in wei"`
	// BlockGasLimit is the gas limit of the block the intake judges a
	// transaction for: no transaction's may exceed it, nor the chain's
	// per-transaction cap of 2^24 (EIP-7825).
	BlockGasLimit uint64
	// RPCBatchLimit bounds the requests of one JSON-RPC batch.
	RPCBatchLimit int
}

// MaxPoolTxSize is geth's own pool's largest transaction (4 slots of
// 32 KiB), and what the table's CHECK allows.
const MaxPoolTxSize = 128 << 10

// defaults holds the default of every setting: WithDefaults fills those
// whose zero is not a setting of its own, Defaults the others too.
var defaults = Config{
	Ledger: LedgerConfig{
		Kind: LedgerJAM, Timeout: 5 * time.Second,
		Sim: jam.Config{FundDevAccounts: true},
	},
	Pool: PoolConfig{
		ChainID: 1337, Limits: store.DefaultPoolLimits(), MaxTxSize: 32 << 10, MinTip: big.NewInt(1_000_000_000),
		BlockGasLimit: 30_000_000, RPCBatchLimit: 100,
	},
	BundleSize: 100, MaxQueued: 16, Cores: 2,
	GuaranteeTimeout: 18 * time.Second, MaxVersions: 3, FinalityDepth: 2,
	SubmitBackoff: time.Second, SubmitBackoffMax: 30 * time.Second,
	BlocksPerRound: 64, SweepSenders: 100,
	RetentionAge: 7 * 24 * time.Hour, RetentionBatchSize: 1000, RetentionInterval: time.Minute,
}

// Defaults returns the lane's defaults: WithDefaults of the zero Config,
// and the defaults of the settings whose zero means something (a pool
// with --builder-pool-max-queued 0 holds no queued transaction,
// --builder-bundle-finality-depth 0 finalizes a bundle at its accumulation,
// --builder-retention-age 0 keeps bundles forever, and the simulated chain
// funds the development accounts unless told not to), which a zero Config
// leaves at zero. (--builder-pool-max-per-sender's
// default is its zero: no cap.)
func Defaults() Config {
	d := &defaults
	c := Config{}.WithDefaults()
	c.Pool.Limits.MaxQueued = d.Pool.Limits.MaxQueued
	c.Pool.Limits.AccountSlots = d.Pool.Limits.AccountSlots
	c.FinalityDepth = d.FinalityDepth
	c.RetentionAge = d.RetentionAge
	c.Ledger.Sim.FundDevAccounts = d.Ledger.Sim.FundDevAccounts
	return c
}

// WithDefaults returns c with every setting whose zero is not a setting of
// its own set to its default.
func (c Config) WithDefaults() Config {
	d := &defaults
	c.Ledger.Kind = cmp.Or(c.Ledger.Kind, d.Ledger.Kind)
	c.Ledger.Timeout = cmp.Or(c.Ledger.Timeout, d.Ledger.Timeout)
	c.Pool.ChainID = cmp.Or(c.Pool.ChainID, d.Pool.ChainID)
	c.Pool.Limits.MaxPending = cmp.Or(c.Pool.Limits.MaxPending, d.Pool.Limits.MaxPending)
	c.Pool.Limits.AccountQueue = cmp.Or(c.Pool.Limits.AccountQueue, d.Pool.Limits.AccountQueue)
	c.Pool.Limits.TTL = cmp.Or(c.Pool.Limits.TTL, d.Pool.Limits.TTL)
	c.Pool.MaxTxSize = cmp.Or(c.Pool.MaxTxSize, d.Pool.MaxTxSize)
	if c.Pool.MinTip == nil {
		c.Pool.MinTip = new(big.Int).Set(d.Pool.MinTip)
	}
	c.Pool.BlockGasLimit = cmp.Or(c.Pool.BlockGasLimit, d.Pool.BlockGasLimit)
	c.Pool.RPCBatchLimit = cmp.Or(c.Pool.RPCBatchLimit, d.Pool.RPCBatchLimit)
	c.BundleSize = cmp.Or(c.BundleSize, d.BundleSize)
	c.MaxQueued = cmp.Or(c.MaxQueued, d.MaxQueued)
	c.Cores = cmp.Or(c.Cores, d.Cores)
	c.GuaranteeTimeout = cmp.Or(c.GuaranteeTimeout, d.GuaranteeTimeout)
	c.MaxVersions = cmp.Or(c.MaxVersions, d.MaxVersions)
	c.SubmitBackoff = cmp.Or(c.SubmitBackoff, d.SubmitBackoff)
	c.SubmitBackoffMax = cmp.Or(c.SubmitBackoffMax, d.SubmitBackoffMax)
	c.BlocksPerRound = cmp.Or(c.BlocksPerRound, d.BlocksPerRound)
	c.SweepSenders = cmp.Or(c.SweepSenders, d.SweepSenders)
	c.RetentionBatchSize = cmp.Or(c.RetentionBatchSize, d.RetentionBatchSize)
	c.RetentionInterval = cmp.Or(c.RetentionInterval, d.RetentionInterval)
	return c
}

// Validate reports the first setting the lane's roles cannot work with,
// naming its flag. The choice of chain is Ledger.Validate's: a role is
// handed its chain.
func (c *Config) Validate() error {
	p := &c.Pool
	switch {
	case p.ChainID <= 0:
		return errors.New("--builder-chain-id must be positive")
	case c.Ledger.Timeout <= 0:
		return errors.New("--builder-ledger-timeout must be positive")
	case c.BundleSize < 1 || c.MaxQueued < 1 || c.Cores < 1:
		return errors.New("--builder-bundle-size, --builder-bundle-queue-size and --builder-cores must be at least 1")
	case c.GuaranteeTimeout <= 0 || c.MaxVersions < 1:
		return errors.New("--builder-guarantee-timeout must be positive and --builder-bundle-max-versions at least 1")
	case c.WindowOpen < 0 || c.WindowClose < 0 || (c.WindowOpen > 0 && c.WindowClose >= c.WindowOpen):
		return errors.New("--builder-submit-window-open must be longer than --builder-submit-window-close (both before the next slot; 0 scales 3 s and 1 s of a 6 s slot to the chain's slot)")
	case c.SubmitBackoff <= 0 || c.SubmitBackoffMax < c.SubmitBackoff:
		return errors.New("--builder-submit-backoff must be positive and --builder-submit-backoff-max at least as long")
	case p.MinTip == nil || p.MinTip.Sign() < 0:
		return errors.New("--builder-pool-min-tip must not be negative")
	case p.MaxTxSize < 1 || p.MaxTxSize > MaxPoolTxSize:
		return fmt.Errorf("--builder-pool-max-tx-size must be from 1 to %d bytes", MaxPoolTxSize)
	case p.Limits.MaxPending < 1 || p.Limits.AccountQueue < 1:
		return errors.New("--builder-pool-max-pending and --builder-pool-account-queue must be at least 1")
	case p.Limits.MaxQueued < 0 || p.Limits.MaxPerSender < 0 || p.Limits.AccountSlots < 0:
		return errors.New("--builder-pool-max-queued, --builder-pool-max-per-sender and --builder-pool-account-slots must not be negative (--builder-pool-max-per-sender 0: no cap; --builder-pool-account-slots 0: none, --builder-pool-max-pending bounds every sender)")
	case p.Limits.TTL <= 0:
		return errors.New("--builder-pool-ttl must be positive")
	case p.BlockGasLimit < 21000 || p.BlockGasLimit > math.MaxInt64:
		return fmt.Errorf("builder lane: the pool's block gas limit %d must be from 21000 to 2^63-1", p.BlockGasLimit)
	case p.RPCBatchLimit < 1:
		return fmt.Errorf("builder lane: the JSON-RPC batch limit %d must be at least 1", p.RPCBatchLimit)
	case c.RetentionAge < 0:
		return errors.New("--builder-retention-age must not be negative (0 keeps bundles and pool transactions forever)")
	case c.RetentionAge > 0 && (c.RetentionBatchSize < 1 || c.RetentionInterval <= 0):
		return errors.New("--builder-retention-batch-size must be at least 1 and --builder-retention-interval positive")
	case c.MaxBundles < 0 || c.BlocksPerRound < 1 || c.SweepSenders < 1:
		return errors.New("builder lane: MaxBundles must not be negative, BlocksPerRound and SweepSenders must be at least 1")
	}
	return nil
}

// BundlesPerRound is the most bundles one bundler round cuts: MaxBundles,
// or Cores when it is 0.
func (c *Config) BundlesPerRound() int { return cmp.Or(c.MaxBundles, c.Cores) }

// Validate reports a chain that cannot be opened, naming its flag.
func (l *LedgerConfig) Validate() error {
	switch {
	case l.Instance == nil && l.Kind != LedgerJAM && l.Kind != LedgerSim:
		return fmt.Errorf("--builder-ledger %q: want jam or sim", l.Kind)
	case l.Instance == nil && l.Kind == LedgerJAM && l.URL == "":
		return errors.New("--builder-ledger jam needs --builder-ledger-url (for example http://127.0.0.1:8546, 'ledgerq simledger --kind jam')")
	}
	for _, u := range []struct{ flag, v string }{{"--builder-ledger-url", l.URL}, {"--builder-evm-rpc-url", l.EVMURL}} {
		if u.v == "" {
			continue
		}
		if p, err := url.ParseRequestURI(u.v); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("%s %q: want an http or https URL", u.flag, u.v)
		}
	}
	return nil
}
