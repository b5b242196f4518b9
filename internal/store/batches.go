package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// BatchStatus is a batch's seed-001 status. The empty status is the seed's
// None: never sent.
type BatchStatus string

// Batch statuses, as stored.
const (
	BatchStatusNone      BatchStatus = ""
	BatchStatusPending   BatchStatus = "pending"
	BatchStatusUnknown   BatchStatus = "unknown"
	BatchStatusDelayed   BatchStatus = "delayed"
	BatchStatusCommitted BatchStatus = "committed"
	BatchStatusValid     BatchStatus = "valid"
	BatchStatusInvalid   BatchStatus = "invalid"
)

// Terminal reports whether the status is final: the queuer never looks at the
// batch again.
func (s BatchStatus) Terminal() bool {
	return s == BatchStatusCommitted || s == BatchStatusValid || s == BatchStatusInvalid
}

// ParseBatchStatus validates a status name.
func ParseBatchStatus(s string) (BatchStatus, error) {
	switch st := BatchStatus(s); st {
	case BatchStatusPending, BatchStatusUnknown, BatchStatusDelayed,
		BatchStatusCommitted, BatchStatusValid, BatchStatusInvalid:
		return st, nil
	}
	return "", fmt.Errorf("unknown batch status %q (want pending, unknown, delayed, committed, valid or invalid)", s)
}

// Batch is one row of the batch lane.
type Batch struct {
	ID              string
	ServiceID       string
	Payload         []byte
	CreatedAt       time.Time
	Submitted       bool
	Status          BatchStatus
	QueuedAt        *time.Time
	ClaimExpiresAt  *time.Time
	Attempts        int
	LastSubmittedAt *time.Time
	NextCheckAt     *time.Time
	LastError       string
	ReceivedAt      time.Time
	FinishedAt      *time.Time
	UpdatedAt       time.Time
}

func batchFromRow(r dbsqlc.LedgerqBatch) Batch {
	b := Batch{
		ID:              r.ID,
		ServiceID:       r.ServiceID,
		Payload:         r.Payload,
		CreatedAt:       r.CreatedAt.UTC(),
		Submitted:       r.Submitted,
		QueuedAt:        utcPtr(r.QueuedAt),
		ClaimExpiresAt:  utcPtr(r.ClaimExpiresAt),
		Attempts:        int(r.Attempts),
		LastSubmittedAt: utcPtr(r.LastSubmittedAt),
		NextCheckAt:     utcPtr(r.NextCheckAt),
		ReceivedAt:      r.ReceivedAt.UTC(),
		FinishedAt:      utcPtr(r.FinishedAt),
		UpdatedAt:       r.UpdatedAt.UTC(),
	}
	if r.Status != nil {
		b.Status = BatchStatus(*r.Status)
	}
	if r.LastError != nil {
		b.LastError = *r.LastError
	}
	return b
}

// NewBatch is a batch as a client hands it in.
type NewBatch struct {
	ID        string
	ServiceID string
	Payload   []byte
	// CreatedAt orders the batches of a service. Zero means "now".
	CreatedAt time.Time
}

// InsertedBatch is the result of storing one NewBatch.
type InsertedBatch struct {
	Batch Batch
	// Created is false when the id was already stored with the same content.
	Created bool
}

// ConflictError says a batch id is already stored with different content.
type ConflictError struct {
	ID    string
	Field string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("batch %q already exists with a different %s", e.ID, e.Field)
}

// BatchInsertParams is what BatchInsert stores.
type BatchInsertParams struct {
	// Now is the time of receipt, and the created_at of batches without one.
	Now     time.Time
	Batches []NewBatch
}

