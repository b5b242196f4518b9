package workers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ledgerq/ledgerq/internal/store"
)

// Claim is a worker's hold on one shard: its key, the worker that holds it
// and the run number that fences every write of the run. A job passes it to
// store.ShardFenced when it commits.
type Claim = store.ShardClaim

// ErrLeaseLost says the claim no longer holds its shard (the Rescuer took it
// over after its lease expired). A Cycle's Commit or Drop returns it, wrapped
// or not, when its fenced write found the claim gone: the worker then stops
// the run without releasing the shard, which is another worker's now.
var ErrLeaseLost = store.ErrShardLeaseLost

// Job runs the work of one kind of shard, one cycle at a time (the shard's
// execution loop: collect, execute, commit, remove). A Scheduler calls it for
// one shard from one worker at a time, but for different shards from several
// workers at once.
type Job interface {
	// Collect takes a snapshot of the shard's pending work (step 1)
	// and returns it as a Cycle, or nil when there is none: the run then
	// ends at once and the shard goes idle (unless a schedule landed
	// meanwhile). It should take a bounded amount of work, so that a cycle
	// fits well inside the lease.
	Collect(ctx context.Context, c Claim) (Cycle, error)
}

// Cycle is one collected snapshot of a shard's work on its way through the
// execution loop's execute → commit → remove.
type Cycle interface {
	// Execute runs the work (step 2). It may call the ledger; no
	// database transaction may be open across it.
	Execute(ctx context.Context) error
	// Commit persists what Execute produced and removes the executed work
	// from the shard's work (steps 3 and 4) in one transaction fenced
	// by the claim (store.ShardFenced): done apart, a crash between them
	// would execute the work twice.
	Commit(ctx context.Context) error
	// Drop removes the work from the shard after Execute or Commit
	// failed with cause (failed work is still removed),
	// fenced like Commit. The scheduler never runs the same work
	// again; a job that wants to retry transient failures keeps the work
	// here and gives up after Claim.Failures consecutive failed runs.
	Drop(ctx context.Context, cause error) error
}

// Unavailable marks err, a Job's failure, as the ledger's unavailability
// (a provider's rate limit, a 5xx, a reset, a timeout: no answer about the
// work), not a failure of the shard's work. The scheduler releases such a
// run after a short wait (after, the ledger's hint such as Retry-After, or
// Config.Backoff, whichever is longer, capped by Config.UnavailableBackoff),
// and the run does not count as failed: Claim.Failures, which a job reads
// to give up on work that keeps failing, is left as it was. Its error is
// still recorded (the shard's last_error). A nil err stays nil; an err
// already marked is returned as it is.
func Unavailable(err error, after time.Duration) error {
	var u *UnavailableError
	if err == nil || errors.As(err, &u) {
		return err
	}
	return &UnavailableError{Err: err, After: after}
}

// UnavailableError is a failure marked by Unavailable.
type UnavailableError struct {
	Err error
	// After is the ledger's hint of when to ask again; 0 when it gave none.
	After time.Duration
}

func (e *UnavailableError) Error() string {
	if e.After > 0 {
		return fmt.Sprintf("ledger unavailable (retry after %s): %v", e.After, e.Err)
	}
	return fmt.Sprintf("ledger unavailable: %v", e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// kindOf returns a shard key's job kind: the prefix before the first ':'.
func kindOf(key string) string {
	kind, _, _ := strings.Cut(key, ":")
	return kind
}
