package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// TaskStatus is a send-tx task's status, with seed 004's codes.
type TaskStatus int16

// Task statuses, as stored (seed 004: Waiting 0, Executing 1, Error 2, Done 3).
const (
	TaskWaiting   TaskStatus = 0
	TaskExecuting TaskStatus = 1
	TaskError     TaskStatus = 2
	TaskDone      TaskStatus = 3
)

// String is the seed's name of the status ("Waiting", "Executing", "Error",
// "Done").
func (s TaskStatus) String() string {
	switch s {
	case TaskWaiting:
		return "Waiting"
	case TaskExecuting:
		return "Executing"
	case TaskError:
		return "Error"
	case TaskDone:
		return "Done"
	}
	return fmt.Sprintf("TaskStatus(%d)", int16(s))
}

// Terminal reports whether the task has ended (Error or Done).
func (s TaskStatus) Terminal() bool { return s == TaskError || s == TaskDone }

// QueueType is the order in which a wallet's waiting tasks are sent (seed
// 004's sendTxQueueType).
type QueueType string

// Queue types.
const (
	// QueuePriority: highest priority first, then oldest, then id.
	QueuePriority QueueType = "priority"
	// QueueFIFO: oldest first, then id; priority is ignored.
	QueueFIFO QueueType = "fifo"
)

// TaskRequest is the transaction a task asks for.
type TaskRequest struct {
	// To is the recipient, 0x-prefixed hex (stored lower-case).
	To string
	// Value in wei; nil is zero.
	Value *big.Int
	Data  []byte
	// GasLimit is nil when the worker is to estimate it.
	GasLimit *uint64
	// TipCap and FeeCap are the fees (wei per gas) the request asked for its
	// first transaction; nil: the node's suggestion (FeeCap: 2 × base fee +
	// tip). Gas bumps raise them.
	TipCap, FeeCap *big.Int
}

// Task is one row of ledgerq.wallet_tasks.
type Task struct {
	ID             string
	Wallet         string
	ChainID        int64
	Sender         string
	Priority       int32
	Status         TaskStatus
	Request        TaskRequest
	IdempotencyKey string
	RequestHash    []byte
	TxHash         string
	// Bumps is how many gas bumps the task's transaction had.
	Bumps int
	// Replacements is how many times another transaction took the task's
	// nonce and the task went back to waiting.
	Replacements int
	// PriceCappedAt is when a gas bump was refused by the price cap (nil:
	// never, or bumped since).
	PriceCappedAt *time.Time
	// Reorgs is how many times the task's mined transaction left the chain
	// and the task was executing again.
	Reorgs     int
	Error      string
	Reverted   bool
	Cancelled  bool
	CreatedAt  time.Time
	UpdatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
}

func taskFromRow(r dbsqlc.LedgerqWalletTask) Task {
	t := Task{
		ID: r.ID, Wallet: r.WalletID, ChainID: r.ChainID, Sender: r.Sender, Priority: r.Priority,
		Status: TaskStatus(r.Status),
		Request: TaskRequest{
			To: r.ToAddress, Value: bigFromNumeric(r.ValueWei), Data: r.Data,
		},
		RequestHash: r.RequestHash, Reverted: r.Reverted, Cancelled: r.Cancelled,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		StartedAt: utcPtr(r.StartedAt), FinishedAt: utcPtr(r.FinishedAt),
		Bumps: int(r.Bumps), Replacements: int(r.Replacements), PriceCappedAt: utcPtr(r.PriceCappedAt),
		Reorgs: int(r.Reorgs),
	}
	if r.GasLimit != nil {
		g := uint64(*r.GasLimit)
		t.Request.GasLimit = &g
	}
	if r.TipCapWei.Valid {
		t.Request.TipCap = bigFromNumeric(r.TipCapWei)
	}
	if r.FeeCapWei.Valid {
		t.Request.FeeCap = bigFromNumeric(r.FeeCapWei)
	}
	if r.IdempotencyKey != nil {
		t.IdempotencyKey = *r.IdempotencyKey
	}
	if r.TxHash != nil {
		t.TxHash = *r.TxHash
	}
	if r.Error != nil {
		t.Error = *r.Error
	}
	return t
}

// WalletShardKey is the key of the shard that works the tasks of sender on
// chainID (DESIGN §2.4): wallet:<chain>:<address>.
func WalletShardKey(chainID int64, sender string) string {
	return fmt.Sprintf("wallet:%d:%s", chainID, sender)
}

// IdempotencyConflictError says the wallet already has a task under the
// idempotency key, stored from a different request body (the API's 422).
type IdempotencyConflictError struct {
	Wallet string
	Key    string
	// TaskID is the task stored under the key.
	TaskID string
}

func (e *IdempotencyConflictError) Error() string {
	return fmt.Sprintf("wallet %q already has task %s under idempotency key %q, with a different request", e.Wallet, e.TaskID, e.Key)
}

// TaskInsertParams is what TaskInsert stores.
type TaskInsertParams struct {
	Now time.Time
	// Wallet is the configured wallet's name.
	Wallet string
	// ChainID and Sender are the wallet's chain and address: the queue.
	ChainID  int64
	Sender   string
	Priority int32
	Request  TaskRequest
	// IdempotencyKey is empty when the client sent none.
	IdempotencyKey string
}

var hexAddress = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)

