// Package monitor follows what was sent until the ledger gives a final answer.
// For the batch lane it asks the ledger about pending batches and about held
// batches whose submitter's lease expired (a submitter that died mid-send),
// and records COMMITTED, INVALID, PENDING and UNKNOWN as seed 001 says.
package monitor

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Config configures the monitor.
type Config struct {
	Interval time.Duration
	// BatchSize is the most batches asked about in one ledger call.
	BatchSize int
	// CheckInterval is the time between two checks of one pending batch.
	CheckInterval time.Duration
	// Lease is how long the monitor holds an expired held batch while it asks.
	Lease         time.Duration
	DBTimeout     time.Duration
	LedgerTimeout time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Interval: time.Second, BatchSize: 100, CheckInterval: time.Second, Lease: 60 * time.Second,
		DBTimeout: 10 * time.Second, LedgerTimeout: 30 * time.Second,
	}
}

// Monitor is the monitor service.
type Monitor struct {
	cfg    Config
	store  *store.Store
	ledger ledger.BatchLedger
	clock  clock.Clock
	logger *slog.Logger
	loop   *loop.Loop
}

// New returns a monitor. wake may be nil (poll only).
func New(st *store.Store, l ledger.BatchLedger, clk clock.Clock, logger *slog.Logger, cfg Config, wake <-chan struct{}) *Monitor {
	m := &Monitor{cfg: cfg, store: st, ledger: l, clock: clk, logger: logger}
	m.loop = loop.New(loop.Config{Name: "monitor", Interval: cfg.Interval, Wake: wake, Logger: logger},
		func(ctx context.Context) (bool, error) {
			n, err := m.RunOnce(ctx)
			return n == m.cfg.BatchSize, err
		})
	return m
}

// Start starts the loop.
func (m *Monitor) Start(ctx context.Context) error { return m.loop.Start(ctx) }

// Stop stops the loop after the current round.
func (m *Monitor) Stop() { m.loop.Stop() }

// RunOnce checks up to BatchSize batches with the ledger and records what it
// learned. It returns how many batches it checked.
func (m *Monitor) RunOnce(ctx context.Context) (int, error) {
	now := m.clock.Now()
	claimCtx, cancel := context.WithTimeout(ctx, m.cfg.DBTimeout)
	due, err := m.store.ClaimBatchesForCheck(claimCtx, now, now.Add(m.cfg.Lease), now.Add(m.cfg.CheckInterval), m.cfg.BatchSize)
	cancel()
	if err != nil || len(due) == 0 {
		return 0, err
	}
	ids := make([]string, len(due))
	for i, d := range due {
		ids[i] = d.ID
	}
	askCtx, cancel := context.WithTimeout(ctx, m.cfg.LedgerTimeout)
	statuses, err := m.ledger.BatchStatuses(askCtx, ids)
	cancel()
	if err != nil {
		// The claimed rows are checked again at their next check time or
		// when the monitor's lease on them runs out.
		return len(due), fmt.Errorf("asking the ledger for %d batch statuses: %w", len(ids), err)
	}

	outcomes := make([]store.StatusOutcome, 0, len(due))
	for _, d := range due {
		res, ok := statuses[d.ID]
		if !ok {
			res = ledger.BatchStatusResult{Status: ledger.BatchUnknown}
		}
		o := store.StatusOutcome{ID: d.ID, Attempt: d.Attempt, Reason: res.Reason}
		switch res.Status {
		case ledger.BatchCommitted:
			o.Status = store.BatchStatusCommitted
		case ledger.BatchInvalid:
			o.Status = store.BatchStatusInvalid
			if o.Reason == "" {
				o.Reason = "the ledger reported the batch invalid"
			}
		case ledger.BatchPending:
			if !d.Held {
				continue // still pending; the claim already moved its next check
			}
			o.Status = store.BatchStatusPending
		case ledger.BatchUnknown:
			o.Status = store.BatchStatusUnknown
			o.Reason = "the ledger does not know the batch"
		default:
			m.logger.Warn("monitor: ledger answered an unexpected status", "batch_id", d.ID, "status", res.Status)
			continue
		}
		outcomes = append(outcomes, o)
	}
	if len(outcomes) == 0 {
		return len(due), nil
	}
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.DBTimeout)
	defer cancel()
	done := m.clock.Now()
	if _, err := m.store.RecordBatchStatuses(recCtx, done, done.Add(m.cfg.CheckInterval), outcomes); err != nil {
		return len(due), err
	}
	return len(due), nil
}
