package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// The wallet shard's own reads and writes (seed 003's worker, package eoa),
// beside the write-ahead and confirm of wallet_tasks.go.

// WalletNonceRaiseParams move a wallet's next nonce up to the chain's.
type WalletNonceRaiseParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// AtLeast is the chain's nonce.
	AtLeast int64
}

// WalletNonceRaise moves the wallet's next nonce up to p.AtLeast when it is
// below (the chain's nonce passed it: someone else sent from the address) and
// reports whether it moved. It never moves it down, and does nothing before
// the wallet's first attempt (the first send starts from the chain's nonce).
func (s *Store) WalletNonceRaise(ctx context.Context, p WalletNonceRaiseParams) (bool, error) {
	n, err := s.q.WalletNonceRaise(ctx, dbsqlc.WalletNonceRaiseParams{
		AtLeast: p.AtLeast, Now: p.Now, ChainID: p.ChainID, Sender: lowerHex(p.Sender),
	})
	if err != nil {
		return false, fmt.Errorf("raising the next nonce of %s to %d: %w", WalletShardKey(p.ChainID, p.Sender), p.AtLeast, err)
	}
	return n > 0, nil
}

// WalletNoncesFreedParams select a wallet's freed nonces.
type WalletNoncesFreedParams struct {
	ChainID int64
	Sender  string
	// From is the chain's nonce: nonces below it are used.
	From int64
	Max  int
}