// BatchInsert stores batches in one transaction and wakes the batch queuer. A
// batch whose id is stored already with the same service, payload and (when
// given) created_at is returned as it is; one with different content fails
// the whole call with a *ConflictError and nothing is stored.
func (s *Store) BatchInsert(ctx context.Context, p BatchInsertParams) ([]InsertedBatch, error) {
	out := make([]InsertedBatch, 0, len(p.Batches))
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		out = out[:0]
		created := false
		for _, nb := range p.Batches {
			createdAt := nb.CreatedAt
			if createdAt.IsZero() {
				createdAt = p.Now
			}
			row, err := one(q.BatchInsert(ctx, dbsqlc.BatchInsertParams{
				ID: nb.ID, ServiceID: nb.ServiceID, Payload: nb.Payload, CreatedAt: createdAt, Now: p.Now,
			}))
			if err == nil {
				out = append(out, InsertedBatch{Batch: batchFromRow(row), Created: true})
				created = true
				continue
			}
			// ON CONFLICT DO NOTHING returns no row for a known id.
			if !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("inserting batch %q: %w", nb.ID, err)
			}
			existing, err := one(q.BatchGet(ctx, nb.ID))
			if err != nil {
				return fmt.Errorf("reading existing batch %q: %w", nb.ID, err)
			}
			switch {
			case existing.ServiceID != nb.ServiceID:
				return &ConflictError{ID: nb.ID, Field: "service_id"}
			case !bytes.Equal(existing.Payload, nb.Payload):
				return &ConflictError{ID: nb.ID, Field: "payload"}
			case !nb.CreatedAt.IsZero() && !existing.CreatedAt.Equal(nb.CreatedAt):
				return &ConflictError{ID: nb.ID, Field: "created_at"}
			}
			out = append(out, InsertedBatch{Batch: batchFromRow(existing)})
		}
		if created {
			return wake(ctx, q, notify.BatchQueuer)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// BatchGet returns one batch, or an error wrapping ErrNotFound.
func (s *Store) BatchGet(ctx context.Context, id string) (Batch, error) {
	row, err := one(s.q.BatchGet(ctx, id))
	if err != nil {
		return Batch{}, fmt.Errorf("reading batch %q: %w", id, err)
	}
	return batchFromRow(row), nil
}

// BatchListParams selects batches for BatchList.
type BatchListParams struct {
	ServiceID string      // optional
	Status    BatchStatus // optional
	After     string      // keyset cursor: ids greater than this
	Limit     int
}

// BatchList lists batches by id, after the cursor.
func (s *Store) BatchList(ctx context.Context, f BatchListParams) ([]Batch, error) {
	p := dbsqlc.BatchListParams{After: f.After, Max: int32(f.Limit)}
	if f.ServiceID != "" {
		p.ServiceID = &f.ServiceID
	}
	if f.Status != BatchStatusNone {
		st := dbsqlc.LedgerqBatchStatus(f.Status)
		p.Status = &st
	}
	rows, err := s.q.BatchList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("listing batches: %w", err)
	}
	out := make([]Batch, len(rows))
	for i, r := range rows {
		out[i] = batchFromRow(r)
	}
	return out, nil
}

// QueuedBatch is a batch the queuer marked for sending.
type QueuedBatch struct {
	ID        string
	ServiceID string
	Status    BatchStatus
}

// BatchQueueParams are the inputs of the queuer's rule.
type BatchQueueParams struct {
	Now time.Time
	// DelayWindow is the seed's delay window of a delayed batch; it doubles
	// with each further attempt, up to DelayCap.
	DelayWindow time.Duration
	DelayCap    time.Duration
}

// BatchQueue runs the queuer's rule (seed 001, see BatchQueue in
// queries/batches.sql) and wakes the batch submitter when it queued anything.
func (s *Store) BatchQueue(ctx context.Context, p BatchQueueParams) ([]QueuedBatch, error) {
	var out []QueuedBatch
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		rows, err := q.BatchQueue(ctx, dbsqlc.BatchQueueParams{
			Now: p.Now, DelayWindowSecs: p.DelayWindow.Seconds(), DelayCapSecs: p.DelayCap.Seconds(),
		})
		if err != nil {
			return fmt.Errorf("queuing batches: %w", err)
		}
		out = make([]QueuedBatch, len(rows))
		for i, r := range rows {
			out[i] = QueuedBatch{ID: r.ID, ServiceID: r.ServiceID}
			if r.Status != nil {
				out[i].Status = BatchStatus(*r.Status)
			}
		}
		if len(rows) > 0 {
			return wake(ctx, q, notify.BatchSubmitter)
		}
		return nil
	})
	return out, err
}

// ClaimedBatch is a batch a submitter holds, with the attempt number that
// fences its outcome.
type ClaimedBatch struct {
	ID        string
	ServiceID string
	Payload   []byte
	Attempt   int
}

// BatchClaimQueuedParams are the inputs of the submitter's claim.
type BatchClaimQueuedParams struct {
	Now time.Time
	// LeaseUntil is when the claim expires and the monitor may take over.
	LeaseUntil time.Time
	Max        int
}

// BatchClaimQueued claims up to Max queued batches for sending (seed 001:
// submitted = true while the submitter has them) with a lease until LeaseUntil.
func (s *Store) BatchClaimQueued(ctx context.Context, p BatchClaimQueuedParams) ([]ClaimedBatch, error) {
	rows, err := s.q.BatchClaimQueued(ctx, dbsqlc.BatchClaimQueuedParams{
		Now: p.Now, LeaseExpiresAt: p.LeaseUntil, Max: int32(p.Max),
	})
	if err != nil {
		return nil, fmt.Errorf("claiming queued batches: %w", err)
	}
	out := make([]ClaimedBatch, len(rows))
	for i, r := range rows {
		out[i] = ClaimedBatch{ID: r.ID, ServiceID: r.ServiceID, Payload: r.Payload, Attempt: int(r.Attempts)}
	}
	return out, nil
}

