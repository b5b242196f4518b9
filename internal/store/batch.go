package store

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// BatchStatus is a batch's status as the ledger reported it. The empty
// status is None: never sent.
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

// Batch is one batch of the batch lane: its state row and the id the
// client gave it.
type Batch struct {
	// Seq is the batch's key in the store (ledgerq.batches.seq): the rounds
	// of the lane locate and record batches by it.
	Seq int64
	// ID is the client's id, unique (for Sawtooth, the header_signature).
	ID              string
	ServiceID       string
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

func batchFromRow(id string, r dbsqlc.LedgerqBatch) Batch {
	return Batch{
		Seq:             r.Seq,
		ID:              id,
		ServiceID:       r.ServiceID,
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
		Status:          BatchStatus(deref(r.Status)),
		LastError:       deref(r.LastError),
	}
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

// BatchInsert stores batches in one transaction with one INSERT, and admits
// the next batch of every service it made busy-able: a service with no active
// batch gets its oldest never-sent batch queued in the same transaction
// (which wakes the batch submitter). A batch whose id is stored already with
// the same service, payload and (when given) created_at is returned as it is;
// one with different content fails the whole call with a *ConflictError and
// nothing is stored.
func (s *Store) BatchInsert(ctx context.Context, p BatchInsertParams) ([]InsertedBatch, error) {
	n := len(p.Batches)
	ins := dbsqlc.BatchInsertManyParams{
		Now: p.Now, Ids: make([]string, n), ServiceIds: make([]string, n),
		Payloads: make([][]byte, n), CreatedAts: make([]time.Time, n),
	}
	for i, nb := range p.Batches {
		ins.Ids[i], ins.ServiceIds[i], ins.Payloads[i], ins.CreatedAts[i] = nb.ID, nb.ServiceID, nb.Payload, nb.CreatedAt
		if nb.CreatedAt.IsZero() {
			ins.CreatedAts[i] = p.Now
		}
	}
	var (
		out      []InsertedBatch
		deferred []string
	)
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		out, deferred = nil, nil
		rows, err := q.BatchInsertMany(ctx, ins)
		if err != nil {
			return fmt.Errorf("inserting %d batches: %w", n, err)
		}
		created := make(map[string]dbsqlc.LedgerqBatch, len(rows))
		var services []string
		for _, r := range rows {
			created[r.ID] = dbsqlc.LedgerqBatch{
				Seq: r.Seq, ServiceID: r.ServiceID, CreatedAt: r.CreatedAt, Submitted: r.Submitted,
				Status: r.Status, QueuedAt: r.QueuedAt, ClaimExpiresAt: r.ClaimExpiresAt, Attempts: r.Attempts,
				LastSubmittedAt: r.LastSubmittedAt, NextCheckAt: r.NextCheckAt, LastError: r.LastError,
				ReceivedAt: r.ReceivedAt, FinishedAt: r.FinishedAt, UpdatedAt: r.UpdatedAt,
			}
			services = append(services, r.ServiceID)
		}
		var known map[string]dbsqlc.BatchGetManyRow
		if len(rows) < n {
			// ON CONFLICT DO NOTHING returned no row for known ids.
			var missing []string
			for _, nb := range p.Batches {
				if _, ok := created[nb.ID]; !ok {
					missing = append(missing, nb.ID)
				}
			}
			existing, err := q.BatchGetMany(ctx, missing)
			if err != nil {
				return fmt.Errorf("reading %d existing batches: %w", len(missing), err)
			}
			known = make(map[string]dbsqlc.BatchGetManyRow, len(existing))
			for _, r := range existing {
				known[r.ID] = r
			}
		}
		admitted, freed, err := admitAtIntake(ctx, q, p.Now, services)
		if err != nil {
			return err
		}
		deferred = freed
		out = make([]InsertedBatch, 0, n)
		for _, nb := range p.Batches {
			if r, ok := created[nb.ID]; ok {
				b := batchFromRow(nb.ID, r)
				if _, ok := admitted[r.Seq]; ok {
					b.QueuedAt = &p.Now
				}
				out = append(out, InsertedBatch{Batch: b, Created: true})
				continue
			}
			existing, ok := known[nb.ID]
			switch {
			case !ok:
				return fmt.Errorf("batch %q was neither stored nor found", nb.ID)
			case existing.LedgerqBatch.ServiceID != nb.ServiceID:
				return &ConflictError{ID: nb.ID, Field: "service_id"}
			case !bytes.Equal(existing.Payload, nb.Payload):
				return &ConflictError{ID: nb.ID, Field: "payload"}
			case !nb.CreatedAt.IsZero() && !existing.LedgerqBatch.CreatedAt.Equal(nb.CreatedAt):
				return &ConflictError{ID: nb.ID, Field: "created_at"}
			}
			out = append(out, InsertedBatch{Batch: batchFromRow(existing.ID, existing.LedgerqBatch)})
		}
		if len(admitted) > 0 {
			return wake(ctx, q, notify.BatchSubmitter)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(deferred) > 0 {
		// Services freed while this transaction waited for their locks: now
		// that its batches are committed, admit them as their finisher would
		// have. Should this fail or the process die here, the queuer's
		// reconciliation admits them (the batches are stored).
		var admitted map[int64]QueuedBatch
		err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
			var err error
			if admitted, err = admit(ctx, q, p.Now, deferred); err != nil || len(admitted) == 0 {
				return err
			}
			return wake(ctx, q, notify.BatchSubmitter)
		})
		if err != nil {
			return nil, fmt.Errorf("batches stored; admitting %d services freed meanwhile: %w", len(deferred), err)
		}
		for i := range out {
			if _, ok := admitted[out[i].Batch.Seq]; ok && out[i].Created {
				out[i].Batch.QueuedAt = &p.Now
			}
		}
	}
	return out, nil
}

// admitAtIntake runs admission in an intake transaction, after its INSERT:
// a service seen idle is locked exclusively and admitted as admit does; a
// service seen busy is locked shared (intakes of a busy service do not wait
// for each other; its finisher, which locks exclusively, waits for them and
// admits after them). A busy service found idle once its lock is held was
// freed by a transaction that committed before it could see this one's
// batches: those services are returned as freed, for admission after the
// commit.
func admitAtIntake(ctx context.Context, q *dbsqlc.Queries, now time.Time, services []string) (map[int64]QueuedBatch, []string, error) {
	if len(services) == 0 {
		return nil, nil, nil
	}
	locks, err := q.BatchServiceLockForIntake(ctx, services)
	if err != nil {
		return nil, nil, fmt.Errorf("locking %d services for admission: %w", len(services), err)
	}
	var idle, busy []string
	for _, l := range locks {
		if l.Busy {
			busy = append(busy, l.ServiceIds...)
		} else {
			idle = append(idle, l.ServiceIds...)
		}
	}
	admitted, err := admitLocked(ctx, q, now, idle)
	if err != nil {
		return nil, nil, err
	}
	var freed []string
	if len(busy) > 0 {
		if freed, err = q.BatchServiceFilterIdle(ctx, busy); err != nil {
			return nil, nil, fmt.Errorf("probing %d services: %w", len(busy), err)
		}
	}
	return admitted, freed, nil
}

// admit runs the batch lane's admission for services inside a transaction:
// under each service's advisory lock (taken in key order), a service with no
// active batch gets its oldest never-sent batch queued. It returns the
// batches it queued, by seq.
func admit(ctx context.Context, q *dbsqlc.Queries, now time.Time, services []string) (map[int64]QueuedBatch, error) {
	if len(services) == 0 {
		return nil, nil
	}
	if err := q.BatchServiceLock(ctx, services); err != nil {
		return nil, fmt.Errorf("locking %d services for admission: %w", len(services), err)
	}
	return admitLocked(ctx, q, now, services)
}

// admitLocked is admission for services whose locks the transaction holds
// exclusively.
func admitLocked(ctx context.Context, q *dbsqlc.Queries, now time.Time, services []string) (map[int64]QueuedBatch, error) {
	if len(services) == 0 {
		return nil, nil
	}
	rows, err := q.BatchAdmit(ctx, dbsqlc.BatchAdmitParams{Now: now, ServiceIds: services, LeaseExpiresAt: now})
	if err != nil {
		return nil, fmt.Errorf("admitting the next batches of %d services: %w", len(services), err)
	}
	return byKey(rows, func(r dbsqlc.BatchAdmitRow) (int64, QueuedBatch) {
		return r.Seq, QueuedBatch{Seq: r.Seq, ServiceID: r.ServiceID}
	}), nil
}

// BatchGet returns one batch, or an error wrapping ErrNotFound.
func (s *Store) BatchGet(ctx context.Context, id string) (Batch, error) {
	row, err := one(s.q.BatchGet(ctx, id))
	if err != nil {
		return Batch{}, fmt.Errorf("reading batch %q: %w", id, err)
	}
	return batchFromRow(row.ID, row.LedgerqBatch), nil
}

// BatchWithPayload is a stored batch with its payload.
type BatchWithPayload struct {
	Batch
	Payload []byte
}

// BatchGetMany returns the stored batches among ids, with their payloads, in
// no particular order; an id that is not stored has no entry. The caller
// bounds ids: every payload is read into memory.
func (s *Store) BatchGetMany(ctx context.Context, ids []string) ([]BatchWithPayload, error) {
	rows, err := s.q.BatchGetMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading %d batches: %w", len(ids), err)
	}
	out := make([]BatchWithPayload, len(rows))
	for i, r := range rows {
		out[i] = BatchWithPayload{Batch: batchFromRow(r.ID, r.LedgerqBatch), Payload: r.Payload}
	}
	return out, nil
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
	var status *dbsqlc.LedgerqBatchStatus
	if f.Status != BatchStatusNone {
		st := dbsqlc.LedgerqBatchStatus(f.Status)
		status = &st
	}
	var out []Batch
	if f.ServiceID != "" {
		rows, err := s.q.BatchListByService(ctx, dbsqlc.BatchListByServiceParams{
			ServiceID: f.ServiceID, Status: status, After: f.After, Max: int32(f.Limit),
		})
		if err != nil {
			return nil, fmt.Errorf("listing the batches of service %q: %w", f.ServiceID, err)
		}
		out = make([]Batch, len(rows))
		for i, r := range rows {
			out[i] = batchFromRow(r.ID, r.LedgerqBatch)
		}
		return out, nil
	}
	// With a generic plan (BatchList's comment says why).
	genericPlans := func(ctx context.Context, build func(*pgx.Batch)) error {
		return s.sendTxWith(ctx, queueGenericPlans, build)
	}
	rows, err := sendRows(ctx, genericPlans, func(b *pgx.Batch, out *[]dbsqlc.BatchListRow) {
		queueMany(b, (*dbsqlc.Queries).BatchList, dbsqlc.BatchListParams{Status: status, After: f.After, Max: int32(f.Limit)}, out)
	})
	if err != nil {
		return nil, fmt.Errorf("listing batches: %w", err)
	}
	out = make([]Batch, len(rows))
	for i, r := range rows {
		out[i] = batchFromRow(r.ID, r.LedgerqBatch)
	}
	return out, nil
}

