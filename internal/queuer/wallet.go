package queuer

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/crashpoint"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// WalletSender is the wallet lane's queuer: the send step of a wallet's run
// (wallet.Job). It decides what may go now — the waiting tasks in
// queue order, up to the in-flight budget — assigns their nonces (freed
// ones first, then consecutive new ones from the wallet's next nonce, the
// chain's nonce the first time and moved up to it when the chain passed
// it), signs them, and stores the attempts with the tasks' move to
// executing in one fenced transaction (store.AttemptStoreMany) before anything
// is broadcast: the write-ahead. A crash before the commit leaves nothing
// signed; after it, the recover step broadcasts the stored bytes. Unlike
// the other lanes' queuers it calls the ledger: a transaction is signed
// with its fees and gas limit, so the send reads the node's fee suggestion
// and the gas estimates of the tasks that name no gas limit.
type WalletSender struct {
	cfg    wallet.Config
	store  *store.Store
	ledger ledger.WalletLedger
}

var _ wallet.SendStep = (*WalletSender)(nil)

// NewWalletSender returns the send step of the wallets on led; cfg gets its
// defaults (wallet.Config.WithDefaults).
func NewWalletSender(st *store.Store, led ledger.WalletLedger, cfg wallet.Config) (*WalletSender, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if st == nil || led == nil {
		return nil, errors.New("wallet sender: it needs a store and a ledger")
	}
	return &WalletSender{cfg: cfg, store: st, ledger: led}, nil
}

// sendCycle is one send: waiting tasks in queue order, up to the
// in-flight budget, built with the node's EIP-1559 fee suggestion, signed
// with freed nonces first and then consecutive new ones, and stored with
// their tasks' move to executing in one fenced transaction (the
// write-ahead) before anything is broadcast. The recover cycle that follows
// broadcasts them.
type sendCycle struct {
	*wallet.Shard
	*WalletSender
	tasks []store.Task
	// next is the wallet's stored next nonce; first: none is stored yet.
	next  int64
	first bool
	// freed are nonces below next that no live attempt holds, lowest first.
	freed []int64

	// Execute's results.
	firstNonce int64
	reused     []store.SignedTx
	added      []store.SignedTx
}

// estimateError is the node's verdict on the gas estimate of the first task
// of a send (ledger.CallRefused: it would revert, the sender cannot pay for
// it): the task's own failure, counted by Drop. A failure to get an answer
// is no estimateError: LedgerCall marks it workers.Unavailable and it fails
// no task.
type estimateError struct {
	task store.Task
	err  error
}

func (e *estimateError) Error() string {
	return fmt.Sprintf("estimating the gas of task %s: %v", e.task.ID, e.err)
}

func (e *estimateError) Unwrap() error { return e.err }

