package monitor

import (
	"context"
	"fmt"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// BundleMonitor follows the JAM chain for the builder lane (docs/design.md,
// "The builder lane"): it imports every block since the last one it processed — never only
// the head — and applies their guarantees (first guarantee of any version
// wins, the core is freed), accumulations and finality; then it requeues
// bundles whose guarantee timed out, with the conditional update that
// requires no version guaranteed, and drops those past the retry limit once
// no version of them can still be guaranteed. A transaction the chain left
// out of its bundle's block is never reported executed: it is dropped with
// the chain's reason (or queued again for a nonce gap), logged and counted
// (store.BundleApplyBlocks). It also runs the pool's TTL
// sweep (expired transactions become dropped, reason expired).
type BundleMonitor struct {
	*loop.Loop
	cfg    builder.Config
	store  *store.Store
	ledger ledger.BundleLedger
	deps   loop.Deps

	// OnCoresFreed, when set, is called after a round freed cores or
	// requeued bundles (the bundle submitters of this process); OnDropped
	// after it returned transactions to the pool (the bundler): a dropped
	// bundle's, or ones the chain skipped for a nonce gap. Set them before
	// Start.
	OnCoresFreed func()
	OnDropped    func()
}

// NewBundleMonitor returns the builder lane's monitor, cfg and deps with
// their defaults, or the first setting that cannot work.
func NewBundleMonitor(st *store.Store, l ledger.BundleLedger, deps loop.Deps, cfg builder.Config) (*BundleMonitor, error) {
	cfg, deps = cfg.WithDefaults(), deps.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &BundleMonitor{cfg: cfg, store: st, ledger: l, deps: deps}
	m.Loop = loop.NewService("bundle_monitor", deps.PollInterval, deps, cfg.BlocksPerRound, m.RunOnce)
	return m, nil
}

// RunOnce imports up to BlocksPerRound blocks, checks timeouts and sweeps
// the pool; it returns how many blocks it imported.
func (m *BundleMonitor) RunOnce(ctx context.Context) (int, error) {
	blocks, head, err := m.newBlocks(ctx)
	if err != nil {
		return 0, err
	}
	dctx, cancel := context.WithTimeout(ctx, m.deps.DBTimeout)
	defer cancel()
	now := m.deps.Clock.Now()
	freed, requeued := false, false
	if len(blocks) > 0 {
		applied, err := m.store.BundleApplyBlocks(dctx, m.cfg.Pool.ChainID, blocks, m.cfg.FinalityDepth, now)
		if err != nil {
			return 0, fmt.Errorf("applying JAM blocks %d..%d: %w", blocks[0].Slot, blocks[len(blocks)-1].Slot, err)
		}
		m.deps.Metrics.Transition("bundle", string(store.BundleGuaranteed), applied.Guaranteed)
		m.deps.Metrics.Transition("bundle", string(store.BundleAccumulated), applied.Accumulated)
		m.deps.Metrics.Transition("bundle", string(store.BundleFinalized), applied.Finalized)
		if applied.IgnoredGuarantees+applied.IgnoredAccumulations > 0 {
			// A later guarantee of a bundle already guaranteed (the first one
			// wins), or one for a dropped bundle.
			m.deps.Logger.Info("JAM blocks named work packages of bundles past that state",
				"chain_id", m.cfg.Pool.ChainID, "guarantees", applied.IgnoredGuarantees, "accumulations", applied.IgnoredAccumulations,
				"from_slot", blocks[0].Slot, "to_slot", blocks[len(blocks)-1].Slot)
		}
		if applied.UnknownGuarantees+applied.UnknownAccumulations > 0 {
			// Another builder's packages on the same chain, or ours from a
			// database that was reset.
			m.deps.Logger.Debug("JAM blocks named work packages this database does not know",
				"chain_id", m.cfg.Pool.ChainID, "guarantees", applied.UnknownGuarantees, "accumulations", applied.UnknownAccumulations)
		}
		for _, sk := range applied.SkippedTxs {
			// The chain left it out of its bundle's block: it never ran.
			m.deps.Logger.Warn("bundle monitor: the chain skipped a pool transaction",
				"chain_id", m.cfg.Pool.ChainID, "tx_hash", sk.Hash, "sender", sk.Sender, "nonce", sk.Nonce,
				"block", sk.Bundle, "chain_reason", sk.Reason, "nonce_gap", sk.NonceGap, "state", string(sk.State))
		}
		m.deps.Metrics.Transition("pool", store.PoolDropSkipped, applied.SkippedDropped)
		if applied.UnknownSkipped > 0 {
			m.deps.Logger.Debug("JAM blocks named skipped transactions this database does not know",
				"chain_id", m.cfg.Pool.ChainID, "skipped", applied.UnknownSkipped)
		}
		freed = applied.Guaranteed > 0
		requeued = applied.SkippedRequeued > 0
	}
	res, err := m.store.BundleRetryTimedOut(dctx, store.BundleRetryTimedOutParams{
		ChainID: m.cfg.Pool.ChainID, Now: now, Timeout: m.cfg.GuaranteeTimeout, MaxVersions: m.cfg.MaxVersions, HeadSlot: head,
	})
	if err != nil {
		return len(blocks), fmt.Errorf("checking guarantee timeouts: %w", err)
	}
	for _, n := range res.Requeued {
		m.deps.Logger.Warn("bundle guarantee timed out: requeued with the next version", "chain_id", m.cfg.Pool.ChainID, "block", n)
	}
	for _, n := range res.Dropped {
		m.deps.Logger.Error("bundle dropped: its transactions return to the pool", "chain_id", m.cfg.Pool.ChainID, "block", n)
	}
	m.deps.Metrics.Transition("bundle", "requeued", len(res.Requeued))
	m.deps.Metrics.Transition("bundle", string(store.BundleDropped), len(res.Dropped))
	if (freed || len(res.Requeued) > 0 || len(res.Dropped) > 0) && m.OnCoresFreed != nil {
		m.OnCoresFreed()
	}
	if (len(res.Dropped) > 0 || requeued) && m.OnDropped != nil {
		m.OnDropped()
	}
	expired, _, err := m.store.PoolExpire(dctx, store.PoolExpireParams{Now: now, ChainID: m.cfg.Pool.ChainID, MaxSenders: m.cfg.SweepSenders})
	if err != nil {
		return len(blocks), fmt.Errorf("sweeping expired pool transactions: %w", err)
	}
	m.deps.Metrics.Transition("pool", "expired", int(expired))
	return len(blocks), nil
}

// newBlocks reads the blocks after the last processed one, and the head
// slot they reach. With none processed yet (a new database), it starts at
// the oldest recent block: no older block can hold a package of ours.
func (m *BundleMonitor) newBlocks(ctx context.Context) ([]ledger.JAMBlock, uint64, error) {
	dctx, cancel := context.WithTimeout(ctx, m.deps.DBTimeout)
	after, ok, err := m.store.BundleProcessedSlot(dctx, m.cfg.Pool.ChainID)
	cancel()
	if err != nil {
		return nil, 0, fmt.Errorf("reading the last processed JAM block: %w", err)
	}
	lctx, cancel := context.WithTimeout(ctx, m.cfg.Ledger.Timeout)
	defer cancel()
	if !ok {
		recent, err := m.ledger.RecentBlocks(lctx)
		if err != nil {
			return nil, 0, fmt.Errorf("reading the chain's recent blocks: %w", err)
		}
		if len(recent) == 0 {
			return nil, 0, nil
		}
		if recent[0].Number > 0 {
			after = recent[0].Number - 1
		}
	}
	blocks, err := m.ledger.Blocks(lctx, after, m.cfg.BlocksPerRound)
	if err != nil {
		return nil, 0, fmt.Errorf("reading JAM blocks after slot %d: %w", after, err)
	}
	head := after
	if len(blocks) > 0 {
		head = blocks[len(blocks)-1].Slot
	}
	return blocks, head, nil
}
