package queuer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/calldata"
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
// signed that ledgerq's process held; after it, the recover step broadcasts
// the stored bytes.
//
// A signer outside the process (an HSM, a KMS, a remote signer:
// wallet.Shard.RemoteSigner) keeps what it was asked — the signature, or the
// request in its audit log — through a crash between the signing and the
// commit, and the next send could give that nonce to other content (another
// task first in queue order). So for such a wallet the write-ahead reaches
// across the signer: before the signer is asked, the send records each
// request (nonce, task, the content hash of chain, sender, nonce, to, value
// and data, and the gas limit) in one fenced transaction
// (store.SignRequestRecord), and until the attempt at that nonce is stored
// (AttemptStoreMany deletes the request in the same transaction) the nonce
// is pinned: it is only ever asked again with the same content. The next
// send reads the pins (Collect): a pinned task joins the send whatever its
// place in the queue and takes its own nonce, with the gas limit it was
// requested with (fees are not content: they follow the node); other tasks
// take the nonces no pin holds. A new nonce pinned to a task that is not
// waiting, or to a no-op, stops the send there: a task after it would be
// mined only once the nonce is filled, and only its own content may fill it,
// so nothing is signed past it. A pinned task is never cancelled
// (store.TaskBeingSignedError) nor ended in error by a failing send (Drop):
// while a signature may exist, its task waits. A request the chain's nonce
// passed is dead and deleted. A wallet whose key is in the process records
// nothing and makes no statement for it. Unlike
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
	// remote: the wallet's signer is outside the process; pins are its
	// recorded sign requests from the chain's nonce on, by nonce (the
	// write-ahead across signers), and pinnedGas the gas limit of each
	// pinned task.
	remote    bool
	pins      map[int64]store.PinnedRequest
	pinnedGas map[string]uint64
	// requested are the tasks whose requests this send recorded.
	requested map[string]bool
	// refused is the task whose call reverts with nothing of the wallet
	// ahead of it (prepare): Commit ends it in error, and nothing is signed.
	refused *refusal

	// Execute's results.
	firstNonce int64
	reused     []store.SignedTx
	added      []store.SignedTx
}

// estimateError is the node's verdict on the gas estimate, or on the
// preflight, of the first task of a send (ledger.CallRefused: it would
// revert, the sender cannot pay for it) that does not end the task at once
// (a revert of a task that opted out of its preflight; another verdict):
// the task's own failure, counted by Drop. A failure to get an answer is no
// estimateError: LedgerCall marks it workers.Unavailable and it fails no
// task.
type estimateError struct {
	task store.Task
	err  error
	// estimate: the gas estimate's verdict, else the preflight's.
	estimate bool
}

func (e *estimateError) Error() string {
	if !e.estimate {
		return fmt.Sprintf("the preflight of task %s: %v", e.task.ID, e.err)
	}
	return fmt.Sprintf("estimating the gas of task %s: %v", e.task.ID, e.err)
}

func (e *estimateError) Unwrap() error { return e.err }

