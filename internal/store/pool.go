package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/ethereum/go-ethereum/core/txpool/legacypool"
	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/internal/ledger/gethpool"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// PoolTxState is a pool transaction's state.
type PoolTxState string

// Pool transaction states. Pending, queued and included are live: they hold
// their sender's nonce.
const (
	// PoolPending: the nonce is next in line (the chain's nonce, then the
	// sender's included and pending transactions without a gap); a bundle
	// may take it.
	PoolPending PoolTxState = "pending"
	// PoolQueued: a nonce gap before it; it waits until the gap is filled.
	PoolQueued PoolTxState = "queued"
	// PoolIncluded: in a bundle (PoolTx.BundleBlock).
	PoolIncluded PoolTxState = "included"
	// PoolReplaced: a transaction with the same nonce took its place by
	// geth's replacement rule (gethpool.Replaces) (PoolTx.ReplacedBy).
	PoolReplaced PoolTxState = "replaced"
	// PoolDropped: it will not be bundled (PoolTx.DropReason).
	PoolDropped PoolTxState = "dropped"
)

// Live reports whether the state holds the sender's nonce.
func (s PoolTxState) Live() bool { return s == PoolPending || s == PoolQueued || s == PoolIncluded }

// Drop reasons.
const (
	// PoolDropExpired: the TTL passed while it was pending or queued.
	PoolDropExpired = "expired"
	// PoolDropStale: the chain's nonce for the sender passed it, so it can
	// never run.
	PoolDropStale = "stale"
	// PoolDropEvicted: its sender was at the account limit and sent a
	// transaction with a lower nonce, nearer to running: the highest queued
	// nonce makes room for it, as geth truncates an account's queue from the
	// top, so that no sender is stranded behind its own nonce gap.
	PoolDropEvicted = "evicted"
	// PoolDropSkipped: the chain left it out of its bundle's EVM block for
	// a reason other than a nonce gap (PoolTx.ChainReason), so it never
	// ran; its nonce is free again (pool_skipped.go).
	PoolDropSkipped = "skipped"
)

// PoolTx is one row of ledgerq.pool_txs: the transaction as PoolAdd took it,
// and what became of it.
type PoolTx struct {
	NewPoolTx
	State PoolTxState
	// ReplacedBy is the replacement's hash (state replaced).
	ReplacedBy string
	// DropReason says why (state dropped).
	DropReason string
	// ChainReason is the chain's reason for leaving it out of its bundle's
	// block (drop reason skipped).
	ChainReason string
	// BundleBlock is the block number of its bundle (state included).
	BundleBlock *int64
	ReceivedAt  time.Time
	ExpiresAt   time.Time
	UpdatedAt   time.Time
}

func poolTxFromRow(r dbsqlc.LedgerqPoolTx) PoolTx {
	return PoolTx{
		NewPoolTx: NewPoolTx{
			ChainID: r.ChainID, Hash: r.TxHash, Sender: r.Sender, Nonce: uint64(r.Nonce), Type: uint8(r.TxType),
			GasFeeCap: bigFromNumeric(r.GasFeeCap), GasTipCap: bigFromNumeric(r.GasTipCap), Gas: uint64(r.Gas),
			Value: bigFromNumeric(r.ValueWei), Raw: r.Raw, To: deref(r.ToAddress),
		},
		State: PoolTxState(r.State), BundleBlock: r.BundleBlock,
		ReceivedAt: r.ReceivedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		ReplacedBy: deref(r.ReplacedBy), DropReason: deref(r.DropReason), ChainReason: deref(r.ChainReason),
	}
}

// PoolLimits are the pool's limits, all configurable. They are geth's
// (core/txpool/legacypool's Config), with geth's defaults, so that a burst
// geth's pool holds is held here too:
//
//   - per account: AccountSlots executable (pending) transactions, admitted
//     even when the pool is full, which a sender may pass while the pool's
//     pending transactions are below MaxPending, and AccountQueue
//     non-executable (queued) ones; at the
//     queue's limit a lower nonce evicts the sender's highest queued nonce
//     (as geth truncates an account's queue from the top), a higher one is
//     refused;
//   - per chain: MaxPending pending and MaxQueued queued transactions,
//     across processes;
//   - MaxPerSender, off by default, caps one sender's pending and queued
//     transactions together (the builder-queue document's single limit of
//     16).
//
// A pending transaction is never dropped to make room: geth truncates the
// pending transactions of accounts over their slots when the pool is full,
// ledgerq refuses the intake instead (txpool is full), so that an answer
// "accepted" for a transaction that can run is never taken back.
type PoolLimits struct {
	// MaxPending and MaxQueued bound the pool's pending and queued
	// transactions on the chain (default geth's global slots, 5120, and
	// global queue, 1024), across processes.
	MaxPending int `flag:"max-pending" help:"builder lane: most pending (executable) transactions in the pool, geth's global slots (a full pool answers 429 / txpool is full)"`
	MaxQueued  int `flag:"max-queued" help:"builder lane: most queued (nonce-gapped) transactions in the pool, geth's global queue"`
	// AccountSlots is geth's account slots (default 16): a sender's pending
	// transactions within them are admitted whatever the pool holds; past
	// them, while the pool's pending transactions are below MaxPending.
	// geth trims the senders past their slots when its pool is full;
	// ledgerq refuses their intake instead, so MaxPending bounds the
	// pending transactions past the slots, and one sender's burst never
	// shuts the others out. 0: none, MaxPending bounds every sender's
	// pending transactions.
	AccountSlots int `flag:"account-slots" help:"builder lane: pending (executable) transactions of one sender admitted even when the pool holds --builder-pool-max-pending, geth's account slots; past them a sender is admitted while the pool has room"`
	// AccountQueue bounds one sender's queued transactions (default 64): at
	// the limit a lower nonce evicts the sender's highest queued one, a
	// higher one is refused.
	AccountQueue int `flag:"account-queue" help:"builder lane: most queued (nonce-gapped) transactions of one sender, geth's account queue; at the limit a lower nonce evicts the sender's highest queued one (dropped, reason evicted), a higher one is refused"`
	// MaxPerSender, when above 0, bounds one sender's pending and queued
	// transactions together (default 0: no such cap); included ones do not
	// count. At the cap a lower nonce evicts the sender's highest queued
	// one, as at AccountQueue.
	MaxPerSender int `flag:"max-per-sender" help:"builder lane: most pending and queued transactions of one sender together (0: no cap beyond --builder-pool-account-queue and the pool's limits; the builder-queue document's cap is 16)"`
	// TTL: a transaction still pending or queued this long after it was
	// received is dropped as expired by PoolExpire (default 1 h).
	TTL time.Duration `flag:"ttl" help:"builder lane: a transaction still pending or queued after this is dropped (reason expired)"`
}