// TaskRequestHash is the SHA-256 of a task's request body, the fingerprint
// a replay under the same idempotency key must match.
func TaskRequestHash(p TaskInsertParams) []byte {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte("ledgerq send-tx v1"))
	field(binary.BigEndian.AppendUint64(nil, uint64(p.ChainID)))
	field([]byte(lowerHex(p.Sender)))
	field([]byte(lowerHex(p.Request.To)))
	v := p.Request.Value
	if v == nil {
		v = new(big.Int)
	}
	field(v.Bytes())
	field(p.Request.Data)
	if p.Request.GasLimit != nil {
		field(binary.BigEndian.AppendUint64(nil, *p.Request.GasLimit))
	} else {
		field(nil)
	}
	field(binary.BigEndian.AppendUint32(nil, uint32(p.Priority)))
	// Added later: only when set, so a request without them keeps the
	// fingerprint it had before (a replay after an upgrade still matches).
	if p.Request.TipCap != nil || p.Request.FeeCap != nil {
		field([]byte("fees"))
		for _, f := range []*big.Int{p.Request.TipCap, p.Request.FeeCap} {
			if f == nil {
				field(nil)
			} else {
				field(append([]byte{1}, f.Bytes()...))
			}
		}
	}
	return h.Sum(nil)
}

// TaskInsert stores a waiting task and schedules its wallet's shard in the
// same transaction, so a committed task always has a shard that will run it.
// With an idempotency key already used by the wallet it stores nothing: the
// same request body returns the stored task with created false; a different
// one fails with *IdempotencyConflictError. Concurrent inserts under one key
// store one task (ON CONFLICT DO NOTHING waits for the other insert, then the
// stored row is read back in this transaction).
func (s *Store) TaskInsert(ctx context.Context, p TaskInsertParams) (task Task, created bool, err error) {
	if !hexAddress.MatchString(p.Sender) || !hexAddress.MatchString(p.Request.To) {
		return Task{}, false, fmt.Errorf("storing a task: sender %q or recipient %q is not a hex address", p.Sender, p.Request.To)
	}
	if p.Request.Value != nil && p.Request.Value.Sign() < 0 {
		return Task{}, false, fmt.Errorf("storing a task: negative value %s", p.Request.Value)
	}
	if p.Request.GasLimit != nil && *p.Request.GasLimit > 1<<63-1 {
		return Task{}, false, fmt.Errorf("storing a task: gas limit %d out of range", *p.Request.GasLimit)
	}
	for _, f := range []*big.Int{p.Request.TipCap, p.Request.FeeCap} {
		if f != nil && (f.Sign() < 0 || f.BitLen() > 256) {
			return Task{}, false, fmt.Errorf("storing a task: fee %s is not a uint256", f)
		}
	}
	if p.Request.TipCap != nil && p.Request.FeeCap != nil && p.Request.TipCap.Cmp(p.Request.FeeCap) > 0 {
		return Task{}, false, fmt.Errorf("storing a task: tip %s above fee cap %s", p.Request.TipCap, p.Request.FeeCap)
	}
	hash := TaskRequestHash(p)
	ins := dbsqlc.TaskInsertParams{
		ID: newUUIDv7(p.Now), WalletID: p.Wallet, ChainID: p.ChainID, Sender: lowerHex(p.Sender), Priority: p.Priority,
		ToAddress: lowerHex(p.Request.To), ValueWei: numericFromBig(p.Request.Value), Data: p.Request.Data,
		RequestHash: hash, Now: p.Now,
	}
	if ins.Data == nil {
		ins.Data = []byte{}
	}
	if p.Request.GasLimit != nil {
		g := int64(*p.Request.GasLimit)
		ins.GasLimit = &g
	}
	if p.Request.TipCap != nil {
		ins.TipCapWei = numericFromBig(p.Request.TipCap)
	}
	if p.Request.FeeCap != nil {
		ins.FeeCapWei = numericFromBig(p.Request.FeeCap)
	}
	if p.IdempotencyKey != "" {
		ins.IdempotencyKey = &p.IdempotencyKey
	}
	err = s.withTx(ctx, func(q *dbsqlc.Queries) error {
		row, err := one(q.TaskInsert(ctx, ins))
		switch {
		case err == nil:
			task, created = taskFromRow(row), true
			_, err := shardSchedule(ctx, q, ShardScheduleParams{Now: p.Now, Key: WalletShardKey(p.ChainID, ins.Sender)})
			return err
		case !errors.Is(err, ErrNotFound):
			return fmt.Errorf("storing a task of wallet %q: %w", p.Wallet, err)
		}
		// The key is taken (only a keyed insert can conflict).
		row, err = one(q.TaskGetByIdempotencyKey(ctx, dbsqlc.TaskGetByIdempotencyKeyParams{
			WalletID: p.Wallet, IdempotencyKey: ins.IdempotencyKey,
		}))
		if err != nil {
			return fmt.Errorf("reading the task of wallet %q under idempotency key %q: %w", p.Wallet, p.IdempotencyKey, err)
		}
		if string(row.RequestHash) != string(hash) {
			return &IdempotencyConflictError{Wallet: p.Wallet, Key: p.IdempotencyKey, TaskID: row.ID}
		}
		task, created = taskFromRow(row), false
		return nil
	})
	if err != nil {
		return Task{}, false, err
	}
	return task, created, nil
}

