package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// ShardState is a shard's scheduling state.
type ShardState string

// Shard states, as stored.
const (
	ShardIdle    ShardState = "idle"
	ShardPending ShardState = "pending"
	ShardRunning ShardState = "running"
)

// ErrShardLeaseLost says a claim no longer holds its shard: its lease expired
// and the rescuer put the shard back in the queue (another worker may run it
// now). Whatever the old claim still wanted to write must not be written.
var ErrShardLeaseLost = errors.New("shard lease lost")

// Shard is one row of ledgerq.shards.
type Shard struct {
	Key            string
	State          ShardState
	ScheduledAt    *time.Time
	Owner          string
	Run            int64
	ClaimedAt      *time.Time
	LeaseExpiresAt *time.Time
	// LivenessLock is the liveness lock of the holder's process (Liveness),
	// 0 when the claim recorded none: only its lease frees the shard then.
	LivenessLock   int32
	MoreWork       bool
	Failures       int
	LastError      string
	Rescues        int64
	LastReleasedAt *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func shardFromRow(r dbsqlc.LedgerqShard) Shard {
	return Shard{
		Key:            r.Key,
		State:          ShardState(r.State),
		ScheduledAt:    utcPtr(r.ScheduledAt),
		Run:            r.Run,
		ClaimedAt:      utcPtr(r.ClaimedAt),
		LeaseExpiresAt: utcPtr(r.LeaseExpiresAt),
		MoreWork:       r.MoreWork,
		Failures:       int(r.Failures),
		Rescues:        r.Rescues,
		LastReleasedAt: utcPtr(r.LastReleasedAt),
		CreatedAt:      r.CreatedAt.UTC(),
		UpdatedAt:      r.UpdatedAt.UTC(),
		Owner:          deref(r.Owner),
		LastError:      deref(r.LastError),
		LivenessLock:   deref(r.LivenessLock),
	}
}

// ShardGet returns one shard, or an error wrapping ErrNotFound.
func (s *Store) ShardGet(ctx context.Context, key string) (Shard, error) {
	row, err := one(s.q.ShardGet(ctx, key))
	if err != nil {
		return Shard{}, fmt.Errorf("reading shard %q: %w", key, err)
	}
	return shardFromRow(row), nil
}

// ShardScheduleParams names the shard to schedule.
type ShardScheduleParams struct {
	Now time.Time
	Key string
}

// ShardScheduled says what a schedule did.
type ShardScheduled int

// Schedule outcomes.
const (
	// ShardQueued: the shard was idle or new and is now pending.
	ShardQueued ShardScheduled = iota + 1
	// ShardAlreadyPending: it was pending already; nothing changed.
	ShardAlreadyPending
	// ShardMoreWork: it was running; its release will queue it again.
	ShardMoreWork
)

// ShardSchedule is schedule(key): an idle (or new) shard becomes
// pending, at the back of the queue, and the workers are notified when the
// transaction commits; a pending shard is left alone; a running one gets
// more_work, so its release puts it back in the queue even if its job saw no
// work left. Each is one statement, so two schedules never queue a shard
// twice.
func (s *Store) ShardSchedule(ctx context.Context, p ShardScheduleParams) (ShardScheduled, error) {
	var out ShardScheduled
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		var err error
		out, err = shardSchedule(ctx, q, p)
		return err
	})
	return out, err
}

// shardSchedule runs ShardSchedule inside a transaction, so that a lane's
// store method can schedule the shard of the work it stores in the same
// transaction.
func shardSchedule(ctx context.Context, q *dbsqlc.Queries, p ShardScheduleParams) (ShardScheduled, error) {
	state, err := one(q.ShardSchedule(ctx, dbsqlc.ShardScheduleParams{Key: p.Key, Now: p.Now}))
	switch {
	case errors.Is(err, ErrNotFound):
		// DO UPDATE's WHERE wrote nothing: pending, or running with
		// more_work already set.
		cur, err := one(q.ShardGet(ctx, p.Key))
		if err != nil {
			return 0, fmt.Errorf("reading shard %q after scheduling it: %w", p.Key, err)
		}
		if cur.State == dbsqlc.LedgerqShardStateRunning {
			return ShardMoreWork, nil
		}
		return ShardAlreadyPending, nil
	case err != nil:
		return 0, fmt.Errorf("scheduling shard %q: %w", p.Key, err)
	case state == dbsqlc.LedgerqShardStateRunning:
		return ShardMoreWork, nil
	}
	if err := wake(ctx, q, notify.Shards); err != nil {
		return 0, err
	}
	return ShardQueued, nil
}