// DefaultPoolLimits returns the default limits: geth's.
func DefaultPoolLimits() PoolLimits {
	return PoolLimits{MaxPending: 4096 + 1024, MaxQueued: 1024, AccountSlots: 16, AccountQueue: 64, TTL: time.Hour}
}

// Validate reports a limit that cannot work.
func (l PoolLimits) Validate() error {
	switch {
	case l.MaxPending < 1, l.MaxQueued < 0, l.AccountSlots < 0, l.AccountQueue < 0, l.MaxPerSender < 0:
		return fmt.Errorf("pool limits: max pending (%d) must be at least 1, account slots (%d), max queued (%d), account queue (%d) and max per sender (%d) at least 0",
			l.MaxPending, l.AccountSlots, l.MaxQueued, l.AccountQueue, l.MaxPerSender)
	case l.TTL <= 0:
		return fmt.Errorf("pool limits: TTL must be positive, got %s", l.TTL)
	}
	return nil
}

// The pool's refusals are go-ethereum's own error values (errors.Is with
// txpool.ErrAlreadyKnown, txpool.ErrReplaceUnderpriced,
// legacypool.ErrTxPoolOverflow, core.ErrNonceTooLow,
// core.ErrInsufficientFunds, txpool.ErrAccountLimitExceeded), with geth's
// messages word for word, so that clients which match on them (ethers,
// viem, ledgerq's own wallet lane) understand ledgerq as they understand
// geth:
//
//   - txpool.ErrAlreadyKnown: the same bytes are pending, queued or
//     included;
//   - txpool.ErrReplaceUnderpriced: the nonce is taken and the new
//     transaction does not outbid it by geth's replacement rule;
//   - legacypool.ErrTxPoolOverflow ("txpool is full"): the pool holds its
//     limit of pending or queued transactions (HTTP 429).

// PoolNonceTooLowError: the nonce is below the sender's next one (the
// chain's, or past transactions already in bundles). It is
// core.ErrNonceTooLow.
type PoolNonceTooLowError struct {
	Next, Nonce uint64
}

func (e *PoolNonceTooLowError) Error() string {
	return fmt.Sprintf("%v: next nonce %d, tx nonce %d", core.ErrNonceTooLow, e.Next, e.Nonce)
}

// Unwrap returns geth's error.
func (e *PoolNonceTooLowError) Unwrap() error { return core.ErrNonceTooLow }

// PoolInsufficientFundsError: the sender's balance does not cover what its
// transactions not yet executed may spend with this one (gas × fee cap +
// value each), as geth's pool checks it; it is core.ErrInsufficientFunds,
// with geth's message.
type PoolInsufficientFundsError struct {
	Balance, Cost *big.Int
	// Queued is what the sender's other transactions not yet executed may
	// spend; nil when the transaction alone is over the balance.
	Queued *big.Int
	// Bumped is set for a replacement: Cost is then the bump over the
	// replaced transaction's cost.
	Bumped bool
}

func (e *PoolInsufficientFundsError) Error() string {
	need := new(big.Int).Set(e.Cost)
	if e.Queued != nil {
		need.Add(need, e.Queued)
	}
	over := need.Sub(need, e.Balance)
	switch {
	case e.Queued == nil:
		return fmt.Sprintf("%v: balance %v, tx cost %v, overshot %v", core.ErrInsufficientFunds, e.Balance, e.Cost, over)
	case e.Bumped:
		return fmt.Sprintf("%v: balance %v, queued cost %v, tx bumped %v, overshot %v", core.ErrInsufficientFunds, e.Balance, e.Queued, e.Cost, over)
	}
	return fmt.Sprintf("%v: balance %v, queued cost %v, tx cost %v, overshot %v", core.ErrInsufficientFunds, e.Balance, e.Queued, e.Cost, over)
}

// Unwrap returns geth's error.
func (e *PoolInsufficientFundsError) Unwrap() error { return core.ErrInsufficientFunds }

// PoolAccountLimitError: the sender already has its limit of pending and
// queued transactions (HTTP 429). It is txpool.ErrAccountLimitExceeded.
type PoolAccountLimitError struct {
	Pooled int
}

func (e *PoolAccountLimitError) Error() string {
	return fmt.Sprintf("%v: pooled %d txs", txpool.ErrAccountLimitExceeded, e.Pooled)
}

// Unwrap returns geth's error.
func (e *PoolAccountLimitError) Unwrap() error { return txpool.ErrAccountLimitExceeded }

// NewPoolTx is a decoded, validated transaction for PoolAdd. The caller
// decodes it (go-ethereum's types), recovers the sender and checks the
// pool's size, price, gas and value rules and the chain id.
type NewPoolTx struct {
	ChainID int64
	Hash    string
	Sender  string
	Nonce   uint64
	// Type is the EIP-2718 type: 0 legacy, 1 access list, 2 dynamic fee.
	Type uint8
	// To is "" for a contract creation.
	To string
	// GasFeeCap is the max fee per gas (a legacy transaction's gas price);
	// GasTipCap the max priority fee per gas (its gas price too).
	GasFeeCap *big.Int
	GasTipCap *big.Int
	Gas       uint64
	Value     *big.Int
	Raw       []byte
}

// PoolAddParams is one intake.
type PoolAddParams struct {
	Now time.Time
	Tx  NewPoolTx
	// ChainNonce is the sender's nonce in the chain's latest executed
	// state, read before the call (no network call runs inside the
	// database transaction). A value lower than one seen before is ignored.
	ChainNonce uint64
	// Balance is the sender's balance in the chain's latest executed state,
	// read before the call; nil skips the funds check.
	Balance *big.Int
	Limits  PoolLimits
}

// PoolAddResult is what an intake did.
type PoolAddResult struct {
	Tx PoolTx
	// Replaced is the hash of the transaction it replaced, if any.
	Replaced string
	// Evicted is the hash of the sender's queued transaction it made room
	// for itself by dropping (at the account limit), if any.
	Evicted string
	// Promoted counts the sender's queued transactions that became pending
	// with it (their gap closed).
	Promoted int
}

// poolAddAttempts bounds how often PoolAdd reruns an intake whose
// conditional writes found a row moved by a writer that does not take the
// sender's lock (a bundle taking a pending transaction).
const poolAddAttempts = 5

// errPoolMoved says a conditional write of an intake found its row in
// another state than the intake read: the intake runs again.
var errPoolMoved = errors.New("pool transaction changed state during intake")