// QueuedBatch is a batch the queuer marked for sending.
type QueuedBatch struct {
	Seq       int64
	ServiceID string
	Status    BatchStatus
}

// BatchQueueParams are the inputs of the queuer's round.
type BatchQueueParams struct {
	Now time.Time
	// DelayWindow is how long a delayed batch waits before it is queued
	// again; it doubles with each further attempt, up to DelayCap.
	DelayWindow time.Duration
	DelayCap    time.Duration
	// Reconcile also admits the next batch of every idle service that no
	// transaction admitted (rows an operator wrote by hand): a loose index
	// scan over the services, the recovery path. At most ReconcileMax
	// services are admitted per round.
	Reconcile    bool
	ReconcileMax int
}

// BatchQueue runs the queuer's round: unknown batches and delayed batches
// outside their delay window are queued again, and with Reconcile, idle
// services get their oldest never-sent batch (which admission otherwise does
// in the transaction that frees a service). It wakes the batch submitter when it queued anything.
func (s *Store) BatchQueue(ctx context.Context, p BatchQueueParams) ([]QueuedBatch, error) {
	var out []QueuedBatch
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		out = out[:0]
		rows, err := q.BatchQueueRetries(ctx, dbsqlc.BatchQueueRetriesParams{
			Now: p.Now, DelayWindowSecs: p.DelayWindow.Seconds(), DelayCapSecs: p.DelayCap.Seconds(),
		})
		if err != nil {
			return fmt.Errorf("queuing batches to retry: %w", err)
		}
		for _, r := range rows {
			qb := QueuedBatch{Seq: r.Seq, ServiceID: r.ServiceID}
			if r.Status != nil {
				qb.Status = BatchStatus(*r.Status)
			}
			out = append(out, qb)
		}
		if p.Reconcile {
			idle, err := q.BatchServiceListIdle(ctx, int32(max(p.ReconcileMax, 1)))
			if err != nil {
				return fmt.Errorf("finding idle services: %w", err)
			}
			admitted, err := admit(ctx, q, p.Now, idle)
			if err != nil {
				return err
			}
			for _, a := range admitted {
				out = append(out, a)
			}
		}
		if len(out) > 0 {
			return wake(ctx, q, notify.BatchSubmitter)
		}
		return nil
	})
	return out, err
}

