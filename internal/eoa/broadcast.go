package eoa

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ledgerq/ledgerq/internal/crashpoint"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
)

// outcome is what a broadcast means for an attempt (DESIGN §2.3).
type outcome int

const (
	// notTried: not broadcast (the context ended first); it stays signed
	// and the next run's recover broadcasts it.
	notTried outcome = iota
	// sent: the node took it or already had it; with a reason, the outcome
	// was indeterminate (timeout, transport) and it is treated as sent,
	// never recycled, and broadcast again by confirm.
	sent
	// mined: `nonce too low` and one of our hashes for the nonce has a
	// receipt: the task is done.
	mined
	// rejected: a deterministic refusal: the task ends in error and the
	// nonce is freed for the next send.
	rejected
	// requeued: the attempt will never be mined (another transaction used
	// its nonce, or it was never broadcast and is released): it is dropped
	// and its task goes back to waiting.
	requeued
)

// broadcastResult is one attempt's outcome, recorded by Commit.
type broadcastResult struct {
	attempt  store.Attempt
	outcome  outcome
	reason   string
	hash     string // mined: the hash that has the receipt
	reverted bool
	// block and blockHash: mined, the receipt's block; final: it is deep
	// enough (the task is done), else the attempt is only mined.
	block     uint64
	blockHash string
	final     bool
	// replaced: requeued because another transaction took the nonce (every
	// hash of ours definitively absent): counted against MaxReplacements.
	replaced bool
}

// broadcastCycle is seed 003's recover: the attempts signed and stored but
// not known sent, broadcast in nonce order with their stored bytes. It is
// also the second half of every send, since a send stores its attempts (the
// write-ahead) before anything is broadcast: one path broadcasts after a
// send and after a crash alike.
type broadcastCycle struct {
	*shard
	attempts []store.Attempt
	results  []broadcastResult
	// learned is the chain's nonce read after a `nonce too low` (0: none):
	// the run's next send starts at or above it (sendCycle.Commit moves the
	// next nonce up).
	learned uint64
}

// Execute broadcasts the attempts one by one in nonce order and classifies
// each answer (ledger.SendResultOf). After a deterministic rejection, the
// attempts after it that this run stored and never broadcast are not
// broadcast but released: their tasks go back to waiting and the next send
// signs them again from the freed nonce up, so the chain never waits on the
// rejected nonce.
func (c *broadcastCycle) Execute(ctx context.Context) error {
	c.results = make([]broadcastResult, len(c.attempts))
	b := c.budget()
	for i, a := range c.attempts {
		c.results[i].attempt = a
		fresh := c.run.fresh[a.TxHash]
		delete(c.run.fresh, a.TxHash)
		if c.run.releasing && fresh {
			c.results[i].outcome, c.results[i].reason = requeued, "released: an earlier nonce was rejected before it was broadcast"
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if b.spent(i) {
			break // the rest stays signed: the next cycle broadcasts it
		}
		err := c.send(ctx, a.Raw)
		crashpoint.Hit(CrashBroadcast)
		r := &c.results[i]
		switch res := ledger.SendResultOf(err); res {
		case ledger.SendAccepted:
			r.outcome = sent
		case ledger.SendIndeterminate, ledger.SendUnderpriced:
			// Indeterminate: it may be out. Underpriced: the pool holds
			// another transaction for the nonce or wants higher fees — a
			// gas bump (stall.go) decides. Either way the nonce stays
			// taken and confirm broadcasts it again.
			r.outcome, r.reason = sent, fmt.Sprintf("%s: %s", res, ledger.ReasonOf(err))
		case ledger.SendNonceTooLow:
			c.nonceTooLow(ctx, r, fresh, err)
		case ledger.SendRejected:
			if c.isBump(ctx, a) {
				// A bump the node refuses (its higher fees cost more than
				// the balance, say): the attempt it superseded may still be
				// mined, so the task does not fail; the next stall round
				// decides again.
				r.outcome, r.reason = sent, fmt.Sprintf("%s: %s", res, ledger.ReasonOf(err))
				continue
			}
			r.outcome, r.reason = rejected, ledger.ReasonOf(err)
			c.run.releasing = true
		}
	}
	return nil
}

// nonceTooLow: the chain has passed the attempt's nonce. It is a success
// only if one of our hashes for the nonce has a receipt. If none has and the
// attempt was never broadcast before, another transaction used the nonce:
// the attempt is dropped and its task goes back to waiting, to be sent with
// a new nonce (chosen over failing it: the task's transaction never ran, and
// since a nonce is used once, it never will). If it may have been broadcast
// before (recover after a crash), it is kept as sent and confirm decides,
// after Config.ReplacedAfter, with a new lookup.
func (c *broadcastCycle) nonceTooLow(ctx context.Context, r *broadcastResult, fresh bool, sendErr error) {
	if c.learned == 0 {
		if n, err := c.readChainNonce(ctx); err == nil {
			c.learned = n
		}
	}
	hash, rc, failed := c.receiptOfNonce(ctx, r.attempt)
	switch {
	case rc.Found:
		r.outcome, r.hash, r.reverted = mined, hash, rc.Status == ledger.ReceiptReverted
		// Its depth is known at the next confirm, unless one block is
		// enough: a receipt is one.
		r.block, r.blockHash, r.final = rc.BlockNumber, rc.BlockHash.Hex(), c.job.cfg.confirmations(c.chainID()) <= 1
	case failed || !fresh:
		r.outcome, r.reason = sent, fmt.Sprintf("%s: %s", ledger.SendNonceTooLow, ledger.ReasonOf(sendErr))
	default:
		r.outcome, r.reason = requeued, fmt.Sprintf("nonce %d used by another transaction: %s", r.attempt.Nonce, ledger.ReasonOf(sendErr))
	}
}

// Commit records every outcome in one transaction fenced by the claim.
func (c *broadcastCycle) Commit(ctx context.Context) error {
	now := c.now()
	err := c.fenced(ctx, func(tx *store.Store) error {
		return recordBroadcasts(ctx, c.shard, tx, now, c.results)
	})
	if err != nil {
		return fmt.Errorf("recording the broadcasts of %s: %w", c.claim.Key, err)
	}
	c.learnChainNonce(c.learned)
	c.logOutcomes(c.results)
	return nil
}

// recordBroadcasts writes broadcast outcomes inside a fenced transaction.
func recordBroadcasts(ctx context.Context, s *shard, tx *store.Store, now time.Time, results []broadcastResult) error {
	var taken []string
	for _, r := range results {
		a := r.attempt
		var err error
		switch r.outcome {
		case notTried:
		case sent:
			if r.reason == "" {
				taken = append(taken, a.TxHash)
				continue
			}
			_, err = tx.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: s.chainID(), TxHashes: []string{a.TxHash}, Error: r.reason})
		case mined:
			_, err = tx.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: s.chainID(), TxHash: r.hash, Live: a.TxHash,
				Block: r.block, BlockHash: r.blockHash, Final: r.final, Reverted: r.reverted})
			err = s.tolerate(err, "confirm")
		case rejected:
			err = s.recordRejected(ctx, tx, now, a, r.reason)
		case requeued:
			_, err = tx.AttemptRequeue(ctx, store.AttemptRequeueParams{
				Now: now, ChainID: s.chainID(), TxHash: a.TxHash, Reason: r.reason,
				Replaced: r.replaced, MaxReplacements: s.job.cfg.MaxReplacements,
			})
			err = s.tolerate(err, "requeue")
		}
		if err != nil {
			return err
		}
	}
	if len(taken) > 0 {
		if _, err := tx.AttemptMarkSent(ctx, store.AttemptMarkSentParams{Now: now, ChainID: s.chainID(), TxHashes: taken}); err != nil {
			return err
		}
	}
	return nil
}