// PoolAdd admits a transaction to the pool by the pool's rules, in one
// database transaction under the sender's row lock (pool_senders), so
// concurrent intakes of one sender from any number of processes apply them
// one after the other (concurrent intakes of other senders in this process
// may share that transaction: pool_group.go):
//
//   - the same bytes pending, queued or included: txpool.ErrAlreadyKnown,
//     nothing stored;
//   - a nonce below the next one: *PoolNonceTooLowError;
//   - the nonce of a pending or queued transaction: it replaces it only by
//     geth's rule, fee cap and tip each above the old and at least
//     old × 110 / 100 in integer division (gethpool.Replaces; the old
//     becomes replaced), else txpool.ErrReplaceUnderpriced;
//   - the sender's next nonce: pending, and its queued successors without a
//     gap become pending with it; a higher nonce: queued;
//   - more than AccountQueue queued transactions of the sender (or, when
//     MaxPerSender is set, more than MaxPerSender pending and queued): the
//     sender's highest queued transaction is dropped (evicted) if its nonce
//     is above the new one's, so the transaction that fills a gap always
//     finds room; else *PoolAccountLimitError. A pending transaction is
//     never dropped for room;
//   - more than MaxPending or MaxQueued on the chain:
//     legacypool.ErrTxPoolOverflow, exact
//     across processes without a row every intake waits for (see
//     poolCheckLimits: an admission slot and a bound, an exact count only
//     near the limits).
//
// The same bytes after they were replaced or dropped go through the same
// rules and, when admitted, bring their row back. Pending and queued
// transactions whose nonce the chain has passed are dropped (stale).
func (s *Store) PoolAdd(ctx context.Context, p PoolAddParams) (PoolAddResult, error) {
	if err := p.Limits.Validate(); err != nil {
		return PoolAddResult{}, err
	}
	if err := p.Tx.check(); err != nil {
		return PoolAddResult{}, fmt.Errorf("storing pool transaction %s: %w", p.Tx.Hash, err)
	}
	if p.ChainNonce > math.MaxInt64 {
		return PoolAddResult{}, fmt.Errorf("storing pool transaction %s: chain nonce %d out of range", p.Tx.Hash, p.ChainNonce)
	}
	p.Tx = p.Tx.lowered()
	var res PoolAddResult
	var err error
	if s.poolGroups == nil {
		res, err = s.poolAddAlone(ctx, p)
	} else {
		res, err = s.poolGroups.add(ctx, s, p)
	}
	if answerLost(err) {
		// The commit may have gone through with its answer lost (the
		// request's deadline passed during it, the connection was cut).
		// The hash names the bytes: stored, the pool holds them and the
		// chain will include them, so the intake is answered as stored;
		// a client told otherwise would think a transaction it sent once
		// was not taken.
		if stored, ok := s.poolStoredAfterAll(ctx, p.Tx.ChainID, p.Tx.Hash); ok {
			return PoolAddResult{Tx: stored}, nil
		}
	}
	return res, err
}

// poolStoredAfterAll reads back the chain's transaction hash after an
// intake whose outcome is unknown, for up to storedAfterAllWait even when
// ctx has ended (its deadline may be what cut the commit short). ok is
// false when it is not stored or could not be read.
func (s *Store) poolStoredAfterAll(ctx context.Context, chainID int64, hash string) (PoolTx, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storedAfterAllWait)
	defer cancel()
	row, ok := readAfterAll(ctx, func(ctx context.Context) (dbsqlc.LedgerqPoolTx, error) {
		return one(s.q.PoolTxGet(ctx, dbsqlc.PoolTxGetParams{ChainID: chainID, TxHash: hash}))
	})
	return poolTxFromRow(row), ok
}

// poolAddAlone is one intake in a transaction of its own: again with an
// exact count when the bound cannot admit it, again when a row it read
// moved.
func (s *Store) poolAddAlone(ctx context.Context, p PoolAddParams) (PoolAddResult, error) {
	exact := false
	for attempt := 1; ; attempt++ {
		res, err := s.poolAddOnce(ctx, p, exact)
		if errors.Is(err, errPoolCount) && !exact {
			exact = true // not an attempt: the same intake, counted
			attempt--
			continue
		}
		if !errors.Is(err, errPoolMoved) || attempt == poolAddAttempts {
			return res, err
		}
	}
}

// lowered is t with its hash and addresses in lower case, as stored.
func (t NewPoolTx) lowered() NewPoolTx {
	t.Hash, t.Sender, t.To = lowerHex(t.Hash), lowerHex(t.Sender), lowerHex(t.To)
	return t
}

var hexHash = regexp.MustCompile(`^0x[0-9a-fA-F]{64}$`)

func (t NewPoolTx) check() error {
	switch {
	case t.ChainID <= 0:
		return fmt.Errorf("chain id %d is not positive", t.ChainID)
	case !hexHash.MatchString(t.Hash):
		return fmt.Errorf("hash %q is not 32 bytes of hex", t.Hash)
	case !hexAddress.MatchString(t.Sender), t.To != "" && !hexAddress.MatchString(t.To):
		return fmt.Errorf("sender %q or recipient %q is not a hex address", t.Sender, t.To)
	case t.Nonce >= math.MaxInt64:
		return fmt.Errorf("nonce %d out of range", t.Nonce)
	case t.Gas == 0 || t.Gas > math.MaxInt64:
		return fmt.Errorf("gas %d out of range", t.Gas)
	case t.Type > 2:
		return fmt.Errorf("transaction type %d is not pooled", t.Type)
	case t.GasFeeCap == nil || t.GasTipCap == nil || t.Value == nil:
		return errors.New("fee cap, tip and value are required")
	case t.GasFeeCap.Sign() < 0 || t.GasTipCap.Sign() < 0 || t.Value.Sign() < 0,
		t.GasFeeCap.BitLen() > 256 || t.GasTipCap.BitLen() > 256 || t.Value.BitLen() > 256:
		return fmt.Errorf("fee cap %s, tip %s or value %s is not a uint256", t.GasFeeCap, t.GasTipCap, t.Value)
	case t.GasTipCap.Cmp(t.GasFeeCap) > 0:
		return fmt.Errorf("tip %s above fee cap %s", t.GasTipCap, t.GasFeeCap)
	case len(t.Raw) == 0:
		return errors.New("no raw bytes")
	}
	return nil
}