// Collect takes the wallet's next nonce and freed nonces for a send of
// tasks, and, for a signer outside the process, the pinned nonces and their
// tasks.
func (q *WalletSender) Collect(ctx context.Context, s *wallet.Shard, tasks []store.Task) (workers.Cycle, error) {
	c := &sendCycle{Shard: s, WalletSender: q, tasks: tasks, remote: s.RemoteSigner()}
	next, err := wallet.DBCall(ctx, s, func(ctx context.Context) (int64, error) {
		return q.store.WalletNonceGet(ctx, s.ChainID(), s.Sender)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		// The wallet's first send starts from the chain's nonce.
		c.first = true
	case err != nil:
		return nil, err
	default:
		c.next = next
		c.freed, err = wallet.DBCall(ctx, s, func(ctx context.Context) ([]int64, error) {
			return q.store.WalletNonceListFreed(ctx, store.WalletNonceListFreedParams{
				ChainID: s.ChainID(), Sender: s.Sender, From: int64(s.Run.ChainNonce), Max: len(tasks),
			})
		})
		if err != nil {
			return nil, err
		}
	}
	if c.remote {
		if err := c.collectPins(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// collectPins reads the wallet's pinned nonces and puts their waiting tasks
// first in the send (they were in an earlier one, which a crash cut
// between the signing and the commit), keeping the send to its size.
func (c *sendCycle) collectPins(ctx context.Context) error {
	pins, err := wallet.DBCall(ctx, c.Shard, func(ctx context.Context) ([]store.PinnedRequest, error) {
		return c.store.SignRequestListPinned(ctx, c.ChainID(), c.Sender, int64(c.Run.ChainNonce))
	})
	if err != nil || len(pins) == 0 {
		return err
	}
	c.pins = make(map[int64]store.PinnedRequest, len(pins))
	c.pinnedGas = map[string]uint64{}
	byID := make(map[string]store.Task, len(c.tasks))
	for _, t := range c.tasks {
		byID[t.ID] = t
	}
	var pinned []store.Task
	for _, p := range pins {
		c.pins[p.Nonce] = p
		if p.TaskID == "" {
			continue
		}
		t, ok := byID[p.TaskID]
		if !ok {
			t, err = wallet.DBCall(ctx, c.Shard, func(ctx context.Context) (store.Task, error) {
				return c.store.TaskGet(ctx, c.Wallet.ID, p.TaskID)
			})
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if t.ID == "" || t.Status != store.TaskWaiting {
			c.cfg.Logger.Warn("wallet: a nonce is pinned to a task that is not waiting; nothing is signed at or past it", "shard", c.Claim.Key,
				"nonce", p.Nonce, "task", p.TaskID)
			continue
		}
		c.pinnedGas[t.ID] = p.GasLimit
		pinned = append(pinned, t)
	}
	rest := slices.DeleteFunc(slices.Clone(c.tasks), func(t store.Task) bool { _, ok := c.pinnedGas[t.ID]; return ok })
	c.tasks = append(pinned, rest[:min(len(rest), max(len(c.tasks)-len(pinned), 0))]...)
	return nil
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
	if c.refused != nil {
		return nil // nothing is signed: Commit ends the refused task
	}
	if len(ready) == 0 {
		return nil // the head of the queue waits (Run.PreflightWaits)
	}
	fees = wallet.AtLeastTip(fees, c.cfg.MinTip)

	chainNonce := int64(c.Run.ChainNonce)
	c.firstNonce = max(c.next, chainNonce)
	if c.first {
		c.firstNonce = chainNonce
	}
	assigned := c.assign(ready)
	if c.remote {
		// The write-ahead across signers: the requests are recorded before
		// the signer outside the process is asked.
		recorded, err := c.record(ctx, assigned)
		if err != nil || !recorded {
			return err
		}
	}
	chainID := big.NewInt(c.ChainID())
	// The signatures are asked SignParallel at a time: every nonce is
	// assigned (and recorded, for a signer outside the process) already,
	// so the order they come back in changes nothing. The first failure,
	// in nonce order, is the send's; nothing is stored after a failure.
	signed := make([]store.SignedTx, len(assigned))
	errs := make([]error, len(assigned))
	sem := make(chan struct{}, c.cfg.SignParallel)
	var wg sync.WaitGroup
	for i, a := range assigned {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			signed[i], errs[i] = c.sign(ctx, a.prepared, uint64(a.nonce), taskFees(a.task.Request, fees), chainID)
		})
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return err
	}
	for i, a := range assigned {
		if a.reuse {
			c.reused = append(c.reused, signed[i])
		} else {
			c.added = append(c.added, signed[i])
		}
	}
	if c.remote && len(assigned) > 0 {
		crashpoint.Hit(wallet.CrashSigned)
	}
	return nil
}

// assigned is a prepared task with its nonce: a freed one (reuse) or a new
// one.
type assigned struct {
	prepared
	nonce int64
	reuse bool
}

// assign gives the ready tasks their nonces: freed ones first, lowest
// first, then consecutive new ones from firstNonce. A pinned nonce (the
// write-ahead across signers) goes to its own task only: when that task is
// not in the send, a freed pinned nonce is left (a gap below the next nonce
// is allowed; a no-op or its task fills it later) and a new one stops the
// send there, since a nonce after it could not be mined before it. A pinned
// task takes its own nonce and no other.
func (c *sendCycle) assign(ready []prepared) []assigned {
	var out []assigned
	pinned := map[string]prepared{}
	var free []prepared
	for _, p := range ready {
		if _, ok := c.pinnedGas[p.task.ID]; ok {
			pinned[p.task.ID] = p
		} else {
			free = append(free, p)
		}
	}
	take := func(n int64, reuse bool) bool {
		if pin, ok := c.pins[n]; ok {
			p, ok := pinned[pin.TaskID]
			if ok {
				out = append(out, assigned{prepared: p, nonce: n, reuse: reuse})
				delete(pinned, pin.TaskID)
			}
			return ok
		}
		if len(free) == 0 {
			return false
		}
		out = append(out, assigned{prepared: free[0], nonce: n, reuse: reuse})
		free = free[1:]
		return true
	}
	for _, n := range c.freed {
		take(n, true)
	}
	// A pinned freed nonce past the freed nonces read (they are read up
	// to the send's size).
	for n, pin := range c.pins {
		if _, ok := pinned[pin.TaskID]; ok && n < c.firstNonce {
			take(n, true)
		}
	}
	slices.SortFunc(out, func(a, b assigned) int { return cmp.Compare(a.nonce, b.nonce) })
	n := c.firstNonce
	for take(n, false) {
		n++
	}
	return out
}

// record stores the send's requests (store.SignRequestRecord) in one
// transaction fenced by the claim, before the signer is asked. It reports
// false, and the send signs nothing, when a task left the queue meanwhile
// (the next collect reads it again); a nonce found pinned to other content
// fails the send (*store.SignRequestPinnedError), and the next send honours
// the pin.
func (c *sendCycle) record(ctx context.Context, assigned []assigned) (bool, error) {
	reqs := make([]store.SignRequest, len(assigned))
	for i, a := range assigned {
		r := a.task.Request
		reqs[i] = store.SignRequest{TaskID: a.task.ID, Nonce: a.nonce, To: r.To, Value: r.Value, Data: r.Data, GasLimit: a.gas}
	}
	err := c.Fenced(ctx, func(tx *store.Store) error {
		return tx.SignRequestRecord(ctx, store.SignRequestRecordParams{
			Now: c.cfg.Clock.Now(), ChainID: c.ChainID(), Sender: c.Sender, Below: int64(c.Run.ChainNonce), Requests: reqs,
		})
	})
	if _, ok := errors.AsType[*store.TaskNotWaitingError](err); ok {
		c.cfg.Logger.Info("wallet: a task left the queue before it was signed, sending again", "shard", c.Claim.Key)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("recording the sign requests of %s: %w", c.Claim.Key, err)
	}
	c.requested = make(map[string]bool, len(assigned))
	for _, a := range assigned {
		c.requested[a.task.ID] = true
	}
	return true, nil
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

// estimateRounds is how many distinct calls a send checks at once (its
// preflight and its gas estimate): each is a round trip to the node (and,
// under a provider's failures, its waits), and they are independent reads
// of the same state.
const estimateRounds = 8

// check is what the node answered about one distinct call of a send: its
// preflight (eth_call at the pending state) and its gas estimate, each
// asked when a task of the send needs it.
type check struct {
	needCall, needGas bool
	callErr           error
	gas               uint64
	gasErr            error
	done              bool
}

// preflights reports whether the send runs t's call before t takes a
// nonce: unless the task opted out, and never for a pinned task (a signer
// outside the process may hold its signature: its content is fixed, and it
// is never ended by what a call answers).
func (c *sendCycle) preflights(t store.Task) bool {
	if t.Request.SkipPreflight {
		return false
	}
	_, pinned := c.pinnedGas[t.ID]
	return !pinned
}

// prepare is the send's tasks, in queue order, each with its gas limit: its
// own, or the node's estimate. Before a task takes a nonce its call is run
// at the pending state (the preflight), unless it opted out. Tasks that
// send the same call (recipient, value, data) share one check: every check
// of a send is made against the same chain state (the node's), not against
// the state after the send's earlier transactions, so asking again for the
// same call tells nothing new and costs a round trip per task. The distinct
// calls are checked estimateRounds at a time, while the cycle's budget
// lasts; the send takes the tasks up to the first whose check failed or was
// not asked, and the rest wait, in queue order, for the next send.
//
// A revert (of the preflight, or of the estimate of a task that preflights)
// is final only when nothing of the wallet is ahead of the task unmined: no
// earlier task of this send and no transaction of the wallet in flight
// (Shard.InFlight). The pending state does not hold this send's
// transactions (not broadcast yet) and, on some nodes, those in flight, so
// a call that depends on them (approve, then transferFrom) reverts there
// and not on chain: such a task waits for a later send, and is checked
// again. A final revert ends the task in error at once (c.refused, recorded
// by Commit) and spends no nonce. Any other failure of the first task
// fails the send: its own when it is the node's verdict (estimateError),
// the provider's otherwise (no task's).
func (c *sendCycle) prepare(ctx context.Context) ([]prepared, error) {
	checks := map[string]*check{}
	var order []string
	first := map[string]store.Task{}
	for _, t := range c.tasks {
		_, hasGas := c.gasLimit(t)
		if hasGas && !c.preflights(t) {
			continue
		}
		call := callKey(t.Request)
		k := checks[call]
		if k == nil {
			k = &check{}
			checks[call] = k
			order = append(order, call)
			first[call] = t
		}
		k.needCall = k.needCall || c.preflights(t)
		k.needGas = k.needGas || !hasGas
	}
	b := c.Budget()
	for i := 0; i < len(order) && !b.Spent(i); i += estimateRounds {
		var wg sync.WaitGroup
		for _, call := range order[i:min(i+estimateRounds, len(order))] {
			k := checks[call]
			wg.Go(func() {
				var inner sync.WaitGroup
				if k.needCall {
					inner.Go(func() { k.callErr = c.preflight(ctx, first[call]) })
				}
				if k.needGas {
					k.gas, k.gasErr = c.estimate(ctx, first[call])
				}
				inner.Wait()
				k.done = true
			})
		}
		wg.Wait()
		if slices.ContainsFunc(order[i:min(i+estimateRounds, len(order))], func(call string) bool {
			return checks[call].callErr != nil || checks[call].gasErr != nil
		}) {
			break // a failure: the tasks from it on wait for the next send
		}
	}
	var ready []prepared
	for _, t := range c.tasks {
		gas, hasGas := c.gasLimit(t)
		if hasGas && !c.preflights(t) {
			ready = append(ready, prepared{task: t, gas: gas})
			continue
		}
		k := checks[callKey(t.Request)]
		if !k.done {
			break // not asked: it and the tasks after it wait
		}
		var err error
		var estimated bool
		switch {
		case c.preflights(t) && k.callErr != nil:
			err = k.callErr
		case !hasGas && k.gasErr != nil:
			err, estimated = k.gasErr, true
		}
		if err == nil {
			if !hasGas {
				gas = k.gas
			}
			ready = append(ready, prepared{task: t, gas: gas})
			continue
		}
		ahead := len(ready) > 0 || c.InFlight > 0
		switch {
		case c.preflights(t) && ledger.Reverted(err) && ahead:
			// The pending state may lack what is ahead of it: it and
			// the tasks after it wait, and are checked again.
			if len(ready) == 0 {
				c.Run.PreflightWaits = true
				c.cfg.Logger.Info("wallet: a task's call reverts with transactions of the wallet ahead of it unmined; it waits for them",
					"shard", c.Claim.Key, "task", t.ID, "in_flight", c.InFlight, "error", err)
			}
		case len(ready) > 0:
			// Not this task's turn yet: it and the tasks after it wait,
			// in queue order, for the next send.
		case c.preflights(t) && ledger.Reverted(err):
			c.refused = &refusal{task: t, err: err}
			return nil, nil
		case ledger.CallRefused(err):
			// The node's verdict on the first task: its own failure.
			return nil, &estimateError{task: t, err: err, estimate: estimated}
		default:
			// No answer (a rate limit, a 5xx, a timeout): marked
			// unavailable by LedgerCall, it fails no task.
			return nil, fmt.Errorf("checking the call of task %s for %s: %w", t.ID, c.Claim.Key, err)
		}
		break
	}
	return ready, nil
}

// refusal is a task whose call reverts with nothing of its wallet ahead of
// it: the send ends it in error (Commit) and signs nothing.
type refusal struct {
	task store.Task
	err  error
}

// revert is the refusal's revert, decoded with the task's ABI.
func (r *refusal) revert() calldata.Revert {
	var abiJSON json.RawMessage
	if r.task.Request.Call != nil {
		abiJSON = r.task.Request.Call.ABI
	}
	if re, ok := ledger.RevertDataOf(r.err); ok {
		return calldata.DecodeRevert(re.Data, re.Truncated, abiJSON)
	}
	return calldata.DecodeRevert(nil, false, nil)
}

// preflight runs the task's call at the pending state.
func (c *sendCycle) preflight(ctx context.Context, t store.Task) error {
	_, err := wallet.LedgerCall(ctx, c.Shard, func(ctx context.Context) ([]byte, error) {
		return c.ledger.Call(ctx, c.callMsg(t), nil)
	})
	return err
}

// callMsg is the task's transaction as a call from the wallet.
func (c *sendCycle) callMsg(t store.Task) ledger.CallMsg {
	to := ledger.Address(common.HexToAddress(t.Request.To))
	return ledger.CallMsg{From: c.Wallet.Address(), To: &to, Value: t.Request.Value, Data: t.Request.Data}
}

// gasLimit is the task's gas limit when it needs no estimate: the one its
// request names, or the one its pinned request was made with.
func (c *sendCycle) gasLimit(t store.Task) (uint64, bool) {
	if gas, ok := c.pinnedGas[t.ID]; ok {
		return gas, true
	}
	if t.Request.GasLimit != nil {
		return *t.Request.GasLimit, true
	}
	return 0, false
}

// estimate is the node's gas estimate of the task's transaction.
func (c *sendCycle) estimate(ctx context.Context, t store.Task) (uint64, error) {
	msg := c.callMsg(t)
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
	if c.refused != nil {
		return c.commitRefused(ctx, now)
	}
	if c.Run.PreflightWaits && len(c.added)+len(c.reused) == 0 {
		return nil // nothing was signed
	}
	err := c.Fenced(ctx, func(tx *store.Store) error {
		if !c.first && c.firstNonce > c.next {
			if _, err := tx.WalletNonceRaise(ctx, store.WalletNonceRaiseParams{Now: now, ChainID: c.ChainID(), Sender: c.Sender, AtLeast: c.firstNonce}); err != nil {
				return err
			}
		}
		_, err := tx.AttemptStoreMany(ctx, store.AttemptStoreManyParams{
			Now: now, ChainID: c.ChainID(), Sender: c.Sender, FirstNonce: c.firstNonce, Attempts: c.added, Reused: c.reused,
			SignRequests: c.remote,
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

// commitRefused ends the refused task in error with its decoded revert, in
// a transaction fenced by the claim; nothing was signed.
func (c *sendCycle) commitRefused(ctx context.Context, now time.Time) error {
	rev := c.refused.revert()
	revJSON, err := json.Marshal(rev)
	if err != nil {
		return fmt.Errorf("writing the revert of task %s: %w", c.refused.task.ID, err)
	}
	reason := "preflight: " + rev.Reason()
	err = c.Fenced(ctx, func(tx *store.Store) error {
		_, err := tx.TaskFail(ctx, store.TaskFailParams{Now: now, ID: c.refused.task.ID, Reason: reason, Revert: revJSON})
		return c.Tolerate(err, "fail")
	})
	if err != nil {
		return fmt.Errorf("ending task %s refused by its preflight: %w", c.refused.task.ID, err)
	}
	c.cfg.Logger.Info("wallet: a task's call reverts at the pending state; it ended in error, no nonce spent", "shard", c.Claim.Key,
		"task", c.refused.task.ID, "reason", reason)
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
	if _, pinned := c.pinnedGas[task.ID]; pinned || c.requested[task.ID] {
		// A signer outside the process was asked for its transaction: its
		// nonce is pinned to it, so it waits rather than ending in error.
		c.cfg.Logger.Warn("wallet: a task whose send keeps failing is not ended: its transaction is being signed", "shard", c.Claim.Key,
			"task", task.ID, "error", cause)
		return nil
	}
	reason := fmt.Sprintf("its send failed in %d consecutive runs: %v", c.Claim.Failures+1, cause)
	var ee *estimateError
	if errors.As(cause, &ee) {
		what := "gas estimate"
		if !ee.estimate {
			what = "preflight"
		}
		reason = fmt.Sprintf("%s failed in %d consecutive runs: %s", what, c.Claim.Failures+1, ledger.ReasonOf(ee.err))
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

// firstError is the first error of errs that is not nil; one from a signer
// that cannot be reached (workers.UnavailableError) comes first, as it is
// the signer's state and not a task's failure.
func firstError(errs []error) error {
	for _, err := range errs {
		if _, ok := errors.AsType[*workers.UnavailableError](err); ok {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
