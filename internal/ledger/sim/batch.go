package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
)

// InvalidReason is the transaction message of a batch the simulated ledger
// finds invalid.
const InvalidReason = "simulated invalid transaction"

// Reasons the simulated ledger gives for failed submit calls.
const (
	transientReason = "simulated validator unavailable"
	droppedReason   = "simulated dropped response"
)

var _ ledger.BatchLedger = (*Ledger)(nil)

// fate is what becomes of an accepted batch at its due time. It is drawn at
// acceptance so that the draws follow the call order, not the order in which
// transitions happen to be processed.
type fate int

const (
	fateCommit fate = iota
	fateInvalid
	fateLose
)

// heldBatch is a batch the ledger has taken.
type heldBatch struct {
	id     string
	txnIDs []string
	status ledger.BatchStatus // PENDING, COMMITTED or INVALID; UNKNOWN once lost
	fate   fate
	due    time.Time
	index  int // in the due queue while PENDING
}

// batchLane is the ledger's batch state. All of it is guarded by Ledger.mu.
type batchLane struct {
	batches map[string]*heldBatch
	due     dueQueue
}

func newBatchLane() batchLane {
	return batchLane{batches: make(map[string]*heldBatch)}
}

// advance makes the PENDING batches due by now final, earliest due first and
// by id among equals, each event stamped with its due time, so the log stays
// in time order however late the transition is processed.
func (b *batchLane) advance(l *Ledger, now time.Time) {
	for b.due.Len() > 0 && !b.due[0].due.After(now) {
		hb := heap.Pop(&b.due).(*heldBatch)
		switch hb.fate {
		case fateCommit:
			hb.status = ledger.BatchCommitted
			l.stats.Committed++
			l.record(hb.due, EventCommitted, hb.id, "")
		case fateInvalid:
			hb.status = ledger.BatchInvalid
			l.stats.Invalid++
			l.record(hb.due, EventInvalid, hb.id, InvalidReason)
		case fateLose:
			hb.status = ledger.BatchUnknown
			l.stats.Lost++
			l.record(hb.due, EventLost, hb.id, "")
		}
	}
}

// SubmitBatches takes each batch that parses and verifies; a batch that does
// not is refused with a ledger.Deterministic error. A batch the ledger already
// holds (PENDING or final) is taken again without change. A simulated
// transient failure takes nothing and a simulated dropped response takes
// everything; both are returned as the call's error.
func (l *Ledger) SubmitBatches(ctx context.Context, batches []ledger.Batch) ([]error, error) {
	res, err := l.submitBatches(ctx, batches, false)
	switch {
	case err != nil:
		return nil, err
	case res.callErr != nil:
		return nil, res.callErr
	}
	return res.errs, nil
}

// submitResult is the outcome of one submit call.
type submitResult struct {
	// errs has one entry per batch: nil when taken.
	errs []error
	// refused is set when, as Sawtooth does, the whole list was refused
	// because some of its batches were.
	refused bool
	// callErr is a dropped response: the ledger took the batches, the
	// caller is not told.
	callErr error
}