// poolAddOnce is one intake in one database transaction. Its reads go to
// the server in one round trip (the sender's lock first, so they see what
// the sender's previous intake committed), and, when the plan only adds the
// transaction (no replacement, eviction, stale drop or nonce move: the
// common case), its writes, admission and wake-up in another.
func (s *Store) poolAddOnce(ctx context.Context, p PoolAddParams, exact bool) (PoolAddResult, error) {
	tx := p.Tx
	var res PoolAddResult
	err := retryTx(ctx, func() error {
		return s.inTx(ctx, func(dbtx pgx.Tx) error {
			res = PoolAddResult{}
			var r intakeReads
			b := &pgx.Batch{}
			r.queue(b, p)
			if err := dbtx.SendBatch(ctx, b).Close(); err != nil {
				return fmt.Errorf("locking pool sender %s and reading its transactions: %w", tx.Sender, err)
			}
			revive := r.found
			plan, err := r.plan(p)
			if err != nil {
				return err
			}
			q := s.q.WithTx(dbtx)
			if plan.addsOnly() && !revive {
				err = poolAddPipelined(ctx, dbtx, q, p, tx, plan, exact)
			} else {
				err = poolAddStepwise(ctx, q, p, tx, plan, revive, exact)
			}
			if err != nil {
				return err
			}
			res = poolAddResult(p, plan)
			return nil
		})
	})
	if err != nil {
		return PoolAddResult{}, err
	}
	return res, nil
}

// intakeReads is what an intake's first round trip reads under its
// sender's lock: the chain's nonce base, the row of its hash (found says
// there is one) and the sender's live transactions.
type intakeReads struct {
	base  int64
	known dbsqlc.LedgerqPoolTx
	found bool
	rows  []dbsqlc.PoolSenderLiveRow
}

// queue queues the sender's lock and the reads of p's intake on b.
func (r *intakeReads) queue(b *pgx.Batch, p PoolAddParams) {
	tx := p.Tx
	queueOne(b, (*dbsqlc.Queries).PoolSenderLock, dbsqlc.PoolSenderLockParams{
		ChainID: tx.ChainID, Sender: tx.Sender, ChainNonce: int64(p.ChainNonce), Now: p.Now,
	}, &r.base, nil)
	queueOne(b, (*dbsqlc.Queries).PoolTxGet, dbsqlc.PoolTxGetParams{ChainID: tx.ChainID, TxHash: tx.Hash}, &r.known, &r.found)
	// From the caller's chain nonce: the lock may return a higher one,
	// and included transactions below it are left out here.
	queueMany(b, (*dbsqlc.Queries).PoolSenderLive, dbsqlc.PoolSenderLiveParams{ChainID: tx.ChainID, Sender: tx.Sender, ChainNonce: int64(p.ChainNonce)}, &r.rows)
}

// plan is p's intake decided on what was read.
func (r *intakeReads) plan(p PoolAddParams) (poolPlan, error) {
	if r.found && PoolTxState(r.known.State).Live() {
		return poolPlan{}, txpool.ErrAlreadyKnown
	}
	slots := make([]poolSlot, 0, len(r.rows))
	for _, row := range r.rows {
		if PoolTxState(row.State) == PoolIncluded && row.Nonce < r.base {
			continue // executed
		}
		slots = append(slots, poolSlot{hash: row.TxHash, nonce: uint64(row.Nonce), state: PoolTxState(row.State),
			feeCap: bigFromNumeric(row.GasFeeCap), tip: bigFromNumeric(row.GasTipCap),
			cost: txCost(uint64(row.Gas), bigFromNumeric(row.GasFeeCap), bigFromNumeric(row.ValueWei))})
	}
	tx := p.Tx
	in := poolSlot{hash: tx.Hash, nonce: tx.Nonce, feeCap: tx.GasFeeCap, tip: tx.GasTipCap, cost: txCost(tx.Gas, tx.GasFeeCap, tx.Value)}
	return planPoolAdd(slots, uint64(r.base), in, p.Balance, p.Limits)
}

// movePoolTxs moves a sender's queued transactions promote to pending and
// its pending transactions demote to queued, each conditional on the state
// it was read in: errPoolMoved when a row had left it.
func movePoolTxs(ctx context.Context, q *dbsqlc.Queries, chainID int64, sender string, now time.Time, promote, demote []string) error {
	for _, move := range []struct {
		hashes   []string
		from, to PoolTxState
	}{{promote, PoolQueued, PoolPending}, {demote, PoolPending, PoolQueued}} {
		if len(move.hashes) == 0 {
			continue
		}
		n, err := q.PoolTxSetState(ctx, dbsqlc.PoolTxSetStateParams{
			ToState: dbsqlc.LedgerqPoolTxState(move.to), Now: now, ChainID: chainID, TxHashes: move.hashes,
			FromState: dbsqlc.LedgerqPoolTxState(move.from),
		})
		if err != nil {
			return fmt.Errorf("moving pool transactions of %s from %s to %s: %w", sender, move.from, move.to, err)
		}
		if n != int64(len(move.hashes)) {
			return errPoolMoved
		}
	}
	return nil
}

// poolAddResult is what an intake that wrote plan answers.
func poolAddResult(p PoolAddParams, plan poolPlan) PoolAddResult {
	stored := p.Tx
	stored.GasFeeCap, stored.GasTipCap, stored.Value = new(big.Int).Set(p.Tx.GasFeeCap), new(big.Int).Set(p.Tx.GasTipCap), new(big.Int).Set(p.Tx.Value)
	return PoolAddResult{Replaced: plan.replace.hash, Evicted: plan.evict.hash, Promoted: len(plan.promote), Tx: PoolTx{
		NewPoolTx: stored, State: plan.state,
		ReceivedAt: p.Now.UTC(), ExpiresAt: p.Now.Add(p.Limits.TTL).UTC(), UpdatedAt: p.Now.UTC(),
	}}
}

// poolAddStepwise writes any plan, one statement at a time, then admits
// and wakes the bundle queuers.
func poolAddStepwise(ctx context.Context, q *dbsqlc.Queries, p PoolAddParams, tx NewPoolTx, plan poolPlan, revive, exact bool) error {
	if err := applyPoolPlan(ctx, q, p, tx, plan, revive); err != nil {
		return err
	}
	if plan.grows.pending || plan.grows.queued {
		// Last: the admission slot (or every slot and the chain's row) is
		// held from here to the commit.
		if err := poolCheckLimits(ctx, q, tx.ChainID, p, plan, exact); err != nil {
			return err
		}
	}
	// A transaction the queuer may cut now: the bundle queuers hear of it
	// at the commit.
	return wakeAll(ctx, q, wakeIf{plan.state == PoolPending || len(plan.promote) > 0, notify.BundleQueuer})
}

