package queuer

import (
	"context"
	"time"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// BatchQueuer runs the time-driven part of Hyperledger Grid's one-round
// serial strategy: unknown batches and delayed batches whose delay
// window passed are queued again. Admission — per service_id at most one
// batch at the ledger, in created_at order, ties broken by id — happens in
// the transactions that free a service (store.BatchInsert,
// BatchRecordSubmit, BatchRecordStatuses); the queuer reconciles what they
// could not see, every ReconcileInterval.
type BatchQueuer struct {
	*loop.Loop
	cfg   batch.Config
	store *store.Store
	deps  loop.Deps

	lastReconcile time.Time // only the loop's goroutine touches it

	// OnQueued, when set, is called after a round queued batches: the
	// submitters of this process. Set it before Start.
	OnQueued func()
}

// NewBatchQueuer returns the batch lane's queuer, cfg and deps with their
// defaults, or the first setting that cannot work.
func NewBatchQueuer(st *store.Store, deps loop.Deps, cfg batch.Config) (*BatchQueuer, error) {
	cfg, deps = cfg.WithDefaults(), deps.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	q := &BatchQueuer{cfg: cfg, store: st, deps: deps}
	// One queuer round queues everything due at once: no second round.
	q.Loop = loop.NewService("batch_queuer", deps.PollInterval, deps, 0, func(ctx context.Context) (int, error) {
		now := q.deps.Clock.Now()
		reconcile := now.Sub(q.lastReconcile) >= q.cfg.ReconcileInterval
		n, err := q.round(ctx, reconcile)
		if err == nil && reconcile {
			q.lastReconcile = now
		}
		return n, err
	})
	return q, nil
}

// RunOnce runs one whole queuer round, reconciliation included, and returns
// how many batches it queued.
func (q *BatchQueuer) RunOnce(ctx context.Context) (int, error) {
	return q.round(ctx, true)
}

func (q *BatchQueuer) round(ctx context.Context, reconcile bool) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, q.deps.DBTimeout)
	defer cancel()
	queued, err := q.store.BatchQueue(ctx, store.BatchQueueParams{
		Now: q.deps.Clock.Now(), DelayWindow: q.cfg.DelayWindow, DelayCap: q.cfg.DelayCap,
		Reconcile: reconcile, ReconcileMax: q.cfg.ReconcileMax,
	})
	if err != nil {
		return 0, err
	}
	if len(queued) > 0 {
		q.deps.Metrics.Transition("batch", "queued", len(queued))
		q.deps.Logger.Debug("queuer: queued batches", "count", len(queued))
		if q.OnQueued != nil {
			q.OnQueued()
		}
	}
	return len(queued), nil
}
