package submitter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// BatchSubmitter claims queued batches (SKIP LOCKED, with a lease), sends them
// to the ledger in one call, and records each outcome with an update that
// applies only while its claim still holds the batch. No database transaction
// is open during the ledger call.
type BatchSubmitter struct {
	*loop.Loop
	cfg    batch.Config
	store  *store.Store
	ledger ledger.BatchLedger
	deps   loop.Deps

	// OnAccepted, when set, is offered the batches the ledger accepted in a
	// round, before anything is recorded, and the end of their claim's lease
	// (until then no other process looks at them). It returns how many of
	// them, from the first, a monitor of this process follows in memory:
	// those stay held, with no write, until that monitor records the
	// ledger's answer, which saves a write per batch; the rest are recorded
	// pending. Set it before Start.
	OnAccepted func(batches []store.CheckBatch, leaseUntil time.Time) (followed int)
	// OnQueued, when set, is called after a round queued batches (the next
	// batch of a service freed by a rejection): the submitters of this
	// process. Set it before Start.
	OnQueued func()

	// check verifies a batch stored unverified: sawtooth.CheckBatchForID,
	// which tests wrap to count or hold the checks.
	check func(id string, payload []byte) error

	mu     sync.Mutex
	handed []handedBatch // claimed for this submitter by a monitor (Hand)
}

// handedBatch is a batch claimed for the submitter elsewhere in its process.
type handedBatch struct {
	store.ClaimedBatch
	leaseUntil time.Time
}

// NewBatchSubmitter returns the batch lane's submitter, cfg and deps with
// their defaults, or the first setting that cannot work.
func NewBatchSubmitter(st *store.Store, l ledger.BatchLedger, deps loop.Deps, cfg batch.Config) (*BatchSubmitter, error) {
	cfg, deps = cfg.WithDefaults(), deps.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &BatchSubmitter{cfg: cfg, store: st, ledger: l, deps: deps, check: sawtooth.CheckBatchForID}
	s.Loop = loop.NewService("batch_submitter", deps.PollInterval, deps, cfg.SubmitBatchSize, s.RunOnce)
	return s, nil
}

// Hand gives the submitter batches already claimed for it, held under a
// lease until leaseUntil (a monitor of this process claimed the next batch
// of each service it freed): its next rounds send them first. It pokes the
// submitter.
func (s *BatchSubmitter) Hand(batches []store.ClaimedBatch, leaseUntil time.Time) {
	s.mu.Lock()
	for _, b := range batches {
		s.handed = append(s.handed, handedBatch{ClaimedBatch: b, leaseUntil: leaseUntil})
	}
	s.mu.Unlock()
	s.Poke()
}

// Release queues again, for any process, the batches handed to the
// submitter that it has not sent: called once its loop has stopped, so that
// a stopping process leaves no batch waiting for its lease to run out.
func (s *BatchSubmitter) Release(ctx context.Context) {
	s.mu.Lock()
	handed := s.handed
	s.handed = nil
	s.mu.Unlock()
	if len(handed) == 0 {
		return
	}
	batches := make([]store.ClaimedBatch, len(handed))
	for i, h := range handed {
		batches[i] = h.ClaimedBatch
	}
	ctx, cancel := context.WithTimeout(ctx, s.deps.DBTimeout)
	defer cancel()
	n, err := s.store.BatchReleaseClaims(ctx, s.deps.Clock.Now(), batches)
	if err != nil {
		s.deps.Logger.Warn("submitter: could not give back the batches handed to it; they are sent again when their lease runs out",
			"batches", len(batches), "error", err)
		return
	}
	s.deps.Logger.Info("submitter: gave back the batches handed to it and not sent", "batches", n)
}

