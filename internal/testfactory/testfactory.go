// Package testfactory writes rows for tests, so a test can start from a state
// the loops would take many rounds to reach.
//
// Batches are written in any state the way an operator with psql would:
// straight into the tables (PutBatches). Every row must still satisfy the
// table's CHECK constraints, so a state the rules say cannot exist fails here
// instead of being tested. The other lanes' rows span several tables that
// the store writes together (a task with its wallet's shard, an attempt with
// the wallet's next nonce, a bundle with its transactions), so they are made
// through the store as the lane's own code makes them: PostTask as the API,
// StartTask as the wallet's worker, AddPoolTxs as the intake, CutBundles as
// the bundler.
//
// A Factory works on any store (a pool, or a rolled-back transaction from
// testdb.NewTx) and fills the columns a test leaves out relative to its
// clock. Each lane has its own row types and methods (Batch and PutBatches,
// Task and PostTask, PoolTx and AddPoolTxs, …).
package testfactory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Start is when the fake clocks of rule tests start: a fixed time, so a
// failing test shows the same times on every run.
func Start() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// NewClock returns a fake clock set to Start.
func NewClock() *clock.Fake { return clock.NewFake(Start()) }

// Factory writes rows for one test.
type Factory struct {
	tb    testing.TB
	st    *store.Store
	clock clock.Clock
}

// New returns a Factory that writes through st and takes "now" from clk.
func New(tb testing.TB, st *store.Store, clk clock.Clock) *Factory {
	return &Factory{tb: tb, st: st, clock: clk}
}

// Batch is one row of ledgerq.batches in any state. Zero fields get the
// defaults their doc gives; the other columns follow from the state
// (finished_at for a terminal status, next_check_at for a pending one).
type Batch struct {
	ID string
	// ServiceID defaults to "svc".
	ServiceID string
	// CreatedAt defaults to an hour before now.
	CreatedAt time.Time
	Submitted bool
	// Status is the batch's status; BatchStatusNone is NULL (never sent).
	Status store.BatchStatus
	// Attempts defaults to 1 when Status is set.
	Attempts int
	// LastSubmittedAt defaults to a minute before now when Status is set.
	LastSubmittedAt time.Time
	// Queued sets queued_at to now: the queuer released the batch.
	Queued bool
	// ClaimExpiresAt is the end of a claim's lease; zero is no claim.
	ClaimExpiresAt time.Time
}

// PutBatches writes rows and fails the test if the table refuses one.
func (f *Factory) PutBatches(rows ...Batch) {
	f.tb.Helper()
	for _, r := range rows {
		if err := f.InsertBatch(f.tb.Context(), r); err != nil {
			f.tb.Fatalf("testfactory: inserting %+v: %v", r, err)
		}
	}
}

