package monitor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
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
	// TrackGrace is how far past the next in-memory check a followed batch's
	// stored check time is kept: other monitors stay off it until then, and
	// a batch still pending is written back only when that time comes near.
	TrackGrace time.Duration
	// TrackMax bounds the batches followed in memory; beyond it batches are
	// left to the database path.
	TrackMax int
}

// tracked is a pending batch this monitor follows in memory.
type tracked struct {
	serviceID string
	attempt   int
	due       time.Time // next check, in memory
	stored    time.Time // next check time in the database
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

	// The batches this process's submitter saw accepted, followed without a
	// database claim per check (their stored check time keeps other
	// monitors off); the database claim remains the path for the rest and
	// the recovery path when a process dies.
	mu      sync.Mutex
	tracked map[string]tracked

	// OnQueued, when set, is called after a round queued batches (the next
	// batch of a freed service, or an unknown batch to send again): the
	// submitters of this process. Set it before Start.
	OnQueued func()
}

// Track makes the monitor follow accepted batches in memory: it asks about
// each at its first check time without claiming it in the database. It
// pokes the loop for the earliest of them.
func (m *BatchMonitor) Track(batches []submitter.Accepted, firstCheck time.Duration) {
	now := m.deps.Clock.Now()
	m.mu.Lock()
	for _, b := range batches {
		if len(m.tracked) >= m.cfg.TrackMax {
			break // the database path follows the rest
		}
		m.tracked[b.ID] = tracked{serviceID: b.ServiceID, attempt: b.Attempt, due: now.Add(firstCheck), stored: b.StoredCheckAt}
	}
	m.mu.Unlock()
	m.PokeAfter(firstCheck)
}

// dueTracked takes up to max followed batches whose check is due.
func (m *BatchMonitor) dueTracked(now time.Time, max int) []store.CheckBatch {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.CheckBatch
	for id, t := range m.tracked {
		if len(out) == max {
			break
		}
		if !t.due.After(now) {
			out = append(out, store.CheckBatch{ID: id, ServiceID: t.serviceID, Attempt: t.attempt})
		}
	}
	return out
}

// NewBatchMonitor returns the batch lane's monitor.
func NewBatchMonitor(st *store.Store, l ledger.BatchLedger, deps loop.Deps, cfg BatchConfig) *BatchMonitor {
	m := &BatchMonitor{cfg: cfg, store: st, ledger: l, deps: deps, tracked: map[string]tracked{}}
	m.Loop = loop.NewService("batch_monitor", cfg.PollInterval, deps, cfg.CheckBatchSize, m.RunOnce)
	return m
}

// RunOnce checks up to CheckBatchSize batches with the ledger — the followed
// batches that are due, then those it claims in the database — and records
// what it learned. It returns how many batches it checked.
func (m *BatchMonitor) RunOnce(ctx context.Context) (int, error) {
	now := m.deps.Clock.Now()
	due := m.dueTracked(now, m.cfg.CheckBatchSize)
	local := make(map[string]bool, len(due))
	for _, d := range due {
		local[d.ID] = true
	}
	if rest := m.cfg.CheckBatchSize - len(due); rest > 0 {
		claimCtx, cancel := context.WithTimeout(ctx, m.cfg.DBTimeout)
		claimed, err := m.store.BatchClaimForCheck(claimCtx, store.BatchClaimForCheckParams{
			Now: now, LeaseUntil: now.Add(m.cfg.ClaimLease), NextCheckAt: now.Add(m.cfg.CheckInterval), Max: rest,
		})
		cancel()
		if err != nil {
			return 0, err
		}
		for _, c := range claimed {
			if !local[c.ID] {
				due = append(due, c)
			}
		}
	}
	if len(due) == 0 {
		return 0, nil
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
			if local[d.ID] {
				if m.followAgain(d.ID, now) {
					continue // asked again from memory; the stored check time still holds others off
				}
				o.Status = store.BatchStatusPending // push the stored check time forward
				break
			}
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
	nextCheck := done.Add(m.cfg.CheckInterval)
	if len(local) > 0 {
		nextCheck = nextCheck.Add(m.cfg.TrackGrace)
	}
	rec, err := m.store.BatchRecordStatuses(recCtx, store.BatchRecordStatusesParams{
		Now: done, NextCheckAt: nextCheck, Outcomes: outcomes,
	})
	if err != nil {
		return len(due), err
	}
	m.settle(outcomes, done, nextCheck)
	for st, n := range rec.ByResult {
		m.deps.Metrics.Transition("batch", st, n)
	}
	m.deps.Metrics.Transition("batch", "queued", rec.Queued)
	if m.OnQueued != nil && rec.Queued > 0 {
		m.OnQueued()
	}
	return len(due), nil
}

// followAgain schedules the next in-memory check of a followed batch that is
// still pending. It reports false when the stored check time comes too near
// and must be written forward with the outcome.
func (m *BatchMonitor) followAgain(id string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.tracked[id]
	t.due = now.Add(m.cfg.CheckInterval)
	m.tracked[id] = t
	m.PokeAfter(m.cfg.CheckInterval)
	return t.stored.After(t.due.Add(m.cfg.CheckInterval))
}

// settle updates the followed batches after their outcomes were recorded:
// final ones are dropped; pending ones keep being followed, with the stored
// check time just written.
func (m *BatchMonitor) settle(outcomes []store.StatusOutcome, now, stored time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range outcomes {
		t, ok := m.tracked[o.ID]
		if !ok {
			continue
		}
		if o.Status == store.BatchStatusPending {
			t.stored = stored
			m.tracked[o.ID] = t
			continue
		}
		delete(m.tracked, o.ID)
	}
}