// takeHanded takes up to max handed batches whose lease still covers a
// ledger call from now. The others are left to the monitors, which ask the
// ledger about a held batch once its lease has run out (and queue it again
// when the ledger does not know it): sending one now could race with them.
// It returns the batches to send and the earliest of their leases.
func (s *BatchSubmitter) takeHanded(now time.Time, max int) ([]store.ClaimedBatch, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.ClaimedBatch
	var earliest time.Time
	n := 0
	for n < len(s.handed) && len(out) < max {
		h := s.handed[n]
		n++
		if h.leaseUntil.Sub(now) <= s.cfg.Ledger.Timeout {
			s.deps.Logger.Warn("submitter: a batch handed over waited too long; the monitors take it over when its lease runs out",
				"batch_id", h.ID, "lease_until", h.leaseUntil)
			continue
		}
		if earliest.IsZero() || h.leaseUntil.Before(earliest) {
			earliest = h.leaseUntil
		}
		out = append(out, h.ClaimedBatch)
	}
	s.handed = append(s.handed[:0], s.handed[n:]...)
	return out, earliest
}

// RunOnce sends up to SubmitBatchSize batches — those handed to it first,
// then queued ones it claims — and records the outcomes. While handed
// batches fill its rounds it still claims a quarter round of queued ones, so
// a busy monitor never starves the queue. It returns how many batches it
// sent.
func (s *BatchSubmitter) RunOnce(ctx context.Context) (int, error) {
	now := s.deps.Clock.Now()
	claimed, leaseUntil := s.takeHanded(now, s.cfg.SubmitBatchSize)
	claimLease := now.Add(s.cfg.ClaimLease)
	if leaseUntil.IsZero() {
		leaseUntil = claimLease
	}
	claimCtx, cancel := context.WithTimeout(ctx, s.deps.DBTimeout)
	fromQueue, err := s.store.BatchClaimQueued(claimCtx, store.BatchClaimQueuedParams{
		Now: now, LeaseUntil: claimLease, Max: max(s.cfg.SubmitBatchSize-len(claimed), s.cfg.SubmitBatchSize/4, 1),
	})
	cancel()
	if err != nil {
		if len(claimed) == 0 {
			return 0, err
		}
		// The handed batches are held for this process: send them anyway.
		s.deps.Logger.Warn("submitter: claiming queued batches failed; sending the handed ones", "error", err)
	}
	claimed = append(claimed, fromQueue...)
	if len(claimed) == 0 {
		return 0, nil
	}

	// A batch stored through ledgerq.submit_batch has not had its
	// signatures checked: it is checked here as the API checks a posted
	// one, and one that fails is recorded invalid with the reason, as the
	// ledger would answer it, and never sent. The checks run side by side;
	// the batches that pass go out in the order they were claimed.
	refused, verified := s.verify(claimed)
	batches := make([]ledger.Batch, 0, len(claimed))
	for i, c := range claimed {
		if refused[i] == nil {
			batches = append(batches, ledger.Batch{ID: c.ID, Payload: c.Payload})
		}
	}
	var (
		perBatch []error
		callErr  error
	)
	if len(batches) > 0 {
		sendCtx, cancel := context.WithTimeout(ctx, s.cfg.Ledger.Timeout)
		perBatch, callErr = s.ledger.SubmitBatches(sendCtx, batches)
		cancel()
		if callErr == nil && len(perBatch) != len(batches) {
			callErr = ledger.NewError(ledger.Indeterminate, fmt.Sprintf("ledger answered for %d of %d batches", len(perBatch), len(batches)), nil)
		}
	}

	outcomes := make([]store.SubmitOutcome, len(claimed))
	counts := map[store.SubmitResult]int{}
	sent := 0
	for i, c := range claimed {
		err := refused[i]
		if err == nil {
			err = callErr
			if err == nil {
				err = perBatch[sent]
			}
			sent++
		}
		o := store.SubmitOutcome{Seq: c.Seq, Attempt: c.Attempt, Result: store.SubmitAccepted, Verified: verified[i]}
		if err != nil {
			switch ledger.ClassOf(err) {
			case ledger.Transient:
				o.Result, o.Reason = store.SubmitDelayed, ledger.ReasonOf(err)
			case ledger.Deterministic:
				o.Result, o.Reason = store.SubmitRejected, ledger.ReasonOf(err)
			default:
				// Indeterminate: the ledger may have it. Treat it as sent; the
				// monitor asks, and an UNKNOWN answer sends it again.
				s.deps.Logger.Warn("submitter: outcome unknown, treating batch as sent", "batch_id", c.ID, "error", err)
			}
		}
		counts[o.Result]++
		outcomes[i] = o
	}

	// Accepted batches that a monitor of this process takes into memory are
	// not written: they stay held under this claim, and the monitor records
	// the ledger's answer for them (a held batch takes any outcome the
	// monitor records, as when a submitter died mid-send).
	record := outcomes
	followed := 0
	if s.OnAccepted != nil && counts[store.SubmitAccepted] > 0 {
		acc := make([]store.CheckBatch, 0, counts[store.SubmitAccepted])
		for i, o := range outcomes {
			if o.Result == store.SubmitAccepted {
				acc = append(acc, store.CheckBatch{Seq: o.Seq, ID: claimed[i].ID, ServiceID: claimed[i].ServiceID, Attempt: o.Attempt, Verified: o.Verified})
			}
		}
		followed = s.OnAccepted(acc, leaseUntil)
		if followed > 0 {
			taken := make(map[int64]bool, followed)
			for _, a := range acc[:followed] {
				taken[a.Seq] = true
			}
			record = make([]store.SubmitOutcome, 0, len(outcomes)-followed)
			for _, o := range outcomes {
				if !taken[o.Seq] {
					record = append(record, o)
				}
			}
			s.deps.Metrics.Transition("batch", "submit_"+store.SubmitAccepted.String(), followed)
		}
	}
	if len(record) > 0 {
		if err := s.record(ctx, record); err != nil {
			return len(claimed), err
		}
	}
	s.deps.Logger.Debug("submitter: sent batches", "claimed", len(claimed), "followed", followed,
		"accepted", counts[store.SubmitAccepted], "delayed", counts[store.SubmitDelayed], "rejected", counts[store.SubmitRejected])
	return len(claimed), nil
}