// InsertBatch writes one row in its own transaction (a savepoint inside a
// testdb.NewTx store) and returns the database's answer, for tests of the
// table's constraints: a refused row leaves the test's transaction usable.
func (f *Factory) InsertBatch(ctx context.Context, r Batch) error {
	now := f.clock.Now()
	if r.ServiceID == "" {
		r.ServiceID = "svc"
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now.Add(-time.Hour)
	}
	var status, lastSubmit, queuedAt, lease, finished, nextCheck any
	if r.Status != store.BatchStatusNone {
		status = string(r.Status)
		if r.Attempts == 0 {
			r.Attempts = 1
		}
		if r.LastSubmittedAt.IsZero() {
			r.LastSubmittedAt = now.Add(-time.Minute)
		}
	}
	if !r.LastSubmittedAt.IsZero() {
		lastSubmit = r.LastSubmittedAt
	}
	if r.Queued {
		queuedAt = now
	}
	if !r.ClaimExpiresAt.IsZero() {
		lease = r.ClaimExpiresAt
	}
	switch {
	case r.Status.Terminal():
		finished = now
	case r.Status == store.BatchStatusPending:
		nextCheck = now
	}
	tx, err := f.st.DB().Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The state row first, then the client's id (and a payload) in
	// batch_payloads, under the state row's seq.
	_, err = tx.Exec(ctx, `
		WITH b AS (
			INSERT INTO ledgerq.batches (service_id, created_at, submitted, status, attempts,
				last_submitted_at, queued_at, claim_expires_at, finished_at, next_check_at, received_at, updated_at)
			VALUES ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)
			RETURNING seq
		)
		INSERT INTO ledgerq.batch_payloads (seq, id, service_id, payload) SELECT b.seq, $1, $2, '\x00' FROM b`,
		r.ID, r.ServiceID, r.CreatedAt, r.Submitted, status, r.Attempts, lastSubmit, queuedAt, lease, finished, nextCheck, now)
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// PostBatches stores n real signed batches of service through the store, as
// the API does, oldest first: their created_at are now, now + 1 s, …. It
// returns their ids in that order.
func (f *Factory) PostBatches(service string, n int) []string {
	f.tb.Helper()
	now := f.clock.Now()
	ids := make([]string, n)
	nbs := make([]store.NewBatch, n)
	for i := range n {
		id, payload := SignedBatch(f.tb)
		ids[i] = id
		nbs[i] = store.NewBatch{ID: id, ServiceID: service, Payload: payload, CreatedAt: now.Add(time.Duration(i) * time.Second)}
	}
	if _, err := f.st.BatchInsert(f.tb.Context(), store.BatchInsertParams{Now: now, Batches: nbs}); err != nil {
		f.tb.Fatalf("testfactory: storing %d batches of %s: %v", n, service, err)
	}
	return ids
}

var signer = sync.OnceValues(func() (*sawtooth.Signer, error) { return sawtooth.GenerateSigner() })

// SignedBatch returns a real signed Sawtooth batch, its id (header_signature)
// and its payload (a serialized Batch), as the simulated ledger and the API
// require.
func SignedBatch(tb testing.TB) (id string, payload []byte) {
	tb.Helper()
	s, err := signer()
	if err != nil {
		tb.Fatalf("testfactory: generating a signing key: %v", err)
	}
	id, payload, err = s.NewBatch([]byte("payload"))
	if err != nil {
		tb.Fatalf("testfactory: signing a batch: %v", err)
	}
	return id, payload
}

// Queue runs one queuer round (run is a BatchQueuer's RunOnce) and returns
// the ids it queued, sorted; it fails the test when the round's count and the
// rows disagree.
func (f *Factory) Queue(run func(context.Context) (int, error)) []string {
	f.tb.Helper()
	before := f.QueuedIDs()
	n, err := run(f.tb.Context())
	require.NoError(f.tb, err)
	var ids []string
	for _, id := range f.QueuedIDs() {
		if !slices.Contains(before, id) {
			ids = append(ids, id)
		}
	}
	require.Len(f.tb, ids, n, "the round reports as many batches as it queued")
	return ids
}

// QueuedIDs returns the ids of the batches marked queued, sorted.
func (f *Factory) QueuedIDs() []string {
	f.tb.Helper()
	all, err := f.st.BatchList(f.tb.Context(), store.BatchListParams{Limit: 10000})
	require.NoError(f.tb, err)
	var ids []string
	for _, x := range all {
		if x.QueuedAt != nil {
			ids = append(ids, x.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// Get returns one batch; it fails the test when there is none.
func (f *Factory) Get(id string) store.Batch {
	f.tb.Helper()
	got, err := f.st.BatchGet(f.tb.Context(), id)
	require.NoError(f.tb, err)
	return got
}

// AllFinal reports whether every batch is committed or invalid.
func (f *Factory) AllFinal() bool {
	f.tb.Helper()
	counts, err := f.st.BatchCountByState(f.tb.Context())
	require.NoError(f.tb, err)
	var all int64
	for _, n := range counts {
		all += n
	}
	return counts["committed"]+counts["invalid"] == all
}

// Run runs one round of a service (its RunOnce) and returns its count; it
// fails the test, naming the round, when the round fails.
func (f *Factory) Run(name string, run func(context.Context) (int, error)) int {
	f.tb.Helper()
	n, err := run(f.tb.Context())
	require.NoError(f.tb, err, name)
	return n
}
