package monitor

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/crashpoint"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/gethpool"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// maxRequestsPerRun bounds the cancels and speed-ups one run signs; the
// next run takes the rest.
const maxRequestsPerRun = 16

// collectRequests returns a cycle for the cancels and speed-ups clients
// asked of the wallet's executing tasks (store.TaskRequestCancel,
// store.TaskRequestSpeedUp), or nil. Only tasks whose live attempt is sent
// are acted on: one still signed is broadcast first by recover, and one
// mined has won its nonce already (its task ends done).
func (k *WalletKeeper) collectRequests(ctx context.Context, s *wallet.Shard, inFlight int) (workers.Cycle, error) {
	if inFlight == 0 {
		return nil, nil
	}
	reqs, err := wallet.DBCall(ctx, s, func(ctx context.Context) ([]store.TaskWithRequest, error) {
		return k.store.TaskListRequests(ctx, s.ChainID(), s.Sender, maxRequestsPerRun)
	})
	if err != nil {
		return nil, err
	}
	c := &requestCycle{Shard: s, WalletKeeper: k}
	for _, r := range reqs {
		switch {
		case r.Task.SpeedUp != nil && r.Task.CancelRequestedAt != nil:
			c.drops = append(c.drops, r.Task.ID)
		case r.Live.State != store.AttemptSent:
		case r.Task.CancelRequestedAt != nil && !r.CancelStored, r.Task.SpeedUp != nil:
			c.reqs = append(c.reqs, r)
		}
	}
	if len(c.reqs) == 0 && len(c.drops) == 0 {
		return nil, nil
	}
	return c, nil
}

// requestCycle signs the cancels' no-ops and the speed-ups and stores each
// as a new attempt of its task superseding the live one (store.AttemptBump,
// the write-ahead), before the recover cycle that follows broadcasts it.
//
// The fees: a cancel's no-op offers what a gas bump of the live attempt
// would (bumpFees: the live fees raised by wallet.Config.BumpPercent, at
// least the node's suggestion, within wallet.Config.PriceCap), which geth's
// replacement rule takes; a speed-up offers the fees asked for, which the
// API checked against the live attempt and which are checked again here
// (a gas bump may have come first: the speed-up is then dropped).
//
// A signer outside the process needs no sign request here: the nonce is
// held by the task's stored attempt (its request was deleted when it was
// stored), and a crash between the signing and the store leaves the
// request on the task, so the next run asks again for the same content,
// the no-op or the task's own transaction.
type requestCycle struct {
	*wallet.Shard
	*WalletKeeper
	reqs []store.TaskWithRequest
	// drops are tasks whose speed-up is not stored (a cancel overrides it,
	// or the live attempt meets it already).
	drops  []string
	signed []store.AttemptBumpParams
}

// Execute reads the fee suggestion (for cancels) and signs; it writes
// nothing.
func (c *requestCycle) Execute(ctx context.Context) error {
	if err := c.CheckChain(ctx); err != nil {
		return err
	}
	var suggested *gethpool.Fees
	chainID := big.NewInt(c.ChainID())
	for _, r := range c.reqs {
		var old types.Transaction
		if err := old.UnmarshalBinary(r.Live.Raw); err != nil {
			return fmt.Errorf("decoding attempt %s of task %s: %w", r.Live.TxHash, r.Task.ID, err)
		}
		oldFees := gethpool.Fees{FeeCap: old.GasFeeCap(), Tip: old.GasTipCap()}
		var tx *types.Transaction
		var kind store.AttemptKind
		if r.Task.CancelRequestedAt != nil {
			if suggested == nil {
				f, err := c.suggestion(ctx)
				if err != nil {
					return err
				}
				suggested = &f
			}
			next, ok := bumpFees(oldFees, *suggested, c.cfg.PriceCap, c.cfg.BumpPercent)
			if !ok {
				c.cfg.Logger.Warn("wallet: a cancel's no-op would not replace the task's transaction within the price cap; asked again next run",
					"shard", c.Claim.Key, "task", r.Task.ID, "nonce", r.Live.Nonce, "price_cap", c.cfg.PriceCap.String())
				continue
			}
			self := common.Address(c.Wallet.Address())
			tx = c.cfg.NewTx(chainID, old.Nonce(), params.TxGas, &self, new(big.Int), nil, ledger.Fees{TipCap: next.Tip, FeeCap: next.FeeCap})
			kind = store.AttemptCancel
		} else {
			want := gethpool.Fees{FeeCap: r.Task.SpeedUp.FeeCap, Tip: r.Task.SpeedUp.TipCap}
			if !gethpool.Replaces(want, oldFees, gethpool.PriceBump) {
				c.drops = append(c.drops, r.Task.ID)
				continue
			}
			tx = c.cfg.NewTx(chainID, old.Nonce(), old.Gas(), old.To(), old.Value(), old.Data(), ledger.Fees{TipCap: want.Tip, FeeCap: want.FeeCap})
			kind = store.AttemptSpeedUp
		}
		signed, err := c.SignRaw(ctx, tx, chainID)
		if err != nil {
			return err
		}
		signed.TaskID, signed.Kind = r.Task.ID, kind
		c.signed = append(c.signed, store.AttemptBumpParams{ChainID: c.ChainID(), Sender: c.Sender, Old: r.Live.TxHash, New: signed})
	}
	return nil
}

