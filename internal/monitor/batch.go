package monitor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// BatchMonitor asks the ledger about pending batches and about held batches
// whose submitter's lease expired (a submitter that died mid-send), and
// records COMMITTED, INVALID and PENDING as they are, and UNKNOWN as unknown
// with submitted cleared, so the batch is queued and sent again.
type BatchMonitor struct {
	*loop.Loop
	cfg    batch.Config
	store  *store.Store
	ledger ledger.BatchLedger
	deps   loop.Deps

	// The batches this process's submitter saw accepted, followed without a
	// database claim per check (their stored check time keeps other
	// monitors off); the database claim remains the path for the rest and
	// the recovery path when a process dies.
	follow *followed
	// lastClaim is when a round last claimed batches in the database. While
	// the followed batches keep the rounds busy, the database is asked at
	// most once per check interval (its batches are due at that grain).
	lastClaim time.Time
	// recording holds a token per record transaction running apart from
	// its round (RecordsInFlight > 1); records waits for them; recordErr is
	// the last one's error, returned by the next round so the loop backs
	// off as it does for its own.
	recording chan struct{}
	records   sync.WaitGroup
	recordErr atomic.Pointer[error]

	// OnQueued, when set, is called after a round queued batches (the next
	// batch of a freed service, or an unknown batch to send again): the
	// submitters of this process. Set it before Start.
	OnQueued func()
	// OnAdmitted, when set, has the next batch of each service a round
	// frees claimed in the round's transaction, under a lease until
	// leaseUntil, instead of queued, and receives them: a submitter of this
	// process sends them without claiming them again. Set it before Start.
	OnAdmitted func(batches []store.ClaimedBatch, leaseUntil time.Time)
}

// Track makes the monitor follow accepted batches in memory: it asks about
// each at its first check time without claiming it in the database, and
// records its answer. storedCheckAt is when other processes' monitors would
// take the batches over (the end of their claim's lease, for held ones);
// the monitor writes a still pending batch forward before then. It returns
// how many of the batches, from the first, it follows (at most TrackMax are
// followed at once) and pokes the loop for them.
func (m *BatchMonitor) Track(batches []store.CheckBatch, storedCheckAt time.Time, firstCheck time.Duration) int {
	n := m.follow.add(batches, m.deps.Clock.Now().Add(firstCheck), storedCheckAt)
	if n > 0 {
		m.PokeAfter(firstCheck)
	}
	return n
}

// Release writes every batch the monitor follows in memory as pending, due
// for a check at once, so that any process's monitor takes them over:
// called once its loop has stopped, so that a stopping process leaves no
// batch held until its lease runs out.
func (m *BatchMonitor) Release(ctx context.Context) {
	if err := m.Wait(); err != nil {
		m.deps.Logger.Warn("monitor: a round's record failed; its batches are checked again", "error", err)
	}
	now := m.deps.Clock.Now()
	outcomes := m.follow.drain()
	if len(outcomes) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.deps.DBTimeout)
	defer cancel()
	rec, err := m.store.BatchRecordStatuses(ctx, store.BatchRecordStatusesParams{Now: now, NextCheckAt: now, Outcomes: outcomes})
	if err != nil {
		m.deps.Logger.Warn("monitor: could not hand over the batches it follows; other monitors take them over when their leases run out",
			"batches", len(outcomes), "error", err)
		return
	}
	m.deps.Logger.Info("monitor: handed over the batches it followed", "batches", rec.Applied)
}

// Wait waits for the record transactions that rounds left running
// (RecordsInFlight) and returns the error of one that failed, which the
// next round then no longer returns. Release calls it, so a stopping
// process releases the monitor before its submitters give back what they
// hold (a record hands them the batches it admits); a cron run calls it
// after each round.
func (m *BatchMonitor) Wait() error {
	m.records.Wait()
	if errp := m.recordErr.Swap(nil); errp != nil {
		return *errp
	}
	return nil
}

// NewBatchMonitor returns the batch lane's monitor, cfg and deps with their
// defaults, or the first setting that cannot work.
func NewBatchMonitor(st *store.Store, l ledger.BatchLedger, deps loop.Deps, cfg batch.Config) (*BatchMonitor, error) {
	cfg, deps = cfg.WithDefaults(), deps.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &BatchMonitor{cfg: cfg, store: st, ledger: l, deps: deps, follow: newFollowed(cfg.TrackMax)}
	if cfg.RecordsInFlight > 1 {
		m.recording = make(chan struct{}, cfg.RecordsInFlight-1)
	}
	m.Loop = loop.NewService("batch_monitor", deps.PollInterval, deps, cfg.CheckBatchSize, m.RunOnce)
	return m, nil
}

