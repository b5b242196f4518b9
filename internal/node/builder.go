package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmrpc"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/submitter"
)

// BuilderConfig configures the builder lane (docs/design.md, "The builder
// lane"): the
// transaction pool behind POST /rpc and /v1/pool/txs, and the bundles cut
// from it and followed on a JAM chain. The lane runs when Enabled.
type BuilderConfig struct {
	Enabled bool
	Ledger  BuilderLedgerConfig
	// Pool is the intake: the chain id transactions are signed for, the
	// pool's limits, the largest transaction and the minimum tip. Its
	// ChainTimeout is Ledger.Timeout.
	Pool queuer.PoolConfig
	// BundleSize is the most transactions in a bundle; MaxQueued the bundle
	// queue's size (pending transactions wait while it is full).
	BundleSize int
	MaxQueued  int
	// Cores is the most bundles submitted at once (2 by default).
	Cores int
	// GuaranteeTimeout is how long a submitted bundle waits for a guarantee
	// before its next version is queued (18 s by default); MaxVersions the
	// retry limit (3) past which it is dropped.
	GuaranteeTimeout time.Duration
	MaxVersions      int
	// FinalityDepth is how many JAM blocks after accumulation a bundle is
	// finalized.
	FinalityDepth uint64
	// WindowOpen and WindowClose: the submission window, before each
	// timeslot (jamduna's EVM builder: 3 s to 1 s before a 6 s slot). Zero
	// scales that window to the chain's slot length.
	WindowOpen, WindowClose time.Duration
	// SubmitBackoff and SubmitBackoffMax bound the wait after a refused
	// submit.
	SubmitBackoff, SubmitBackoffMax time.Duration
}

// BuilderLedgerConfig chooses the builder lane's JAM chain.
type BuilderLedgerConfig struct {
	// Kind is "jam" (a chain served over HTTP at URL, such as 'ledgerq
	// simledger --kind jam') or "sim" (the simulated JAM chain in this
	// process).
	Kind string
	URL  string
	// EVMURL is the JSON-RPC of the EVM that executes the bundles, which
	// /rpc reads blocks, receipts, state and fees from; empty is URL's /evm
	// (what 'ledgerq simledger --kind jam' serves). Kind "sim" serves it in
	// this process.
	EVMURL string
	// Timeout bounds one call to the chain (its EVM JSON-RPC's included).
	Timeout time.Duration
	// Sim configures the simulated chain, for Kind "sim".
	Sim jam.Config
	// Instance, when set, is used instead of building a chain from Kind;
	// PoolChain, when set, gives the pool its nonces instead of Instance,
	// and EVM, when set, is the EVM JSON-RPC instead of EVMURL's.
	Instance  ledger.BundleLedger
	PoolChain ledger.PoolChain
	EVM       ledger.EVMRPC
}

// Builder ledger kinds.
const (
	BuilderLedgerJAM = "jam"
	BuilderLedgerSim = "sim"
)

// builderDefaults are the builder lane's defaults.
func builderDefaults() BuilderConfig {
	return BuilderConfig{
		Ledger: BuilderLedgerConfig{Kind: BuilderLedgerJAM, Timeout: 5 * time.Second,
			Sim: jam.Config{FundDevAccounts: true}},
		Pool:       queuer.DefaultPoolConfig(1337),
		BundleSize: 100, MaxQueued: 16, Cores: 2,
		GuaranteeTimeout: 18 * time.Second, MaxVersions: 3, FinalityDepth: 2,
		SubmitBackoff: time.Second, SubmitBackoffMax: 30 * time.Second,
	}
}

