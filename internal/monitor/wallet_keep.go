package monitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/gethpool"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// WalletKeeper is the step of a wallet's run (wallet.Job) that keeps
// the wallet moving when the chain does not cooperate: gas bumps, no-ops,
// nonce resets and balance health. Each is collected at most once per run,
// after confirm and before send, in this order:
//
//  0. unknown nonces (wallet_restore.go): the chain used nonces no attempt
//     holds (a database restored behind the chain): the wallet's
//     transactions at them are found in the chain's blocks and recorded,
//     each carrying the waiting task it matches, before anything else; a
//     wallet whose transactions cannot be read is held and signs nothing.
//  1. reconcile: the next nonce is moved to max(chain's nonce, highest live
//     nonce + 1) when it is below the chain's (a reset) or above that (freed
//     nonces at the top are discarded; far above with nothing in flight is
//     a reset). Resets are recorded on the wallet's health row and logged.
//  2. requests (wallet_request.go): a cancel a client asked of an executing
//     task signs a no-op at its nonce, a speed-up signs its transaction
//     again with the fees asked for; each is stored as a new attempt
//     superseding the live one before it is broadcast, as a gas bump is.
//  3. stall: the chain's nonce has not moved for wallet.Config.StallTimeout and
//     one of our sent attempts holds it: a gas bump (a new attempt, stored
//     before it is broadcast); none holds it but later ones are in flight:
//     a no-op fills it.
//  4. balance: read when missing or older than wallet.Config.BalanceMaxAge; below
//     the threshold the run sends nothing.
//  5. no-ops for freed nonces no waiting task fills (or more than
//     wallet.Config.MaxRecycled of them).
type WalletKeeper struct {
	cfg    wallet.Config
	store  *store.Store
	ledger ledger.WalletLedger
}

var _ wallet.KeepStep = (*WalletKeeper)(nil)

// NewWalletKeeper returns the keep-moving step of the wallets on led; cfg
// gets its defaults (wallet.Config.WithDefaults).
func NewWalletKeeper(st *store.Store, led ledger.WalletLedger, cfg wallet.Config) (*WalletKeeper, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if st == nil || led == nil {
		return nil, errors.New("wallet keeper: it needs a store and a ledger")
	}
	return &WalletKeeper{cfg: cfg, store: st, ledger: led}, nil
}

// Collect returns the first of these with work, or nil.
func (k *WalletKeeper) Collect(ctx context.Context, s *wallet.Shard, inFlight, waiting int) (workers.Cycle, error) {
	if !s.Run.UnknownChecked {
		s.Run.UnknownChecked = true
		if cyc, err := k.collectUnknown(ctx, s); cyc != nil || err != nil {
			return cyc, err
		}
	}
	if s.Run.Recovering {
		return nil, nil
	}
	if !s.Run.Reconciled {
		s.Run.Reconciled = true
		if cyc, err := k.collectReconcile(ctx, s, inFlight); cyc != nil || err != nil {
			return cyc, err
		}
	}
	if !s.Run.RequestsChecked {
		s.Run.RequestsChecked = true
		if cyc, err := k.collectRequests(ctx, s, inFlight); cyc != nil || err != nil {
			return cyc, err
		}
	}
	if !s.Run.StallChecked {
		s.Run.StallChecked = true
		if cyc, err := k.collectStall(ctx, s, inFlight); cyc != nil || err != nil {
			return cyc, err
		}
	}
	var freed []int64
	if !s.Run.NoopsChecked {
		var err error
		freed, err = wallet.DBCall(ctx, s, func(ctx context.Context) ([]int64, error) {
			return k.store.WalletNonceListFreed(ctx, store.WalletNonceListFreedParams{
				ChainID: s.ChainID(), Sender: s.Sender, From: int64(s.Run.ChainNonce), Max: max(k.cfg.InFlight, k.cfg.MaxRecycled+1),
			})
		})
		if err != nil {
			return nil, err
		}
	}
	if waiting == 0 && len(freed) == 0 {
		return nil, nil
	}
	if !s.Run.BalanceChecked {
		s.Run.BalanceChecked = true
		h, err := wallet.DBCall(ctx, s, func(ctx context.Context) (store.WalletHealth, error) {
			return k.store.WalletHealthGet(ctx, s.ChainID(), s.Sender)
		})
		switch {
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return nil, err
		case err != nil || h.BalanceAt == nil || k.cfg.Clock.Now().Sub(*h.BalanceAt) >= k.balanceMaxAge(h):
			return &balanceCycle{Shard: s, WalletKeeper: k}, nil
		}
		s.Run.Paused, s.Run.Held = h.Paused, h.HeldAt != nil
	}
	// A held wallet still fills freed nonces: those in flight above them
	// run only once the gap is filled.
	if s.Run.Paused {
		return nil, nil
	}
	if !s.Run.NoopsChecked {
		s.Run.NoopsChecked = true
		budget := k.cfg.InFlight - inFlight
		if len(freed) > 0 && budget > 0 && (waiting == 0 || s.Run.Held || len(freed) > k.cfg.MaxRecycled) {
			return &noopCycle{Shard: s, WalletKeeper: k, nonces: freed[:min(len(freed), budget)], why: "freed nonce no task fills"}, nil
		}
	}
	return nil, nil
}

