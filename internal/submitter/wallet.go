package submitter

import (
	"context"
	"errors"
	"fmt"

	"github.com/ledgerq/ledgerq/internal/crashpoint"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// WalletBroadcaster is the wallet lane's submitter: the recover step of a
// wallet's run (wallet.Job). It broadcasts, in nonce order and with
// their stored bytes, the attempts signed and stored but not known sent. It
// is the second half of every send, since a send stores its attempts (the
// write-ahead) before anything is broadcast: one path broadcasts after a
// send and after a crash alike.
//
// Send results (ledger.SendResultOf):
//
//   - accepted, `already known`: sent.
//   - indeterminate (timeouts, transport, unexplained errors) and busy (a
//     full pool, a rate limit): treated as sent and never recycled; the
//     attempt keeps the error, and each confirm broadcasts it again with the
//     same bytes until the node takes it or the chain passes its nonce. Underpriced is kept the same way; once its
//     nonce has stalled, a gas bump follows.
//   - `nonce too low`: a success when one of our hashes for the nonce has a
//     receipt (a failed lookup: sent, confirm asks again). If none has and
//     the attempt was never broadcast before (stored by this run), another
//     transaction used the nonce: the attempt is dropped, its task goes back
//     to waiting — its transaction never ran and, a nonce being used once,
//     never will — and the next nonce moves up to the chain's. If it may
//     have been broadcast before (recover after a crash), confirm decides.
//   - deterministic rejection: the task ends in error with the node's
//     reason and its attempt is dropped, freeing the nonce. The attempts of
//     the same run after it that were never broadcast are released (their
//     tasks wait again) and the next send fills the freed nonces, lowest
//     first, before taking new ones, so the chain never waits on a gap. A
//     refused gas bump does not fail its task (the attempt it superseded
//     may still be mined).
//
// The broadcasts themselves go through the shard (wallet.Shard.Send), the
// lane's one ledger the job was built with.
type WalletBroadcaster struct {
	cfg   wallet.Config
	store *store.Store
}

var _ wallet.Step = (*WalletBroadcaster)(nil)

// NewWalletBroadcaster returns the recover step; cfg gets its defaults
// (wallet.Config.WithDefaults).
func NewWalletBroadcaster(st *store.Store, cfg wallet.Config) (*WalletBroadcaster, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if st == nil {
		return nil, errors.New("wallet broadcaster: it needs a store")
	}
	return &WalletBroadcaster{cfg: cfg, store: st}, nil
}

// Collect returns a broadcast of the wallet's unsent attempts, or nil.
func (b *WalletBroadcaster) Collect(ctx context.Context, s *wallet.Shard) (workers.Cycle, error) {
	unsent, err := wallet.DBCall(ctx, s, func(ctx context.Context) ([]store.Attempt, error) {
		return b.store.AttemptListUnsent(ctx, store.AttemptListParams{ChainID: s.ChainID(), Sender: s.Sender, Max: b.cfg.InFlight})
	})
	if err != nil || len(unsent) == 0 {
		return nil, err
	}
	return &broadcastCycle{Shard: s, WalletBroadcaster: b, attempts: unsent}, nil
}

// broadcastCycle broadcasts one collect of unsent attempts.
type broadcastCycle struct {
	*wallet.Shard
	*WalletBroadcaster
	attempts []store.Attempt
	results  []wallet.Result
	// learned is the chain's nonce read after a `nonce too low` (0: none):
	// the run's next send starts at or above it (the send moves the next
	// nonce up).
	learned uint64
}

// Execute broadcasts the attempts one by one in nonce order and classifies
// each answer. After a deterministic rejection, the attempts after it that
// this run stored and never broadcast are not broadcast but released: their
// tasks go back to waiting and the next send signs them again from the
// freed nonce up, so the chain never waits on the rejected nonce.
func (c *broadcastCycle) Execute(ctx context.Context) error {
	c.results = make([]wallet.Result, len(c.attempts))
	b := c.Budget()
	for i, a := range c.attempts {
		c.results[i].Attempt = a
		fresh := c.Run.Fresh[a.TxHash]
		delete(c.Run.Fresh, a.TxHash)
		if c.Run.Releasing && fresh {
			c.results[i].Outcome, c.results[i].Reason = wallet.Requeued, "released: an earlier nonce was rejected before it was broadcast"
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if b.Spent(i) {
			break // the rest stays signed: the next cycle broadcasts it
		}
		err := c.Send(ctx, a.Raw)
		crashpoint.Hit(wallet.CrashBroadcast)
		r := &c.results[i]
		switch res := ledger.SendResultOf(err); res {
		case ledger.SendAccepted:
			r.Outcome = wallet.Sent
		case ledger.SendIndeterminate, ledger.SendBusy, ledger.SendUnderpriced:
			// Indeterminate: it may be out. Busy: the node said not
			// now, handled alike. Underpriced: the pool holds
			// another transaction for the nonce or wants higher fees — a
			// gas bump decides. Either way the nonce stays taken and
			// confirm broadcasts it again.
			r.Outcome, r.Reason = wallet.Sent, fmt.Sprintf("%s: %s", res, ledger.ReasonOf(err))
		case ledger.SendNonceTooLow:
			c.nonceTooLow(ctx, r, fresh, err)
		case ledger.SendRejected:
			if c.IsBump(ctx, a) {
				// A bump the node refuses (its higher fees cost more than
				// the balance, say): the attempt it superseded may still be
				// mined, so the task does not fail; the next stall round
				// decides again.
				r.Outcome, r.Reason = wallet.Sent, fmt.Sprintf("%s: %s", res, ledger.ReasonOf(err))
				continue
			}
			r.Outcome, r.Reason = wallet.Rejected, ledger.ReasonOf(err)
			c.Run.Releasing = true
		}
	}
	return nil
}

// nonceTooLow: the chain has passed the attempt's nonce. It is a success
// only if one of our hashes for the nonce has a receipt. If none has and the
// attempt was never broadcast before, another transaction used the nonce:
// the attempt is dropped and its task goes back to waiting, to be sent with
// a new nonce (chosen over failing it: the task's transaction never ran,
// and since a nonce is used once, it never will). If it may have been
// broadcast before (recover after a crash), it is kept as sent and confirm
// decides from the chain's blocks.
func (c *broadcastCycle) nonceTooLow(ctx context.Context, r *wallet.Result, fresh bool, sendErr error) {
	if c.learned == 0 {
		if n, err := c.ReadChainNonce(ctx); err == nil {
			c.learned = n
		}
	}
	hash, rc, failed := c.ReceiptOfNonce(ctx, r.Attempt)
	switch {
	case rc.Found:
		r.Outcome, r.Hash, r.Reverted = wallet.Mined, hash, rc.Status == ledger.ReceiptReverted
		// Its depth is known at the next confirm, unless one block is
		// enough: a receipt is one.
		r.Block, r.BlockHash, r.Final = rc.BlockNumber, rc.BlockHash.Hex(), c.cfg.ConfirmationsOn(c.ChainID()) <= 1
	case failed || !fresh:
		r.Outcome, r.Reason = wallet.Sent, fmt.Sprintf("%s: %s", ledger.SendNonceTooLow, ledger.ReasonOf(sendErr))
	default:
		r.Outcome, r.Reason = wallet.Requeued, fmt.Sprintf("nonce %d used by another transaction: %s", r.Attempt.Nonce, ledger.ReasonOf(sendErr))
	}
}

// Commit records every outcome in one transaction fenced by the claim.
func (c *broadcastCycle) Commit(ctx context.Context) error {
	now := c.cfg.Clock.Now()
	err := c.Fenced(ctx, func(tx *store.Store) error {
		return c.RecordResults(ctx, tx, now, c.results)
	})
	if err != nil {
		return fmt.Errorf("recording the broadcasts of %s: %w", c.Claim.Key, err)
	}
	c.LearnChainNonce(c.learned)
	c.LogResults(c.results)
	return nil
}

// Drop leaves the attempts as they are: still signed, they are broadcast
// again, with the same bytes, by the next run's recover. The node answers
// `already known` or `nonce too low` for those it has, so the work is never
// done twice and never lost.
func (c *broadcastCycle) Drop(context.Context, error) error { return nil }