// ClaimedBatch is a batch a submitter holds, with the attempt number that
// fences its outcome.
type ClaimedBatch struct {
	Seq       int64
	ID        string
	ServiceID string
	Payload   []byte
	Attempt   int
	// Unverified is set for a batch stored through ledgerq.submit_batch,
	// whose signatures SQL could not check: the submitter verifies it
	// before sending it.
	Unverified bool
}

// BatchClaimQueuedParams are the inputs of the submitter's claim.
type BatchClaimQueuedParams struct {
	Now time.Time
	// LeaseUntil is when the claim expires and the monitor may take over.
	LeaseUntil time.Time
	Max        int
}

// BatchClaimQueued claims up to Max queued batches for sending (submitted =
// true while the submitter has them) with a lease until LeaseUntil.
func (s *Store) BatchClaimQueued(ctx context.Context, p BatchClaimQueuedParams) ([]ClaimedBatch, error) {
	rows, err := sendRows(ctx, s.sendClaim, func(b *pgx.Batch, out *[]dbsqlc.BatchClaimQueuedRow) {
		queueMany(b, (*dbsqlc.Queries).BatchClaimQueued, dbsqlc.BatchClaimQueuedParams{
			Now: p.Now, LeaseExpiresAt: p.LeaseUntil, Max: int32(p.Max),
		}, out)
	})
	if err != nil {
		return nil, fmt.Errorf("claiming queued batches: %w", err)
	}
	out := make([]ClaimedBatch, len(rows))
	for i, r := range rows {
		out[i] = ClaimedBatch{Seq: r.Seq, ID: r.ID, ServiceID: r.ServiceID, Payload: r.Payload, Attempt: int(r.Attempts), Unverified: r.Unverified}
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
	Seq     int64 // the claimed batch's Seq
	Attempt int
	Result  SubmitResult
	Reason  string
	// Verified says the submitter checked, in this attempt, the signatures
	// of a batch stored unverified, and they held: recording an accepted
	// or delayed outcome clears the batch's unverified flag in the same
	// transaction, so that sending it again does not check it again.
	Verified bool
}

// BatchRecordSubmitParams are the submitter's results of one round.
type BatchRecordSubmitParams struct {
	Now time.Time
	// NextCheckAt is when the monitor first asks about an accepted batch.
	NextCheckAt time.Time
	Outcomes    []SubmitOutcome
}

// BatchRecorded is what recording a round's outcomes changed.
type BatchRecorded struct {
	// Applied counts outcomes recorded; fewer than given means some claims
	// had expired and another process took the batches over.
	Applied int
	// ByResult counts the applied outcomes by result or status name.
	ByResult map[string]int
	// Queued is how many batches became ready to send in the same
	// transaction: the next batch of a service that was freed, or an
	// unknown batch queued again.
	Queued int
	// Claimed are the next batches of freed services claimed for the
	// caller (BatchRecordStatusesParams.ClaimUntil), with their payloads.
	Claimed []ClaimedBatch
}

// BatchRecordSubmit applies the submitter's results of one round in one
// statement and one transaction. Each outcome applies only if the same claim
// still holds the batch. A rejected batch frees its service, whose next batch
// is admitted in the same transaction. It wakes the monitor for accepted
// batches, the queuer for delayed ones and the submitter for admitted ones.
func (s *Store) BatchRecordSubmit(ctx context.Context, p BatchRecordSubmitParams) (BatchRecorded, error) {
	n := len(p.Outcomes)
	qp := dbsqlc.BatchRecordSubmitManyParams{
		Now: p.Now, NextCheckAt: p.NextCheckAt,
		Seqs: make([]int64, n), Attempts: make([]int32, n), Results: make([]string, n), Reasons: make([]string, n),
	}
	// A rejected batch is final: it is never sent again, so its flag stays.
	verifiedAttempt := map[int64]int32{}
	for i, o := range p.Outcomes {
		switch o.Result {
		case SubmitAccepted, SubmitDelayed, SubmitRejected:
		default:
			return BatchRecorded{}, fmt.Errorf("batch seq %d: unknown submit result %d", o.Seq, o.Result)
		}
		qp.Seqs[i], qp.Attempts[i], qp.Results[i], qp.Reasons[i] = o.Seq, int32(o.Attempt), o.Result.String(), o.Reason
		if o.Verified && o.Result != SubmitRejected {
			verifiedAttempt[o.Seq] = int32(o.Attempt)
		}
	}
	var res BatchRecorded
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		rows, err := q.BatchRecordSubmitMany(ctx, qp)
		if err != nil {
			return fmt.Errorf("recording %d submit outcomes: %w", n, err)
		}
		res = BatchRecorded{Applied: len(rows), ByResult: map[string]int{}}
		var freed []string
		var verified dbsqlc.BatchPayloadMarkVerifiedParams
		for _, r := range rows {
			res.ByResult[r.Result]++
			switch {
			case r.Result == SubmitRejected.String():
				freed = append(freed, r.ServiceID)
			default:
				if a, ok := verifiedAttempt[r.Seq]; ok {
					verified.Seqs = append(verified.Seqs, r.Seq)
					verified.Attempts = append(verified.Attempts, a)
				}
			}
		}
		if len(verified.Seqs) > 0 {
			if _, err := q.BatchPayloadMarkVerified(ctx, verified); err != nil {
				return fmt.Errorf("marking %d batches verified: %w", len(verified.Seqs), err)
			}
		}
		admitted, err := admit(ctx, q, p.Now, freed)
		if err != nil {
			return err
		}
		res.Queued = len(admitted)
		return wakeAll(ctx, q,
			wakeIf{res.ByResult[SubmitAccepted.String()] > 0, notify.BatchMonitor},
			wakeIf{res.ByResult[SubmitDelayed.String()] > 0, notify.BatchQueuer},
			wakeIf{res.Queued > 0, notify.BatchSubmitter})
	})
	return res, err
}