// ShardClaim is a claim on one shard: the worker that holds it and the run
// number that fences everything it writes.
type ShardClaim struct {
	Key   string
	Owner string
	Run   int64
	// Failures is the number of consecutive failed runs before this one.
	Failures int
}

// ShardClaimParams are the inputs of a worker's claim.
type ShardClaimParams struct {
	Now time.Time
	// Owner names the claiming worker (process and worker number).
	Owner string
	// LeaseUntil is when the claim expires unless extended.
	LeaseUntil time.Time
	// Kinds are the key prefixes (before the first ':') the caller has jobs for.
	Kinds []string
}

// ShardClaim claims the oldest pending shard of the given kinds whose
// backoff has passed (FIFO by scheduled_at), skipping those another worker
// is claiming, and marks it running under p.Owner with a lease and the
// store's liveness lock, if it holds one. It returns ErrNotFound when no
// shard is waiting.
func (s *Store) ShardClaim(ctx context.Context, p ShardClaimParams) (ShardClaim, error) {
	row, err := one(s.q.ShardClaim(ctx, dbsqlc.ShardClaimParams{
		Owner: p.Owner, Now: p.Now, LeaseExpiresAt: p.LeaseUntil, Kinds: p.Kinds, LivenessLock: s.livenessLock(),
	}))
	if err != nil {
		return ShardClaim{}, fmt.Errorf("claiming a shard: %w", err)
	}
	return ShardClaim{Key: row.Key, Owner: p.Owner, Run: row.Run, Failures: int(row.Failures)}, nil
}

// ShardExtendLeaseParams extends a claim's lease.
type ShardExtendLeaseParams struct {
	Now        time.Time
	Claim      ShardClaim
	LeaseUntil time.Time
}

// ShardExtendLease moves the claim's lease to p.LeaseUntil. It returns
// ErrShardLeaseLost when the claim no longer holds the shard.
func (s *Store) ShardExtendLease(ctx context.Context, p ShardExtendLeaseParams) error {
	_, err := one(s.q.ShardExtendLease(ctx, dbsqlc.ShardExtendLeaseParams{
		Key: p.Claim.Key, Owner: p.Claim.Owner, Run: p.Claim.Run, LeaseExpiresAt: p.LeaseUntil, Now: p.Now,
	}))
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("extending the lease of shard %q run %d: %w", p.Claim.Key, p.Claim.Run, ErrShardLeaseLost)
	case err != nil:
		return fmt.Errorf("extending the lease of shard %q: %w", p.Claim.Key, err)
	}
	return nil
}

// ShardReleaseParams end a run.
type ShardReleaseParams struct {
	Now   time.Time
	Claim ShardClaim
	// WorkLeft puts the shard back in the queue at NotBefore (or now, if
	// earlier): the quantum ran out, the worker is shutting down, or the run
	// failed (NotBefore is then its backoff).
	WorkLeft  bool
	NotBefore time.Time
	// Failure, when set, counts a failed run and records its error.
	Failure error
	// Unavailable says Failure was the ledger's unavailability, no failure
	// of the shard's work: its error is recorded, and the count of
	// consecutive failed runs is left as it was (neither raised nor reset).
	Unavailable bool
}