// TaskGet returns the wallet's task id. A task of another wallet is
// ErrNotFound, as a missing one is.
func (s *Store) TaskGet(ctx context.Context, wallet, id string) (Task, error) {
	row, err := one(s.q.TaskGet(ctx, dbsqlc.TaskGetParams{ID: id, WalletID: wallet}))
	if err != nil {
		return Task{}, fmt.Errorf("reading task %q of wallet %q: %w", id, wallet, err)
	}
	return taskFromRow(row), nil
}

// TaskListParams select a page of a wallet's tasks.
type TaskListParams struct {
	Wallet string
	// Status, when set, keeps only tasks in it.
	Status *TaskStatus
	// After is the last id of the previous page ("" for the first).
	After string
	Limit int
}

// TaskList returns up to Limit of the wallet's tasks after p.After, in id
// (creation) order.
func (s *Store) TaskList(ctx context.Context, p TaskListParams) ([]Task, error) {
	qp := dbsqlc.TaskListParams{WalletID: p.Wallet, After: p.After, Max: int32(p.Limit)}
	if p.Status != nil {
		st := int16(*p.Status)
		qp.Status = &st
	}
	rows, err := s.q.TaskList(ctx, qp)
	if err != nil {
		return nil, fmt.Errorf("listing the tasks of wallet %q: %w", p.Wallet, err)
	}
	return tasksFromRows(rows), nil
}

// TaskCancelParams name the task to cancel.
type TaskCancelParams struct {
	Now    time.Time
	Wallet string
	ID     string
}

// TaskCancel cancels the wallet's task if it is still waiting (seed 004: an
// aborted task ends in Error): it returns true and the cancelled task, and
// emits failed in the same transaction. A task that has started or ended is
// left alone: it returns false and the task as it is. A missing task, or one
// of another wallet, is ErrNotFound.
func (s *Store) TaskCancel(ctx context.Context, p TaskCancelParams) (Task, bool, error) {
	var out Task
	var cancelled bool
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		row, err := one(q.TaskCancel(ctx, dbsqlc.TaskCancelParams{Now: p.Now, ID: p.ID, WalletID: p.Wallet}))
		switch {
		case err == nil:
			out, cancelled = taskFromRow(row), true
			_, err := emitWebhookEvents(ctx, q, p.Now, []WebhookEvent{TaskWebhookEvent(WebhookFailed, out, "", nil)})
			return err
		case !errors.Is(err, ErrNotFound):
			return fmt.Errorf("cancelling task %q of wallet %q: %w", p.ID, p.Wallet, err)
		}
		row, err = one(q.TaskGet(ctx, dbsqlc.TaskGetParams{ID: p.ID, WalletID: p.Wallet}))
		if err != nil {
			return fmt.Errorf("reading task %q of wallet %q: %w", p.ID, p.Wallet, err)
		}
		out, cancelled = taskFromRow(row), false
		return nil
	})
	if err != nil {
		return Task{}, false, err
	}
	return out, cancelled, nil
}

// TaskNextWaitingParams select a wallet's next waiting tasks.
type TaskNextWaitingParams struct {
	ChainID int64
	Sender  string
	Queue   QueueType
	Max     int
}

// TaskNextWaiting returns up to Max of the wallet's waiting tasks in queue
// order: for QueuePriority highest priority first, then oldest, then id (seed
// 004 leaves ties unordered; ledgerq makes them deterministic); for QueueFIFO
// oldest first, then id. It locks nothing: only the wallet's shard reads its
// queue, and AttemptsStore starts a task only if it is still waiting.
func (s *Store) TaskNextWaiting(ctx context.Context, p TaskNextWaitingParams) ([]Task, error) {
	var rows []dbsqlc.LedgerqWalletTask
	var err error
	switch p.Queue {
	case QueuePriority:
		rows, err = s.q.TaskNextWaitingPriority(ctx, dbsqlc.TaskNextWaitingPriorityParams{
			ChainID: p.ChainID, Sender: lowerHex(p.Sender), Max: int32(p.Max),
		})
	case QueueFIFO:
		rows, err = s.q.TaskNextWaitingFIFO(ctx, dbsqlc.TaskNextWaitingFIFOParams{
			ChainID: p.ChainID, Sender: lowerHex(p.Sender), Max: int32(p.Max),
		})
	default:
		return nil, fmt.Errorf("reading waiting tasks: unknown queue type %q", p.Queue)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the waiting tasks of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return tasksFromRows(rows), nil
}

// TaskFailParams end a task in error.
type TaskFailParams struct {
	Now    time.Time
	ID     string
	Reason string
}

// TaskFail ends a waiting or executing task in Error with the reason (a
// deterministic send failure) and drops its live, unmined attempts: they
// will never be mined. It emits failed in the same transaction, naming the
// dropped attempt (a task has at most one live attempt) when there was one.
// It returns ErrNotFound if the task is not waiting or executing.
func (s *Store) TaskFail(ctx context.Context, p TaskFailParams) (Task, error) {
	if p.Reason == "" {
		return Task{}, fmt.Errorf("failing task %q: no reason given", p.ID)
	}
	var out Task
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		row, err := one(q.TaskFinishError(ctx, dbsqlc.TaskFinishErrorParams{Now: p.Now, ID: p.ID, Error: p.Reason}))
		if err != nil {
			return fmt.Errorf("failing task %q: %w", p.ID, err)
		}
		dropped, err := q.AttemptDropByTask(ctx, dbsqlc.AttemptDropByTaskParams{Now: p.Now, TaskID: &p.ID, Error: p.Reason})
		if err != nil {
			return fmt.Errorf("dropping the attempts of task %q: %w", p.ID, err)
		}
		out = taskFromRow(row)
		ev := TaskWebhookEvent(WebhookFailed, out, "", nil)
		if len(dropped) > 0 {
			ev = TaskWebhookEvent(WebhookFailed, out, dropped[0].TxHash, &dropped[0].Nonce)
		}
		_, err = emitWebhookEvents(ctx, q, p.Now, []WebhookEvent{ev})
		return err
	})
	return out, err
}

