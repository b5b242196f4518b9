// Package submitter sends what the queuer released. For the batch lane it
// claims queued batches (SKIP LOCKED, with a lease), sends them to the ledger
// in one call, and records each outcome with an update that applies only while
// its claim still holds the batch. No database transaction is open during the
// ledger call.
package submitter

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

// Config configures the submitter.
type Config struct {
	Interval time.Duration
	// BatchSize is the most batches claimed and sent in one ledger call.
	BatchSize int
	// Lease is how long a claim holds a batch. It must exceed LedgerTimeout,
	// or the monitor may check a batch the submitter is still sending.
	Lease time.Duration
	// FirstCheck is how long after acceptance the monitor first asks about a batch.
	FirstCheck    time.Duration
	DBTimeout     time.Duration
	LedgerTimeout time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Interval: time.Second, BatchSize: 100, Lease: 60 * time.Second, FirstCheck: 500 * time.Millisecond,
		DBTimeout: 10 * time.Second, LedgerTimeout: 30 * time.Second,
	}
}

// Submitter is the submitter service.
type Submitter struct {
	cfg    Config
	store  *store.Store
	ledger ledger.BatchLedger
	clock  clock.Clock
	logger *slog.Logger
	loop   *loop.Loop
}

// New returns a submitter. wake may be nil (poll only).
func New(st *store.Store, l ledger.BatchLedger, clk clock.Clock, logger *slog.Logger, cfg Config, wake <-chan struct{}) *Submitter {
	s := &Submitter{cfg: cfg, store: st, ledger: l, clock: clk, logger: logger}
	s.loop = loop.New(loop.Config{Name: "submitter", Interval: cfg.Interval, Wake: wake, Logger: logger},
		func(ctx context.Context) (bool, error) {
			n, err := s.RunOnce(ctx)
			return n == s.cfg.BatchSize, err
		})
	return s
}

// Start starts the loop.
func (s *Submitter) Start(ctx context.Context) error { return s.loop.Start(ctx) }

// Stop stops claiming and waits for the batches in flight to be recorded.
func (s *Submitter) Stop() { s.loop.Stop() }

// RunOnce claims up to BatchSize queued batches, sends them and records the
// outcomes. It returns how many batches it claimed.
func (s *Submitter) RunOnce(ctx context.Context) (int, error) {
	now := s.clock.Now()
	claimCtx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
	claimed, err := s.store.ClaimQueuedBatches(claimCtx, now, now.Add(s.cfg.Lease), s.cfg.BatchSize)
	cancel()
	if err != nil || len(claimed) == 0 {
		return 0, err
	}

	batches := make([]ledger.Batch, len(claimed))
	for i, c := range claimed {
		batches[i] = ledger.Batch{ID: c.ID, Payload: c.Payload}
	}
	sendCtx, cancel := context.WithTimeout(ctx, s.cfg.LedgerTimeout)
	perBatch, callErr := s.ledger.SubmitBatches(sendCtx, batches)
	cancel()
	if callErr == nil && len(perBatch) != len(batches) {
		callErr = ledger.NewError(ledger.Indeterminate, fmt.Sprintf("ledger answered for %d of %d batches", len(perBatch), len(batches)), nil)
	}

	outcomes := make([]store.SubmitOutcome, len(claimed))
	counts := map[store.SubmitResult]int{}
	for i, c := range claimed {
		err := callErr
		if err == nil {
			err = perBatch[i]
		}
		o := store.SubmitOutcome{ID: c.ID, Attempt: c.Attempt, Result: store.SubmitAccepted}
		if err != nil {
			switch ledger.ClassOf(err) {
			case ledger.Transient:
				o.Result, o.Reason = store.SubmitDelayed, ledger.ReasonOf(err)
			case ledger.Deterministic:
				o.Result, o.Reason = store.SubmitRejected, ledger.ReasonOf(err)
			default:
				// Indeterminate: the ledger may have it. Treat it as sent; the
				// monitor asks, and an UNKNOWN answer sends it again.
				s.logger.Warn("submitter: outcome unknown, treating batch as sent", "batch_id", c.ID, "error", err)
			}
		}
		counts[o.Result]++
		outcomes[i] = o
	}

	// The outcome must be recorded even when shutdown cancelled ctx meanwhile:
	// the ledger call has happened.
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.DBTimeout)
	defer cancel()
	done := s.clock.Now()
	applied, err := s.store.RecordSubmitOutcomes(recCtx, done, done.Add(s.cfg.FirstCheck), outcomes)
	if err != nil {
		return len(claimed), err
	}
	if applied < len(outcomes) {
		s.logger.Warn("submitter: some claims expired before their outcome was recorded",
			"claimed", len(outcomes), "recorded", applied)
	}
	s.logger.Debug("submitter: sent batches", "claimed", len(claimed),
		"accepted", counts[store.SubmitAccepted], "delayed", counts[store.SubmitDelayed], "rejected", counts[store.SubmitRejected])
	return len(claimed), nil
}
