package store

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger/gethpool"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// A client's requests about a task whose transaction was sent: a cancel (a
// no-op at the task's nonce) and a speed-up (the same transaction with
// higher fees). The API only records them on the task and schedules the
// wallet's shard: the worker of that shard, the only one that signs at the
// wallet's nonces, acts on them in its next run (TaskListRequests), and
// stores what it signs as an attempt of the task before broadcasting it
// (AttemptBump, the write-ahead). Which of the nonce's hashes is mined
// decides how the task ends (AttemptConfirm): the cancel's no-op, cancelled;
// any other, done.

// SpeedUpFees are the fees a speed-up asks for, wei per gas.
type SpeedUpFees struct {
	FeeCap, TipCap *big.Int
}

// CancelOutcome says what TaskRequestCancel did.
type CancelOutcome int

const (
	// CancelledNow: the task was waiting and is cancelled (as TaskCancel).
	CancelledNow CancelOutcome = iota + 1
	// CancelledBefore: the task was cancelled already (a retried request).
	CancelledBefore
	// CancelRequested: the task is executing; the request is recorded (or
	// was, by an earlier request) and the worker sends the no-op.
	CancelRequested
)

// TaskRefusedError says a request about a task cannot be taken in the
// task's state (the API's 409): Reason says why.
type TaskRefusedError struct {
	ID     string
	Status TaskStatus
	Reason string
}

func (e *TaskRefusedError) Error() string {
	return fmt.Sprintf("task %s: %s", e.ID, e.Reason)
}

// SpeedUpTooLowError says a speed-up's fees would not replace the task's
// live transaction in a geth pool (gethpool.Replaces, geth's default price
// bump): Min are the lowest fees that would.
type SpeedUpTooLowError struct {
	ID  string
	Min SpeedUpFees
}

func (e *SpeedUpTooLowError) Error() string {
	return fmt.Sprintf("task %s: the fees do not replace its transaction: max_fee_per_gas must be at least %s and max_priority_fee_per_gas at least %s",
		e.ID, e.Min.FeeCap, e.Min.TipCap)
}

// TaskRequestCancel cancels the wallet's task: a waiting one at once (as
// TaskCancel, with its *TaskBeingSignedError), an executing one by recording
// the request (cancel_requested_at, once) and scheduling the wallet's shard
// after the commit, whose worker sends a no-op at the task's nonce. A task
// cancelled already is CancelledBefore; one that ended otherwise is
// *TaskRefusedError. The change is audited with p.Audit in its transaction.
// A missing task, or one of another wallet, is ErrNotFound.
func (s *Store) TaskRequestCancel(ctx context.Context, p TaskCancelParams) (Task, CancelOutcome, error) {
	// A task can go from executing back to waiting (another transaction
	// took its nonce) between the two statements: each is conditional on
	// its state, and a few rounds settle it.
	for range 3 {
		task, cancelled, err := s.cancelWaiting(ctx, p)
		switch {
		case err != nil:
			return Task{}, 0, err
		case cancelled:
			return task, CancelledNow, nil
		case task.Cancelled:
			return task, CancelledBefore, nil
		case task.Status.Terminal():
			return Task{}, 0, &TaskRefusedError{ID: task.ID, Status: task.Status, Reason: fmt.Sprintf("it is %s: an ended task cannot be cancelled", strings.ToLower(task.Status.String()))}
		case task.Status != TaskExecuting:
			continue
		}
		var out Task
		err = s.withTx(ctx, func(q *dbsqlc.Queries) error {
			row, err := one(q.TaskRequestCancel(ctx, dbsqlc.TaskRequestCancelParams{Now: p.Now, ID: p.ID, WalletID: p.Wallet}))
			if errors.Is(err, ErrNotFound) {
				// Asked before (a retry): the first request stands, and
				// was audited then.
				if out, err = taskGet(ctx, q, p.Wallet, p.ID); err == nil && (out.Status != TaskExecuting || out.CancelRequestedAt == nil) {
					err = ErrNotFound
				}
				return err
			}
			if err != nil {
				return err
			}
			out = taskFromRow(row)
			if p.Audit == nil {
				return nil
			}
			return auditInsert(ctx, q, p.Audit.with(p.Now, "task.cancel", "wallet/"+p.Wallet+"/task/"+p.ID, map[string]any{"status": "executing"}))
		})
		switch {
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			return Task{}, 0, fmt.Errorf("recording the cancel of task %q of wallet %q: %w", p.ID, p.Wallet, err)
		}
		// As TaskInsert's: a failed schedule leaves the task to the wallet
		// follower, which schedules every wallet with transactions in
		// flight.
		_ = s.scheduleCommitted(ctx, p.Now, WalletShardKey(out.ChainID, out.Sender))
		return out, CancelRequested, nil
	}
	return Task{}, 0, fmt.Errorf("cancelling task %q of wallet %q: its state kept changing", p.ID, p.Wallet)
}