// suggestion is the node's fee suggestion as a bump reads it.
func (c *requestCycle) suggestion(ctx context.Context) (gethpool.Fees, error) {
	fees, err := wallet.LedgerCall(ctx, c.Shard, c.ledger.SuggestFees)
	if err != nil {
		return gethpool.Fees{}, fmt.Errorf("reading the fee suggestion for the cancels of %s: %w", c.Claim.Key, err)
	}
	fees = wallet.AtLeastTip(fees, c.cfg.MinTip)
	if c.cfg.Legacy {
		price := wallet.LegacyPrice(fees)
		return gethpool.Fees{FeeCap: price, Tip: price}, nil
	}
	return gethpool.Fees{FeeCap: fees.FeeCap, Tip: fees.TipCap}, nil
}

// Commit stores each signed attempt in its own fenced transaction (one
// whose live attempt moved meanwhile is not stored: the next run looks
// again), and forgets the dropped speed-ups.
func (c *requestCycle) Commit(ctx context.Context) error {
	now := c.cfg.Clock.Now()
	stored := 0
	for _, p := range c.signed {
		p.Now = now
		err := c.Fenced(ctx, func(tx *store.Store) error { return tx.AttemptBump(ctx, p) })
		if errors.Is(err, store.ErrNotFound) {
			c.cfg.Logger.Info("wallet: the task's transaction moved meanwhile; its request waits for the next run", "shard", c.Claim.Key,
				"task", p.New.TaskID, "kind", p.New.Kind, "tx_hash", p.Old)
			continue
		}
		if err != nil {
			return fmt.Errorf("storing the %s of task %s: %w", p.New.Kind, p.New.TaskID, err)
		}
		stored++
		c.cfg.Metrics.Transition("wallet", string(p.New.Kind), 1)
		c.cfg.Logger.Info("wallet: a client's request stored as a replacement of the task's transaction", "shard", c.Claim.Key,
			"task", p.New.TaskID, "kind", p.New.Kind, "nonce", p.New.Nonce, "old_tx_hash", p.Old, "tx_hash", p.New.TxHash,
			"max_fee_per_gas", p.New.MaxFeePerGas.String(), "max_priority_fee_per_gas", p.New.MaxPriorityFeePerGas.String())
	}
	if stored > 0 {
		crashpoint.Hit(wallet.CrashRequestStored)
	}
	for _, id := range c.drops {
		var dropped bool
		err := c.Fenced(ctx, func(tx *store.Store) error {
			var err error
			dropped, err = tx.TaskDropSpeedUp(ctx, now, id)
			return err
		})
		if err != nil {
			return err
		}
		if dropped {
			c.cfg.Logger.Info("wallet: a speed-up not stored: a cancel overrides it, or the task's transaction offers as much already",
				"shard", c.Claim.Key, "task", id)
		}
	}
	return nil
}

// Drop stores nothing: the requests stay on their tasks, and the next run
// signs them again.
func (c *requestCycle) Drop(context.Context, error) error { return nil }
