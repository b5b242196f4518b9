package queuer

import (
	"context"
	"fmt"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Bundler cuts the pool's pending transactions into bundles (the builder
// loop; docs/design.md, "The builder lane"): in (sender, nonce) order, with consecutive block
// numbers, each bundle created and its transactions marked included in one
// database transaction (store.BundleCut), so a transaction is never in the
// pool and in a bundle at once, nor in neither.
type Bundler struct {
	*loop.Loop
	cfg    builder.Config
	store  *store.Store
	ledger ledger.BundleLedger
	deps   loop.Deps

	// OnCut, when set, is called after a round cut bundles: the bundle
	// submitters of this process. Set it before Start.
	OnCut func()
}

// NewBundler returns the builder lane's bundler, cfg and deps with their
// defaults, or the first setting that cannot work.
func NewBundler(st *store.Store, l ledger.BundleLedger, deps loop.Deps, cfg builder.Config) (*Bundler, error) {
	cfg, deps = cfg.WithDefaults(), deps.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Bundler{cfg: cfg, store: st, ledger: l, deps: deps}
	b.Loop = loop.NewService("bundler", deps.PollInterval, deps, cfg.BundlesPerRound(), b.RunOnce)
	return b, nil
}

// RunOnce cuts what is pending into bundles and returns how many it cut.
func (b *Bundler) RunOnce(ctx context.Context) (int, error) {
	lctx, cancel := context.WithTimeout(ctx, b.cfg.Ledger.Timeout)
	info, err := b.ledger.Info(lctx)
	if err == nil {
		var recent []ledger.BlockRef
		recent, err = b.ledger.RecentBlocks(lctx)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("reading the chain's recent blocks: %w", err)
		}
		return b.cut(ctx, info, recent)
	}
	cancel()
	return 0, fmt.Errorf("reading the chain's info: %w", err)
}

func (b *Bundler) cut(ctx context.Context, info ledger.ChainInfo, recent []ledger.BlockRef) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, b.deps.DBTimeout)
	defer cancel()
	bundles, err := b.store.BundleCut(ctx, store.BundleCutParams{
		ChainID: b.cfg.Pool.ChainID, Size: b.cfg.BundleSize, MaxQueued: b.cfg.MaxQueued, MaxBundles: b.cfg.BundlesPerRound(),
		GasLimit: b.cfg.Pool.BlockGasLimit,
		Executed: info.Executed, Recent: recent, Cores: b.cfg.Cores, Now: b.deps.Clock.Now(),
	})
	if err != nil {
		return 0, err
	}
	for _, bd := range bundles {
		b.deps.Logger.Info("bundle cut", "chain_id", b.cfg.Pool.ChainID, "block", bd.Number, "txs", bd.TxCount)
	}
	b.deps.Metrics.Transition("bundle", string(store.BundleQueued), len(bundles))
	if len(bundles) > 0 && b.OnCut != nil {
		b.OnCut()
	}
	return len(bundles), nil
}
