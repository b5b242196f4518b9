package eoa

import (
	"context"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/crashpoint"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
)

// confirmCycle is seed 003's confirm, run once per run: it reads the chain's
// nonce, looks up the receipts of the sent attempts the chain has passed, and
// broadcasts again the sent attempts at or above it whose last broadcast was
// indeterminate.
type confirmCycle struct {
	*shard
	chainNonce uint64
	// confirmed: attempts with a receipt (the task is done).
	confirmed []broadcastResult
	// replaced: attempts passed by the chain whose hashes have had no
	// receipt for Config.ReplacedAfter.
	replaced []broadcastResult
	// resent: outcomes of the new broadcasts.
	resent []broadcastResult
}

// Execute reads the chain; it writes nothing.
func (c *confirmCycle) Execute(ctx context.Context) error {
	if err := c.checkChain(ctx); err != nil {
		return err
	}
	n, err := c.readChainNonce(ctx)
	if err != nil {
		return err
	}
	c.chainNonce = n
	if err := c.lookUpReceipts(ctx); err != nil {
		return err
	}
	return c.broadcastUncertain(ctx)
}

// lookUpReceipts: the chain's nonce passed these attempts, so each was mined
// or another transaction took its nonce. A receipt makes the task done (a
// reverted one too). A failed lookup means "ask again later". Only when
// every hash of the nonce has answered "no receipt" for ReplacedAfter is the
// attempt replaced: it is dropped and its task sent again with a new nonce
// (DESIGN §7: engine-core counted a failed lookup as a replacement and sent
// the transaction twice).
func (c *confirmCycle) lookUpReceipts(ctx context.Context) error {
	passed, err := dbCall(ctx, c.job, func(ctx context.Context) ([]store.Attempt, error) {
		return c.job.store.AttemptsSentBelow(ctx, store.AttemptsListParams{
			ChainID: c.chainID(), Sender: c.sender, Below: int64(c.chainNonce), Max: c.job.cfg.InFlight,
		})
	})
	if err != nil {
		return err
	}
	now := c.now()
	absent := map[string]time.Time{}
	c.job.mu.Lock()
	before := c.job.absent[c.claim.Key]
	c.job.mu.Unlock()
	b := c.budget()
	for i, a := range passed {
		if b.spent(i) {
			// The rest are asked about in the next run; keep their clocks.
			for _, rest := range passed[i:] {
				if since, ok := before[rest.TxHash]; ok {
					absent[rest.TxHash] = since
				}
			}
			break
		}
		hash, rc, failed := c.receiptOfNonce(ctx, a)
		switch {
		case rc.Found:
			c.confirmed = append(c.confirmed, broadcastResult{attempt: a, outcome: mined, hash: hash, reverted: rc.Status == ledger.ReceiptReverted})
		case failed:
			if since, ok := before[a.TxHash]; ok {
				absent[a.TxHash] = since
			}
		default:
			since, ok := before[a.TxHash]
			if !ok {
				since = now
			}
			if now.Sub(since) >= c.job.cfg.ReplacedAfter {
				c.replaced = append(c.replaced, broadcastResult{attempt: a, outcome: requeued, replaced: true,
					reason: fmt.Sprintf("replaced: the chain passed nonce %d and no hash of ours has a receipt since %s", a.Nonce, since.Format(time.RFC3339))})
				continue
			}
			absent[a.TxHash] = since
		}
	}
	c.job.mu.Lock()
	c.job.absent[c.claim.Key] = absent
	c.job.mu.Unlock()
	return nil
}

// broadcastUncertain sends again, with the same bytes, the sent attempts the
// chain has not reached whose last broadcast was indeterminate: the node may
// never have taken them, and every later nonce would wait on them. The same
// bytes make it harmless when it did (`already known`).
func (c *confirmCycle) broadcastUncertain(ctx context.Context) error {
	uncertain, err := dbCall(ctx, c.job, func(ctx context.Context) ([]store.Attempt, error) {
		return c.job.store.AttemptsSentUncertain(ctx, store.AttemptsSentUncertainParams{
			ChainID: c.chainID(), Sender: c.sender, From: int64(c.chainNonce), Max: c.job.cfg.InFlight,
		})
	})
	if err != nil {
		return err
	}
	b := c.budget()
	for i, a := range uncertain {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if b.spent(i) {
			break // the next run's confirm sends the rest
		}
		err := c.send(ctx, a.Raw)
		r := broadcastResult{attempt: a, outcome: sent}
		switch res := ledger.SendResultOf(err); res {
		case ledger.SendAccepted:
		case ledger.SendRejected:
			if c.isBump(ctx, a) {
				r.reason = fmt.Sprintf("%s: %s", res, ledger.ReasonOf(err)) // see broadcastCycle
				break
			}
			r.outcome, r.reason = rejected, ledger.ReasonOf(err)
		default:
			// Still uncertain (or, for `nonce too low`, mined or replaced
			// since the nonce was read: the next confirm finds out).
			r.reason = fmt.Sprintf("%s: %s", res, ledger.ReasonOf(err))
		}
		c.resent = append(c.resent, r)
	}
	return nil
}

// Commit records the confirmations, replacements and new broadcasts in one
// fenced transaction; the run's send starts at or above the chain's nonce.
func (c *confirmCycle) Commit(ctx context.Context) error {
	if len(c.confirmed) > 0 {
		crashpoint.Hit(CrashMined)
	}
	now := c.now()
	err := c.fenced(ctx, func(tx *store.Store) error {
		if err := tx.WalletHealthObserveNonce(ctx, now, c.chainID(), c.sender, int64(c.chainNonce)); err != nil {
			return err
		}
		if err := recordBroadcasts(ctx, c.shard, tx, now, c.confirmed); err != nil {
			return err
		}
		if err := recordBroadcasts(ctx, c.shard, tx, now, c.replaced); err != nil {
			return err
		}
		for _, r := range c.resent {
			var err error
			if r.outcome == rejected {
				err = c.recordRejected(ctx, tx, now, r.attempt, r.reason)
			} else {
				_, err = tx.AttemptRecordBroadcast(ctx, store.AttemptRecordBroadcastParams{Now: now, ChainID: c.chainID(), TxHash: r.attempt.TxHash, Error: r.reason})
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording the confirmations of %s: %w", c.claim.Key, err)
	}
	c.learnChainNonce(c.chainNonce)
	c.job.cfg.Metrics.Transition("wallet", "replaced", len(c.replaced))
	c.logOutcomes(c.replaced)
	c.logOutcomes(c.resent)
	return nil
}

// Drop records nothing: the attempts stay as they were and the next run's
// confirm asks again.
func (c *confirmCycle) Drop(context.Context, error) error { return nil }
