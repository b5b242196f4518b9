// Package ledgertest provides scripted ledgers for tests: each implements a
// lane's ledger interface and answers as the test says, and records what it
// was sent.
package ledgertest

import (
	"context"
	"sync"
	"testing"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

var _ ledger.BatchLedger = (*BatchLedger)(nil)

// BatchLedger is a ledger.BatchLedger whose answers the test scripts. Its
// zero value accepts every batch and knows none (every status is UNKNOWN).
// It is safe for concurrent use.
type BatchLedger struct {
	// Submit, when set, answers each SubmitBatches call from the ids sent, in
	// order, as SubmitBatches does. Set it before the ledger is used. It is
	// called without the ledger's lock held, so it may call the ledger back.
	Submit func(ids []string) ([]error, error)

	mu       sync.Mutex
	statuses map[string]ledger.BatchStatusResult
	calls    [][]string
}

// SubmitBatches records the call and answers it with Submit, or accepts
// every batch.
func (l *BatchLedger) SubmitBatches(_ context.Context, batches []ledger.Batch) ([]error, error) {
	ids := make([]string, len(batches))
	for i, b := range batches {
		ids[i] = b.ID
	}
	l.mu.Lock()
	l.calls = append(l.calls, ids)
	submit := l.Submit
	l.mu.Unlock()
	if submit != nil {
		return submit(append([]string(nil), ids...))
	}
	return make([]error, len(ids)), nil
}

// BatchStatuses answers every id with the status SetStatus gave it, or
// UNKNOWN.
func (l *BatchLedger) BatchStatuses(_ context.Context, ids []string) (map[string]ledger.BatchStatusResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]ledger.BatchStatusResult, len(ids))
	for _, id := range ids {
		res, ok := l.statuses[id]
		if !ok {
			res = ledger.BatchStatusResult{Status: ledger.BatchUnknown}
		}
		out[id] = res
	}
	return out, nil
}

// SetStatus sets what BatchStatuses answers for id from now on.
func (l *BatchLedger) SetStatus(id string, status ledger.BatchStatus, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.statuses == nil {
		l.statuses = map[string]ledger.BatchStatusResult{}
	}
	l.statuses[id] = ledger.BatchStatusResult{Status: status, Reason: reason}
}

// SubmitCalls returns the ids of every SubmitBatches call so far, one slice
// per call, in call order.
func (l *BatchLedger) SubmitCalls() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([][]string, len(l.calls))
	for i, c := range l.calls {
		out[i] = append([]string(nil), c...)
	}
	return out
}

// Sent returns how many batches were sent in all SubmitBatches calls so far.
func (l *BatchLedger) Sent() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		n += len(c)
	}
	return n
}

// RequireSubmitFails submits batches to l and fails the test unless the
// call fails as a whole: no outcome for any batch, and an error of class
// want, which it returns.
func RequireSubmitFails(tb testing.TB, ctx context.Context, l ledger.BatchLedger, batches []ledger.Batch, want ledger.Class) error {
	tb.Helper()
	errs, err := l.SubmitBatches(ctx, batches)
	if errs != nil {
		tb.Fatalf("SubmitBatches answered for each batch (%v), want a failure of the call (%v)", errs, err)
	}
	if got := ledger.ClassOf(err); got != want {
		tb.Fatalf("SubmitBatches failed with %v, of class %v; want class %v", err, got, want)
	}
	return err
}