// submitBatches is the submit call. With allOrNothing it behaves like a
// Sawtooth validator given a BatchList: if any batch is refused, none is
// taken. Its error is the call failing before the ledger acts.
func (l *Ledger) submitBatches(ctx context.Context, batches []ledger.Batch, allOrNothing bool) (submitResult, error) {
	if err := l.wait(ctx); err != nil {
		return submitResult{}, ledger.NewError(ledger.Transient, "call cancelled before the ledger acted", err)
	}
	// Signature checks are the expensive part; do them outside the lock.
	res := submitResult{errs: make([]error, len(batches))}
	txnIDs := make([][]string, len(batches))
	anyRefused := false
	for i, b := range batches {
		ids, err := checkBatch(b, !l.cfg.SkipVerify)
		if err != nil {
			res.errs[i] = refusal(err)
			anyRefused = true
			continue
		}
		txnIDs[i] = ids
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.advanceLocked(now)
	l.stats.SubmitCalls++
	l.stats.BatchesSubmitted += uint64(len(batches))
	transient := l.chance(l.cfg.TransientRate)
	dropped := l.chance(l.cfg.DropResponseRate)
	if transient {
		l.stats.TransientFailures++
		l.log.DebugContext(ctx, "sim: simulated transient failure", "batches", len(batches))
		return submitResult{}, ledger.NewError(ledger.Transient, transientReason, nil)
	}
	for i, b := range batches {
		if res.errs[i] != nil {
			l.log.InfoContext(ctx, "sim: batch refused", "batch_id", b.ID, "reason", ledger.ReasonOf(res.errs[i]))
			l.stats.Refused++
			l.record(now, EventRefused, b.ID, ledger.ReasonOf(res.errs[i]))
		}
	}
	if anyRefused && allOrNothing {
		res.refused = true
		return res, nil
	}
	for i, b := range batches {
		if res.errs[i] != nil {
			continue
		}
		l.batch.take(l, now, b.ID, txnIDs[i])
	}
	if dropped {
		l.stats.DroppedResponses++
		l.log.DebugContext(ctx, "sim: simulated dropped response", "batches", len(batches))
		res.callErr = ledger.NewError(ledger.Indeterminate, droppedReason, nil)
	}
	return res, nil
}

// take holds one checked batch. The caller holds mu.
func (b *batchLane) take(l *Ledger, now time.Time, id string, txnIDs []string) {
	if hb, ok := b.batches[id]; ok && hb.status != ledger.BatchUnknown {
		l.stats.Duplicates++
		l.record(now, EventDuplicate, id, "")
		return
	}
	// Both draws always happen, so a batch's fate depends only on the seed
	// and the order of acceptances.
	lose := l.chance(l.cfg.LostRate)
	invalid := l.chance(l.cfg.RejectRate)
	hb := &heldBatch{id: id, txnIDs: txnIDs, status: ledger.BatchPending, due: now.Add(l.cfg.CommitDelay)}
	switch {
	case lose:
		hb.fate = fateLose
	case invalid:
		hb.fate = fateInvalid
	}
	b.batches[id] = hb
	heap.Push(&b.due, hb)
	l.stats.Accepted++
	l.record(now, EventAccepted, id, "")
}

// refusal classifies a checkBatch error. The reason carries the detail; the
// wrapped error is the sawtooth sentinel, so errors.Is works without the text
// appearing twice.
func refusal(err error) *ledger.Error {
	cause := sawtooth.ErrInvalidBatch
	if errors.Is(err, sawtooth.ErrMalformedBatch) {
		cause = sawtooth.ErrMalformedBatch
	}
	return ledger.NewError(ledger.Deterministic, err.Error(), cause)
}

// checkBatch is the validator's check at submission: the payload is a Sawtooth
// batch whose signatures verify (when verify is set) and whose id is the one
// given. It returns the batch's transaction ids.
func checkBatch(b ledger.Batch, verify bool) ([]string, error) {
	pb, err := sawtooth.ParseBatch(b.Payload)
	if err == nil && verify {
		err = sawtooth.VerifyBatch(pb)
	}
	if err != nil {
		return nil, err
	}
	if pb.HeaderSignature != b.ID {
		return nil, fmt.Errorf("%w: id %.16s is not the batch's header_signature %.16s", sawtooth.ErrInvalidBatch, b.ID, pb.HeaderSignature)
	}
	ids := make([]string, len(pb.Transactions))
	for i, t := range pb.Transactions {
		ids[i] = t.HeaderSignature
	}
	return ids, nil
}

// BatchStatuses reports each id's status. A batch the ledger never took, or
// lost, is UNKNOWN; an INVALID one has the reason InvalidReason.
func (l *Ledger) BatchStatuses(ctx context.Context, ids []string) (map[string]ledger.BatchStatusResult, error) {
	entries, err := l.batchStatusEntries(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]ledger.BatchStatusResult, len(entries))
	for _, e := range entries {
		r := ledger.BatchStatusResult{Status: e.Status}
		if e.Status == ledger.BatchInvalid {
			r.Reason = InvalidReason
		}
		out[e.ID] = r
	}
	return out, nil
}

// batchStatusEntries answers a status query in Sawtooth's shape, one entry per
// distinct id, in the order asked.
func (l *Ledger) batchStatusEntries(ctx context.Context, ids []string) ([]sawtooth.BatchStatusEntry, error) {
	if err := l.wait(ctx); err != nil {
		return nil, ledger.NewError(ledger.Transient, "call cancelled before the ledger acted", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advanceLocked(l.clock.Now())
	l.stats.StatusCalls++
	out := make([]sawtooth.BatchStatusEntry, 0, len(ids))
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		e := sawtooth.BatchStatusEntry{ID: id, Status: ledger.BatchUnknown, InvalidTransactions: []sawtooth.InvalidTransaction{}}
		if hb, ok := l.batch.batches[id]; ok {
			e.Status = hb.status
			if hb.status == ledger.BatchInvalid && len(hb.txnIDs) > 0 {
				// The simulated fault is in the first transaction, as a
				// validator stops at the first one a family refuses.
				e.InvalidTransactions = []sawtooth.InvalidTransaction{{ID: hb.txnIDs[0], Message: InvalidReason}}
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// dueQueue orders PENDING batches by due time, then id.
type dueQueue []*heldBatch

func (q dueQueue) Len() int { return len(q) }

func (q dueQueue) Less(i, j int) bool {
	if !q[i].due.Equal(q[j].due) {
		return q[i].due.Before(q[j].due)
	}
	return q[i].id < q[j].id
}

func (q dueQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}

func (q *dueQueue) Push(x any) {
	hb := x.(*heldBatch)
	hb.index = len(*q)
	*q = append(*q, hb)
}

func (q *dueQueue) Pop() any {
	old := *q
	n := len(old)
	hb := old[n-1]
	old[n-1] = nil
	hb.index = -1
	*q = old[:n-1]
	return hb
}
