package queuer

import (
	"context"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// BundlerConfig configures the Bundler.
type BundlerConfig struct {
	// ChainID is the EVM chain the pool takes transactions for.
	ChainID int64
	// PollInterval is the longest the loop waits between rounds.
	PollInterval time.Duration
	// DBTimeout bounds the database call; LedgerTimeout each chain call.
	DBTimeout     time.Duration
	LedgerTimeout time.Duration
	// BundleSize is the most transactions in one bundle.
	BundleSize int
	// MaxQueued is the bundle queue's size: with that many bundles queued,
	// pending transactions stay pending.
	MaxQueued int
	// MaxBundles is the most bundles one round cuts.
	MaxBundles int
	// Cores is the number of cores (the anchor offset counts bundles ahead
	// per core).
	Cores int
}

// Bundler cuts the pool's pending transactions into bundles (the builder
// loop; docs/design.md, "The builder lane"): in (sender, nonce) order, with consecutive block
// numbers, each bundle created and its transactions marked included in one
// database transaction (store.BundleCut), so a transaction is never in the
// pool and in a bundle at once, nor in neither.
type Bundler struct {
	*loop.Loop
	cfg    BundlerConfig
	store  *store.Store
	ledger ledger.BundleLedger
	deps   loop.Deps

	// OnCut, when set, is called after a round cut bundles: the bundle
	// submitters of this process. Set it before Start.
	OnCut func()
}

// NewBundler returns the builder lane's bundler.
func NewBundler(st *store.Store, l ledger.BundleLedger, deps loop.Deps, cfg BundlerConfig) *Bundler {
	b := &Bundler{cfg: cfg, store: st, ledger: l, deps: deps}
	b.Loop = loop.NewService("bundler", cfg.PollInterval, deps, cfg.MaxBundles, b.RunOnce)
	return b
}

// RunOnce cuts what is pending into bundles and returns how many it cut.
func (b *Bundler) RunOnce(ctx context.Context) (int, error) {
	lctx, cancel := context.WithTimeout(ctx, b.cfg.LedgerTimeout)
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
	ctx, cancel := context.WithTimeout(ctx, b.cfg.DBTimeout)
	defer cancel()
	bundles, err := b.store.BundleCut(ctx, store.BundleCutParams{
		ChainID: b.cfg.ChainID, Size: b.cfg.BundleSize, MaxQueued: b.cfg.MaxQueued, MaxBundles: b.cfg.MaxBundles,
		Executed: info.Executed, Recent: recent, Cores: b.cfg.Cores, Now: b.deps.Clock.Now(),
	})
	if err != nil {
		return 0, err
	}
	for _, bd := range bundles {
		b.deps.Logger.Info("bundle cut", "chain_id", b.cfg.ChainID, "block", bd.Number, "txs", bd.TxCount)
	}
	b.deps.Metrics.Transition("bundle", string(store.BundleQueued), len(bundles))
	if len(bundles) > 0 && b.OnCut != nil {
		b.OnCut()
	}
	return len(bundles), nil
}