// RunOnce checks up to CheckBatchSize batches with the ledger — the followed
// batches that are due, then those it claims in the database — and records
// what it learned. It returns how many batches it checked.
func (m *BatchMonitor) RunOnce(ctx context.Context) (int, error) {
	if errp := m.recordErr.Swap(nil); errp != nil {
		return 0, *errp
	}
	now := m.deps.Clock.Now()
	taken := m.follow.take(now, m.cfg.CheckBatchSize)
	// Every batch taken goes back, at its next check or, if its round set
	// none, after the check interval: when the round ends, or when its
	// record ends if that runs apart.
	giveBack := func() {
		if len(taken) > 0 {
			m.follow.release(taken, now, now.Add(m.cfg.CheckInterval))
			m.PokeAfter(m.cfg.CheckInterval)
		}
	}
	apart := false
	defer func() {
		if !apart {
			giveBack()
		}
	}()
	due := append([]store.CheckBatch(nil), taken...)
	local := make(map[int64]bool, len(due))
	for _, d := range due {
		local[d.Seq] = true
	}
	if rest := m.cfg.CheckBatchSize - len(due); rest > 0 && (len(taken) == 0 || now.Sub(m.lastClaim) >= m.cfg.CheckInterval) {
		m.lastClaim = now
		claimCtx, cancel := context.WithTimeout(ctx, m.deps.DBTimeout)
		claimed, err := m.store.BatchClaimForCheck(claimCtx, store.BatchClaimForCheckParams{
			Now: now, LeaseUntil: now.Add(m.cfg.ClaimLease), NextCheckAt: now.Add(m.cfg.CheckInterval), Max: rest,
		})
		cancel()
		if err != nil {
			return 0, err
		}
		for _, c := range claimed {
			if !local[c.Seq] {
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
	askCtx, cancel := context.WithTimeout(ctx, m.cfg.Ledger.Timeout)
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
		o := store.StatusOutcome{Seq: d.Seq, ServiceID: d.ServiceID, Attempt: d.Attempt, Reason: res.Reason, Verified: d.Verified}
		switch res.Status {
		case ledger.BatchCommitted:
			o.Status = store.BatchStatusCommitted
		case ledger.BatchInvalid:
			o.Status = store.BatchStatusInvalid
			if o.Reason == "" {
				o.Reason = "the ledger reported the batch invalid"
			}
		case ledger.BatchPending:
			if local[d.Seq] {
				if m.follow.again(d.Seq, now.Add(m.cfg.CheckInterval), m.cfg.CheckInterval) {
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
	if m.recording != nil {
		select {
		case m.recording <- struct{}{}:
			apart = true
			m.records.Add(1)
			go func() {
				defer m.records.Done()
				defer func() { <-m.recording }()
				defer giveBack()
				if err := m.record(ctx, outcomes, len(local) > 0); err != nil {
					m.recordErr.Store(&err)
				}
			}()
			return len(due), nil
		default: // as many records as allowed run apart: this round records itself
		}
	}
	return len(due), m.record(ctx, outcomes, len(local) > 0)
}

// record writes a round's outcomes in one transaction, hands the batches
// it admitted to this process's submitter and settles the followed ones.
func (m *BatchMonitor) record(ctx context.Context, outcomes []store.StatusOutcome, followed bool) error {
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.deps.DBTimeout)
	defer cancel()
	done := m.deps.Clock.Now()
	nextCheck := done.Add(m.cfg.CheckInterval)
	if followed {
		nextCheck = nextCheck.Add(m.cfg.TrackGrace)
	}
	var claimUntil time.Time
	if m.OnAdmitted != nil {
		claimUntil = done.Add(m.cfg.ClaimLease)
	}
	rec, err := m.store.BatchRecordStatuses(recCtx, store.BatchRecordStatusesParams{
		Now: done, NextCheckAt: nextCheck, Outcomes: outcomes, ClaimUntil: claimUntil,
	})
	if err != nil {
		return err
	}
	if len(rec.Claimed) > 0 {
		m.OnAdmitted(rec.Claimed, claimUntil)
	}
	m.follow.settle(outcomes, nextCheck)
	for st, n := range rec.ByResult {
		m.deps.Metrics.Transition("batch", st, n)
	}
	// A batch claimed for this process's submitter was admitted as a queued
	// one is; it is counted the same.
	m.deps.Metrics.Transition("batch", "queued", rec.Queued+len(rec.Claimed))
	if m.OnQueued != nil && rec.Queued > 0 {
		m.OnQueued()
	}
	return nil
}
