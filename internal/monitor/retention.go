package monitor

import (
	"context"
	"time"

	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// RetentionConfig configures BatchRetention.
type RetentionConfig struct {
	// Interval is the wait between rounds once the backlog is cleared; a
	// round that deleted a full BatchSize is followed by another at once.
	Interval time.Duration
	// DBTimeout bounds each round's delete.
	DBTimeout time.Duration
	// Age is how long a terminal batch is kept after it finished. Zero (or
	// less) turns retention off: rounds delete nothing and never touch the
	// database, so every row is kept.
	Age time.Duration
	// BatchSize is the most batches one round deletes (one statement, one
	// short transaction); it must be at least 1 when Age is set.
	BatchSize int
}

// BatchRetention deletes the batch lane's terminal batches (committed, valid,
// invalid) that finished more than Age ago, BatchSize at a time, so that the
// table and its indexes stay flat under churn (DESIGN §5). A batch that is
// not terminal is never deleted, whatever its age. Several processes may run
// it at once: each round skips the rows another round holds.
type BatchRetention struct {
	*loop.Loop
	cfg   RetentionConfig
	store *store.Store
	deps  loop.Deps
}

// NewBatchRetention returns the batch lane's retention service. It needs no
// NOTIFY channel: deps.Wake may be nil.
func NewBatchRetention(st *store.Store, deps loop.Deps, cfg RetentionConfig) *BatchRetention {
	r := &BatchRetention{cfg: cfg, store: st, deps: deps}
	r.Loop = loop.NewService("batch_retention", cfg.Interval, deps, cfg.BatchSize, r.RunOnce)
	return r
}

// RunOnce deletes up to BatchSize terminal batches that finished before
// now - Age and returns how many it deleted. With Age zero it returns 0 at
// once.
func (r *BatchRetention) RunOnce(ctx context.Context) (int, error) {
	if r.cfg.Age <= 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.DBTimeout)
	defer cancel()
	n, err := r.store.BatchDeleteFinished(ctx, store.BatchDeleteFinishedParams{
		Cutoff: r.deps.Clock.Now().Add(-r.cfg.Age), Max: r.cfg.BatchSize,
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		r.deps.Metrics.Transition("batch", "deleted", n)
		r.deps.Logger.Debug("retention: deleted finished batches", "count", n)
	}
	return n, nil
}
