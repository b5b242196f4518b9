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
	// DelayWindow is the delay window for a delayed batch (15 s by default,
	// Grid's figure); it doubles with each further attempt, up to DelayCap.
	DelayWindow time.Duration
	DelayCap    time.Duration
	// ReconcileInterval is how often the loop also admits the next batch of
	// services that no transaction admitted (rows written by hand): the
	// recovery path, a scan over the services. RunOnce always does it.
	ReconcileInterval time.Duration
	// ReconcileMax bounds the services admitted by one reconciliation.
	ReconcileMax int
}

// BatchQueuer runs the time-driven part of Hyperledger Grid's one-round
// serial strategy: unknown batches and delayed batches whose delay
// window passed are queued again. Admission — per service_id at most one
// batch at the ledger, in created_at order, ties broken by id — happens in
// the transactions that free a service (store.BatchInsert,
// BatchRecordSubmit, BatchRecordStatuses); the queuer reconciles what they
// could not see, every ReconcileInterval.
type BatchQueuer struct {
	*loop.Loop
	cfg   BatchConfig
	store *store.Store
	deps  loop.Deps

	lastReconcile time.Time // only the loop's goroutine touches it

	// OnQueued, when set, is called after a round queued batches: the
	// submitters of this process. Set it before Start.
	OnQueued func()
}

// NewBatchQueuer returns the batch lane's queuer.
func NewBatchQueuer(st *store.Store, deps loop.Deps, cfg BatchConfig) *BatchQueuer {
	q := &BatchQueuer{cfg: cfg, store: st, deps: deps}
	// One queuer round queues everything due at once: no second round.
	q.Loop = loop.NewService("batch_queuer", cfg.PollInterval, deps, 0, func(ctx context.Context) (int, error) {
		now := q.deps.Clock.Now()
		reconcile := now.Sub(q.lastReconcile) >= q.cfg.ReconcileInterval
		n, err := q.round(ctx, reconcile)
		if err == nil && reconcile {
			q.lastReconcile = now
		}
		return n, err
	})
	return q
}

// RunOnce runs one whole queuer round, reconciliation included, and returns
// how many batches it queued.
func (q *BatchQueuer) RunOnce(ctx context.Context) (int, error) {
	return q.round(ctx, true)
}

func (q *BatchQueuer) round(ctx context.Context, reconcile bool) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, q.cfg.DBTimeout)
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