// BatchReleaseClaims queues again at once the batches claimed for a
// stopping process and never sent, while their claims (same attempt) still
// hold them, and wakes the submitters. It returns how many it released.
func (s *Store) BatchReleaseClaims(ctx context.Context, now time.Time, batches []ClaimedBatch) (int, error) {
	p := dbsqlc.BatchReleaseClaimsParams{Now: now, Seqs: make([]int64, len(batches)), Attempts: make([]int32, len(batches))}
	for i, b := range batches {
		p.Seqs[i], p.Attempts[i] = b.Seq, int32(b.Attempt)
	}
	var n int64
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		var err error
		if n, err = q.BatchReleaseClaims(ctx, p); err != nil || n == 0 {
			return err
		}
		return wake(ctx, q, notify.BatchSubmitter)
	})
	if err != nil {
		return 0, fmt.Errorf("releasing %d claimed batches: %w", len(batches), err)
	}
	return int(n), nil
}

// CheckBatch is a batch the monitor asks the ledger about.
type CheckBatch struct {
	Seq       int64
	ID        string
	ServiceID string
	Attempt   int
	// Held is true for a batch whose submitter's lease expired.
	Held bool
	// Verified says this process's submitter checked the signatures of the
	// batch, stored unverified, before sending it, and the flag is not
	// cleared yet (SubmitOutcome.Verified): the monitor passes it on to
	// the StatusOutcome it records.
	Verified bool
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
	held, err := sendRows(ctx, s.sendClaim, func(b *pgx.Batch, out *[]dbsqlc.BatchClaimExpiredHeldRow) {
		queueMany(b, (*dbsqlc.Queries).BatchClaimExpiredHeld, dbsqlc.BatchClaimExpiredHeldParams{
			Now: p.Now, LeaseExpiresAt: p.LeaseUntil, Max: int32(p.Max),
		}, out)
	})
	if err != nil {
		return nil, fmt.Errorf("claiming expired held batches: %w", err)
	}
	out := make([]CheckBatch, 0, len(held))
	for _, r := range held {
		out = append(out, CheckBatch{Seq: r.Seq, ID: r.ID, ServiceID: r.ServiceID, Attempt: int(r.Attempts), Held: true})
	}
	if rest := p.Max - len(out); rest > 0 {
		pending, err := sendRows(ctx, s.sendClaim, func(b *pgx.Batch, out *[]dbsqlc.BatchClaimPendingForCheckRow) {
			queueMany(b, (*dbsqlc.Queries).BatchClaimPendingForCheck, dbsqlc.BatchClaimPendingForCheckParams{
				Now: p.Now, NextCheckAt: p.NextCheckAt, Max: int32(rest),
			}, out)
		})
		if err != nil {
			return nil, fmt.Errorf("claiming pending batches for check: %w", err)
		}
		for _, r := range pending {
			out = append(out, CheckBatch{Seq: r.Seq, ID: r.ID, ServiceID: r.ServiceID, Attempt: int(r.Attempts)})
		}
	}
	return out, nil
}