// poolAddPipelined writes a plan that only adds the transaction: the row,
// the sender's next nonce, the admission slot and the bound (when the
// growth allows admission on it), and the wake-up, in one round trip.
func poolAddPipelined(ctx context.Context, dbtx pgx.Tx, q *dbsqlc.Queries, p PoolAddParams, tx NewPoolTx, plan poolPlan, exact bool) error {
	b := &pgx.Batch{}
	var inserted int64
	queueIntakeAdd(b, p, plan, &inserted)
	grows := plan.grows.pending || plan.grows.queued
	onBound := grows && !exact && plan.growth.pending <= 1 && plan.growth.queued <= 1
	var (
		took, counted bool
		bound         dbsqlc.PoolAdmissionBoundRow
	)
	if onBound {
		queueOne(b, (*dbsqlc.Queries).PoolSlotTake, dbsqlc.PoolSlotTakeParams{
			ChainID: tx.ChainID, Pending: int64(plan.growth.pending), Queued: int64(plan.growth.queued),
			Start: rand.N(int32(poolAdmissionSlots)),
		}, new(int16), &took)
		queueOne(b, (*dbsqlc.Queries).PoolAdmissionBound, tx.ChainID, &bound, &counted)
	}
	if plan.state == PoolPending {
		queueExec(b, (*dbsqlc.Queries).Notify, dbsqlc.NotifyParams{Channel: notify.BundleQueuer})
	}
	if err := dbtx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("storing pool transaction %s: %w", tx.Hash, err)
	}
	if inserted != 1 {
		return errPoolMoved
	}
	switch {
	case !grows:
		return nil
	case onBound && took:
		// The bound was read in a statement after the slot's: under it.
		if !counted {
			return errPoolCount
		}
		return admitOnBound(bound, plan.limits(p.Limits), plan.growth, 1)
	}
	// Every slot held, or the exact count: as the stepwise intake does.
	return poolCheckLimits(ctx, q, tx.ChainID, p, plan, exact)
}

// queueIntakeAdd queues the writes of an intake whose plan only adds its
// transaction: the row (the rows inserted are set into inserted) and the
// sender's next nonce.
func queueIntakeAdd(b *pgx.Batch, p PoolAddParams, plan poolPlan, inserted *int64) {
	queueExecRows(b, (*dbsqlc.Queries).PoolTxInsert, poolTxInsertParams(p, p.Tx, plan), inserted)
	queueExecRows(b, (*dbsqlc.Queries).PoolSenderSetNext, dbsqlc.PoolSenderSetNextParams{
		NextNonce: int64(plan.next), Now: p.Now, ChainID: p.Tx.ChainID, Sender: p.Tx.Sender,
	}, nil)
}

// poolTxInsertParams are the new row of an intake's transaction.
func poolTxInsertParams(p PoolAddParams, tx NewPoolTx, plan poolPlan) dbsqlc.PoolTxInsertParams {
	ins := dbsqlc.PoolTxInsertParams{
		ChainID: tx.ChainID, TxHash: tx.Hash, Sender: tx.Sender, Nonce: int64(tx.Nonce), TxType: int16(tx.Type),
		GasFeeCap: numericFromBig(tx.GasFeeCap), GasTipCap: numericFromBig(tx.GasTipCap), Gas: int64(tx.Gas),
		ValueWei: numericFromBig(tx.Value), Raw: tx.Raw, State: dbsqlc.LedgerqPoolTxState(plan.state),
		Now: p.Now, ExpiresAt: p.Now.Add(p.Limits.TTL),
	}
	if tx.To != "" {
		ins.ToAddress = &tx.To
	}
	return ins
}

// applyPoolPlan writes an intake's plan, each write conditional on the state
// the plan was made from.
func applyPoolPlan(ctx context.Context, q *dbsqlc.Queries, p PoolAddParams, tx NewPoolTx, plan poolPlan, revive bool) error {
	if len(plan.stale) > 0 {
		n, err := q.PoolTxDrop(ctx, dbsqlc.PoolTxDropParams{
			DropReason: PoolDropStale, Now: p.Now, ChainID: tx.ChainID, TxHashes: plan.stale,
		})
		if err != nil {
			return fmt.Errorf("dropping stale pool transactions of %s: %w", tx.Sender, err)
		}
		if n != int64(len(plan.stale)) {
			return errPoolMoved
		}
	}
	if plan.evict.hash != "" {
		n, err := q.PoolTxDrop(ctx, dbsqlc.PoolTxDropParams{
			DropReason: PoolDropEvicted, Now: p.Now, ChainID: tx.ChainID, TxHashes: []string{plan.evict.hash},
		})
		if err != nil {
			return fmt.Errorf("evicting pool transaction %s of %s: %w", plan.evict.hash, tx.Sender, err)
		}
		if n != 1 {
			return errPoolMoved
		}
	}
	if plan.replace.hash != "" {
		n, err := q.PoolTxReplace(ctx, dbsqlc.PoolTxReplaceParams{
			ReplacedBy: &tx.Hash, Now: p.Now, ChainID: tx.ChainID, TxHash: plan.replace.hash,
			Expected: dbsqlc.LedgerqPoolTxState(plan.replace.state),
		})
		if err != nil {
			return fmt.Errorf("replacing pool transaction %s: %w", plan.replace.hash, err)
		}
		if n != 1 {
			return errPoolMoved
		}
	}
	expires := p.Now.Add(p.Limits.TTL)
	state := dbsqlc.LedgerqPoolTxState(plan.state)
	var n int64
	var err error
	if revive {
		n, err = q.PoolTxRevive(ctx, dbsqlc.PoolTxReviveParams{
			State: state, Now: p.Now, ExpiresAt: expires, ChainID: tx.ChainID, TxHash: tx.Hash,
		})
	} else {
		n, err = q.PoolTxInsert(ctx, poolTxInsertParams(p, tx, plan))
	}
	if err != nil {
		return fmt.Errorf("storing pool transaction %s: %w", tx.Hash, err)
	}
	if n != 1 {
		return errPoolMoved
	}
	if err := movePoolTxs(ctx, q, tx.ChainID, tx.Sender, p.Now, plan.promote, plan.demote); err != nil {
		return err
	}
	if _, err := q.PoolSenderSetNext(ctx, dbsqlc.PoolSenderSetNextParams{
		NextNonce: int64(plan.next), Now: p.Now, ChainID: tx.ChainID, Sender: tx.Sender,
	}); err != nil {
		return fmt.Errorf("recording the next nonce of %s: %w", tx.Sender, err)
	}
	return nil
}

// poolAdmissionSlots is the number of admission slots per chain (the
// table's CHECK holds it): at most this many intakes that grow the pool are
// in flight at once without one of them holding every slot.
const poolAdmissionSlots = 16

