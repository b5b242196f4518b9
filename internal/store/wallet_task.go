package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/internal/calldata"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// TaskStatus is a send-tx task's status. Its codes are stored and are part
// of the API (webhook events carry them), so they never change.
type TaskStatus int16

// Task statuses, as stored.
const (
	TaskWaiting   TaskStatus = 0
	TaskExecuting TaskStatus = 1
	TaskError     TaskStatus = 2
	TaskDone      TaskStatus = 3
)

// String is the status's name in the API ("Waiting", "Executing",
// "Error", "Done").
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

// QueueType is the order in which a wallet's waiting tasks are sent
// (--wallet-queue-type).
type QueueType string

// MarshalText and UnmarshalText make a QueueType a setting's value: any
// text is taken, and wallet.Config.Validate refuses one that is no
// QueueType.
func (q QueueType) MarshalText() ([]byte, error) { return []byte(q), nil }

// UnmarshalText sets q to text.
func (q *QueueType) UnmarshalText(text []byte) error {
	*q = QueueType(text)
	return nil
}

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
	// Call is the contract call the client named, which Data encodes; nil
	// when the client sent Data itself.
	Call *TaskCall
	// SkipPreflight: the client asked for no preflight ("preflight": false):
	// the send does not run the call at the pending state before the task
	// takes a nonce.
	SkipPreflight bool
}

// TaskCall is a contract call named by a function signature or by a method
// of an ABI fragment, with its arguments (stored as the task's call).
type TaskCall struct {
	// Function is the canonical signature, "transfer(address,uint256)".
	Function string `json:"function"`
	// Method and ABI are the client's, for a call named by an ABI: ABI is
	// the fragment as a JSON array (kept to decode what the call answers).
	Method string          `json:"method,omitempty"`
	ABI    json.RawMessage `json:"abi,omitempty"`
	// Args is the JSON array of the arguments, normalised.
	Args json.RawMessage `json:"args"`
}

// MaxTaskCallBytes is the largest call a task stores, as JSON (the API
// refuses a larger one; the table's wallet_tasks_call_size leaves room for
// PostgreSQL's own spacing).
const MaxTaskCallBytes = 256 << 10

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
	Reorgs int
	// CancelRequestedAt is when a client asked to cancel the task after it
	// was sent (TaskRequestCancel); nil: never.
	CancelRequestedAt *time.Time
	// SpeedUp is the fees a client asked for that the worker has not
	// stored yet (TaskRequestSpeedUp); nil: none.
	SpeedUp   *SpeedUpFees
	Error     string
	Reverted  bool
	Cancelled bool
	// Revert is why the task's call reverted, decoded (a calldata.Revert as
	// JSON): the preflight's verdict of a task ended in error, or the
	// replay of a reverted transaction; nil: none.
	Revert json.RawMessage
	// Logs are the logs of the task's mined transaction (a calldata.Logs as
	// JSON, its events decoded by the call's ABI; a done task whose
	// transaction emitted none has none in it); nil: not done.
	Logs       json.RawMessage
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
		Reorgs: int(r.Reorgs), IdempotencyKey: deref(r.IdempotencyKey), TxHash: deref(r.TxHash), Error: deref(r.Error),
	}
	if r.GasLimit != nil {
		g := uint64(*r.GasLimit)
		t.Request.GasLimit = &g
	}
	t.Request.SkipPreflight = !r.Preflight
	t.Revert, t.Logs = compactJSON(r.Revert), compactJSON(r.Logs)
	if t.Logs == nil && t.Status == TaskDone {
		// Its confirm records the logs of a transaction that emitted
		// some, in the transaction that ends it done: none recorded is
		// none emitted.
		t.Logs = json.RawMessage(noLogs)
	}
	if r.TipCapWei.Valid {
		t.Request.TipCap = bigFromNumeric(r.TipCapWei)
	}
	t.CancelRequestedAt = utcPtr(r.CancelRequestedAt)
	if r.SpeedUpFeeCapWei.Valid && r.SpeedUpTipCapWei.Valid {
		t.SpeedUp = &SpeedUpFees{FeeCap: bigFromNumeric(r.SpeedUpFeeCapWei), TipCap: bigFromNumeric(r.SpeedUpTipCapWei)}
	}
	if r.FeeCapWei.Valid {
		t.Request.FeeCap = bigFromNumeric(r.FeeCapWei)
	}
	if r.Call != nil {
		// The table's check holds the shape; a row it let through but
		// this cannot read would still be shown without its call.
		var c TaskCall
		if json.Unmarshal(r.Call, &c) == nil {
			// jsonb writes a space after each ',' and ':'.
			c.ABI, c.Args = compactJSON(c.ABI), compactJSON(c.Args)
			t.Request.Call = &c
			if len(t.Logs) > 0 && len(c.ABI) > 0 {
				// Stored as the ledger read them: decoded here.
				t.Logs = calldata.DecodeStoredLogs(t.Logs, common.HexToAddress(t.Request.To), c.ABI)
			}
		}
	}
	return t
}