// pausedBalanceMaxAge is how old the balance of a paused wallet may be: it
// is read again this often (when the wallet has work), so that a wallet that
// was funded, or whose fees fell, goes on within seconds.
const pausedBalanceMaxAge = 10 * time.Second

// balanceMaxAge is how old h's balance may be before a send reads it again.
func (k *WalletKeeper) balanceMaxAge(h store.WalletHealth) time.Duration {
	if h.Paused {
		return min(k.cfg.BalanceMaxAge, pausedBalanceMaxAge)
	}
	return k.cfg.BalanceMaxAge
}

// collectReconcile compares the wallet's next nonce with the chain's and
// the highest live attempt.
func (k *WalletKeeper) collectReconcile(ctx context.Context, s *wallet.Shard, inFlight int) (workers.Cycle, error) {
	next, err := wallet.DBCall(ctx, s, func(ctx context.Context) (int64, error) {
		return k.store.WalletNonceGet(ctx, s.ChainID(), s.Sender)
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // the first send starts from the chain's nonce
	}
	if err != nil {
		return nil, err
	}
	// Confirmed attempts count: a nonce the chain no longer has (it lost
	// the block) is still ours, its same bytes sent again by confirm.
	maxHeld, err := wallet.DBCall(ctx, s, func(ctx context.Context) (int64, error) {
		return k.store.AttemptGetMaxHeldNonce(ctx, s.ChainID(), s.Sender)
	})
	if err != nil {
		return nil, err
	}
	chain := int64(s.Run.ChainNonce)
	target := max(chain, maxHeld+1)
	if next == target || next > chain && next < target {
		return nil, nil
	}
	return &nonceCycle{Shard: s, WalletKeeper: k, from: next, to: target,
		reset: next < chain || inFlight == 0 && next-chain > int64(cmp.Or(k.cfg.ResetGap, k.cfg.InFlight))}, nil
}

// nonceCycle moves the wallet's next nonce: a reset (recorded and logged)
// or a trim of freed nonces above every live attempt (recycled nonces at or
// above the highest submitted one are discarded).
type nonceCycle struct {
	*wallet.Shard
	*WalletKeeper
	from, to int64
	reset    bool
}

// Execute makes no call.
func (c *nonceCycle) Execute(context.Context) error { return nil }

// Commit moves the next nonce if it is still from and no live attempt is at
// or above to.
func (c *nonceCycle) Commit(ctx context.Context) error {
	var moved bool
	err := c.Fenced(ctx, func(tx *store.Store) error {
		var err error
		moved, err = tx.WalletNonceReset(ctx, store.WalletNonceResetParams{
			Now: c.cfg.Clock.Now(), ChainID: c.ChainID(), Sender: c.Sender, From: c.from, To: c.to, Record: c.reset,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("moving the next nonce of %s: %w", c.Claim.Key, err)
	}
	switch {
	case !moved:
	case c.reset:
		c.cfg.Logger.Warn("wallet: nonce reset to the chain's", "shard", c.Claim.Key, "from", c.from, "to", c.to, "chain_nonce", c.Run.ChainNonce)
		c.cfg.Metrics.Transition("wallet", "nonce_reset", 1)
	default:
		c.cfg.Logger.Info("wallet: freed nonces above the highest live attempt discarded", "shard", c.Claim.Key, "from", c.from, "to", c.to)
	}
	return nil
}

// Drop changes nothing; the next run looks again.
func (c *nonceCycle) Drop(context.Context, error) error { return nil }

// collectStall looks for a stalled nonce: the chain's nonce unmoved for
// StallTimeout with attempts in flight.
func (k *WalletKeeper) collectStall(ctx context.Context, s *wallet.Shard, inFlight int) (workers.Cycle, error) {
	if inFlight == 0 {
		return nil, nil
	}
	h, err := wallet.DBCall(ctx, s, func(ctx context.Context) (store.WalletHealth, error) {
		return k.store.WalletHealthGet(ctx, s.ChainID(), s.Sender)
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	chain := int64(s.Run.ChainNonce)
	if h.ChainNonce == nil || *h.ChainNonce != chain {
		return nil, nil
	}
	now := k.cfg.Clock.Now()
	stalledFor := now.Sub(*h.ChainNonceSince)
	if stalledFor < k.cfg.StallTimeout {
		return nil, nil
	}
	live, err := wallet.DBCall(ctx, s, func(ctx context.Context) (store.Attempt, error) {
		return k.store.AttemptGetLiveAt(ctx, s.ChainID(), s.Sender, chain)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		maxLive, err := wallet.DBCall(ctx, s, func(ctx context.Context) (int64, error) {
			return k.store.AttemptGetMaxLiveNonce(ctx, s.ChainID(), s.Sender)
		})
		if err != nil || maxLive <= chain {
			return nil, err
		}
		// A gap: later nonces wait on one nothing holds.
		return &noopCycle{Shard: s, WalletKeeper: k, nonces: []int64{chain}, why: "stalled nonce no attempt holds"}, nil
	case err != nil:
		return nil, err
	case live.State != store.AttemptSent:
		return nil, nil // recover broadcasts it first
	}
	underpriced := strings.HasPrefix(live.LastError, ledger.SendUnderpriced.String())
	if !underpriced && now.Sub(live.CreatedAt) < k.cfg.StallTimeout {
		return nil, nil // the newest attempt has not had its time yet
	}
	return &bumpCycle{Shard: s, WalletKeeper: k, old: live}, nil
}

// bumpCycle signs the stalled nonce's newest attempt again with fee cap and
// tip raised to max(previous × 1.2, the node's suggestion), within
// wallet.Config.PriceCap, and stores it as a new attempt (superseding the old one)
// before the recover cycle that follows broadcasts it.
type bumpCycle struct {
	*wallet.Shard
	*WalletKeeper
	old store.Attempt

	bumped *store.SignedTx
	// capped: the cap leaves no replacement geth's rule takes.
	capped bool
}

// raise is x × 1.2, at least x + 1.
func raise(x *big.Int, percent int) *big.Int {
	r := new(big.Int).Mul(x, big.NewInt(int64(100+percent)))
	r.Quo(r, big.NewInt(100))
	if r.Cmp(x) <= 0 {
		r.Add(x, big.NewInt(1))
	}
	return r
}

func maxBig(a, b *big.Int) *big.Int {
	if a.Cmp(b) >= 0 {
		return new(big.Int).Set(a)
	}
	return new(big.Int).Set(b)
}

// bumpFees are the fees of a bump of an attempt offering old: the tip
// max(old raised by percent (20: × 1.2), the node's suggestion), the fee cap
// the same and at least the tip, both within limit (nil or 0: no limit). ok
// is false when the limit leaves no replacement that geth's rule
// (gethpool.Replaces, with geth's default price bump) takes; a raise of 10
// percent or more alone always is one.
func bumpFees(old, suggested gethpool.Fees, limit *big.Int, percent int) (next gethpool.Fees, ok bool) {
	tip := maxBig(raise(old.Tip, percent), suggested.Tip)
	feeCap := maxBig(maxBig(raise(old.FeeCap, percent), suggested.FeeCap), tip)
	if limit != nil && limit.Sign() > 0 && feeCap.Cmp(limit) > 0 {
		feeCap = new(big.Int).Set(limit)
		if tip.Cmp(feeCap) > 0 {
			tip = new(big.Int).Set(feeCap)
		}
	}
	next = gethpool.Fees{FeeCap: feeCap, Tip: tip}
	return next, gethpool.Replaces(next, old, gethpool.PriceBump)
}

// Execute reads the fee suggestion and signs the bump; it writes nothing.
func (c *bumpCycle) Execute(ctx context.Context) error {
	var old types.Transaction
	if err := old.UnmarshalBinary(c.old.Raw); err != nil {
		return fmt.Errorf("decoding attempt %s to bump it: %w", c.old.TxHash, err)
	}
	limit := c.cfg.PriceCap
	if limit != nil && limit.Sign() > 0 && old.GasFeeCap().Cmp(limit) >= 0 {
		c.capped = true // at the cap already: no call
		return nil
	}
	fees, err := wallet.LedgerCall(ctx, c.Shard, c.ledger.SuggestFees)
	if err != nil {
		return fmt.Errorf("reading the fee suggestion to bump %s: %w", c.Claim.Key, err)
	}
	fees = wallet.AtLeastTip(fees, c.cfg.MinTip)
	suggested := gethpool.Fees{FeeCap: fees.FeeCap, Tip: fees.TipCap}
	if c.cfg.Legacy {
		// A legacy price is both cap and tip.
		price := wallet.LegacyPrice(fees)
		suggested = gethpool.Fees{FeeCap: price, Tip: price}
	}
	next, ok := bumpFees(gethpool.Fees{FeeCap: old.GasFeeCap(), Tip: old.GasTipCap()}, suggested, limit, c.cfg.BumpPercent)
	if !ok {
		c.capped = true
		return nil
	}
	chainID := big.NewInt(c.ChainID())
	tx := c.cfg.NewTx(chainID, old.Nonce(), old.Gas(), old.To(), old.Value(), old.Data(), ledger.Fees{TipCap: next.Tip, FeeCap: next.FeeCap})
	signed, err := c.SignRaw(ctx, tx, chainID)
	if err != nil {
		return err
	}
	signed.TaskID = c.old.TaskID
	if c.old.Kind == store.AttemptCancel {
		// A bump of a cancel's no-op is the cancel's no-op still: mined,
		// it ends the task cancelled.
		signed.Kind = store.AttemptCancel
	}
	c.bumped = &signed
	return nil
}

// Commit stores the bump (the write-ahead), or records that the price cap
// stopped it and tells the operator.
func (c *bumpCycle) Commit(ctx context.Context) error {
	now := c.cfg.Clock.Now()
	if c.capped {
		if c.old.Noop() {
			c.cfg.Logger.Warn("wallet: a stalled no-op is at the price cap", "shard", c.Claim.Key, "nonce", c.old.Nonce)
			return nil
		}
		var news bool
		err := c.Fenced(ctx, func(tx *store.Store) error {
			var err error
			news, err = tx.TaskMarkPriceCapped(ctx, now, c.old.TaskID)
			return err
		})
		if err != nil {
			return fmt.Errorf("recording the price cap of %s: %w", c.Claim.Key, err)
		}
		if news {
			c.cfg.Logger.Warn("wallet: stalled transaction at the price cap, not bumped; the task stays", "shard", c.Claim.Key,
				"task", c.old.TaskID, "nonce", c.old.Nonce, "max_fee_per_gas", c.old.MaxFeePerGas.String(), "price_cap", c.cfg.PriceCap.String())
			if hook := c.cfg.OnPriceCapped; hook != nil {
				hook(wallet.PriceCapped{Shard: c.Claim.Key, Wallet: c.Wallet.ID, TaskID: c.old.TaskID, Nonce: c.old.Nonce, FeeCap: c.old.MaxFeePerGas})
			}
		}
		return nil
	}
	err := c.Fenced(ctx, func(tx *store.Store) error {
		return tx.AttemptBump(ctx, store.AttemptBumpParams{Now: now, ChainID: c.ChainID(), Sender: c.Sender, Old: c.old.TxHash, New: *c.bumped})
	})
	if errors.Is(err, store.ErrNotFound) {
		c.cfg.Logger.Info("wallet: the stalled attempt moved meanwhile, not bumped", "shard", c.Claim.Key, "tx_hash", c.old.TxHash)
		return nil
	}
	if err != nil {
		return fmt.Errorf("storing the gas bump of %s: %w", c.Claim.Key, err)
	}
	c.cfg.Metrics.Transition("wallet", "bumped", 1)
	c.cfg.Logger.Info("wallet: stalled nonce, gas bump stored", "shard", c.Claim.Key, "task", c.old.TaskID, "nonce", c.old.Nonce,
		"old_tx_hash", c.old.TxHash, "tx_hash", c.bumped.TxHash, "max_fee_per_gas", c.bumped.MaxFeePerGas.String(),
		"max_priority_fee_per_gas", c.bumped.MaxPriorityFeePerGas.String())
	return nil
}

// Drop stores nothing: the next run looks again.
func (c *bumpCycle) Drop(context.Context, error) error { return nil }

// noopCycle fills nonces no live attempt holds with 0-value transfers to
// the wallet itself, stored (attempts of no task) before the recover cycle
// that follows broadcasts them.
type noopCycle struct {
	*wallet.Shard
	*WalletKeeper
	nonces []int64
	why    string
	signed []store.SignedTx
}

// Execute reads the fee suggestion and signs; it writes nothing.
func (c *noopCycle) Execute(ctx context.Context) error {
	if err := c.CheckChain(ctx); err != nil {
		return err
	}
	fees, err := wallet.LedgerCall(ctx, c.Shard, c.ledger.SuggestFees)
	if err != nil {
		return fmt.Errorf("reading the fee suggestion for no-ops of %s: %w", c.Claim.Key, err)
	}
	fees = wallet.AtLeastTip(fees, c.cfg.MinTip)
	chainID := big.NewInt(c.ChainID())
	self := common.Address(c.Wallet.Address())
	if c.RemoteSigner() {
		if err := c.record(ctx, self); err != nil {
			return err
		}
	}
	for _, n := range c.nonces {
		tx := c.cfg.NewTx(chainID, uint64(n), params.TxGas, &self, new(big.Int), nil, fees)
		signed, err := c.SignRaw(ctx, tx, chainID)
		if err != nil {
			return err
		}
		c.signed = append(c.signed, signed)
	}
	return nil
}

// record is the write-ahead across signers for no-ops (queuer.WalletSender
// tells the rule): a nonce pinned to a task's request gets no no-op — only
// that task may fill it — and the others' requests are recorded, in one
// transaction fenced by the claim, before the signer outside the process
// is asked.
func (c *noopCycle) record(ctx context.Context, self common.Address) error {
	pins, err := wallet.DBCall(ctx, c.Shard, func(ctx context.Context) ([]store.PinnedRequest, error) {
		return c.store.SignRequestListPinned(ctx, c.ChainID(), c.Sender, int64(c.Run.ChainNonce))
	})
	if err != nil {
		return err
	}
	c.nonces = slices.DeleteFunc(c.nonces, func(n int64) bool {
		return slices.ContainsFunc(pins, func(p store.PinnedRequest) bool { return p.Nonce == n && p.TaskID != "" })
	})
	reqs := make([]store.SignRequest, len(c.nonces))
	for i, n := range c.nonces {
		reqs[i] = store.SignRequest{Nonce: n, To: self.Hex(), Value: new(big.Int), GasLimit: params.TxGas}
	}
	err = c.Fenced(ctx, func(tx *store.Store) error {
		return tx.SignRequestRecord(ctx, store.SignRequestRecordParams{
			Now: c.cfg.Clock.Now(), ChainID: c.ChainID(), Sender: c.Sender, Below: int64(c.Run.ChainNonce), Requests: reqs,
		})
	})
	if err != nil {
		return fmt.Errorf("recording the no-op sign requests of %s: %w", c.Claim.Key, err)
	}
	return nil
}

// Commit stores the no-ops in one fenced transaction; a nonce taken or no
// longer a gap meanwhile stores none of them (the next run looks again).
func (c *noopCycle) Commit(ctx context.Context) error {
	if len(c.signed) == 0 {
		return nil
	}
	now := c.cfg.Clock.Now()
	err := c.Fenced(ctx, func(tx *store.Store) error {
		for _, n := range c.signed {
			if err := tx.AttemptStoreNoop(ctx, store.AttemptStoreNoopParams{Now: now, ChainID: c.ChainID(), Sender: c.Sender, Tx: n}); err != nil {
				return err
			}
		}
		return nil
	})
	var taken *store.NonceTakenError
	var moved *store.NonceMovedError
	if errors.As(err, &taken) || errors.As(err, &moved) {
		c.cfg.Logger.Info("wallet: a no-op's nonce is no longer free, none stored", "shard", c.Claim.Key, "error", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("storing the no-ops of %s: %w", c.Claim.Key, err)
	}
	c.cfg.Metrics.Transition("wallet", "noop", len(c.nonces))
	c.cfg.Logger.Info("wallet: no-ops stored", "shard", c.Claim.Key, "nonces", c.nonces, "why", c.why)
	return nil
}

// Drop stores nothing.
func (c *noopCycle) Drop(context.Context, error) error { return nil }

// balanceCycle reads the wallet's balance and the fees of the moment, and
// records whether sending pauses: below the threshold, what a plain
// transfer costs at those fees (gas 21000 × fee cap), the wallet could send
// nothing, so its tasks wait rather than each end in error. The threshold is
// computed anew at each read, so a wallet paused when fees were high goes
// on when they fall or it is funded; a task that costs more (its value, its
// gas, its own fee cap) is refused by the node and ends in error alone.
type balanceCycle struct {
	*wallet.Shard
	*WalletKeeper
	balance   *big.Int
	threshold *big.Int
}

// Execute reads the balance and the fee suggestion.
func (c *balanceCycle) Execute(ctx context.Context) error {
	addr := c.Wallet.Address()
	b, err := wallet.LedgerCall(ctx, c.Shard, func(ctx context.Context) (*big.Int, error) { return c.ledger.BalanceAt(ctx, addr) })
	if err != nil {
		return fmt.Errorf("reading the balance of %s: %w", c.Claim.Key, err)
	}
	fees, err := wallet.LedgerCall(ctx, c.Shard, c.ledger.SuggestFees)
	if err != nil {
		return fmt.Errorf("reading the fee suggestion for the balance threshold of %s: %w", c.Claim.Key, err)
	}
	fees = wallet.AtLeastTip(fees, c.cfg.MinTip)
	c.balance = b
	c.threshold = new(big.Int).Mul(big.NewInt(int64(params.TxGas)), fees.FeeCap)
	return nil
}

// Commit records the balance and threshold; below it the run sends nothing.
func (c *balanceCycle) Commit(ctx context.Context) error {
	var h store.WalletHealth
	err := c.Fenced(ctx, func(tx *store.Store) error {
		var err error
		h, err = tx.WalletHealthSetBalance(ctx, c.cfg.Clock.Now(), c.ChainID(), c.Sender, c.balance, c.threshold)
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the balance of %s: %w", c.Claim.Key, err)
	}
	if h.Paused && !c.Run.Paused {
		c.cfg.Logger.Warn("wallet: balance below what a plain transfer costs, sending paused", "shard", c.Claim.Key,
			"balance_wei", h.Balance.String(), "threshold_wei", h.Threshold.String())
		c.cfg.Metrics.Transition("wallet", "paused", 1)
	}
	c.Run.Paused, c.Run.Held = h.Paused, h.HeldAt != nil
	return nil
}

// Drop records nothing; the run does not send (no balance known).
func (c *balanceCycle) Drop(context.Context, error) error {
	c.Run.Paused = true
	return nil
}