// ShardRelease ends the claim's run in one UPDATE that checks the claim: the
// shard goes back to pending when work is left or a schedule landed during
// the run (more_work), else to idle; more_work is cleared. It returns the
// state the shard was left in, or ErrShardLeaseLost when the claim no longer
// held the shard (it was rescued): then nothing changed.
func (s *Store) ShardRelease(ctx context.Context, p ShardReleaseParams) (ShardState, error) {
	qp := dbsqlc.ShardReleaseParams{
		Key: p.Claim.Key, Owner: p.Claim.Owner, Run: p.Claim.Run, Now: p.Now,
		WorkLeft: p.WorkLeft || p.Failure != nil, ScheduledAt: p.NotBefore, Failed: p.Failure != nil,
		Unavailable: p.Failure != nil && p.Unavailable,
	}
	if p.Failure != nil {
		qp.Error = p.Failure.Error()
	}
	state, err := one(s.q.ShardRelease(ctx, qp))
	switch {
	case errors.Is(err, ErrNotFound):
		return "", fmt.Errorf("releasing shard %q run %d: %w", p.Claim.Key, p.Claim.Run, ErrShardLeaseLost)
	case err != nil:
		return "", fmt.Errorf("releasing shard %q: %w", p.Claim.Key, err)
	}
	return ShardState(state), nil
}

// ShardRescueParams are the inputs of the rescuer's round.
type ShardRescueParams struct {
	Now time.Time
	Max int
}

// ShardRescued is a shard a rescue put back in the queue.
type ShardRescued struct {
	Key string
	// HolderDied says its lease was still running: the liveness lock its
	// claim recorded was no longer held (the holder's process died or lost
	// its connection). Otherwise the lease had expired.
	HolderDied bool
}

// ShardRescue puts up to Max running shards whose holder is gone back to
// pending and notifies the workers: those whose holder's liveness lock is
// no longer held, at once, and those whose lease expired. It returns the
// shards it rescued.
func (s *Store) ShardRescue(ctx context.Context, p ShardRescueParams) ([]ShardRescued, error) {
	var out []ShardRescued
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		rows, err := q.ShardRescue(ctx, dbsqlc.ShardRescueParams{Now: p.Now, Max: int32(p.Max)})
		if err != nil {
			return fmt.Errorf("rescuing shards whose holder is gone: %w", err)
		}
		out = make([]ShardRescued, len(rows))
		for i, r := range rows {
			out[i] = ShardRescued{Key: r.Key, HolderDied: r.HolderDied}
		}
		return wakeAll(ctx, q, wakeIf{len(rows) > 0, notify.Shards})
	})
	return out, err
}

// ShardHeld is the fence of a job's writes: it returns ErrShardLeaseLost
// unless the claim still holds its shard. A lane's store method runs the same
// check (shardHeld) inside the transaction that commits a run's results, so
// that the check and the write are one.
func (s *Store) ShardHeld(ctx context.Context, c ShardClaim) error {
	return shardHeld(ctx, s.q, c)
}

// shardHeld checks the claim and locks the shard row FOR KEY SHARE until the
// transaction ends: the rescuer skips the row (its FOR UPDATE conflicts), so
// it cannot take the shard over between the check and the commit, while a
// schedule's more_work goes through without waiting for the commit.
func shardHeld(ctx context.Context, q *dbsqlc.Queries, c ShardClaim) error {
	_, err := one(q.ShardHeld(ctx, dbsqlc.ShardHeldParams{Key: c.Key, Owner: c.Owner, Run: c.Run}))
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("shard %q run %d: %w", c.Key, c.Run, ErrShardLeaseLost)
	case err != nil:
		return fmt.Errorf("checking the claim on shard %q: %w", c.Key, err)
	}
	return nil
}

// ShardCountByState returns the number of shards per state.
func (s *Store) ShardCountByState(ctx context.Context) (map[ShardState]int64, error) {
	rows, err := s.q.ShardCountByState(ctx)
	if err != nil {
		return nil, fmt.Errorf("counting shards: %w", err)
	}
	return byKey(rows, func(r dbsqlc.ShardCountByStateRow) (ShardState, int64) { return ShardState(r.State), r.Shards }), nil
}

// ShardFenced runs fn in one transaction that first checks, and holds until
// it commits, the claim on its shard (shardHeld): a job commits a run's
// results through it, so a worker whose lease was rescued writes nothing. fn
// gets a store bound to that transaction. It returns an error wrapping
// ErrShardLeaseLost when the claim no longer holds the shard.
func (s *Store) ShardFenced(ctx context.Context, c ShardClaim, fn func(tx *Store) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		txs := NewTx(tx)
		if err := shardHeld(ctx, txs.q, c); err != nil {
			return err
		}
		return fn(txs)
	})
}