// WalletNoncesFreed returns up to Max nonces from p.From up to the wallet's
// next nonce that no live attempt holds (their attempt was dropped), lowest
// first: seed 003's recycled nonces, which the next send fills before it
// takes new ones so that the chain never waits on a gap. None before the
// wallet's first attempt.
func (s *Store) WalletNoncesFreed(ctx context.Context, p WalletNoncesFreedParams) ([]int64, error) {
	out, err := s.q.WalletNoncesFreed(ctx, dbsqlc.WalletNoncesFreedParams{
		FromNonce: p.From, ChainID: p.ChainID, Sender: lowerHex(p.Sender), Max: int32(p.Max),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the freed nonces of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return out, nil
}

// AttemptsLive counts a wallet's live attempts.
type AttemptsLive struct {
	// InFlight: signed or sent and not yet mined (what seed 003's in-flight
	// budget counts).
	InFlight int
	// Mined: mined, not yet final.
	Mined int
}

// AttemptsInFlight returns how many of the wallet's attempts are signed or
// sent and not yet mined, and how many are mined but not yet final.
func (s *Store) AttemptsInFlight(ctx context.Context, chainID int64, sender string) (AttemptsLive, error) {
	r, err := one(s.q.AttemptsInFlight(ctx, dbsqlc.AttemptsInFlightParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return AttemptsLive{}, fmt.Errorf("counting the attempts in flight of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return AttemptsLive{InFlight: int(r.InFlight), Mined: int(r.Mined)}, nil
}

// AttemptsMined returns the wallet's attempts that are mined but not yet
// final, in nonce order: each confirm checks their receipts again.
func (s *Store) AttemptsMined(ctx context.Context, p AttemptsListParams) ([]Attempt, error) {
	rows, err := s.q.AttemptsMined(ctx, dbsqlc.AttemptsMinedParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender), Max: int32(p.Max)})
	if err != nil {
		return nil, fmt.Errorf("reading the mined attempts of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return attemptsFromRows(rows), nil
}

// AttemptsMinedFromParams select the mined or confirmed attempts the chain
// no longer has.
type AttemptsMinedFromParams struct {
	ChainID int64
	Sender  string
	// From is the chain's nonce.
	From int64
	Max  int
}

// AttemptsMinedFrom returns the wallet's mined or confirmed attempts at or
// above nonce p.From (the chain's nonce), in nonce order: by the chain's
// own count none of them is in it.
func (s *Store) AttemptsMinedFrom(ctx context.Context, p AttemptsMinedFromParams) ([]Attempt, error) {
	rows, err := s.q.AttemptsMinedFrom(ctx, dbsqlc.AttemptsMinedFromParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender), FromNonce: p.From, Max: int32(p.Max)})
	if err != nil {
		return nil, fmt.Errorf("reading the mined attempts of %s from nonce %d: %w", WalletShardKey(p.ChainID, p.Sender), p.From, err)
	}
	return attemptsFromRows(rows), nil
}

// AttemptsSentUncertainParams select the sent attempts to broadcast again.
type AttemptsSentUncertainParams struct {
	ChainID int64
	Sender  string
	// From is the chain's nonce: attempts below it are mined or replaced,
	// which confirm finds out.
	From int64
	Max  int
}

// AttemptsSentUncertain returns the wallet's sent attempts from nonce p.From
// on whose last broadcast had an indeterminate outcome (LastError set), in
// nonce order. They count as sent, so their nonce is never recycled, but the
// node may never have taken them: confirm broadcasts them again, with the
// same bytes.
func (s *Store) AttemptsSentUncertain(ctx context.Context, p AttemptsSentUncertainParams) ([]Attempt, error) {
	rows, err := s.q.AttemptsSentUncertain(ctx, dbsqlc.AttemptsSentUncertainParams{
		ChainID: p.ChainID, Sender: lowerHex(p.Sender), FromNonce: p.From, Max: int32(p.Max),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the uncertain attempts of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return attemptsFromRows(rows), nil
}

// AttemptsSentFrom returns every sent attempt of the wallet from nonce
// p.From on, in nonce order: confirm broadcasts them again, with the same
// bytes, when the chain lost blocks or its nonce has not moved for a while.
func (s *Store) AttemptsSentFrom(ctx context.Context, p AttemptsSentUncertainParams) ([]Attempt, error) {
	rows, err := s.q.AttemptsSentFrom(ctx, dbsqlc.AttemptsSentFromParams{
		ChainID: p.ChainID, Sender: lowerHex(p.Sender), FromNonce: p.From, Max: int32(p.Max),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the sent attempts of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return attemptsFromRows(rows), nil
}

// AttemptRecordBroadcastParams record a sent attempt's new broadcast.
type AttemptRecordBroadcastParams struct {
	Now     time.Time
	ChainID int64
	TxHash  string
	// Error is the broadcast's error when its outcome was indeterminate
	// again; empty when the node took the transaction or already had it.
	Error string
}

// AttemptRecordBroadcast records the outcome of broadcasting a sent attempt
// again and reports whether the attempt was still sent.
func (s *Store) AttemptRecordBroadcast(ctx context.Context, p AttemptRecordBroadcastParams) (bool, error) {
	qp := dbsqlc.AttemptRecordBroadcastParams{Now: p.Now, ChainID: p.ChainID, TxHash: lowerHex(p.TxHash)}
	if p.Error != "" {
		qp.Error = &p.Error
	}
	n, err := s.q.AttemptRecordBroadcast(ctx, qp)
	if err != nil {
		return false, fmt.Errorf("recording the broadcast of attempt %s: %w", p.TxHash, err)
	}
	return n > 0, nil
}

// AttemptRequeueParams name an attempt that will never be mined.
type AttemptRequeueParams struct {
	Now     time.Time
	ChainID int64
	TxHash  string
	// Reason is kept on the dropped attempt, for operators.
	Reason string
	// Replaced: another transaction took the attempt's nonce (every hash of
	// ours definitively absent). The task's replacements count goes up, and
	// past MaxReplacements the task ends in error with Reason instead.
	Replaced        bool
	MaxReplacements int
}

// AttemptRequeue drops a live, unmined attempt that will never be mined —
// another transaction took its nonce, or it was signed and never broadcast —
// and puts its task back to waiting, in one transaction: the task is sent
// again with a new nonce, and the attempt's nonce is free. A replaced task
// that already went back MaxReplacements times ends in error instead. A
// replaced task emits replaced (with the dropped hash and nonce), and failed
// too when it ends in error, in the same transaction; other requeues emit
// nothing. A no-op's attempt is only dropped (the zero Task). It returns the task, or
// ErrNotFound when the attempt was not live or its task not executing
// (nothing changes then).
func (s *Store) AttemptRequeue(ctx context.Context, p AttemptRequeueParams) (Task, error) {
	if p.Reason == "" {
		return Task{}, fmt.Errorf("requeueing the task of attempt %s: no reason given", p.TxHash)
	}
	hash := lowerHex(p.TxHash)
	var out Task
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		dropped, err := one(q.AttemptDrop(ctx, dbsqlc.AttemptDropParams{Error: p.Reason, Now: p.Now, ChainID: p.ChainID, TxHash: hash}))
		if err != nil {
			return fmt.Errorf("dropping attempt %s: %w", hash, err)
		}
		taskID := dropped.TaskID
		if taskID == nil {
			return nil // a no-op
		}
		var row dbsqlc.LedgerqWalletTask
		switch {
		case !p.Replaced:
			row, err = one(q.TaskRequeue(ctx, dbsqlc.TaskRequeueParams{Now: p.Now, ID: *taskID}))
		default:
			row, err = one(q.TaskRequeueReplaced(ctx, dbsqlc.TaskRequeueReplacedParams{Now: p.Now, ID: *taskID}))
			if err == nil && int(row.Replacements) > p.MaxReplacements {
				reason := fmt.Sprintf("%s (replaced %d times, the limit is %d)", p.Reason, row.Replacements, p.MaxReplacements)
				row, err = one(q.TaskFinishError(ctx, dbsqlc.TaskFinishErrorParams{Now: p.Now, ID: *taskID, Error: reason}))
			}
		}
		if err != nil {
			return fmt.Errorf("requeueing task %q of attempt %s: %w", *taskID, hash, err)
		}
		out = taskFromRow(row)
		if !p.Replaced {
			return nil
		}
		events := []WebhookEvent{TaskWebhookEvent(WebhookReplaced, out, hash, &dropped.Nonce)}
		if out.Status == TaskError {
			events = append(events, TaskWebhookEvent(WebhookFailed, out, hash, &dropped.Nonce))
		}
		_, err = emitWebhookEvents(ctx, q, p.Now, events)
		return err
	})
	return out, err
}

// WalletKey names one wallet's queue: a chain and a sender address.
type WalletKey struct {
	ChainID int64
	// Sender is lower-case hex.
	Sender string
}

// WalletsWithWorkParams select a page of wallets with work.
type WalletsWithWorkParams struct {
	// After is the last wallet of the previous page (zero for the first).
	After WalletKey
	// WatchSince: wallets whose chain nonce moved after it are listed too,
	// so that their final transactions are watched a while longer.
	WatchSince time.Time
	Max        int
}

// WalletsWithWork returns up to Max wallets, in (chain, sender) order after
// p.After, that have live attempts (signed, sent or mined) or waiting tasks,
// or whose chain nonce moved after p.WatchSince: the shards that must keep
// running until their transactions are final (and a while after).
func (s *Store) WalletsWithWork(ctx context.Context, p WalletsWithWorkParams) ([]WalletKey, error) {
	rows, err := s.q.WalletsWithWork(ctx, dbsqlc.WalletsWithWorkParams{
		Max: int32(p.Max), AfterChainID: p.After.ChainID, AfterSender: lowerHex(p.After.Sender), WatchSince: p.WatchSince,
	})
	if err != nil {
		return nil, fmt.Errorf("listing the wallets with work: %w", err)
	}
	out := make([]WalletKey, len(rows))
	for i, r := range rows {
		out[i] = WalletKey{ChainID: r.ChainID, Sender: r.Sender}
	}
	return out, nil
}