// SubmitResult is what became of one claimed batch at the ledger.
type SubmitResult int

// Submit results.
const (
	SubmitAccepted SubmitResult = iota + 1 // → pending
	SubmitDelayed                          // transient failure → delayed, submitted = false
	SubmitRejected                         // deterministic rejection → invalid
)

func (r SubmitResult) String() string {
	switch r {
	case SubmitAccepted:
		return "accepted"
	case SubmitDelayed:
		return "delayed"
	case SubmitRejected:
		return "rejected"
	}
	return fmt.Sprintf("SubmitResult(%d)", int(r))
}

// SubmitOutcome records one claimed batch's result.
type SubmitOutcome struct {
	ID      string
	Attempt int
	Result  SubmitResult
	Reason  string
}

// BatchRecordSubmitParams are the submitter's results of one round.
type BatchRecordSubmitParams struct {
	Now time.Time
	// NextCheckAt is when the monitor first asks about an accepted batch.
	NextCheckAt time.Time
	Outcomes    []SubmitOutcome
}

// BatchRecordSubmit applies the submitter's results in one transaction.
// Each update applies only if the same claim still holds the batch; the count
// of applied updates is returned (a smaller count means a claim was lost to the
// monitor after its lease expired). The monitor is woken for accepted batches
// and the queuer for delayed or rejected ones.
func (s *Store) BatchRecordSubmit(ctx context.Context, p BatchRecordSubmitParams) (int, error) {
	applied := 0
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		applied = 0
		wakeMonitor, wakeQueuer := false, false
		for _, o := range p.Outcomes {
			var n int64
			var err error
			switch o.Result {
			case SubmitAccepted:
				n, err = q.BatchMarkPending(ctx, dbsqlc.BatchMarkPendingParams{
					ID: o.ID, Attempts: int32(o.Attempt), Now: p.Now, NextCheckAt: p.NextCheckAt,
				})
				wakeMonitor = true
			case SubmitDelayed:
				n, err = q.BatchMarkDelayed(ctx, dbsqlc.BatchMarkDelayedParams{
					ID: o.ID, Attempts: int32(o.Attempt), Now: p.Now, LastError: o.Reason,
				})
				wakeQueuer = true
			case SubmitRejected:
				n, err = q.BatchMarkRejected(ctx, dbsqlc.BatchMarkRejectedParams{
					ID: o.ID, Attempts: int32(o.Attempt), Now: p.Now, LastError: o.Reason,
				})
				wakeQueuer = true
			default:
				return fmt.Errorf("batch %q: unknown submit result %d", o.ID, o.Result)
			}
			if err != nil {
				return fmt.Errorf("recording submit outcome of batch %q: %w", o.ID, err)
			}
			applied += int(n)
		}
		if wakeMonitor {
			if err := wake(ctx, q, notify.BatchMonitor); err != nil {
				return err
			}
		}
		if wakeQueuer {
			return wake(ctx, q, notify.BatchQueuer)
		}
		return nil
	})
	return applied, err
}

// CheckBatch is a batch the monitor asks the ledger about.
type CheckBatch struct {
	ID        string
	ServiceID string
	Attempt   int
	// Held is true for a batch whose submitter's lease expired.
	Held bool
}

// BatchClaimForCheckParams are the inputs of the monitor's claim.
type BatchClaimForCheckParams struct {
	Now time.Time
	// LeaseUntil is the monitor's lease on an expired held batch while it asks.
	LeaseUntil time.Time
	// NextCheckAt is when a claimed pending batch is due again if this check
	// records nothing.
	NextCheckAt time.Time
	Max         int
}

// BatchClaimForCheck claims up to Max batches to ask the ledger about: held
// batches whose claim lease expired (their submitter died mid-send), then
// pending batches whose next check is due. Claiming pushes the row's lease or
// next check forward so that other monitors skip it.
func (s *Store) BatchClaimForCheck(ctx context.Context, p BatchClaimForCheckParams) ([]CheckBatch, error) {
	held, err := s.q.BatchClaimExpiredHeld(ctx, dbsqlc.BatchClaimExpiredHeldParams{
		Now: p.Now, LeaseExpiresAt: p.LeaseUntil, Max: int32(p.Max),
	})
	if err != nil {
		return nil, fmt.Errorf("claiming expired held batches: %w", err)
	}
	out := make([]CheckBatch, 0, len(held))
	for _, r := range held {
		out = append(out, CheckBatch{ID: r.ID, ServiceID: r.ServiceID, Attempt: int(r.Attempts), Held: true})
	}
	if rest := p.Max - len(out); rest > 0 {
		pending, err := s.q.BatchClaimPendingForCheck(ctx, dbsqlc.BatchClaimPendingForCheckParams{
			Now: p.Now, NextCheckAt: p.NextCheckAt, Max: int32(rest),
		})
		if err != nil {
			return nil, fmt.Errorf("claiming pending batches for check: %w", err)
		}
		for _, r := range pending {
			out = append(out, CheckBatch{ID: r.ID, ServiceID: r.ServiceID, Attempt: int(r.Attempts)})
		}
	}
	return out, nil
}