// noLogs are the logs of a done task whose transaction emitted none.
const noLogs = `{"logs":[],"count":0}`

// compactJSON is raw without insignificant whitespace (raw itself if it is
// not JSON).
func compactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// WalletShardKey is the key of the shard that works the tasks of sender on
// chainID: wallet:<chain>:<address>. One shard per wallet, so one worker at
// a time assigns its nonces.
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

// TaskNotWaitingError says some tasks were no longer waiting (cancelled, or
// started by another worker) when their attempts were to be stored. Nothing
// was stored.
type TaskNotWaitingError struct {
	Wanted, Waiting int
}

func (e *TaskNotWaitingError) Error() string {
	return fmt.Sprintf("only %d of %d tasks are still waiting", e.Waiting, e.Wanted)
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
	// Declared says the wallet was added at run time (ledgerq.wallets): the
	// insert then holds its row, so that the wallet cannot be removed while
	// the task is stored, and refuses a wallet removed (ErrWalletGone) or
	// disabled (ErrWalletDisabled) meanwhile by another process.
	Declared bool
}

// ErrWalletGone and ErrWalletDisabled are TaskInsert's errors for a wallet
// added at run time that was removed, or disabled, by the time the task
// was stored.
var (
	ErrWalletGone     = errors.New("the wallet was removed")
	ErrWalletDisabled = errors.New("the wallet is disabled: it takes no new task")
)

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
	// Likewise the call, which data already encodes: the same data named
	// by another function or ABI, or with other arguments (their normal
	// form: "0x10" and "16" are one), is another request.
	if c := p.Request.Call; c != nil {
		field([]byte("call"))
		field([]byte(c.Function))
		field([]byte(c.Method))
		field(c.ABI)
		field(c.Args)
	}
	// Likewise "preflight": false (the default, true, adds nothing).
	if p.Request.SkipPreflight {
		field([]byte("no preflight"))
	}
	return h.Sum(nil)
}

// TaskInsert stores a waiting task and then schedules its wallet's shard
// (scheduleCommitted), so a stored task has a shard that will run it; should
// the process die between the two, or the schedule fail, the wallet
// follower schedules every wallet with waiting tasks.
// With an idempotency key already used by the wallet it stores nothing: the
// same request body returns the stored task with created false; a different
// one fails with *IdempotencyConflictError. Concurrent inserts under one key
// store one task (ON CONFLICT DO NOTHING waits for the other insert, then the
// stored row is read back).
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
		RequestHash: hash, Now: p.Now, Preflight: !p.Request.SkipPreflight,
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
	if c := p.Request.Call; c != nil {
		b, err := json.Marshal(c)
		if err != nil {
			return Task{}, false, fmt.Errorf("storing a task: its call: %w", err)
		}
		if len(b) > MaxTaskCallBytes {
			return Task{}, false, fmt.Errorf("storing a task: its call is %d bytes, more than %d", len(b), MaxTaskCallBytes)
		}
		ins.Call = b
	}
	// One statement, no transaction around it: a conflict on the key
	// waits for the other insert to commit or roll back, so the row read
	// after it is committed. A wallet with a policy takes a transaction.
	row, refused, err := s.taskInsert(ctx, ins, p.Declared)
	if refused != nil {
		return Task{}, false, refused
	}
	if errors.Is(err, ErrWalletGone) || errors.Is(err, ErrWalletDisabled) {
		return Task{}, false, fmt.Errorf("storing a task of wallet %q: %w", p.Wallet, err)
	}
	if outcomeUnknown(err) {
		// The connection failed after the insert was sent: it may have
		// committed with its answer lost. The id is this call's own, so
		// the row says; a stored task must be answered as stored, or a
		// client retrying without a key would store it twice.
		if stored, ok := s.taskStoredAfterAll(ctx, ins.ID, p.Wallet); ok {
			row, err = stored, nil
		}
	}
	switch {
	case err == nil:
		task, created = taskFromRow(row), true
	case !errors.Is(err, ErrNotFound):
		return Task{}, false, fmt.Errorf("storing a task of wallet %q: %w", p.Wallet, err)
	default:
		// The key is taken (only a keyed insert can conflict).
		row, err = one(s.q.TaskGetByIdempotencyKey(ctx, dbsqlc.TaskGetByIdempotencyKeyParams{
			WalletID: p.Wallet, IdempotencyKey: ins.IdempotencyKey,
		}))
		if err != nil {
			return Task{}, false, fmt.Errorf("reading the task of wallet %q under idempotency key %q: %w", p.Wallet, p.IdempotencyKey, err)
		}
		if string(row.RequestHash) != string(hash) {
			return Task{}, false, &IdempotencyConflictError{Wallet: p.Wallet, Key: p.IdempotencyKey, TaskID: row.ID}
		}
		task, created = taskFromRow(row), false
	}
	// The shard is scheduled after the task is committed (a replay's too:
	// the request that stored it may have died before its schedule). A
	// schedule that fails leaves the stored task to the wallet follower,
	// which schedules every wallet with waiting tasks: the task is stored
	// and its answer must say so, or a client retrying without a key would
	// store it twice.
	_ = s.scheduleCommitted(ctx, p.Now, WalletShardKey(p.ChainID, ins.Sender))
	return task, created, nil
}