// errPoolCount says an intake could not prove on the bound that the pool
// has room: it runs again and counts exactly.
var errPoolCount = errors.New("pool admission needs an exact count")

// poolCheckLimits is the intake's last step when it grows the pool. The
// global limits hold across processes without one row every intake waits
// for:
//
//   - An intake that grows the pending and the queued transactions by at
//     most one each takes one of the chain's 16 admission slots (SKIP
//     LOCKED; it waits for one only when all are held), records its growth
//     in it, and, in a statement of its own, reads the bound: the chain's
//     base plus every slot's growth. Held to the commit, the slot means
//     that any other intake this one cannot see (not committed when its
//     snapshot was taken) holds another slot: at most 15, each adding at
//     most one. So bound + 15 within the limit admits, exactly: no
//     interleaving takes the pool past it. (A group of intakes holds a slot
//     for each transaction it adds, k of them: bound + 16 - k.)
//   - Otherwise (a larger growth, a bound too near the limit, no base yet)
//     it returns errPoolCount and PoolAdd runs it again with exact: it
//     takes every slot in order and then the chain's row, so no other
//     intake that grows the pool is in flight and no cut, drop or sweep
//     moves the base, counts the pool (its own writes included), refuses
//     a full pool, and makes the count the new base with the growth reset.
//
// The bound never falls below the pool: intakes record what they add in
// their slot and cuts, drops and sweeps move the base by what they change,
// in the transaction that changes it (PoolChainAdjust). Cuts lower it, so
// an exact count is only needed near the limits.
func poolCheckLimits(ctx context.Context, q *dbsqlc.Queries, chainID int64, p PoolAddParams, plan poolPlan, exact bool) error {
	grow, limits := plan.growth, plan.limits(p.Limits)
	if !exact && grow.pending <= 1 && grow.queued <= 1 {
		return poolAdmitOnBound(ctx, q, chainID, limits, grow)
	}
	if !exact {
		return errPoolCount
	}
	slots, err := q.PoolSlotLockAll(ctx, chainID)
	if err != nil {
		return fmt.Errorf("locking the admission slots of chain %d: %w", chainID, err)
	}
	if len(slots) < poolAdmissionSlots {
		if err := q.PoolChainEnsure(ctx, dbsqlc.PoolChainEnsureParams{ChainID: chainID, Now: p.Now}); err != nil {
			return fmt.Errorf("creating the pool admission of chain %d: %w", chainID, err)
		}
		if _, err := q.PoolSlotLockAll(ctx, chainID); err != nil {
			return fmt.Errorf("locking the admission slots of chain %d: %w", chainID, err)
		}
	}
	if _, err := one(q.PoolChainLock(ctx, chainID)); err != nil {
		return fmt.Errorf("locking the pool of chain %d: %w", chainID, err)
	}
	counts, err := one(q.PoolCountWaiting(ctx, chainID))
	if err != nil {
		return fmt.Errorf("counting the pool of chain %d: %w", chainID, err)
	}
	if (grow.pending > 0 && counts.Pending > int64(limits.MaxPending)) ||
		(grow.queued > 0 && counts.Queued > int64(limits.MaxQueued)) {
		return legacypool.ErrTxPoolOverflow
	}
	if err := q.PoolChainRebase(ctx, dbsqlc.PoolChainRebaseParams{ChainID: chainID, Pending: counts.Pending, Queued: counts.Queued}); err != nil {
		return fmt.Errorf("recording the count of the pool of chain %d: %w", chainID, err)
	}
	return nil
}

// poolAdjust moves the base of the chain's pool bound by what a cut, a
// drop or a sweep changed in its transaction; it is that transaction's last
// write to the pool (the chain's row lock is last in every lock order).
func poolAdjust(ctx context.Context, q *dbsqlc.Queries, chainID, pending, queued int64) error {
	if pending == 0 && queued == 0 {
		return nil
	}
	if err := q.PoolChainAdjust(ctx, dbsqlc.PoolChainAdjustParams{ChainID: chainID, Pending: pending, Queued: queued}); err != nil {
		return fmt.Errorf("moving the pool bound of chain %d: %w", chainID, err)
	}
	return nil
}

// poolAdmitOnBound is poolCheckLimits' path without a count: one slot and
// the bound.
func poolAdmitOnBound(ctx context.Context, q *dbsqlc.Queries, chainID int64, limits PoolLimits, grow poolGrowth) error {
	start := rand.N(int32(poolAdmissionSlots))
	_, err := one(q.PoolSlotTake(ctx, dbsqlc.PoolSlotTakeParams{
		ChainID: chainID, Pending: int64(grow.pending), Queued: int64(grow.queued), Start: start,
	}))
	if errors.Is(err, ErrNotFound) {
		// Every slot is held: wait for one.
		_, err = one(q.PoolSlotWait(ctx, dbsqlc.PoolSlotWaitParams{
			ChainID: chainID, Pending: int64(grow.pending), Queued: int64(grow.queued), Slot: int16(start),
		}))
		if errors.Is(err, ErrNotFound) {
			return errPoolCount // no slots yet: the exact path makes them
		}
	}
	if err != nil {
		return fmt.Errorf("taking an admission slot of chain %d: %w", chainID, err)
	}
	b, err := one(q.PoolAdmissionBound(ctx, chainID))
	if errors.Is(err, ErrNotFound) {
		return errPoolCount
	}
	if err != nil {
		return fmt.Errorf("reading the pool bound of chain %d: %w", chainID, err)
	}
	return admitOnBound(b, limits, grow, 1)
}

// admitOnBound admits on the bound read under the held admission slots (its
// own growth included) when it and what the other slots' holders may add,
// at most one pending and one queued each, fit the limits; else the intake
// must count (errPoolCount).
func admitOnBound(b dbsqlc.PoolAdmissionBoundRow, limits PoolLimits, grow poolGrowth, held int) error {
	if b.PendingBase == nil || b.QueuedBase == nil {
		return errPoolCount
	}
	inFlight := int64(poolAdmissionSlots - held)
	if (grow.pending > 0 && *b.PendingBase+b.PendingGrowth+inFlight > int64(limits.MaxPending)) ||
		(grow.queued > 0 && *b.QueuedBase+b.QueuedGrowth+inFlight > int64(limits.MaxQueued)) {
		return errPoolCount
	}
	return nil
}

// poolSlot is one of a sender's live transactions as intake plans with it.
type poolSlot struct {
	hash        string
	nonce       uint64
	state       PoolTxState
	feeCap, tip *big.Int
	// cost is the most it may spend: gas × fee cap + value.
	cost *big.Int
}