// TaskDeleteFinishedParams bound one retention round.
type TaskDeleteFinishedParams struct {
	// Before: tasks finished before it are deleted.
	Before time.Time
	Max    int
}

// TaskDeleteFinished deletes up to Max tasks (and their attempts) that ended
// before p.Before, oldest first, and returns how many it deleted. Retention
// calls it until it deletes fewer than Max.
func (s *Store) TaskDeleteFinished(ctx context.Context, p TaskDeleteFinishedParams) (int64, error) {
	n, err := s.q.TaskDeleteFinished(ctx, dbsqlc.TaskDeleteFinishedParams{Before: p.Before, Max: int32(p.Max)})
	if err != nil {
		return 0, fmt.Errorf("deleting finished tasks: %w", err)
	}
	return n, nil
}

func tasksFromRows(rows []dbsqlc.LedgerqWalletTask) []Task {
	out := make([]Task, len(rows))
	for i, r := range rows {
		out[i] = taskFromRow(r)
	}
	return out
}

// newUUIDv7 returns a UUIDv7 (RFC 9562), the id of tasks and API keys: 48
// bits of Unix milliseconds, then random bits, so ids sort roughly by
// creation time and keyset pages follow it. Generated here rather than by
// PostgreSQL (15 has no uuidv7()), from the caller's now.
func newUUIDv7(now time.Time) string {
	var b [16]byte
	// crypto/rand.Read never returns an error (Go 1.24+); it panics instead.
	_, _ = rand.Read(b[6:])
	ms := uint64(now.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// lowerHex lower-cases an 0x-prefixed hex string (addresses and hashes are
// stored lower-case, so a checksummed address finds the same rows).
func lowerHex(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'F' || c == 'X' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

func numericFromBig(v *big.Int) pgtype.Numeric {
	if v == nil {
		v = new(big.Int)
	}
	return pgtype.Numeric{Int: new(big.Int).Set(v), Valid: true}
}

// bigFromNumeric converts an integral numeric (numeric(78,0) columns).
func bigFromNumeric(n pgtype.Numeric) *big.Int {
	if !n.Valid || n.Int == nil {
		return new(big.Int)
	}
	v := new(big.Int).Set(n.Int)
	switch {
	case n.Exp > 0:
		v.Mul(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.Exp)), nil))
	case n.Exp < 0:
		v.Quo(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-n.Exp)), nil))
	}
	return v
}

// pgUniqueViolation reports whether err is a unique violation of the named
// constraint or index.
func pgUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

// AttemptState is a transaction attempt's state.
type AttemptState string

// Attempt states, as stored.
const (
	// AttemptSigned: stored before any broadcast, not known sent (seed 003's
	// borrowed transaction); recover re-broadcasts it.
	AttemptSigned AttemptState = "signed"
	// AttemptSent: broadcast, or its outcome was indeterminate.
	AttemptSent AttemptState = "sent"
	// AttemptMined: it has a receipt, but fewer blocks on top of it than the
	// lane's confirmations; its task is still executing.
	AttemptMined AttemptState = "mined"
	// AttemptConfirmed: mined and deep enough: final.
	AttemptConfirmed AttemptState = "confirmed"
	// AttemptDropped: will never be mined; its nonce is free again.
	AttemptDropped AttemptState = "dropped"
)

// SignedTx is a transaction the caller signed for a task, to be stored
// before it is broadcast.
type SignedTx struct {
	TaskID string
	Nonce  int64
	// TxHash is the signed transaction's hash, 0x-prefixed hex.
	TxHash string
	// Raw is the signed transaction as it will be broadcast.
	Raw                  []byte
	GasLimit             uint64
	MaxFeePerGas         *big.Int
	MaxPriorityFeePerGas *big.Int
}

// Attempt is one row of ledgerq.tx_attempts.
type Attempt struct {
	SignedTx
	// ID is the row's key, in the order attempts were stored.
	ID          int64
	ChainID     int64
	Sender      string
	State       AttemptState
	LastError   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	SentAt      *time.Time
	ConfirmedAt *time.Time
	// SupersededBy is the hash of the gas bump that replaced this attempt
	// for its nonce (it is dropped, but may still be mined).
	SupersededBy string
	// MinedBlock and MinedBlockHash are the block its receipt was last seen
	// in (mined and confirmed attempts), MinedAt when.
	MinedBlock     *int64
	MinedBlockHash string
	MinedAt        *time.Time
	// Reorgs is how many times its mined transaction left the chain.
	Reorgs int
}

// Noop reports whether the attempt is a no-op (a 0-value transfer to self
// filling a nonce no task holds): an attempt of no task.
func (a Attempt) Noop() bool { return a.TaskID == "" }

