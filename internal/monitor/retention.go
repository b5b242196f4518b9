package monitor

import (
	"context"
	"time"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// RetentionConfig configures a Retention.
type RetentionConfig struct {
	// Interval is the wait between rounds once the backlog is cleared; a
	// round that deleted a full BatchSize is followed by another at once.
	Interval time.Duration
	// DBTimeout bounds each round's delete.
	DBTimeout time.Duration
	// Age is how long a finished row is kept after it finished. Zero (or
	// less) turns retention off: rounds delete nothing and never touch the
	// database, so every row is kept.
	Age time.Duration
	// BatchSize is the most rows one round deletes (one statement, one
	// short transaction); it must be at least 1 when Age is set.
	BatchSize int
}

// Retention deletes one lane's finished rows that finished more than Age
// ago, BatchSize at a time, so that the lane's tables and indexes stay flat
// under churn (docs/operations.md, "Retention"). A row that has not finished
// is never deleted, whatever its age. Several processes may run it at once:
// each round skips the rows another round holds.
type Retention struct {
	*loop.Loop
	cfg    RetentionConfig
	lane   string
	delete func(ctx context.Context, cutoff time.Time, max int) (int64, error)
	deps   loop.Deps
}

// NewBatchRetention returns the batch lane's retention service: terminal
// batches (committed, valid, invalid). It needs no
// NOTIFY channel: deps.Wake may be nil.
//
// cfg and deps get their defaults; it returns the first setting that
// cannot work.
func NewBatchRetention(st *store.Store, deps loop.Deps, cfg batch.Config) (*Retention, error) {
	cfg, deps = cfg.WithDefaults(), deps.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc := RetentionConfig{Interval: cfg.RetentionInterval, DBTimeout: deps.DBTimeout, Age: cfg.RetentionAge, BatchSize: cfg.RetentionBatchSize}
	return newRetention("batch", deps, rc, func(ctx context.Context, cutoff time.Time, max int) (int64, error) {
		n, err := st.BatchDeleteFinished(ctx, store.BatchDeleteFinishedParams{Cutoff: cutoff, Max: max})
		return int64(n), err
	}), nil
}

// NewTaskRetention returns the wallet lane's retention service: send-tx
// tasks that ended (done or error), with their transaction attempts, and
// the wallets' policy refusals recorded before the same cutoff, each up to
// BatchSize a round; a round counts the rows of both.
func NewTaskRetention(st *store.Store, deps loop.Deps, cfg RetentionConfig) *Retention {
	return newRetention("wallet", deps, cfg, func(ctx context.Context, cutoff time.Time, batch int) (int64, error) {
		tasks, err := st.TaskDeleteFinished(ctx, store.TaskDeleteFinishedParams{Before: cutoff, Max: batch})
		if err != nil {
			return tasks, err
		}
		refusals, err := st.WalletPolicyRefusalsDeleteOld(ctx, cutoff, batch)
		return tasks + refusals, err
	})
}

func newRetention(lane string, deps loop.Deps, cfg RetentionConfig, del func(context.Context, time.Time, int) (int64, error)) *Retention {
	r := &Retention{cfg: cfg, lane: lane, delete: del, deps: deps}
	r.Loop = loop.NewService(lane+"_retention", cfg.Interval, deps, cfg.BatchSize, r.RunOnce)
	return r
}

// RunOnce deletes up to BatchSize finished rows that finished before
// now - Age and returns how many it deleted. With Age zero it returns 0 at
// once.
func (r *Retention) RunOnce(ctx context.Context) (int, error) {
	if r.cfg.Age <= 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.DBTimeout)
	defer cancel()
	n, err := r.delete(ctx, r.deps.Clock.Now().Add(-r.cfg.Age), r.cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		r.deps.Metrics.Transition(r.lane, "deleted", int(n))
		r.deps.Logger.Debug("retention: deleted finished rows", "lane", r.lane, "count", n)
	}
	return int(n), nil
}