// txCost is gas × feeCap + value.
func txCost(gas uint64, feeCap, value *big.Int) *big.Int {
	c := new(big.Int).Mul(new(big.Int).SetUint64(gas), feeCap)
	return c.Add(c, value)
}

// poolPlan is what an intake writes.
type poolPlan struct {
	// state is the new transaction's: pending or queued.
	state PoolTxState
	// replace is the transaction it replaces (hash "" for none).
	replace poolSlot
	// stale are waiting transactions below the chain's nonce, to drop.
	stale []string
	// evict is the queued transaction dropped to make room at the account
	// limit (hash "" for none).
	evict poolSlot
	// promote are queued transactions that become pending; demote pending
	// ones behind a gap that wait again.
	promote, demote []string
	// next is the nonce after the sender's pending run.
	next uint64
	// grows says whether the sender's pending or queued count grows, which
	// the global limits must then allow; growth by how much (negative: it
	// shrinks).
	grows  struct{ pending, queued bool }
	growth poolGrowth
	// pending is the sender's pending transactions with the new one.
	pending int
}

// limits are the chain's limits this intake is held to: a sender that stays
// within its account slots is not held to MaxPending, as geth's global
// limit trims only the accounts past their slots, so that one sender's
// burst never shuts the others out of the pool. The pool's pending
// transactions are then bounded by MaxPending plus AccountSlots per sender.
func (p poolPlan) limits(l PoolLimits) PoolLimits {
	if l.AccountSlots > 0 && p.pending <= l.AccountSlots {
		l.MaxPending = math.MaxInt32
	}
	return l
}

// addsOnly reports whether the plan only adds the new transaction: nothing
// replaced, evicted or dropped, no other transaction's state moved.
func (p poolPlan) addsOnly() bool {
	return p.replace.hash == "" && p.evict.hash == "" && len(p.stale) == 0 && len(p.promote) == 0 && len(p.demote) == 0
}

// poolGrowth is how much an intake changes the pool's pending and queued
// transactions.
type poolGrowth struct{ pending, queued int }

// planPoolAdd applies the pool's rules to a sender's live transactions
// (slots: pending and queued ones, and included ones from base up), the
// chain's nonce base, and the new transaction in. It is the whole decision
// of an intake; the caller writes it.
func planPoolAdd(slots []poolSlot, base uint64, in poolSlot, balance *big.Int, limits PoolLimits) (poolPlan, error) {
	var plan poolPlan
	byNonce := make(map[uint64]poolSlot, len(slots)+1)
	var before struct{ pending, queued int }
	for _, sl := range slots {
		switch sl.state {
		case PoolPending:
			before.pending++
		case PoolQueued:
			before.queued++
		}
		if sl.nonce < base && sl.state != PoolIncluded {
			plan.stale = append(plan.stale, sl.hash)
			continue
		}
		byNonce[sl.nonce] = sl
	}
	included := func(n uint64) bool { sl, ok := byNonce[n]; return ok && sl.state == PoolIncluded }
	// The next nonce a client may use: the chain's, past the transactions
	// already in bundles.
	next := base
	for included(next) {
		next++
	}
	if in.nonce < next {
		return poolPlan{}, &PoolNonceTooLowError{Next: next, Nonce: in.nonce}
	}
	if included(in.nonce) {
		// Only if a bundle's transactions went back to pending below it.
		n := in.nonce + 1
		for included(n) {
			n++
		}
		return poolPlan{}, &PoolNonceTooLowError{Next: n, Nonce: in.nonce}
	}
	if err := checkFunds(byNonce, in, balance); err != nil {
		return poolPlan{}, err
	}
	waiting := before.pending + before.queued - len(plan.stale)
	if old, ok := byNonce[in.nonce]; ok {
		if !outbids(in, old) {
			return poolPlan{}, txpool.ErrReplaceUnderpriced
		}
		plan.replace = old
	} else if limits.MaxPerSender > 0 && waiting >= limits.MaxPerSender {
		top, ok := highestQueued(byNonce)
		if !ok || top.nonce < in.nonce {
			return poolPlan{}, &PoolAccountLimitError{Pooled: waiting}
		}
		plan.evict = top
		delete(byNonce, top.nonce)
	}
	in.state = ""
	byNonce[in.nonce] = in

	// The pending run: from the chain's nonce, every nonce held without a
	// gap. Queued transactions in it are promoted; pending ones past it
	// wait again.
	run := base
	for {
		sl, ok := byNonce[run]
		if !ok {
			break
		}
		if sl.state == PoolQueued {
			plan.promote = append(plan.promote, sl.hash)
		}
		run++
	}
	plan.next = run
	plan.state = PoolQueued
	if in.nonce < run {
		plan.state = PoolPending
	}
	var after struct{ pending, queued int }
	for n, sl := range byNonce {
		inRun := n < run
		switch {
		case sl.state == PoolIncluded:
		case inRun:
			after.pending++
		default:
			after.queued++
			if sl.state == PoolPending {
				plan.demote = append(plan.demote, sl.hash)
			}
		}
	}
	if after.queued > before.queued && after.queued > limits.AccountQueue {
		// The sender's queue grows past its limit: its highest queued
		// nonce makes room for a lower one, as geth truncates an
		// account's queue from the top; a nonce above every queued one
		// is refused (geth would take it and drop it at once). Never a
		// pending transaction: the new one is queued here, or it closed
		// a gap and the queue shrank.
		top, ok := highestQueued(byNonce)
		if plan.evict.hash != "" || !ok || top.nonce < in.nonce || after.queued-1 > limits.AccountQueue {
			return poolPlan{}, &PoolAccountLimitError{Pooled: waiting}
		}
		plan.evict = top
		delete(byNonce, top.nonce)
		after.queued--
	}
	slices.Sort(plan.promote)
	slices.Sort(plan.demote)
	plan.grows.pending = after.pending > before.pending
	plan.grows.queued = after.queued > before.queued
	plan.growth = poolGrowth{pending: after.pending - before.pending, queued: after.queued - before.queued}
	plan.pending = after.pending
	return plan, nil
}