// TaskSpeedUpParams are a speed-up of a task whose transaction was sent.
type TaskSpeedUpParams struct {
	Now    time.Time
	Wallet string
	ID     string
	Fees   SpeedUpFees
	// Audit, when set, records the request in the same transaction.
	Audit *AuditEntry
}

// TaskRequestSpeedUp records the fees a client asks for the executing
// task's transaction and schedules the wallet's shard after the commit,
// whose worker signs the transaction again with them (AttemptSpeedUp). The
// fees must replace the task's live attempt by geth's rule, else
// *SpeedUpTooLowError names the least that would. A task not executing, one
// a cancel was asked of, and one whose transaction is mined already are
// *TaskRefusedError. Fees that would pass one of the wallet's fee caps
// (the replacement counted at its worst case in place of the live
// attempt) are *PolicyRefusedError, recorded. A missing task, or one of
// another wallet, is ErrNotFound.
func (s *Store) TaskRequestSpeedUp(ctx context.Context, p TaskSpeedUpParams) (Task, error) {
	f := p.Fees
	if f.FeeCap == nil || f.TipCap == nil || f.TipCap.Sign() < 0 || f.TipCap.Cmp(f.FeeCap) > 0 || f.FeeCap.BitLen() > 256 {
		return Task{}, fmt.Errorf("speeding up task %q: fees %v/%v are no tip within a uint256 fee cap", p.ID, f.TipCap, f.FeeCap)
	}
	var out Task
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		row, err := one(q.TaskGetForRequest(ctx, dbsqlc.TaskGetForRequestParams{ID: p.ID, WalletID: p.Wallet}))
		if err != nil {
			return fmt.Errorf("reading task %q of wallet %q: %w", p.ID, p.Wallet, err)
		}
		task := taskFromRow(row)
		refuse := func(reason string) error { return &TaskRefusedError{ID: p.ID, Status: task.Status, Reason: reason} }
		switch {
		case task.Status != TaskExecuting:
			return refuse(fmt.Sprintf("it is %s: only a task whose transaction was sent can be sped up", strings.ToLower(task.Status.String())))
		case task.CancelRequestedAt != nil:
			return refuse("a cancel was asked of it")
		}
		live, err := one(q.AttemptGetLiveOfTask(ctx, &p.ID))
		switch {
		case errors.Is(err, ErrNotFound):
			return refuse("it has no transaction in flight")
		case err != nil:
			return fmt.Errorf("reading the live attempt of task %q: %w", p.ID, err)
		case live.State == dbsqlc.LedgerqTxAttemptStateMined:
			return refuse("its transaction is mined")
		}
		old := gethpool.Fees{FeeCap: bigFromNumeric(live.MaxFeePerGas), Tip: bigFromNumeric(live.MaxPriorityFeePerGas)}
		if !gethpool.Replaces(gethpool.Fees{FeeCap: f.FeeCap, Tip: f.TipCap}, old, gethpool.PriceBump) {
			return &SpeedUpTooLowError{ID: p.ID, Min: SpeedUpFees{FeeCap: LeastReplacing(old.FeeCap), TipCap: LeastReplacing(old.Tip)}}
		}
		// The wallet's fee caps: the replacement's worst case in place of
		// the live attempt's must stay within each.
		refused, err := speedUpWithinFeeCaps(ctx, q, p.Now, task, live.GasLimit, old.FeeCap, f.FeeCap)
		switch {
		case err != nil:
			return err
		case refused != nil:
			return refused
		}
		row, err = one(q.TaskRequestSpeedUp(ctx, dbsqlc.TaskRequestSpeedUpParams{
			Now: p.Now, ID: p.ID, WalletID: p.Wallet, FeeCap: numericFromBig(f.FeeCap), TipCap: numericFromBig(f.TipCap),
		}))
		if err != nil {
			return fmt.Errorf("recording the speed-up of task %q: %w", p.ID, err)
		}
		out = taskFromRow(row)
		if p.Audit == nil {
			return nil
		}
		return auditInsert(ctx, q, p.Audit.with(p.Now, "task.speed_up", "wallet/"+p.Wallet+"/task/"+p.ID, map[string]any{
			"max_fee_per_gas": f.FeeCap.String(), "max_priority_fee_per_gas": f.TipCap.String(), "replaces": live.TxHash,
		}))
	})
	var refused *PolicyRefusedError
	if errors.As(err, &refused) {
		if rerr := s.recordRefusal(ctx, p.Now, refused, new(big.Int)); rerr != nil {
			return Task{}, fmt.Errorf("recording the policy refusal of the speed-up of task %q: %w", p.ID, rerr)
		}
	}
	if err != nil {
		return Task{}, err
	}
	_ = s.scheduleCommitted(ctx, p.Now, WalletShardKey(out.ChainID, out.Sender))
	return out, nil
}

