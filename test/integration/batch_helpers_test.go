package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// t0 is the fake clock's start in batch-lane tests.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// batchLane is what a batch-lane rule test needs: a database, a fake clock and
// the three loops, driven by calling RunOnce.
type batchLane struct {
	t     *testing.T
	db    *testdb.DB
	st    *store.Store
	clock *clock.Fake
	ctx   context.Context
	q     *queuer.Queuer
}

func setupBatchLane(t *testing.T) *batchLane {
	t.Helper()
	db := testdb.New(t)
	clk := clock.NewFake(t0)
	qc := queuer.DefaultConfig()
	return &batchLane{
		t: t, db: db, st: db.Store, clock: clk, ctx: ctxT(t, 2*time.Minute),
		q: queuer.New(db.Store, clk, testLogger(t), qc, nil),
	}
}

func (b *batchLane) submitter(l ledger.BatchLedger, mutate ...func(*submitter.Config)) *submitter.Submitter {
	cfg := submitter.DefaultConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	return submitter.New(b.st, l, b.clock, testLogger(b.t), cfg, nil)
}

func (b *batchLane) monitor(l ledger.BatchLedger) *monitor.Monitor {
	return monitor.New(b.st, l, b.clock, testLogger(b.t), monitor.DefaultConfig(), nil)
}

// row describes a batch in any state, written straight to the table.
type row struct {
	id          string
	service     string
	createdAt   time.Time
	submitted   bool
	status      string // "" is NULL (the seed's None)
	attempts    int
	lastSubmit  time.Time
	queued      bool
	leaseExpiry time.Time
}

// put writes rows as an operator with psql would. Each state must satisfy the
// table's CHECK constraints, so a row the seed says cannot exist fails here.
func (b *batchLane) put(rows ...row) {
	b.t.Helper()
	for _, r := range rows {
		require.NoError(b.t, b.insert(r), "inserting %+v", r)
	}
}

func (b *batchLane) insert(r row) error {
	if r.service == "" {
		r.service = "svc"
	}
	if r.createdAt.IsZero() {
		r.createdAt = t0.Add(-time.Hour)
	}
	var status, lastSubmit, queuedAt, lease, finished, nextCheck any
	if r.status != "" {
		status = r.status
		if r.attempts == 0 {
			r.attempts = 1
		}
		if r.lastSubmit.IsZero() {
			r.lastSubmit = t0.Add(-time.Minute)
		}
	}
	if !r.lastSubmit.IsZero() {
		lastSubmit = r.lastSubmit
	}
	if r.queued {
		queuedAt = b.clock.Now()
	}
	if !r.leaseExpiry.IsZero() {
		lease = r.leaseExpiry
	}
	switch r.status {
	case "committed", "valid", "invalid":
		finished = t0
	case "pending":
		nextCheck = t0
	}
	_, err := b.st.Pool().Exec(b.ctx, `
		INSERT INTO ledgerq.batches (id, service_id, payload, created_at, submitted, status, attempts,
			last_submitted_at, queued_at, claim_expires_at, finished_at, next_check_at, received_at, updated_at)
		VALUES ($1, $2, '\x00', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)`,
		r.id, r.service, r.createdAt, r.submitted, status, r.attempts, lastSubmit, queuedAt, lease, finished, nextCheck, t0)
	return err
}

// queue runs one queuer round and returns the ids it queued, sorted.
func (b *batchLane) queue() []string {
	b.t.Helper()
	queued, err := b.st.QueueBatches(b.ctx, b.clock.Now(), queuer.DefaultConfig().DelayBase, queuer.DefaultConfig().DelayCap)
	require.NoError(b.t, err)
	ids := make([]string, len(queued))
	for i, q := range queued {
		ids[i] = q.ID
	}
	return sortedCopy(ids)
}

func (b *batchLane) get(id string) store.Batch {
	b.t.Helper()
	got, err := b.st.GetBatch(b.ctx, id)
	require.NoError(b.t, err)
	return got
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// scriptedLedger is a BatchLedger whose answers the test sets.
type scriptedLedger struct {
	mu       sync.Mutex
	submit   func(ids []string) ([]error, error)
	statuses map[string]ledger.BatchStatusResult
	sent     [][]string
}

func (s *scriptedLedger) SubmitBatches(_ context.Context, batches []ledger.Batch) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, len(batches))
	for i, b := range batches {
		ids[i] = b.ID
	}
	s.sent = append(s.sent, ids)
	if s.submit != nil {
		return s.submit(ids)
	}
	return make([]error, len(ids)), nil
}

func (s *scriptedLedger) BatchStatuses(_ context.Context, ids []string) (map[string]ledger.BatchStatusResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]ledger.BatchStatusResult, len(ids))
	for _, id := range ids {
		res, ok := s.statuses[id]
		if !ok {
			res = ledger.BatchStatusResult{Status: ledger.BatchUnknown}
		}
		out[id] = res
	}
	return out, nil
}

func (s *scriptedLedger) setStatus(id string, st ledger.BatchStatus, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statuses == nil {
		s.statuses = map[string]ledger.BatchStatusResult{}
	}
	s.statuses[id] = ledger.BatchStatusResult{Status: st, Reason: reason}
}

func (s *scriptedLedger) sentCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, call := range s.sent {
		n += len(call)
	}
	return n
}

func id(n int) string { return fmt.Sprintf("b%03d", n) }