// StatusOutcome is the ledger's answer for one checked batch, in store terms.
type StatusOutcome struct {
	Seq int64 // the checked batch's Seq
	// ServiceID is the batch's service: a final status frees it, and its
	// next batch is admitted in the same transaction.
	ServiceID string
	Attempt   int
	Status    BatchStatus // pending, unknown, committed, valid or invalid
	Reason    string
	// Verified says this process checked the batch's signatures
	// (CheckBatch.Verified): recording it pending or unknown, from where
	// it may be sent again, clears its unverified flag in the same
	// transaction, fenced by Attempt.
	Verified bool
}

// BatchRecordStatusesParams are the monitor's results of one round.
type BatchRecordStatusesParams struct {
	Now time.Time
	// NextCheckAt is when a batch still pending is asked about again.
	NextCheckAt time.Time
	Outcomes    []StatusOutcome
	// ClaimUntil, when set, has the next batch of each freed service claimed
	// in the same transaction, held under a lease until then, instead of
	// queued: the caller hands them to a submitter of its process
	// (BatchRecorded.Claimed).
	ClaimUntil time.Time
}

// BatchRecordStatuses applies the monitor's results of one round in one
// statement and one transaction, each conditional on the attempt the monitor
// checked. An unknown batch is queued again at once; a
// batch that reached a final status frees its service, whose next batch is
// admitted in the same transaction. It wakes the submitters when anything
// was queued. The transaction's statements reach the server in one round
// trip: the services to lock and admit are those of the final outcomes
// (an outcome that no longer applies leaves its service busy, and admission
// queues nothing for it).
func (s *Store) BatchRecordStatuses(ctx context.Context, p BatchRecordStatusesParams) (BatchRecorded, error) {
	n := len(p.Outcomes)
	qp := dbsqlc.BatchRecordStatusManyParams{
		Now: p.Now, NextCheckAt: p.NextCheckAt,
		Seqs: make([]int64, n), Attempts: make([]int32, n), Statuses: make([]string, n), Reasons: make([]string, n),
	}
	var freed, queueing []string
	var verified dbsqlc.BatchPayloadMarkVerifiedParams
	for i, o := range p.Outcomes {
		if o.Status == BatchStatusNone || o.Status == BatchStatusDelayed {
			return BatchRecorded{}, fmt.Errorf("batch seq %d: %q is not a status the ledger reports", o.Seq, o.Status)
		}
		if o.ServiceID == "" {
			return BatchRecorded{}, fmt.Errorf("batch seq %d: outcome without its service", o.Seq)
		}
		qp.Seqs[i], qp.Attempts[i], qp.Statuses[i], qp.Reasons[i] = o.Seq, int32(o.Attempt), string(o.Status), o.Reason
		switch {
		case o.Status.Terminal():
			freed = append(freed, o.ServiceID)
			queueing = append(queueing, o.ServiceID)
		case o.Status == BatchStatusUnknown:
			queueing = append(queueing, o.ServiceID)
		}
		if o.Verified && !o.Status.Terminal() {
			verified.Seqs = append(verified.Seqs, o.Seq)
			verified.Attempts = append(verified.Attempts, int32(o.Attempt))
		}
	}
	var (
		rows     []dbsqlc.BatchRecordStatusManyRow
		admitted []dbsqlc.BatchAdmitRow
	)
	err := s.sendTx(ctx, func(b *pgx.Batch) {
		rows, admitted = nil, nil
		queueMany(b, (*dbsqlc.Queries).BatchRecordStatusMany, qp, &rows)
		if len(verified.Seqs) > 0 {
			// After the record, which locked the batches' rows; fenced by
			// the attempt as the record is.
			queueExecRows(b, (*dbsqlc.Queries).BatchPayloadMarkVerified, verified, nil)
		}
		if len(freed) > 0 {
			queueExec(b, (*dbsqlc.Queries).BatchServiceLock, freed)
			queueMany(b, (*dbsqlc.Queries).BatchAdmit, dbsqlc.BatchAdmitParams{
				Now: p.Now, ServiceIds: freed, Claim: !p.ClaimUntil.IsZero(), LeaseExpiresAt: p.ClaimUntil,
			}, &admitted)
		}
		if len(queueing) > 0 {
			// Last in the transaction, so that only it runs with a generic
			// plan: planned for each call's services, it cost more to plan
			// than to run.
			s.queueSettings(b, queueGenericPlans)
			queueExec(b, (*dbsqlc.Queries).BatchWakeIfQueued, dbsqlc.BatchWakeIfQueuedParams{Channel: notify.BatchSubmitter, Now: p.Now, ServiceIds: queueing})
		}
	})
	if err != nil {
		return BatchRecorded{}, fmt.Errorf("recording %d batch statuses: %w", n, err)
	}
	res := BatchRecorded{Applied: len(rows), ByResult: map[string]int{}}
	for _, r := range rows {
		res.ByResult[r.Status]++
	}
	res.Queued = res.ByResult[string(BatchStatusUnknown)]
	if p.ClaimUntil.IsZero() {
		res.Queued += len(admitted)
	} else {
		res.Claimed = make([]ClaimedBatch, len(admitted))
		for i, r := range admitted {
			res.Claimed[i] = ClaimedBatch{Seq: r.Seq, ID: r.ID, ServiceID: r.ServiceID, Payload: r.Payload, Attempt: int(r.Attempts), Unverified: r.Unverified}
		}
	}
	return res, nil
}

