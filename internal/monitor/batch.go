package monitor

import (
	"context"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// BatchConfig configures the BatchMonitor.
type BatchConfig struct {
	PollInterval  time.Duration
	DBTimeout     time.Duration
	LedgerTimeout time.Duration
	// CheckBatchSize is the most batches asked about in one ledger call.
	CheckBatchSize int
	// CheckInterval is the time between two checks of one pending batch.
	CheckInterval time.Duration
	// ClaimLease is how long the monitor holds an expired held batch while it
	// asks the ledger (the submitter's lease, taken over).
	ClaimLease time.Duration
}

// BatchMonitor asks the ledger about pending batches and about held batches
// whose submitter's lease expired (a submitter that died mid-send), and
// records COMMITTED, INVALID, PENDING and UNKNOWN as seed 001 says.
type BatchMonitor struct {
	*loop.Loop
	cfg    BatchConfig
	store  *store.Store
	ledger ledger.BatchLedger
	deps   loop.Deps
}

// NewBatchMonitor returns the batch lane's monitor.
func NewBatchMonitor(st *store.Store, l ledger.BatchLedger, deps loop.Deps, cfg BatchConfig) *BatchMonitor {
	m := &BatchMonitor{cfg: cfg, store: st, ledger: l, deps: deps}
	m.Loop = loop.NewService("batch_monitor", cfg.PollInterval, deps, cfg.CheckBatchSize, m.RunOnce)
	return m
}

// RunOnce checks up to CheckBatchSize batches with the ledger and records what
// it learned. It returns how many batches it checked.
func (m *BatchMonitor) RunOnce(ctx context.Context) (int, error) {
	now := m.deps.Clock.Now()
	claimCtx, cancel := context.WithTimeout(ctx, m.cfg.DBTimeout)
	due, err := m.store.BatchClaimForCheck(claimCtx, store.BatchClaimForCheckParams{
		Now: now, LeaseUntil: now.Add(m.cfg.ClaimLease), NextCheckAt: now.Add(m.cfg.CheckInterval), Max: m.cfg.CheckBatchSize,
	})
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
			m.deps.Logger.Warn("monitor: ledger answered an unexpected status", "batch_id", d.ID, "status", res.Status)
			continue
		}
		outcomes = append(outcomes, o)
	}
	if len(outcomes) == 0 {
		return len(due), nil
	}
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.DBTimeout)
	defer cancel()
	done := m.deps.Clock.Now()
	applied, err := m.store.BatchRecordStatuses(recCtx, store.BatchRecordStatusesParams{
		Now: done, NextCheckAt: done.Add(m.cfg.CheckInterval), Outcomes: outcomes,
	})
	if err != nil {
		return len(due), err
	}
	if applied == len(outcomes) {
		counts := map[store.BatchStatus]int{}
		for _, o := range outcomes {
			counts[o.Status]++
		}
		for st, n := range counts {
			m.deps.Metrics.Transition("batch", string(st), n)
		}
	}
	return len(due), nil
}
