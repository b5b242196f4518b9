package queuer

import (
	"context"
	"time"

	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// BatchConfig configures the BatchQueuer.
type BatchConfig struct {
	// PollInterval is the longest the loop waits between rounds.
	PollInterval time.Duration
	// DBTimeout bounds each database call.
	DBTimeout time.Duration
	// DelayWindow is the seed's delay window for a delayed batch (15 s); it
	// doubles with each further attempt, up to DelayCap.
	DelayWindow time.Duration
	DelayCap    time.Duration
}

// BatchQueuer runs Hyperledger Grid's one-round serial strategy (seed 001):
// per service_id at most one batch is at the ledger, and batches go out in
// created_at order, ties broken by id.
type BatchQueuer struct {
	*loop.Loop
	cfg   BatchConfig
	store *store.Store
	deps  loop.Deps
}

// NewBatchQueuer returns the batch lane's queuer.
func NewBatchQueuer(st *store.Store, deps loop.Deps, cfg BatchConfig) *BatchQueuer {
	q := &BatchQueuer{cfg: cfg, store: st, deps: deps}
	// One queuer round queues everything due at once: no second round.
	q.Loop = loop.NewService("batch_queuer", cfg.PollInterval, deps, 0, q.RunOnce)
	return q
}

// RunOnce runs one queuer round and returns how many batches it queued.
func (q *BatchQueuer) RunOnce(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, q.cfg.DBTimeout)
	defer cancel()
	queued, err := q.store.BatchQueue(ctx, store.BatchQueueParams{
		Now: q.deps.Clock.Now(), DelayWindow: q.cfg.DelayWindow, DelayCap: q.cfg.DelayCap,
	})
	if err != nil {
		return 0, err
	}
	if len(queued) > 0 {
		q.deps.Metrics.Transition("batch", "queued", len(queued))
		q.deps.Logger.Debug("queuer: queued batches", "count", len(queued))
	}
	return len(queued), nil
}