// taskInsert runs the insert: one statement, or, for a wallet added at run
// time, the statement after a share lock on the wallet's row (which its
// removal takes exclusively, and then counts the wallet's tasks). The
// statement stores nothing for a wallet with a policy (nor under a key
// already used): the insert then goes again through insertUnderPolicy, in
// a transaction, which either stores it or returns refused. Whether a
// policy exists is the table's word at the statement, never a cache's.
func (s *Store) taskInsert(ctx context.Context, ins dbsqlc.TaskInsertParams, declared bool) (row dbsqlc.LedgerqWalletTask, refused *PolicyRefusedError, err error) {
	if !declared {
		row, err = one(s.q.TaskInsert(ctx, ins))
		if !errors.Is(err, ErrNotFound) {
			return row, nil, err
		}
		var insErr error
		err = s.inTx(ctx, func(tx pgx.Tx) error {
			row, refused, insErr = insertUnderPolicy(ctx, s.q.WithTx(tx), ins)
			if errors.Is(insErr, ErrNotFound) {
				return nil
			}
			return insErr
		})
		if err != nil {
			return row, nil, err
		}
		return row, refused, insErr
	}
	var insErr error
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		disabled, err := one(q.WalletsLockShared(ctx, ins.WalletID))
		switch {
		case errors.Is(err, ErrNotFound):
			return ErrWalletGone
		case err != nil:
			return err
		case disabled:
			// A replay of a task stored before is still answered with it.
			if ins.IdempotencyKey != nil {
				if _, err := one(q.TaskGetByIdempotencyKey(ctx, dbsqlc.TaskGetByIdempotencyKeyParams{WalletID: ins.WalletID, IdempotencyKey: ins.IdempotencyKey})); err == nil {
					insErr = ErrNotFound
					return nil
				}
			}
			return ErrWalletDisabled
		}
		row, insErr = one(q.TaskInsert(ctx, ins))
		if errors.Is(insErr, ErrNotFound) {
			row, refused, insErr = insertUnderPolicy(ctx, q, ins)
		}
		if errors.Is(insErr, ErrNotFound) {
			return nil
		}
		return insErr
	})
	if err != nil {
		return row, nil, err
	}
	return row, refused, insErr
}

// scheduleCommitted schedules the shard of work that is already committed.
// A shard that is pending, or running with more_work set, needs nothing,
// and reading that takes no lock: any run of it that collects after this
// read (the next claim of a pending shard, the run its release queues)
// starts after the commit and sees the work. Only an idle shard, or a
// running one without more_work, takes ShardSchedule's row lock, so
// concurrent inserts of one wallet do not queue behind each other's commits
// on its shard row.
func (s *Store) scheduleCommitted(ctx context.Context, now time.Time, key string) error {
	row, err := one(s.q.ShardGet(ctx, key))
	switch {
	case err == nil && (row.State == dbsqlc.LedgerqShardStatePending || row.State == dbsqlc.LedgerqShardStateRunning && row.MoreWork):
		return nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return fmt.Errorf("reading shard %q: %w", key, err)
	}
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		_, err := shardSchedule(ctx, q, ShardScheduleParams{Now: now, Key: key})
		return err
	})
}

// TaskGet returns the wallet's task id. A task of another wallet is
// ErrNotFound, as a missing one is.
func (s *Store) TaskGet(ctx context.Context, wallet, id string) (Task, error) {
	return taskGet(ctx, s.q, wallet, id)
}