func attemptFromRow(r dbsqlc.LedgerqTxAttempt) Attempt {
	a := Attempt{
		SignedTx: SignedTx{
			TaskID: deref(r.TaskID), Nonce: r.Nonce, TxHash: r.TxHash, Raw: r.Raw, GasLimit: uint64(r.GasLimit),
			MaxFeePerGas: bigFromNumeric(r.MaxFeePerGas), MaxPriorityFeePerGas: bigFromNumeric(r.MaxPriorityFeePerGas),
		},
		ID: r.ID, ChainID: r.ChainID, Sender: r.Sender, State: AttemptState(r.State),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		SentAt: utcPtr(r.SentAt), ConfirmedAt: utcPtr(r.ConfirmedAt),
		MinedBlock: r.MinedBlock, MinedAt: utcPtr(r.MinedAt), Reorgs: int(r.Reorgs),
	}
	if r.MinedBlockHash != nil {
		a.MinedBlockHash = *r.MinedBlockHash
	}
	if r.LastError != nil {
		a.LastError = *r.LastError
	}
	if r.SupersededBy != nil {
		a.SupersededBy = *r.SupersededBy
	}
	return a
}

func attemptsFromRows(rows []dbsqlc.LedgerqTxAttempt) []Attempt {
	out := make([]Attempt, len(rows))
	for i, r := range rows {
		out[i] = attemptFromRow(r)
	}
	return out
}

// NonceMovedError says the wallet's next nonce was not the one the caller
// signed with: another writer stored attempts meanwhile (or reconciliation
// moved it). Nothing was stored; the caller reads the nonce again and signs
// again.
type NonceMovedError struct {
	ChainID  int64
	Sender   string
	Expected int64
}

func (e *NonceMovedError) Error() string {
	return fmt.Sprintf("next nonce of %s is no longer %d", WalletShardKey(e.ChainID, e.Sender), e.Expected)
}

// NonceTakenError says a live attempt already holds one of the nonces: a
// second transaction for it would be a double spend, so nothing was stored.
type NonceTakenError struct {
	ChainID int64
	Sender  string
}

func (e *NonceTakenError) Error() string {
	return fmt.Sprintf("a live transaction attempt of %s already holds one of these nonces", WalletShardKey(e.ChainID, e.Sender))
}

// TaskNotWaitingError says some tasks were no longer waiting (cancelled, or
// started by another worker) when their attempts were to be stored. Nothing
// was stored.
type TaskNotWaitingError struct {
	Wanted, Waiting int
}

func (e *TaskNotWaitingError) Error() string {
	return fmt.Sprintf("only %d of %d tasks are still waiting", e.Waiting, e.Wanted)
}

