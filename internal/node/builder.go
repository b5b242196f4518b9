package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ledgerq/ledgerq/internal/builder"
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

// builderLane is the builder lane's part of a node.
type builderLane struct {
	ledger    ledger.BundleLedger
	poolChain ledger.PoolChain
	evm       ledger.EVMRPC
	closeLed  func()
	bundler   *queuer.Bundler
	submitter *submitter.BundleSubmitter
	monitor   *monitor.BundleMonitor
	retention *monitor.Retention
}

// buildBuilderLane opens the JAM chain and builds the bundler (queuer
// role), the bundle submitter (submitter role) and the bundle monitor with
// the pool's TTL sweep and the lane's retention (monitor role).
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
	if b.Ledger.Instance == nil && b.Ledger.Kind == builder.LedgerSim {
		if err := n.checkSimChainHasTheDatabases(ctx, lane.ledger); err != nil {
			return err
		}
	}
	led := lane.ledger
	loops := n.cfg.Loops
	if loops.Queuer {
		if lane.bundler, err = queuer.NewBundler(n.store, led, n.deps(notify.BundleQueuer), *b); err != nil {
			return err
		}
	}
	if loops.Submitter {
		dctx, cancel := context.WithTimeout(ctx, loops.DBTimeout)
		err := n.store.BundleEnsureCores(dctx, b.Pool.ChainID, b.Cores, n.clock.Now())
		cancel()
		if err != nil {
			return fmt.Errorf("builder lane: %w", err)
		}
		if lane.submitter, err = submitter.NewBundleSubmitter(n.store, led, n.deps(notify.BundleSubmitter), *b); err != nil {
			return err
		}
	}
	if loops.Monitor {
		if lane.monitor, err = monitor.NewBundleMonitor(n.store, led, n.deps(notify.BundleMonitor), *b); err != nil {
			return err
		}
		if b.RetentionAge > 0 {
			if lane.retention, err = monitor.NewBuilderRetention(n.store, n.deps(""), *b); err != nil {
				return err
			}
		}
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
	d := httpapi.Deps{Store: n.store, Wallets: wallets, Ready: n, Clock: n.clock, Logger: n.logger, Metrics: n.metrics, Version: n.cfg.Version,
		KeyChanges: n.listener.Subscribe(notify.APIKeys)}
	if b := n.builder; b != nil {
		d.Pool, d.PoolChain, d.EVM = &n.cfg.Builder, b.poolChain, b.evm
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
	if lc.Kind == builder.LedgerSim {
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