// BatchCountByState returns the number of batches per state: new, queued,
// held, or a status. It reads the whole table: for reports, not for scrapes
// (see BatchDepthByState).
func (s *Store) BatchCountByState(ctx context.Context) (map[string]int64, error) {
	rows, err := s.q.BatchCountByState(ctx)
	if err != nil {
		return nil, fmt.Errorf("counting batches: %w", err)
	}
	return byKey(rows, func(r dbsqlc.BatchCountByStateRow) (string, int64) { return r.State, r.Batches }), nil
}

// BatchWaitingStates are the batch lane's non-terminal states, in lane order:
// the states BatchDepthByState reports.
var BatchWaitingStates = []string{"new", "queued", "held", "pending", "unknown", "delayed"}

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

// BatchSeedFinishedParams describes the terminal rows a benchmark seeds.
type BatchSeedFinishedParams struct {
	Prefix       string
	N            int
	PayloadBytes int
	At           time.Time
}

// BatchSeedFinished writes N committed batches, as a long-running lane
// leaves behind, for `ledgerq bench batches --backlog-finished`. No loop or
// API path calls it.
func (s *Store) BatchSeedFinished(ctx context.Context, p BatchSeedFinishedParams) (int, error) {
	n, err := s.q.BatchSeedFinished(ctx, dbsqlc.BatchSeedFinishedParams{
		Prefix: p.Prefix, N: int32(p.N), PayloadBytes: int32(p.PayloadBytes), At: p.At,
	})
	if err != nil {
		return 0, fmt.Errorf("seeding %d finished batches: %w", p.N, err)
	}
	return int(n), nil
}

// BatchDeleteFinishedParams are the inputs of the batch lane's retention.
type BatchDeleteFinishedParams struct {
	// Cutoff: terminal batches that finished before it are deleted.
	Cutoff time.Time
	// Max is the most batches one call deletes (at least 1).
	Max int
}

// BatchDeleteFinished deletes up to Max terminal batches (committed, valid,
// invalid) whose finished_at is before Cutoff, oldest first, in one statement,
// and returns how many it deleted. Batches that are not terminal are never
// deleted, whatever their age. Fewer than Max means the backlog is cleared for
// now (or another process's round holds the rest).
func (s *Store) BatchDeleteFinished(ctx context.Context, p BatchDeleteFinishedParams) (int, error) {
	if p.Max < 1 {
		return 0, fmt.Errorf("deleting finished batches: max %d: want at least 1", p.Max)
	}
	n, err := s.q.BatchDeleteFinished(ctx, dbsqlc.BatchDeleteFinishedParams{
		Cutoff: p.Cutoff, Max: int32(min(p.Max, math.MaxInt32)),
	})
	if err != nil {
		return 0, fmt.Errorf("deleting finished batches: %w", err)
	}
	return int(n), nil
}