// WalletNonceGet returns the next nonce ledgerq will assign for sender on
// chainID, or ErrNotFound before its first attempt (the caller then starts
// from the chain's pending nonce).
func (s *Store) WalletNonceGet(ctx context.Context, chainID int64, sender string) (int64, error) {
	row, err := one(s.q.WalletNonceGet(ctx, dbsqlc.WalletNonceGetParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return 0, fmt.Errorf("reading the next nonce of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return row.NextNonce, nil
}

// AttemptsStoreParams are the signed transactions of one send round.
type AttemptsStoreParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// FirstNonce is the next nonce the caller read (WalletNonceGet, or the
	// chain's pending nonce for an address with none stored) and signed
	// Attempts[0] with; Attempts[i] has nonce FirstNonce+i.
	FirstNonce int64
	// Attempts: one per task, each task waiting.
	Attempts []SignedTx
	// Reused are attempts at freed nonces (seed 003's recycled nonces):
	// below FirstNonce, each held by no live attempt (the unique index
	// refuses one that is). They do not move the next nonce. One per task,
	// each task waiting, none also in Attempts.
	Reused []SignedTx
}

// AttemptsStore is the write-ahead of DESIGN §2.3 and seed 003: in one
// transaction it moves the tasks waiting -> executing, advances the wallet's
// next nonce from FirstNonce past the attempts, and stores the attempts
// (signed, with their raw bytes) — before anything is broadcast.
//
// The caller reads the next nonce, signs with consecutive nonces from it,
// and stores; the nonce moves only if it is still FirstNonce (a
// compare-and-set), so the caller never needs to sign inside a database
// transaction. It fails, storing nothing, with *NonceMovedError when the
// nonce moved, *NonceTakenError when a live attempt already holds one of the
// nonces (the unique index refuses a second transaction for a nonce), and
// *TaskNotWaitingError when a task was cancelled or started meanwhile.
// Signed bytes of a failed store were never stored, so they must not be
// broadcast. A worker runs it inside ShardFenced, so a worker whose lease
// was rescued stores nothing.
//
// Reused attempts are stored in the same transaction; they need the
// wallet's next nonce to be stored already and equal to FirstNonce. It
// returns the stored attempts, Reused first, then Attempts.
func (s *Store) AttemptsStore(ctx context.Context, p AttemptsStoreParams) ([]Attempt, error) {
	all := append(append([]SignedTx(nil), p.Reused...), p.Attempts...)
	n := len(all)
	if n == 0 {
		return nil, nil
	}
	sender := lowerHex(p.Sender)
	ins := dbsqlc.AttemptInsertManyParams{
		ChainID: p.ChainID, Sender: sender, Now: p.Now,
		TxHashes: make([]string, n), TaskIds: make([]string, n), Nonces: make([]int64, n), Raws: make([][]byte, n),
		GasLimits: make([]int64, n), MaxFees: make([]pgtype.Numeric, n), MaxTips: make([]pgtype.Numeric, n),
	}
	seen := make(map[string]bool, n)
	reusedNonces := make(map[int64]bool, len(p.Reused))
	for i, a := range all {
		reused := i < len(p.Reused)
		switch {
		case reused && (a.Nonce < 0 || a.Nonce >= p.FirstNonce):
			return nil, fmt.Errorf("storing attempts: reused nonce %d is not below the next nonce %d", a.Nonce, p.FirstNonce)
		case reused && reusedNonces[a.Nonce]:
			return nil, fmt.Errorf("storing attempts: reused nonce %d twice", a.Nonce)
		case !reused && a.Nonce != p.FirstNonce+int64(i-len(p.Reused)):
			return nil, fmt.Errorf("storing attempts: attempt %d has nonce %d, not %d: nonces must be consecutive from the next nonce", i-len(p.Reused), a.Nonce, p.FirstNonce+int64(i-len(p.Reused)))
		case seen[a.TaskID]:
			return nil, fmt.Errorf("storing attempts: task %q twice", a.TaskID)
		case a.GasLimit == 0 || a.GasLimit > 1<<63-1:
			return nil, fmt.Errorf("storing attempts: gas limit %d out of range", a.GasLimit)
		}
		seen[a.TaskID] = true
		if reused {
			reusedNonces[a.Nonce] = true
		}
		ins.TxHashes[i], ins.TaskIds[i], ins.Nonces[i], ins.Raws[i] = lowerHex(a.TxHash), a.TaskID, a.Nonce, a.Raw
		ins.GasLimits[i], ins.MaxFees[i], ins.MaxTips[i] = int64(a.GasLimit), numericFromBig(a.MaxFeePerGas), numericFromBig(a.MaxPriorityFeePerGas)
	}
	key := WalletShardKey(p.ChainID, sender)
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		started, err := q.TaskStartMany(ctx, dbsqlc.TaskStartManyParams{Now: p.Now, Ids: ins.TaskIds, ChainID: p.ChainID, Sender: sender})
		if err != nil {
			return fmt.Errorf("starting the tasks of %s: %w", key, err)
		}
		if started != int64(n) {
			return &TaskNotWaitingError{Wanted: n, Waiting: int(started)}
		}
		if len(p.Reused) > 0 {
			// A nonce below the next one was assigned before: only then can
			// it have been freed.
			if _, err := one(q.WalletNonceGet(ctx, dbsqlc.WalletNonceGetParams{ChainID: p.ChainID, Sender: sender})); errors.Is(err, ErrNotFound) {
				return &NonceMovedError{ChainID: p.ChainID, Sender: sender, Expected: p.FirstNonce}
			} else if err != nil {
				return fmt.Errorf("reading the next nonce of %s: %w", key, err)
			}
		}
		_, err = one(q.WalletNonceAdvance(ctx, dbsqlc.WalletNonceAdvanceParams{
			ChainID: p.ChainID, Sender: sender, Expected: p.FirstNonce, Next: p.FirstNonce + int64(len(p.Attempts)), Now: p.Now,
		}))
		switch {
		case errors.Is(err, ErrNotFound):
			return &NonceMovedError{ChainID: p.ChainID, Sender: sender, Expected: p.FirstNonce}
		case err != nil:
			return fmt.Errorf("advancing the next nonce of %s: %w", key, err)
		}
		if _, err := q.AttemptInsertMany(ctx, ins); err != nil {
			if pgUniqueViolation(err, "tx_attempts_live_nonce") {
				return &NonceTakenError{ChainID: p.ChainID, Sender: sender}
			}
			return fmt.Errorf("storing the attempts of %s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Attempt, n)
	for i, a := range all {
		a.TxHash = ins.TxHashes[i]
		out[i] = Attempt{SignedTx: a, ChainID: p.ChainID, Sender: sender, State: AttemptSigned, CreatedAt: p.Now, UpdatedAt: p.Now}
	}
	return out, nil
}

// AttemptsListParams select a wallet's attempts in nonce order.
type AttemptsListParams struct {
	ChainID int64
	Sender  string
	// Below, for AttemptsSentBelow: only nonces below it (the chain's nonce).
	Below int64
	Max   int
}

// AttemptsUnsent returns the wallet's attempts that were signed and stored
// but are not known sent, in nonce order: seed 003's recover re-broadcasts
// them first, with the same bytes.
func (s *Store) AttemptsUnsent(ctx context.Context, p AttemptsListParams) ([]Attempt, error) {
	rows, err := s.q.AttemptsUnsent(ctx, dbsqlc.AttemptsUnsentParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender), Max: int32(p.Max)})
	if err != nil {
		return nil, fmt.Errorf("reading the unsent attempts of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return attemptsFromRows(rows), nil
}

// AttemptsSentBelow returns the wallet's sent attempts with a nonce below
// p.Below (the chain's nonce passed them: confirm looks up their receipts),
// in nonce order.
func (s *Store) AttemptsSentBelow(ctx context.Context, p AttemptsListParams) ([]Attempt, error) {
	rows, err := s.q.AttemptsSentBelow(ctx, dbsqlc.AttemptsSentBelowParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender), Below: p.Below, Max: int32(p.Max)})
	if err != nil {
		return nil, fmt.Errorf("reading the sent attempts of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return attemptsFromRows(rows), nil
}

// AttemptListByTask returns a task's attempts, oldest first.
func (s *Store) AttemptListByTask(ctx context.Context, taskID string) ([]Attempt, error) {
	rows, err := s.q.AttemptListByTask(ctx, &taskID)
	if err != nil {
		return nil, fmt.Errorf("reading the attempts of task %q: %w", taskID, err)
	}
	return attemptsFromRows(rows), nil
}

// AttemptMarkSentParams record broadcasts.
type AttemptMarkSentParams struct {
	Now      time.Time
	ChainID  int64
	TxHashes []string
	// Error is the broadcast's error when its outcome was indeterminate
	// (treated as sent), for operators; empty on success.
	Error string
}

// AttemptMarkSent moves signed attempts to sent and returns how many moved;
// attempts in any other state are left alone. In the same transaction each
// moved attempt of a task emits submitted with its hash and nonce, in nonce
// order: an attempt marked sent again (a new broadcast of the same bytes)
// moves nothing and emits nothing, and a gas bump, a new attempt, emits
// submitted again with its new hash. No-ops emit nothing.
func (s *Store) AttemptMarkSent(ctx context.Context, p AttemptMarkSentParams) (int64, error) {
	hashes := make([]string, len(p.TxHashes))
	for i, h := range p.TxHashes {
		hashes[i] = lowerHex(h)
	}
	qp := dbsqlc.AttemptMarkSentParams{Now: p.Now, ChainID: p.ChainID, TxHashes: hashes}
	if p.Error != "" {
		qp.Error = &p.Error
	}
	var n int64
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		rows, err := q.AttemptMarkSent(ctx, qp)
		if err != nil {
			return fmt.Errorf("marking attempts sent: %w", err)
		}
		n = int64(len(rows))
		return emitSubmitted(ctx, q, p.Now, rows)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// emitSubmitted emits submitted for the attempts of tasks that moved to
// sent, in nonce order.
func emitSubmitted(ctx context.Context, q *dbsqlc.Queries, now time.Time, moved []dbsqlc.LedgerqTxAttempt) error {
	var ids []string
	for _, a := range moved {
		if a.TaskID != nil {
			ids = append(ids, *a.TaskID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.TaskGetMany(ctx, ids)
	if err != nil {
		return fmt.Errorf("reading the tasks of %d sent attempts: %w", len(ids), err)
	}
	tasks := make(map[string]Task, len(rows))
	for _, r := range rows {
		tasks[r.ID] = taskFromRow(r)
	}
	slices.SortFunc(moved, func(a, b dbsqlc.LedgerqTxAttempt) int {
		return cmp.Or(cmp.Compare(a.Nonce, b.Nonce), strings.Compare(a.TxHash, b.TxHash))
	})
	events := make([]WebhookEvent, 0, len(ids))
	for _, a := range moved {
		if a.TaskID == nil {
			continue
		}
		t, ok := tasks[*a.TaskID]
		if !ok {
			return fmt.Errorf("reading the task of sent attempt %s: %w", a.TxHash, ErrNotFound)
		}
		events = append(events, TaskWebhookEvent(WebhookSubmitted, t, a.TxHash, &a.Nonce))
	}
	_, err = emitWebhookEvents(ctx, q, now, events)
	return err
}

// AttemptConfirmParams record a receipt.
type AttemptConfirmParams struct {
	Now     time.Time
	ChainID int64
	// TxHash is the hash that has the receipt.
	TxHash string
	// Live, when set and not TxHash, is the nonce's live attempt: TxHash is
	// one it superseded (a gas bump that was not the one mined). Live is
	// dropped and TxHash takes its place.
	Live string
	// Block and BlockHash are the receipt's block.
	Block     uint64
	BlockHash string
	// Final: the block is deep enough (the lane's confirmations). Otherwise
	// the attempt is only mined and its task stays executing.
	Final bool
	// Reverted: the receipt's status is 0. The task is done all the same.
	Reverted bool
}

// AttemptConfirm records a receipt of the attempt's transaction. With Final
// it is final: in one transaction the attempt becomes confirmed and its task
// done with the attempt's hash (and reverted as the receipt says), and
// confirmed is emitted with the mined hash and nonce. Without it the attempt
// becomes mined in p.Block (or moves there, mined again after a reorg) and
// its task stays executing. A no-op has no task (the zero Task). It returns
// the task, or ErrNotFound when the attempt is not live (or, with p.Live,
// the superseded hash is not Live's task's) or its task is not executing
// (nothing changes then).
func (s *Store) AttemptConfirm(ctx context.Context, p AttemptConfirmParams) (Task, error) {
	hash, live := lowerHex(p.TxHash), lowerHex(p.Live)
	if p.Block > 1<<63-1 {
		return Task{}, fmt.Errorf("confirming attempt %s: block %d out of range", hash, p.Block)
	}
	block, blockHash := int64(p.Block), lowerHex(p.BlockHash)
	// A final receipt may come without its block (a caller that has only
	// the receipt's word); a mined one needs it, to be checked again.
	var blockArg *int64
	var blockHashArg *string
	switch {
	case blockHash != "":
		blockArg, blockHashArg = &block, &blockHash
	case !p.Final:
		return Task{}, fmt.Errorf("recording attempt %s mined: no block hash", hash)
	}
	var out Task
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		var taskID *string
		var nonce int64
		switch {
		case live != "" && live != hash:
			// The live bump leaves the live set first: the unique index
			// holds one live attempt per nonce at every row.
			d, err := one(q.AttemptDrop(ctx, dbsqlc.AttemptDropParams{Error: "superseded attempt " + hash + " was mined", Now: p.Now, ChainID: p.ChainID, TxHash: live}))
			if err != nil {
				return fmt.Errorf("confirming attempt %s: %w", hash, err)
			}
			r, err := one(q.AttemptMineSuperseded(ctx, dbsqlc.AttemptMineSupersededParams{
				Final: p.Final, Now: p.Now, MinedBlock: blockArg, MinedBlockHash: blockHashArg, ChainID: p.ChainID, TxHash: hash, TaskID: d.TaskID,
			}))
			if err != nil {
				return fmt.Errorf("confirming attempt %s: %w", hash, err)
			}
			taskID, nonce = r.TaskID, r.Nonce
		case p.Final:
			r, err := one(q.AttemptConfirm(ctx, dbsqlc.AttemptConfirmParams{Now: p.Now, MinedBlock: blockArg, MinedBlockHash: blockHashArg, ChainID: p.ChainID, TxHash: hash}))
			if err != nil {
				return fmt.Errorf("confirming attempt %s: %w", hash, err)
			}
			taskID, nonce = r.TaskID, r.Nonce
		default:
			r, err := one(q.AttemptMarkMined(ctx, dbsqlc.AttemptMarkMinedParams{MinedBlock: block, MinedBlockHash: blockHash, Now: p.Now, ChainID: p.ChainID, TxHash: hash}))
			if err != nil {
				return fmt.Errorf("recording attempt %s mined: %w", hash, err)
			}
			taskID, nonce = r.TaskID, r.Nonce
		}
		if taskID == nil {
			return nil // a no-op
		}
		if !p.Final {
			rows, err := q.TaskGetMany(ctx, []string{*taskID})
			if err != nil {
				return fmt.Errorf("reading task %q of attempt %s: %w", *taskID, hash, err)
			}
			if len(rows) != 1 || rows[0].Status != int16(TaskExecuting) {
				return fmt.Errorf("recording attempt %s mined: task %q is not executing: %w", hash, *taskID, ErrNotFound)
			}
			out = taskFromRow(rows[0])
			return nil
		}
		row, err := one(q.TaskFinishDone(ctx, dbsqlc.TaskFinishDoneParams{Now: p.Now, ID: *taskID, TxHash: &hash, Reverted: p.Reverted}))
		if err != nil {
			return fmt.Errorf("finishing task %q of attempt %s: %w", *taskID, hash, err)
		}
		out = taskFromRow(row)
		_, err = emitWebhookEvents(ctx, q, p.Now, []WebhookEvent{TaskWebhookEvent(WebhookConfirmed, out, hash, &nonce)})
		return err
	})
	return out, err
}

// AttemptReopenParams name a mined or confirmed attempt whose transaction
// left the chain.
type AttemptReopenParams struct {
	Now     time.Time
	ChainID int64
	TxHash  string
	// Reason is kept as the attempt's last error, for operators; it also
	// makes the attempt due for a new broadcast.
	Reason string
}

// AttemptReopen records that a mined or confirmed attempt's transaction is
// no longer on the chain (a reorg, a node that lost blocks or was restored
// from an older state): in one transaction the attempt goes back to sent —
// its nonce stays held and its same bytes are broadcast again — and its task
// is executing again (a done one too), with the reorg counted on both; a
// task that was done emits reorged. It returns the task (the zero Task for a
// no-op), or ErrNotFound when the attempt is not mined or confirmed.
func (s *Store) AttemptReopen(ctx context.Context, p AttemptReopenParams) (Task, error) {
	if p.Reason == "" {
		return Task{}, fmt.Errorf("reopening attempt %s: no reason given", p.TxHash)
	}
	hash := lowerHex(p.TxHash)
	var out Task
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		r, err := one(q.AttemptReopen(ctx, dbsqlc.AttemptReopenParams{Now: p.Now, Error: p.Reason, ChainID: p.ChainID, TxHash: hash}))
		if err != nil {
			return fmt.Errorf("reopening attempt %s: %w", hash, err)
		}
		if r.TaskID == nil {
			return nil
		}
		before, err := q.TaskGetMany(ctx, []string{*r.TaskID})
		if err != nil {
			return fmt.Errorf("reading task %q of attempt %s: %w", *r.TaskID, hash, err)
		}
		row, err := one(q.TaskReopen(ctx, dbsqlc.TaskReopenParams{Now: p.Now, ID: *r.TaskID}))
		if err != nil {
			return fmt.Errorf("reopening task %q of attempt %s: %w", *r.TaskID, hash, err)
		}
		out = taskFromRow(row)
		if len(before) != 1 || before[0].Status != int16(TaskDone) {
			return nil
		}
		_, err = emitWebhookEvents(ctx, q, p.Now, []WebhookEvent{TaskWebhookEvent(WebhookReorged, out, hash, &r.Nonce)})
		return err
	})
	return out, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