// StatusOutcome is the ledger's answer for one checked batch, in store terms.
type StatusOutcome struct {
	ID      string
	Attempt int
	Status  BatchStatus // pending, unknown, committed, valid or invalid
	Reason  string
}

// BatchRecordStatusesParams are the monitor's results of one round.
type BatchRecordStatusesParams struct {
	Now time.Time
	// NextCheckAt is when a batch still pending is asked about again.
	NextCheckAt time.Time
	Outcomes    []StatusOutcome
}

// BatchRecordStatuses applies the monitor's results in one transaction, each
// conditional on the attempt the monitor checked. It wakes the queuer when a
// batch became unknown or terminal (its service may send again).
func (s *Store) BatchRecordStatuses(ctx context.Context, p BatchRecordStatusesParams) (int, error) {
	applied := 0
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		applied = 0
		wakeQueuer := false
		for _, o := range p.Outcomes {
			qp := dbsqlc.BatchRecordStatusParams{
				ID: o.ID, Attempts: int32(o.Attempt), Status: dbsqlc.LedgerqBatchStatus(o.Status),
				Now: p.Now, NextCheckAt: p.NextCheckAt,
			}
			if o.Reason != "" {
				qp.LastError = &o.Reason
			}
			n, err := q.BatchRecordStatus(ctx, qp)
			if err != nil {
				return fmt.Errorf("recording status %s of batch %q: %w", o.Status, o.ID, err)
			}
			applied += int(n)
			if n > 0 && o.Status != BatchStatusPending {
				wakeQueuer = true
			}
		}
		if wakeQueuer {
			return wake(ctx, q, notify.BatchQueuer)
		}
		return nil
	})
	return applied, err
}

// BatchCountByState returns the number of batches per state: new, queued,
// held, or a status. It reads the whole table: for reports, not for scrapes
// (see BatchDepthByState).
func (s *Store) BatchCountByState(ctx context.Context) (map[string]int64, error) {
	rows, err := s.q.BatchCountByState(ctx)
	if err != nil {
		return nil, fmt.Errorf("counting batches: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.State] = r.Batches
	}
	return out, nil
}

// StateDepth is how many items of a lane wait in one state, and since when.
type StateDepth struct {
	State  string
	Items  int64
	Oldest time.Time
}

// BatchDepthByState returns the depth of each non-terminal state of the
// batch lane and when its oldest batch was received, from an index of the
// unfinished batches only: cheap enough for every metrics scrape.
func (s *Store) BatchDepthByState(ctx context.Context) ([]StateDepth, error) {
	rows, err := s.q.BatchDepthByState(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading batch lane depth: %w", err)
	}
	out := make([]StateDepth, len(rows))
	for i, r := range rows {
		out[i] = StateDepth{State: r.State, Items: r.Batches, Oldest: r.OldestReceivedAt.UTC()}
	}
	return out, nil
}

// BatchRunSummary is the figures of one bench run, from its rows.
type BatchRunSummary struct {
	Inserted, Committed, Invalid, Valid, Unfinished int
	Submissions                                     int64
	// EndToEnd runs from the first received_at to the last finished_at.
	EndToEnd time.Duration
	// Latency of committed batches, received_at to finished_at.
	P50, P99, Max time.Duration
}

// BatchRunSummary reads the figures of the batches whose service ids start
// with prefix (one `ledgerq bench batches` run).
func (s *Store) BatchRunSummary(ctx context.Context, prefix string) (BatchRunSummary, error) {
	r, err := one(s.q.BatchRunSummary(ctx, prefix))
	if err != nil {
		return BatchRunSummary{}, fmt.Errorf("reading the run's figures: %w", err)
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return BatchRunSummary{
		Inserted: int(r.Inserted), Committed: int(r.Committed), Invalid: int(r.Invalid), Valid: int(r.Valid),
		Unfinished: int(r.Unfinished), Submissions: r.Submissions,
		EndToEnd: us(r.EndToEndUs), P50: us(r.P50Us), P99: us(r.P99Us), Max: us(r.MaxUs),
	}, nil
}

// utcPtr returns t in UTC: pgx returns times in the local zone.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