// validate reports the first builder setting that cannot work.
func (b *BuilderConfig) validate() error {
	if !b.Enabled {
		return nil
	}
	l := &b.Ledger
	switch {
	case b.Pool.ChainID <= 0:
		return errors.New("--builder-chain-id must be positive")
	case l.Instance == nil && l.Kind != BuilderLedgerJAM && l.Kind != BuilderLedgerSim:
		return fmt.Errorf("--builder-ledger %q: want jam or sim", l.Kind)
	case l.Instance == nil && l.Kind == BuilderLedgerJAM && l.URL == "":
		return errors.New("--builder-ledger jam needs --builder-ledger-url (for example http://127.0.0.1:8546, 'ledgerq simledger --kind jam')")
	case l.Timeout <= 0:
		return errors.New("--builder-ledger-timeout must be positive")
	case b.BundleSize < 1 || b.MaxQueued < 1 || b.Cores < 1:
		return errors.New("--bundle-size, --bundle-queue-size and --builder-cores must be at least 1")
	case b.GuaranteeTimeout <= 0 || b.MaxVersions < 1:
		return errors.New("--guarantee-timeout must be positive and --bundle-max-versions at least 1")
	case b.WindowOpen < 0 || b.WindowClose < 0 || (b.WindowOpen > 0 && b.WindowClose >= b.WindowOpen):
		return errors.New("--submit-window-open must be longer than --submit-window-close (both before the next slot; 0 scales 3 s and 1 s of a 6 s slot to the chain's slot)")
	case b.SubmitBackoff <= 0 || b.SubmitBackoffMax < b.SubmitBackoff:
		return errors.New("--submit-backoff must be positive and --submit-backoff-max at least as long")
	case b.Pool.MinTip == nil || b.Pool.MinTip.Sign() < 0:
		return errors.New("--pool-min-tip must not be negative")
	case b.Pool.MaxTxSize < 1 || b.Pool.MaxTxSize > queuer.MaxPoolTxSize:
		return fmt.Errorf("--pool-max-tx-size must be from 1 to %d bytes", queuer.MaxPoolTxSize)
	case b.Pool.Limits.MaxPending < 1 || b.Pool.Limits.MaxPerSender < 1 || b.Pool.Limits.MaxQueued < 0:
		return errors.New("--pool-max-pending and --pool-max-per-sender must be at least 1, --pool-max-queued at least 0")
	case b.Pool.Limits.TTL <= 0:
		return errors.New("--pool-ttl must be positive")
	}
	for flag, v := range map[string]string{"--builder-ledger-url": l.URL, "--builder-evm-rpc-url": l.EVMURL} {
		if v == "" {
			continue
		}
		if u, err := url.ParseRequestURI(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s %q: want an http or https URL", flag, v)
		}
	}
	return b.poolConfig().Validate()
}

// poolConfig is the intake's configuration: b.Pool, whose chain calls are
// bounded by the lane's ledger timeout.
func (b *BuilderConfig) poolConfig() queuer.PoolConfig {
	c := b.Pool
	c.ChainTimeout = b.Ledger.Timeout
	return c
}

// builderLane is the builder lane's part of a node.
type builderLane struct {
	ledger    ledger.BundleLedger
	poolChain ledger.PoolChain
	evm       ledger.EVMRPC
	closeLed  func()
	bundler   *queuer.Bundler
	submitter *submitter.BundleSubmitter
	monitor   *monitor.BundleMonitor
}

// buildBuilderLane opens the JAM chain and builds the bundler (queuer
// role), the bundle submitter (submitter role) and the bundle monitor with
// the pool's TTL sweep (monitor role).
func (n *Node) buildBuilderLane(ctx context.Context) error {
	b := &n.cfg.Builder
	if !b.Enabled {
		return nil
	}
	lane, err := n.newBuilderChain()
	if err != nil {
		return err
	}
	n.builder = lane
	if b.Ledger.Instance == nil && b.Ledger.Kind == BuilderLedgerSim {
		if err := n.checkSimChainHasTheDatabases(ctx, lane.ledger); err != nil {
			return err
		}
	}
	led := lane.ledger
	loops := n.cfg.Loops
	if loops.Queuer {
		lane.bundler = queuer.NewBundler(n.store, led, n.deps(notify.BundleQueuer), queuer.BundlerConfig{
			ChainID: b.Pool.ChainID, PollInterval: loops.PollInterval, DBTimeout: loops.DBTimeout, LedgerTimeout: b.Ledger.Timeout,
			// A round cuts what one submission window takes (and runs again
			// at once when it cut that much), so the chain's lock it holds
			// never keeps the monitor's guarantees, and the cores they free,
			// waiting for a long cut.
			BundleSize: b.BundleSize, MaxQueued: b.MaxQueued, MaxBundles: b.Cores, Cores: b.Cores,
		})
	}
	if loops.Submitter {
		dctx, cancel := context.WithTimeout(ctx, loops.DBTimeout)
		err := n.store.BundleEnsureCores(dctx, b.Pool.ChainID, b.Cores, n.clock.Now())
		cancel()
		if err != nil {
			return fmt.Errorf("builder lane: %w", err)
		}
		lane.submitter = submitter.NewBundleSubmitter(n.store, led, n.deps(notify.BundleSubmitter), submitter.BundleConfig{
			ChainID: b.Pool.ChainID, PollInterval: loops.PollInterval, DBTimeout: loops.DBTimeout, LedgerTimeout: b.Ledger.Timeout,
			Cores: b.Cores, WindowOpen: b.WindowOpen, WindowClose: b.WindowClose,
			MinBackoff: b.SubmitBackoff, MaxBackoff: b.SubmitBackoffMax,
		})
	}
	if loops.Monitor {
		lane.monitor = monitor.NewBundleMonitor(n.store, led, n.deps(notify.BundleMonitor), monitor.BundleConfig{
			ChainID: b.Pool.ChainID, PollInterval: loops.PollInterval, DBTimeout: loops.DBTimeout, LedgerTimeout: b.Ledger.Timeout,
			BlocksPerRound: 64, FinalityDepth: b.FinalityDepth, GuaranteeTimeout: b.GuaranteeTimeout,
			MaxVersions: b.MaxVersions, SweepSenders: 100,
		})
	}
	// This process's loops hand each other work without waiting for a poll.
	if lane.bundler != nil && lane.submitter != nil {
		lane.bundler.OnCut = lane.submitter.Poke
	}
	if lane.submitter != nil && lane.monitor != nil {
		lane.monitor.OnCoresFreed = lane.submitter.Poke
	}
	if lane.bundler != nil && lane.monitor != nil {
		lane.monitor.OnDropped = lane.bundler.Poke
	}
	return nil
}