// checkFunds is geth's funds check: the balance covers the transaction's
// cost, and the cost of every transaction of the sender not yet executed
// with it (for a replacement, with the bump over the one it replaces). A
// nil balance is not checked.
func checkFunds(byNonce map[uint64]poolSlot, in poolSlot, balance *big.Int) error {
	if balance == nil {
		return nil
	}
	if balance.Cmp(in.cost) < 0 {
		return &PoolInsufficientFundsError{Balance: balance, Cost: in.cost}
	}
	spent := new(big.Int)
	for _, sl := range byNonce {
		spent.Add(spent, sl.cost)
	}
	if old, ok := byNonce[in.nonce]; ok {
		bump := new(big.Int).Sub(in.cost, old.cost)
		if new(big.Int).Add(spent, bump).Cmp(balance) > 0 {
			return &PoolInsufficientFundsError{Balance: balance, Cost: bump, Queued: spent, Bumped: true}
		}
		return nil
	}
	if new(big.Int).Add(spent, in.cost).Cmp(balance) > 0 {
		return &PoolInsufficientFundsError{Balance: balance, Cost: in.cost, Queued: spent}
	}
	return nil
}

// highestQueued returns the queued transaction with the highest nonce.
func highestQueued(byNonce map[uint64]poolSlot) (poolSlot, bool) {
	var top poolSlot
	found := false
	for n, sl := range byNonce {
		if sl.state == PoolQueued && (!found || n > top.nonce) {
			top, found = sl, true
		}
	}
	return top, found
}

// outbids reports whether in may replace old: geth's replacement rule with
// geth's default price bump.
func outbids(in, old poolSlot) bool {
	return gethpool.Replaces(gethpool.Fees{FeeCap: in.feeCap, Tip: in.tip}, gethpool.Fees{FeeCap: old.feeCap, Tip: old.tip}, gethpool.PriceBump)
}

// PoolGet returns the chain's transaction with hash (any state), or
// ErrNotFound.
func (s *Store) PoolGet(ctx context.Context, chainID int64, hash string) (PoolTx, error) {
	row, err := one(s.q.PoolTxGet(ctx, dbsqlc.PoolTxGetParams{ChainID: chainID, TxHash: lowerHex(hash)}))
	if err != nil {
		return PoolTx{}, fmt.Errorf("reading pool transaction %s: %w", hash, err)
	}
	return poolTxFromRow(row), nil
}

// PoolPendingNonce returns the sender's next nonce counting the pool
// (eth_getTransactionCount with "pending"): from chainNonce, the chain's,
// past every nonce an included or pending transaction holds without a gap.
// Queued transactions are not counted, as in geth.
func (s *Store) PoolPendingNonce(ctx context.Context, chainID int64, sender string, chainNonce uint64) (uint64, error) {
	if chainNonce > math.MaxInt64 {
		return chainNonce, nil
	}
	nonces, err := s.q.PoolSenderRun(ctx, dbsqlc.PoolSenderRunParams{
		ChainID: chainID, Sender: lowerHex(sender), FromNonce: int64(chainNonce),
	})
	if err != nil {
		return 0, fmt.Errorf("reading the pending nonces of %s: %w", sender, err)
	}
	next := chainNonce
	for _, n := range nonces {
		if uint64(n) != next {
			break
		}
		next++
	}
	return next, nil
}

// PoolExpireParams bound one TTL sweep round.
type PoolExpireParams struct {
	Now     time.Time
	ChainID int64
	// MaxSenders bounds the senders one round sweeps.
	MaxSenders int
}

// PoolExpire is the pool's TTL sweep, for the monitor to call each round:
// pending and queued transactions whose expires_at has passed become
// dropped with reason expired, for up to MaxSenders senders, each under its
// intake lock (a sender whose intake is running is left for the next round).
// A pending transaction dropped leaves a gap: the sender's pending
// transactions above it become queued again. It returns how many it dropped;
// the caller runs it again while it sweeps MaxSenders senders.
func (s *Store) PoolExpire(ctx context.Context, p PoolExpireParams) (dropped int64, senders int, err error) {
	if p.MaxSenders < 1 {
		return 0, 0, fmt.Errorf("expiring pool transactions: max senders %d must be at least 1", p.MaxSenders)
	}
	err = s.withTx(ctx, func(q *dbsqlc.Queries) error {
		dropped, senders = 0, 0
		locked, err := q.PoolSenderLockExpired(ctx, dbsqlc.PoolSenderLockExpiredParams{
			ChainID: p.ChainID, Now: p.Now, Max: int32(min(p.MaxSenders, math.MaxInt32)),
		})
		if err != nil {
			return fmt.Errorf("locking senders with expired pool transactions: %w", err)
		}
		if len(locked) == 0 {
			return nil
		}
		rows, err := q.PoolTxExpire(ctx, dbsqlc.PoolTxExpireParams{Now: p.Now, ChainID: p.ChainID, Senders: locked})
		if err != nil {
			return fmt.Errorf("expiring pool transactions: %w", err)
		}
		gaps := map[string]int64{}
		for _, r := range rows {
			if PoolTxState(r.Was) != PoolPending {
				continue
			}
			if g, ok := gaps[r.Sender]; !ok || r.Nonce < g {
				gaps[r.Sender] = r.Nonce
			}
		}
		var pending, queued int64
		for _, r := range rows {
			if PoolTxState(r.Was) == PoolPending {
				pending--
			} else {
				queued--
			}
		}
		for _, sender := range slices.Sorted(maps.Keys(gaps)) {
			gap := gaps[sender]
			demoted, err := q.PoolTxDemoteAbove(ctx, dbsqlc.PoolTxDemoteAboveParams{
				Now: p.Now, ChainID: p.ChainID, Sender: sender, Gap: gap,
			})
			pending, queued = pending-demoted, queued+demoted
			if err != nil {
				return fmt.Errorf("re-queueing the pending transactions of %s above nonce %d: %w", sender, gap, err)
			}
			if _, err := q.PoolSenderLowerNext(ctx, dbsqlc.PoolSenderLowerNextParams{
				Gap: gap, Now: p.Now, ChainID: p.ChainID, Sender: sender,
			}); err != nil {
				return fmt.Errorf("recording the next nonce of %s: %w", sender, err)
			}
		}
		if err := poolAdjust(ctx, q, p.ChainID, pending, queued); err != nil {
			return err
		}
		dropped, senders = int64(len(rows)), len(locked)
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return dropped, senders, nil
}

// PoolTxDeleteFinished deletes up to max pool transactions replaced or
// dropped before before, oldest first (the builder lane's retention), and
// returns how many. A pending, queued or included transaction is kept.
func (s *Store) PoolTxDeleteFinished(ctx context.Context, before time.Time, max int) (int64, error) {
	n, err := s.q.PoolTxDeleteFinished(ctx, dbsqlc.PoolTxDeleteFinishedParams{Before: before, Max: int32(max)})
	if err != nil {
		return 0, fmt.Errorf("deleting finished pool transactions: %w", err)
	}
	return n, nil
}
