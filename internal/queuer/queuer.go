// Package queuer decides what may be sent now. For the batch lane it runs
// Hyperledger Grid's one-round serial strategy (seed 001): per service_id, at
// most one batch is at the ledger, and batches go out in created_at order.
package queuer

import (
	"context"
	"log/slog"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Config configures the queuer.
type Config struct {
	// Interval is the poll interval.
	Interval time.Duration
	// DelayBase is the seed's delay window for a delayed batch (15 s); it
	// doubles with each further attempt, up to DelayCap.
	DelayBase time.Duration
	DelayCap  time.Duration
	// DBTimeout bounds each database call.
	DBTimeout time.Duration
}

// DefaultConfig returns the seed's defaults.
func DefaultConfig() Config {
	return Config{Interval: time.Second, DelayBase: 15 * time.Second, DelayCap: 5 * time.Minute, DBTimeout: 10 * time.Second}
}

// Queuer is the queuer service.
type Queuer struct {
	cfg    Config
	store  *store.Store
	clock  clock.Clock
	logger *slog.Logger
	loop   *loop.Loop
}

// New returns a queuer. wake may be nil (poll only).
func New(st *store.Store, clk clock.Clock, logger *slog.Logger, cfg Config, wake <-chan struct{}) *Queuer {
	q := &Queuer{cfg: cfg, store: st, clock: clk, logger: logger}
	q.loop = loop.New(loop.Config{Name: "queuer", Interval: cfg.Interval, Wake: wake, Logger: logger},
		func(ctx context.Context) (bool, error) {
			_, err := q.RunOnce(ctx)
			return false, err
		})
	return q
}

// Start starts the loop; Stop stops it (see package loop).
func (q *Queuer) Start(ctx context.Context) error { return q.loop.Start(ctx) }

// Stop stops the loop after the current round.
func (q *Queuer) Stop() { q.loop.Stop() }

// RunOnce runs one queuer round and returns how many batches it queued.
func (q *Queuer) RunOnce(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, q.cfg.DBTimeout)
	defer cancel()
	queued, err := q.store.QueueBatches(ctx, q.clock.Now(), q.cfg.DelayBase, q.cfg.DelayCap)
	if err != nil {
		return 0, err
	}
	if len(queued) > 0 {
		q.logger.Debug("queuer: queued batches", "count", len(queued))
	}
	return len(queued), nil
}