// recordRejected records a deterministic rejection: the task ends in error
// alone (a no-op is only dropped: its nonce is free again). A refusal for
// insufficient funds asks for a new balance read before the next send: the
// balance check pauses the wallet only when it cannot pay for a plain
// transfer, never because of one task's value or fees.
func (s *shard) recordRejected(ctx context.Context, tx *store.Store, now time.Time, a store.Attempt, reason string) error {
	var err error
	if a.Noop() {
		_, err = tx.AttemptRequeue(ctx, store.AttemptRequeueParams{Now: now, ChainID: s.chainID(), TxHash: a.TxHash, Reason: reason})
		err = s.tolerate(err, "drop no-op")
	} else {
		_, err = tx.TaskFail(ctx, store.TaskFailParams{Now: now, ID: a.TaskID, Reason: reason})
		err = s.tolerate(err, "fail")
	}
	if err != nil || !strings.HasPrefix(reason, "insufficient funds") {
		return err
	}
	return tx.WalletHealthBalanceStale(ctx, now, s.chainID(), s.sender)
}

// isBump reports whether a superseded an earlier attempt of its nonce (a
// failed read says no).
func (s *shard) isBump(ctx context.Context, a store.Attempt) bool {
	hashes, err := s.hashesOfNonce(ctx, a)
	return err == nil && len(hashes) > 1
}

// logOutcomes logs what operators need to know: failures and requeues.
func (s *shard) logOutcomes(results []broadcastResult) {
	for _, r := range results {
		switch r.outcome {
		case rejected:
			s.job.log.Warn("eoa: transaction rejected, task failed", "shard", s.claim.Key, "task", r.attempt.TaskID,
				"nonce", r.attempt.Nonce, "tx_hash", r.attempt.TxHash, "reason", r.reason)
		case requeued:
			s.job.log.Info("eoa: attempt dropped, task back to waiting", "shard", s.claim.Key, "task", r.attempt.TaskID,
				"nonce", r.attempt.Nonce, "tx_hash", r.attempt.TxHash, "reason", r.reason)
		}
	}
}

// Drop leaves the attempts as they are: still signed, they are broadcast
// again, with the same bytes, by the next run's recover. The node answers
// `already known` or `nonce too low` for those it has, so the work is never
// done twice and never lost.
func (c *broadcastCycle) Drop(context.Context, error) error { return nil }