// verify checks the signatures of the claimed batches stored unverified,
// up to VerifyWorkers at a time (a check is CPU work: one secp256k1
// verification per header). For each claimed batch it returns the
// deterministic refusal of one whose check failed, and whether one was
// checked and held: that outcome's record clears its flag, so a batch is
// checked once however often it is sent. A process that dies before the
// record loses only the check, done again by the next claim.
func (s *BatchSubmitter) verify(claimed []store.ClaimedBatch) (refused []error, verified []bool) {
	refused, verified = make([]error, len(claimed)), make([]bool, len(claimed))
	var todo []int
	for i, c := range claimed {
		if c.Unverified {
			todo = append(todo, i)
		}
	}
	check := func(i int) {
		c := claimed[i]
		if err := s.check(c.ID, c.Payload); err != nil {
			refused[i] = ledger.NewError(ledger.Deterministic, err.Error(), err)
			return
		}
		verified[i] = true
	}
	workers := min(s.cfg.VerifyWorkers, len(todo))
	if workers <= 1 {
		for _, i := range todo {
			check(i)
		}
		return refused, verified
	}
	// Each worker takes the next index; each writes only its batches'
	// slots, read after Wait.
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for n := next.Add(1) - 1; n < int64(len(todo)); n = next.Add(1) - 1 {
				check(todo[n])
			}
		})
	}
	wg.Wait()
	return refused, verified
}

// record writes the outcomes of a round that no monitor of this process
// follows: accepted ones pending with their first check, the others as
// they failed.
func (s *BatchSubmitter) record(ctx context.Context, outcomes []store.SubmitOutcome) error {
	// The outcome must be recorded even when shutdown cancelled ctx meanwhile:
	// the ledger call has happened.
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.deps.DBTimeout)
	defer cancel()
	done := s.deps.Clock.Now()
	rec, err := s.store.BatchRecordSubmit(recCtx, store.BatchRecordSubmitParams{
		Now: done, NextCheckAt: done.Add(s.cfg.FirstCheck), Outcomes: outcomes,
	})
	if err != nil {
		return err
	}
	if rec.Applied < len(outcomes) {
		s.deps.Logger.Warn("submitter: some claims expired before their outcome was recorded",
			"claimed", len(outcomes), "recorded", rec.Applied)
	}
	for r, n := range rec.ByResult {
		s.deps.Metrics.Transition("batch", "submit_"+r, n)
	}
	s.deps.Metrics.Transition("batch", "queued", rec.Queued)
	if s.OnQueued != nil && rec.Queued > 0 {
		s.OnQueued()
	}
	return nil
}