// Collect takes the wallet's next nonce and freed nonces for a send of
// tasks.
func (q *WalletSender) Collect(ctx context.Context, s *wallet.Shard, tasks []store.Task) (workers.Cycle, error) {
	c := &sendCycle{Shard: s, WalletSender: q, tasks: tasks}
	next, err := wallet.DBCall(ctx, s, func(ctx context.Context) (int64, error) {
		return q.store.WalletNonceGet(ctx, s.ChainID(), s.Sender)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		// The wallet's first send starts from the chain's nonce.
		c.first = true
		return c, nil
	case err != nil:
		return nil, err
	}
	c.next = next
	c.freed, err = wallet.DBCall(ctx, s, func(ctx context.Context) ([]int64, error) {
		return q.store.WalletNonceListFreed(ctx, store.WalletNonceListFreedParams{
			ChainID: s.ChainID(), Sender: s.Sender, From: int64(s.Run.ChainNonce), Max: len(tasks),
		})
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// prepared is a task with its gas limit, before it has a nonce.
type prepared struct {
	task store.Task
	gas  uint64
}

// Execute builds and signs; it writes nothing and broadcasts nothing.
func (c *sendCycle) Execute(ctx context.Context) error {
	// The fee suggestion is read while the gas is estimated: under a slow
	// provider each is a round trip, or a Retry-After, of its own.
	var (
		fees    ledger.Fees
		feesErr error
		read    sync.WaitGroup
	)
	read.Go(func() { fees, feesErr = wallet.LedgerCall(ctx, c.Shard, c.ledger.SuggestFees) })
	ready, err := c.prepare(ctx)
	read.Wait()
	if feesErr != nil {
		return fmt.Errorf("reading the fee suggestion for %s: %w", c.Claim.Key, feesErr)
	}
	if err != nil {
		return err
	}
	fees = wallet.AtLeastTip(fees, c.cfg.MinTip)

	chainNonce := int64(c.Run.ChainNonce)
	c.firstNonce = max(c.next, chainNonce)
	if c.first {
		c.firstNonce = chainNonce
	}
	chainID := big.NewInt(c.ChainID())
	for i, p := range ready {
		reuse := i < len(c.freed)
		nonce := c.firstNonce + int64(i-len(c.freed))
		if reuse {
			nonce = c.freed[i]
		}
		signed, err := c.sign(ctx, p, uint64(nonce), taskFees(p.task.Request, fees), chainID)
		if err != nil {
			return err
		}
		if reuse {
			c.reused = append(c.reused, signed)
		} else {
			c.added = append(c.added, signed)
		}
	}
	return nil
}

// taskFees are the fees of a task's first transaction: those its request
// names, else the node's suggestion. A tip without a fee cap gets the
// suggestion's room for the base fee (2 × base fee) on top of it; a fee cap
// below the tip is raised to it.
func taskFees(r store.TaskRequest, suggested ledger.Fees) ledger.Fees {
	if r.TipCap == nil && r.FeeCap == nil {
		return suggested
	}
	f := ledger.Fees{TipCap: suggested.TipCap, FeeCap: r.FeeCap}
	if r.TipCap != nil {
		f.TipCap = r.TipCap
	}
	if f.FeeCap == nil {
		room := new(big.Int).Sub(suggested.FeeCap, suggested.TipCap)
		f.FeeCap = room.Add(room, f.TipCap)
	}
	if f.FeeCap.Cmp(f.TipCap) < 0 {
		f.TipCap = f.FeeCap
	}
	return f
}

// callKey identifies what a task's transaction calls: recipient, value and
// data (the sender is the wallet's).
func callKey(r store.TaskRequest) string {
	v := "0"
	if r.Value != nil {
		v = r.Value.String()
	}
	return strings.ToLower(r.To) + "/" + v + "/" + string(r.Data)
}

// estimateRounds is how many gas estimates a send asks at once: each is a
// round trip to the node (and, under a provider's failures, its waits), and
// they are independent reads of the same state.
const estimateRounds = 8

// prepare is the send's tasks, in queue order, each with its gas limit: its
// own, or the node's estimate. Tasks that send the same call (recipient,
// value, data) share one estimate: every estimate of a send is made against
// the same chain state (the node's latest), not against the state after the
// send's earlier transactions, so asking again for the same call tells
// nothing new and costs a round trip per task. The distinct calls are
// estimated estimateRounds at a time, while the cycle's budget lasts; the
// send takes the tasks up to the first whose estimate failed or was not
// asked, and the rest wait, in queue order, for the next send. The first
// task's failure fails the send: its own when it is the node's verdict
// (estimateError), the provider's otherwise (no task's).
func (c *sendCycle) prepare(ctx context.Context) ([]prepared, error) {
	type estimate struct {
		gas  uint64
		err  error
		done bool
	}
	estimates := map[string]*estimate{}
	var order []string
	for _, t := range c.tasks {
		if t.Request.GasLimit != nil {
			continue
		}
		if call := callKey(t.Request); estimates[call] == nil {
			estimates[call] = &estimate{}
			order = append(order, call)
		}
	}
	first := map[string]store.Task{}
	for _, t := range c.tasks {
		if call := callKey(t.Request); t.Request.GasLimit == nil && first[call].ID == "" {
			first[call] = t
		}
	}
	b := c.Budget()
	for i := 0; i < len(order) && !b.Spent(i); i += estimateRounds {
		var wg sync.WaitGroup
		for _, call := range order[i:min(i+estimateRounds, len(order))] {
			e := estimates[call]
			wg.Go(func() {
				e.gas, e.err = c.gasOf(ctx, first[call])
				e.done = true
			})
		}
		wg.Wait()
		if slices.ContainsFunc(order[i:min(i+estimateRounds, len(order))], func(call string) bool { return estimates[call].err != nil }) {
			break // a failure: the tasks from it on wait for the next send
		}
	}
	var ready []prepared
	for _, t := range c.tasks {
		if t.Request.GasLimit != nil {
			ready = append(ready, prepared{task: t, gas: *t.Request.GasLimit})
			continue
		}
		e := estimates[callKey(t.Request)]
		switch {
		case e.done && e.err == nil:
			ready = append(ready, prepared{task: t, gas: e.gas})
			continue
		case !e.done:
		case len(ready) == 0 && ledger.CallRefused(e.err):
			// The node's verdict on the first task: its own failure.
			return nil, &estimateError{task: t, err: e.err}
		case len(ready) == 0:
			// No answer (a rate limit, a 5xx, a timeout): marked
			// unavailable by LedgerCall, it fails no task.
			return nil, fmt.Errorf("estimating the gas of task %s for %s: %w", t.ID, c.Claim.Key, e.err)
		}
		// Not this task's turn yet (its estimate failed or was not asked):
		// it and the tasks after it wait, in queue order, for the next
		// send.
		break
	}
	return ready, nil
}

// gasOf is the task's gas limit, or the node's estimate.
func (c *sendCycle) gasOf(ctx context.Context, t store.Task) (uint64, error) {
	if t.Request.GasLimit != nil {
		return *t.Request.GasLimit, nil
	}
	to := ledger.Address(common.HexToAddress(t.Request.To))
	msg := ledger.CallMsg{From: c.Wallet.Address(), To: &to, Value: t.Request.Value, Data: t.Request.Data}
	return wallet.LedgerCall(ctx, c.Shard, func(ctx context.Context) (uint64, error) { return c.ledger.EstimateGas(ctx, msg) })
}

// sign builds the task's transaction (EIP-1559, or legacy on a chain priced
// so) and signs it with the wallet's
// signer (the key never leaves it).
func (c *sendCycle) sign(ctx context.Context, p prepared, nonce uint64, fees ledger.Fees, chainID *big.Int) (store.SignedTx, error) {
	to := common.HexToAddress(p.task.Request.To)
	value := p.task.Request.Value
	if value == nil {
		value = new(big.Int)
	}
	tx := c.cfg.NewTx(chainID, nonce, p.gas, &to, value, p.task.Request.Data, fees)
	signed, err := c.Sign(ctx, tx, chainID)
	if _, ok := errors.AsType[*workers.UnavailableError](err); ok {
		return store.SignedTx{}, err // the signer's, not the task's
	}
	if err != nil {
		return store.SignedTx{}, &taskError{task: p.task, err: fmt.Errorf("signing for %s: %w", c.Claim.Key, err)}
	}
	raw, err := signed.MarshalBinary()
	if err != nil {
		return store.SignedTx{}, &taskError{task: p.task, err: fmt.Errorf("encoding its transaction: %w", err)}
	}
	return store.SignedTx{
		TaskID: p.task.ID, Nonce: int64(nonce), TxHash: signed.Hash().Hex(), Raw: raw, GasLimit: p.gas,
		MaxFeePerGas: fees.FeeCap, MaxPriorityFeePerGas: fees.TipCap,
	}, nil
}

// Commit is the write-ahead: the next nonce moves up to the chain's if it
// is below, and the attempts are stored with their tasks' move to
// executing, in one transaction fenced by the claim. Nothing was broadcast yet, so a commit
// that fails leaves nothing behind.
func (c *sendCycle) Commit(ctx context.Context) error {
	now := c.cfg.Clock.Now()
	err := c.Fenced(ctx, func(tx *store.Store) error {
		if !c.first && c.firstNonce > c.next {
			if _, err := tx.WalletNonceRaise(ctx, store.WalletNonceRaiseParams{Now: now, ChainID: c.ChainID(), Sender: c.Sender, AtLeast: c.firstNonce}); err != nil {
				return err
			}
		}
		_, err := tx.AttemptStoreMany(ctx, store.AttemptStoreManyParams{
			Now: now, ChainID: c.ChainID(), Sender: c.Sender, FirstNonce: c.firstNonce, Attempts: c.added, Reused: c.reused,
		})
		return err
	})
	var notWaiting *store.TaskNotWaitingError
	if errors.As(err, &notWaiting) {
		// A task was cancelled meanwhile: nothing was stored, and the next
		// collect reads the queue again.
		c.cfg.Logger.Info("wallet: a task left the queue while it was signed, sending again", "shard", c.Claim.Key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("storing the attempts of %s: %w", c.Claim.Key, err)
	}
	if len(c.added)+len(c.reused) > 0 {
		crashpoint.Hit(wallet.CrashStored)
	}
	c.Run.Releasing = false
	for _, a := range c.reused {
		c.Run.Fresh[a.TxHash] = true
	}
	for _, a := range c.added {
		c.Run.Fresh[a.TxHash] = true
	}
	return nil
}

// Drop stores nothing, so the tasks stay waiting for the next run. When
// the send failed for a reason of the task's own (the node's verdict on its
// gas estimate, its signing, or a value the database refuses) in
// wallet.Config.MaxFailures consecutive runs, that task ends in error, so
// that it does not hold up its wallet forever. After a failed run the next
// send takes the head of the queue alone (Collect), so the task that ends
// in error is the one that fails. A node or database that cannot be reached
// fails no task: a ledger that did not answer (workers.Unavailable) is
// blamed on no task, and such a run is not counted in Claim.Failures.
func (c *sendCycle) Drop(ctx context.Context, cause error) error {
	var unavailable *workers.UnavailableError
	if errors.As(cause, &unavailable) {
		return nil
	}
	task, ok := c.blame(cause)
	if !ok || c.Claim.Failures+1 < c.cfg.MaxFailures {
		return nil
	}
	reason := fmt.Sprintf("its send failed in %d consecutive runs: %v", c.Claim.Failures+1, cause)
	var ee *estimateError
	if errors.As(cause, &ee) {
		reason = fmt.Sprintf("gas estimate failed in %d consecutive runs: %s", c.Claim.Failures+1, ledger.ReasonOf(ee.err))
	}
	err := c.Fenced(ctx, func(tx *store.Store) error {
		_, err := tx.TaskFail(ctx, store.TaskFailParams{Now: c.cfg.Clock.Now(), ID: task.ID, Reason: reason})
		return c.Tolerate(err, "fail")
	})
	if err == nil {
		c.cfg.Logger.Warn("wallet: a task whose send keeps failing ended in error", "shard", c.Claim.Key, "task", task.ID, "reason", reason)
	}
	return err
}

// blame returns the task a send's failure is attributed to: the task whose
// gas estimate the node refused or whose signing failed, or, for a value the database refuses
// (a data exception or a constraint, SQLSTATE class 22 or 23), the task when
// the send was of that one task alone.
func (c *sendCycle) blame(cause error) (store.Task, bool) {
	var ee *estimateError
	var te *taskError
	var pgErr *pgconn.PgError
	switch {
	case errors.As(cause, &ee):
		return ee.task, true
	case errors.As(cause, &te):
		return te.task, true
	case errors.As(cause, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")) && len(c.tasks) == 1:
		return c.tasks[0], true
	}
	return store.Task{}, false
}

// taskError is a send's failure that is the task's own (its transaction
// could not be signed or encoded).
type taskError struct {
	task store.Task
	err  error
}

func (e *taskError) Error() string { return fmt.Sprintf("task %s: %v", e.task.ID, e.err) }

func (e *taskError) Unwrap() error { return e.err }