func taskGet(ctx context.Context, q *dbsqlc.Queries, wallet, id string) (Task, error) {
	row, err := one(q.TaskGet(ctx, dbsqlc.TaskGetParams{ID: id, WalletID: wallet}))
	if err != nil {
		return Task{}, fmt.Errorf("reading task %q of wallet %q: %w", id, wallet, err)
	}
	return taskFromRow(row), nil
}

// TaskView is a task as its readers show it, read from one snapshot: the
// task, its attempts, and its wallet's health (nil before the wallet's
// first check), whose chain head an attempt's confirmations are counted
// from. Read one by one, a commit of the lane between the reads could show
// a head newer than the attempt beside it, or a task behind its attempts.
type TaskView struct {
	Task     Task
	Attempts []Attempt
	Health   *WalletHealth
}

// TaskView reads the wallet's task id with its attempts and its wallet's
// health in one read-only REPEATABLE READ transaction. A task of another
// wallet is ErrNotFound, as a missing one is.
func (s *Store) TaskView(ctx context.Context, wallet, id string) (TaskView, error) {
	var v TaskView
	err := s.inSnapshot(ctx, func(q *dbsqlc.Queries) error {
		var err error
		if v.Task, err = taskGet(ctx, q, wallet, id); err != nil {
			return err
		}
		if v.Attempts, err = attemptListByTask(ctx, q, id); err != nil {
			return err
		}
		h, err := walletHealthGet(ctx, q, v.Task.ChainID, v.Task.Sender)
		switch {
		case err == nil:
			v.Health = &h
		case !errors.Is(err, ErrNotFound):
			return err
		}
		return nil
	})
	return v, err
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

// TaskCountByStatus counts the tasks of the given wallets by status, in the
// database (for ledgerq bench's progress line).
func (s *Store) TaskCountByStatus(ctx context.Context, wallets []string) (map[TaskStatus]int, error) {
	rows, err := s.q.TaskCountByStatus(ctx, wallets)
	if err != nil {
		return nil, fmt.Errorf("counting the tasks of %d wallets: %w", len(wallets), err)
	}
	counts := make(map[TaskStatus]int, len(rows))
	for _, r := range rows {
		counts[TaskStatus(r.Status)] = int(r.Tasks)
	}
	return counts, nil
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
	return fromRows(rows, taskFromRow), nil
}

// TaskCancelParams name the task to cancel.
type TaskCancelParams struct {
	Now    time.Time
	Wallet string
	ID     string
	// Audit, when set, records the cancel in the same transaction.
	Audit *AuditEntry
}

// TaskCancel cancels the wallet's task if it is still waiting (an aborted
// task ends in Error): it returns true and the cancelled task, and
// emits failed in the same transaction. A task that has started or ended is
// left alone: it returns false and the task as it is. A waiting task whose
// transaction a signer outside the process was asked to sign is left alone
// too, with *TaskBeingSignedError: its nonce is pinned to it until its
// attempt is stored (SignRequestRecord). A missing task, or one of another
// wallet, is ErrNotFound.
func (s *Store) TaskCancel(ctx context.Context, p TaskCancelParams) (Task, bool, error) {
	return s.cancelWaiting(ctx, p)
}

// cancelWaiting is TaskCancel, for TaskRequestCancel too.
func (s *Store) cancelWaiting(ctx context.Context, p TaskCancelParams) (Task, bool, error) {
	var out Task
	var cancelled bool
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		row, err := one(q.TaskCancel(ctx, dbsqlc.TaskCancelParams{Now: p.Now, ID: p.ID, WalletID: p.Wallet}))
		switch {
		case err == nil:
			out, cancelled = taskFromRow(row), true
			// A signer outside the process was asked for its transaction:
			// its nonce is pinned to it until the attempt is stored, so it
			// is not cancelled. A send recording its requests holds the
			// row FOR SHARE, so the UPDATE above waited for it and this
			// statement, on a new snapshot, sees them.
			signing, err := one(q.SignRequestCountOfTask(ctx, dbsqlc.SignRequestCountOfTaskParams{ChainID: row.ChainID, Sender: row.Sender, TaskID: &row.ID}))
			switch {
			case err != nil:
				return fmt.Errorf("reading the sign requests of task %q: %w", p.ID, err)
			case signing > 0:
				return &TaskBeingSignedError{ID: p.ID}
			}
			if _, err := emitWebhookEvents(ctx, q, p.Now, []WebhookEvent{TaskWebhookEvent(WebhookFailed, out, "", nil)}); err != nil {
				return err
			}
			if p.Audit == nil {
				return nil
			}
			return auditInsert(ctx, q, p.Audit.with(p.Now, "task.cancel", "wallet/"+p.Wallet+"/task/"+p.ID, map[string]any{"priority": out.Priority}))
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
// order: for QueuePriority highest priority first, then oldest, then id (ties
// broken, so the order is deterministic); for QueueFIFO
// oldest first, then id. It locks nothing: only the wallet's shard reads its
// queue, and AttemptStoreMany starts a task only if it is still waiting.
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
	return fromRows(rows, taskFromRow), nil
}

// TaskFailParams end a task in error.
type TaskFailParams struct {
	Now    time.Time
	ID     string
	Reason string
	// Revert is the decoded revert that ended it (a preflight's verdict),
	// as JSON; nil: none.
	Revert json.RawMessage
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
		row, err := one(q.TaskFinishError(ctx, dbsqlc.TaskFinishErrorParams{Now: p.Now, ID: p.ID, Error: p.Reason, Revert: p.Revert}))
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

// TaskMarkPriceCapped records that a gas bump of the executing task was
// refused by the price cap; it reports whether this is news (the first time
// since the task's last bump).
func (s *Store) TaskMarkPriceCapped(ctx context.Context, now time.Time, id string) (bool, error) {
	n, err := s.q.TaskMarkPriceCapped(ctx, dbsqlc.TaskMarkPriceCappedParams{Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("marking task %q price-capped: %w", id, err)
	}
	return n > 0, nil
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

// TaskSeedFinishedParams are the inputs of TaskSeedFinished.
type TaskSeedFinishedParams struct {
	ChainID int64
	// Prefix starts the seeded tasks' wallet ids (and makes their ids and
	// hashes the run's own).
	Prefix string
	N      int
	// At is the seeded tasks' every time.
	At time.Time
}

// TaskSeedFinished writes N done tasks, each with its confirmed attempt, on
// 1000 made-up senders of ChainID, as a long-running lane leaves behind, for
// `ledgerq bench wallets --backlog-finished`. No loop or API path calls it.
func (s *Store) TaskSeedFinished(ctx context.Context, p TaskSeedFinishedParams) (int, error) {
	n, err := s.q.TaskSeedFinished(ctx, dbsqlc.TaskSeedFinishedParams{ChainID: p.ChainID, Prefix: p.Prefix, N: int32(p.N), At: p.At})
	if err != nil {
		return 0, fmt.Errorf("seeding %d finished tasks: %w", p.N, err)
	}
	return int(n), nil
}

// taskStoredAfterAll reads back the task id of wallet, whose insert failed
// with its outcome unknown, for up to storedAfterAllWait even when ctx has
// ended (its deadline may be what cut the insert short). ok is false when
// the task is not there, or could not be read in that time.
func (s *Store) taskStoredAfterAll(ctx context.Context, id, wallet string) (dbsqlc.LedgerqWalletTask, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storedAfterAllWait)
	defer cancel()
	return readAfterAll(ctx, func(ctx context.Context) (dbsqlc.LedgerqWalletTask, error) {
		return one(s.q.TaskGet(ctx, dbsqlc.TaskGetParams{ID: id, WalletID: wallet}))
	})
}

// TaskOutcome is what a done task's transaction left: its logs (a
// calldata.Logs as JSON, as the ledger read them: their events are decoded
// when the task is read, by its call's ABI) and, when it reverted, its
// decoded revert (a calldata.Revert as JSON); nil: none.
type TaskOutcome struct {
	ID     string
	Logs   json.RawMessage
	Revert json.RawMessage
}

// TaskRecordOutcomes records, in one statement, the logs and reverts of
// tasks a confirm ends done; it runs in that confirm's transaction, after
// the tasks are done (a task that is not done is left alone), and what is
// already recorded stays. It makes no statement when outs is empty: a
// confirm whose tasks left nothing pays nothing. It returns how many tasks
// it wrote.
func (s *Store) TaskRecordOutcomes(ctx context.Context, outs []TaskOutcome) (int64, error) {
	if len(outs) == 0 {
		return 0, nil
	}
	p := dbsqlc.TaskRecordOutcomesParams{Ids: make([]string, len(outs)), Logs: make([]string, len(outs)), Reverts: make([]string, len(outs))}
	for i, o := range outs {
		p.Ids[i], p.Logs[i], p.Reverts[i] = o.ID, string(o.Logs), string(o.Revert)
	}
	n, err := s.q.TaskRecordOutcomes(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("recording the outcomes of %d tasks: %w", len(outs), err)
	}
	return n, nil
}