func (n *Node) builderLedgerName() string {
	if n.cfg.Builder.Ledger.Instance != nil {
		return "given"
	}
	return n.cfg.Builder.Ledger.Kind
}

// apiDeps are the HTTP API's dependencies: the builder lane's ingress is on
// only with the lane.
func (n *Node) apiDeps(wallets *keystore.Registry) httpapi.Deps {
	d := httpapi.Deps{Store: n.store, Wallets: wallets, Ready: n, Clock: n.clock, Logger: n.logger, Metrics: n.metrics, Version: n.cfg.Version}
	if b := n.builder; b != nil {
		pc := n.cfg.Builder.poolConfig()
		d.Pool, d.PoolChain, d.EVM = &pc, b.poolChain, b.evm
	}
	return d
}

// checkSimChainHasTheDatabases refuses a simulated chain that has not
// executed the bundles the database says it executed: a fresh chain (no
// journal, or another one) beside a database that outlived it. The bundler
// would cut on a parent the chain never saw, and nothing would run again.
func (n *Node) checkSimChainHasTheDatabases(ctx context.Context, led ledger.BundleLedger) error {
	chainID := n.cfg.Builder.Pool.ChainID
	dctx, cancel := context.WithTimeout(ctx, n.cfg.Loops.DBTimeout)
	defer cancel()
	heads, err := n.store.BundleHeads(dctx, chainID)
	if err != nil || heads.Executed == 0 {
		return err
	}
	info, err := led.Info(dctx)
	if err != nil {
		return fmt.Errorf("builder lane: the simulated JAM chain: %w", err)
	}
	if info.Executed.Number >= heads.Executed {
		return nil
	}
	journal := n.cfg.Builder.Ledger.Sim.Journal
	if journal == "" {
		journal = "none: it is kept in memory"
	}
	return fmt.Errorf("builder lane: the database has bundles up to %d executed on chain %d, but the simulated JAM chain (journal %s) has executed only up to %d: "+
		"they are not the same chain. Start with the journal that belongs to this database (--builder-sim-journal), or with a database of its own",
		heads.Executed, chainID, journal, info.Executed.Number)
}

// newBuilderChain returns the builder lane with its JAM chain, the pool's
// view of its EVM service's nonces, its EVM JSON-RPC, and what closes them.
func (n *Node) newBuilderChain() (*builderLane, error) {
	lc := &n.cfg.Builder.Ledger
	if lc.Instance != nil {
		lane := &builderLane{ledger: lc.Instance, poolChain: lc.PoolChain, evm: lc.EVM, closeLed: func() {}}
		if lane.poolChain == nil {
			p, ok := lc.Instance.(ledger.PoolChain)
			if !ok {
				return nil, errors.New("builder lane: the given chain gives no nonces and no PoolChain is set")
			}
			lane.poolChain = p
		}
		if lane.evm == nil && lc.EVMURL != "" {
			evm, err := evmrpc.New(evmrpc.Config{URL: lc.EVMURL, Timeout: lc.Timeout})
			if err != nil {
				return nil, fmt.Errorf("builder lane: %w", err)
			}
			lane.evm = evm
		}
		return lane, nil
	}
	if lc.Kind == BuilderLedgerSim {
		cfg := lc.Sim
		if cfg.Clock == nil {
			cfg.Clock = n.clock
		}
		if cfg.ChainID == 0 {
			cfg.ChainID = n.cfg.Builder.Pool.ChainID
		}
		c, err := jam.Open(cfg)
		if err != nil {
			return nil, fmt.Errorf("builder lane: the simulated JAM chain: %w", err)
		}
		evm, err := evmrpc.New(evmrpc.Config{Handler: c.EVMHandler(), Timeout: lc.Timeout})
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("builder lane: %w", err)
		}
		return &builderLane{ledger: c, poolChain: c, evm: evm, closeLed: func() {
			if err := c.Close(); err != nil {
				n.logger.Error("builder lane: closing the simulated JAM chain", "error", err)
			}
		}}, nil
	}
	c := jam.NewClient(lc.URL, &http.Client{Timeout: lc.Timeout})
	evmURL := lc.EVMURL
	if evmURL == "" {
		evmURL = strings.TrimSuffix(lc.URL, "/") + "/evm"
	}
	evm, err := evmrpc.New(evmrpc.Config{URL: evmURL, Timeout: lc.Timeout})
	if err != nil {
		return nil, fmt.Errorf("builder lane: --builder-evm-rpc-url: %w", err)
	}
	return &builderLane{ledger: c, poolChain: c, evm: evm, closeLed: func() {}}, nil
}
