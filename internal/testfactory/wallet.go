package testfactory

import (
	"errors"
	"fmt"
	"math/big"
	"sync/atomic"
	"time"

	"github.com/ledgerq/ledgerq/internal/store"
)

// The wallet lane's rows are made through the store, as the API and the
// wallet's worker make them: a task, its attempt, the wallet's next nonce and
// the wallet's shard are written together there, and a test that wrote one
// without the others would start from a state the lane cannot reach.

// The chain, sender and recipient of a Task that names none.
const (
	WalletChainID = int64(1337)
	WalletSender  = "0x00000000000000000000000000000000000000a1"
	WalletTo      = "0x00000000000000000000000000000000000000b2"
)

// Task is a send-tx task (a row of ledgerq.wallet_tasks) as a client posts
// it. Zero fields get the defaults their doc gives.
type Task struct {
	// Wallet defaults to "main".
	Wallet string
	// ChainID defaults to WalletChainID.
	ChainID int64
	// Sender defaults to WalletSender.
	Sender   string
	Priority int32
	// Request.To defaults to WalletTo; a nil Value is zero.
	Request        store.TaskRequest
	IdempotencyKey string
	// CreatedAt defaults to now.
	CreatedAt time.Time
}

// PostTasks stores waiting tasks through the store (store.TaskInsert), as
// the send-tx API does, which also schedules their wallet's shard, and
// returns them in order. It fails the test if the store refuses one or
// already had it (a replayed idempotency key).
func (f *Factory) PostTasks(rows ...Task) []store.Task {
	f.tb.Helper()
	out := make([]store.Task, len(rows))
	for i, r := range rows {
		p := store.TaskInsertParams{
			Now: r.CreatedAt, Wallet: r.Wallet, ChainID: r.ChainID, Sender: r.Sender, Priority: r.Priority,
			Request: r.Request, IdempotencyKey: r.IdempotencyKey,
		}
		if p.Now.IsZero() {
			p.Now = f.clock.Now()
		}
		if p.Wallet == "" {
			p.Wallet = "main"
		}
		if p.ChainID == 0 {
			p.ChainID = WalletChainID
		}
		if p.Sender == "" {
			p.Sender = WalletSender
		}
		if p.Request.To == "" {
			p.Request.To = WalletTo
		}
		task, created, err := f.st.TaskInsert(f.tb.Context(), p)
		if err != nil {
			f.tb.Fatalf("testfactory: posting task %+v: %v", r, err)
		}
		if !created {
			f.tb.Fatalf("testfactory: posting task %+v: the wallet already has task %s under its idempotency key", r, task.ID)
		}
		out[i] = task
	}
	return out
}

// PostTask is PostTasks of one task.
func (f *Factory) PostTask(r Task) store.Task {
	f.tb.Helper()
	return f.PostTasks(r)[0]
}

var signedTxs atomic.Int64

// SignedTx is a stand-in for a transaction signed for taskID with nonce: a
// hash no other call returns, raw bytes that name the task and the nonce,
// 21000 gas, a fee cap of 2 gwei and a tip of 1 gwei. A no-op's taskID is
// empty.
func SignedTx(taskID string, nonce int64) store.SignedTx {
	n := signedTxs.Add(1)
	return store.SignedTx{
		TaskID: taskID, Nonce: nonce, TxHash: fmt.Sprintf("0x%064x", n),
		Raw:      fmt.Appendf(nil, "raw %s %d", taskID, nonce),
		GasLimit: 21000, MaxFeePerGas: big.NewInt(2_000_000_000), MaxPriorityFeePerGas: big.NewInt(1_000_000_000),
	}
}

// StartTasks stores one send round for tasks of one wallet (store.
// AttemptStoreMany, the lane's write-ahead), as the wallet's worker does:
// a SignedTx for each, with consecutive nonces from first, which must be
// the wallet's next nonce (any nonce while it has none). The tasks move to
// executing. It returns the attempts in the order of tasks.
func (f *Factory) StartTasks(first int64, tasks ...store.Task) []store.Attempt {
	f.tb.Helper()
	if len(tasks) == 0 {
		return nil
	}
	p := store.AttemptStoreManyParams{Now: f.clock.Now(), ChainID: tasks[0].ChainID, Sender: tasks[0].Sender, FirstNonce: first}
	for i, task := range tasks {
		p.Attempts = append(p.Attempts, SignedTx(task.ID, first+int64(i)))
	}
	out, err := f.st.AttemptStoreMany(f.tb.Context(), p)
	if err != nil {
		f.tb.Fatalf("testfactory: starting %d tasks of %s at nonce %d: %v", len(tasks), store.WalletShardKey(p.ChainID, p.Sender), first, err)
	}
	return out
}

// StartTask stores an attempt for task at its wallet's next nonce (0 for a
// wallet with none yet), as the wallet's worker does first: the task moves
// to executing.
func (f *Factory) StartTask(task store.Task) store.Attempt {
	f.tb.Helper()
	next, err := f.st.WalletNonceGet(f.tb.Context(), task.ChainID, task.Sender)
	if errors.Is(err, store.ErrNotFound) {
		next, err = 0, nil
	}
	if err != nil {
		f.tb.Fatalf("testfactory: reading the next nonce of %s: %v", store.WalletShardKey(task.ChainID, task.Sender), err)
	}
	return f.StartTasks(next, task)[0]
}

// FinishTask starts task and records its attempt's receipt final
// (store.AttemptConfirm): the task is done, with the attempt's hash.
func (f *Factory) FinishTask(task store.Task) store.Attempt {
	f.tb.Helper()
	a := f.StartTask(task)
	if _, err := f.st.AttemptConfirm(f.tb.Context(), store.AttemptConfirmParams{
		Now: f.clock.Now(), ChainID: a.ChainID, TxHash: a.TxHash, Final: true,
	}); err != nil {
		f.tb.Fatalf("testfactory: confirming the attempt of task %s: %v", task.ID, err)
	}
	return a
}

// CancelTask cancels a waiting task (store.TaskCancel), as a client does: it
// ends in error, cancelled. It fails the test if the task is not waiting.
func (f *Factory) CancelTask(task store.Task) store.Task {
	f.tb.Helper()
	got, ok, err := f.st.TaskCancel(f.tb.Context(), store.TaskCancelParams{Now: f.clock.Now(), Wallet: task.Wallet, ID: task.ID})
	if err != nil {
		f.tb.Fatalf("testfactory: cancelling task %s: %v", task.ID, err)
	}
	if !ok {
		f.tb.Fatalf("testfactory: cancelling task %s: it is %s, not waiting", task.ID, got.Status)
	}
	return got
}