// LeastReplacing is the least fee (a fee cap or a tip) geth's rule
// (gethpool.Replaces, its default price bump) takes in place of old: what
// a speed-up must offer at least.
func LeastReplacing(old *big.Int) *big.Int {
	least := new(big.Int).Mul(old, big.NewInt(100+gethpool.PriceBump))
	least.Quo(least, big.NewInt(100))
	if least.Cmp(old) <= 0 {
		least.Add(old, big.NewInt(1))
	}
	return least
}

// TaskWithRequest is an executing task with a request for the worker, its
// live attempt, and whether its cancel's no-op is stored already.
type TaskWithRequest struct {
	Task         Task
	Live         Attempt
	CancelStored bool
}

// TaskListRequests returns up to max of the wallet's executing tasks with
// a cancel or a speed-up asked for, in id order, each with its live attempt.
func (s *Store) TaskListRequests(ctx context.Context, chainID int64, sender string, max int) ([]TaskWithRequest, error) {
	rows, err := s.q.TaskListRequests(ctx, dbsqlc.TaskListRequestsParams{ChainID: chainID, Sender: lowerHex(sender), Max: int32(max)})
	if err != nil {
		return nil, fmt.Errorf("listing the task requests of %s: %w", WalletShardKey(chainID, sender), err)
	}
	out := make([]TaskWithRequest, len(rows))
	for i, r := range rows {
		out[i] = TaskWithRequest{Task: taskFromRow(r.LedgerqWalletTask), Live: attemptFromRow(r.LedgerqTxAttempt), CancelStored: r.CancelStored}
	}
	return out, nil
}

// TaskDropSpeedUp forgets a speed-up the worker will not store: the live
// attempt's fees meet it already (a gas bump came first), or a cancel was
// asked after it. It reports whether there was one.
func (s *Store) TaskDropSpeedUp(ctx context.Context, now time.Time, id string) (bool, error) {
	n, err := s.q.TaskClearSpeedUp(ctx, dbsqlc.TaskClearSpeedUpParams{Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("dropping the speed-up of task %q: %w", id, err)
	}
	return n > 0, nil
}
