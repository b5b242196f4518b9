package store

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// Wallet lane II (seed 003): what keeps a wallet moving — gas bumps, no-op
// transactions, nonce resets and balance health.

// AttemptHashesOfNonce returns every hash ever stored for a's nonce on behalf
// of a's task (or of a no-op), newest first, a's own included: a gas bump's
// superseded attempts may be the one mined, so confirm asks about them all.
func (s *Store) AttemptHashesOfNonce(ctx context.Context, a Attempt) ([]string, error) {
	qp := dbsqlc.AttemptHashesOfNonceParams{ChainID: a.ChainID, Sender: lowerHex(a.Sender), Nonce: a.Nonce}
	if !a.Noop() {
		qp.TaskID = &a.TaskID
	}
	out, err := s.q.AttemptHashesOfNonce(ctx, qp)
	if err != nil {
		return nil, fmt.Errorf("reading the hashes of nonce %d of %s: %w", a.Nonce, WalletShardKey(a.ChainID, a.Sender), err)
	}
	return out, nil
}

// AttemptLiveAt returns the live (signed or sent) attempt holding nonce, or
// ErrNotFound.
func (s *Store) AttemptLiveAt(ctx context.Context, chainID int64, sender string, nonce int64) (Attempt, error) {
	row, err := one(s.q.AttemptLiveAt(ctx, dbsqlc.AttemptLiveAtParams{ChainID: chainID, Sender: lowerHex(sender), Nonce: nonce}))
	if err != nil {
		return Attempt{}, fmt.Errorf("reading the attempt at nonce %d of %s: %w", nonce, WalletShardKey(chainID, sender), err)
	}
	return attemptFromRow(row), nil
}

// AttemptMaxLiveNonce returns the highest nonce a live attempt (signed,
// sent or mined) of the wallet holds, or -1 when none does.
func (s *Store) AttemptMaxLiveNonce(ctx context.Context, chainID int64, sender string) (int64, error) {
	n, err := one(s.q.AttemptMaxLiveNonce(ctx, dbsqlc.AttemptMaxLiveNonceParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return 0, fmt.Errorf("reading the highest live nonce of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return n, nil
}

// AttemptMaxHeldNonce returns the highest nonce any attempt of the wallet
// that is not dropped holds, confirmed ones included, or -1 when none does:
// the next nonce never moves to or below it.
func (s *Store) AttemptMaxHeldNonce(ctx context.Context, chainID int64, sender string) (int64, error) {
	n, err := one(s.q.AttemptMaxHeldNonce(ctx, dbsqlc.AttemptMaxHeldNonceParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return 0, fmt.Errorf("reading the highest held nonce of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return n, nil
}

// AttemptBumpParams are a gas bump: the sent attempt it replaces and the
// new one, signed for the same task and nonce with higher fees.
type AttemptBumpParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// Old is the hash of the nonce's live, sent attempt.
	Old string
	New SignedTx
}

// AttemptBump stores a gas bump before it is broadcast (the write-ahead), in
// one transaction: the old attempt leaves the live set (dropped, superseded
// by the new hash: it may still be mined, and confirm looks it up), the new
// one is stored signed, and the task's bump count goes up. It returns
// ErrNotFound, storing nothing, when the old attempt is no longer sent or
// belongs to another task or nonce.
func (s *Store) AttemptBump(ctx context.Context, p AttemptBumpParams) error {
	sender, oldHash, newHash := lowerHex(p.Sender), lowerHex(p.Old), lowerHex(p.New.TxHash)
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		old, err := one(q.AttemptLiveAt(ctx, dbsqlc.AttemptLiveAtParams{ChainID: p.ChainID, Sender: sender, Nonce: p.New.Nonce}))
		if err != nil {
			return fmt.Errorf("bumping nonce %d of %s: %w", p.New.Nonce, WalletShardKey(p.ChainID, sender), err)
		}
		if old.TxHash != oldHash || deref(old.TaskID) != p.New.TaskID {
			return fmt.Errorf("bumping nonce %d of %s: attempt %s is not its live attempt: %w", p.New.Nonce, WalletShardKey(p.ChainID, sender), oldHash, ErrNotFound)
		}
		if _, err := one(q.AttemptSupersede(ctx, dbsqlc.AttemptSupersedeParams{SupersededBy: newHash, Now: p.Now, ChainID: p.ChainID, TxHash: oldHash})); err != nil {
			return fmt.Errorf("superseding attempt %s: %w", oldHash, err)
		}
		if err := insertOne(ctx, q, p.Now, p.ChainID, sender, p.New); err != nil {
			return err
		}
		if p.New.TaskID == "" {
			return nil
		}
		n, err := q.TaskCountBump(ctx, dbsqlc.TaskCountBumpParams{Now: p.Now, ID: p.New.TaskID})
		if err != nil {
			return fmt.Errorf("counting the bump of task %q: %w", p.New.TaskID, err)
		}
		if n != 1 {
			return fmt.Errorf("counting the bump of task %q: %w", p.New.TaskID, ErrNotFound)
		}
		return nil
	})
}

// AttemptStoreNoopParams are a no-op transaction (a 0-value transfer to
// self) for a nonce below the wallet's next nonce that no live attempt
// holds.
type AttemptStoreNoopParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// Tx has no TaskID.
	Tx SignedTx
}

// AttemptStoreNoop stores a no-op before it is broadcast (the write-ahead).
// It fails, storing nothing, with *NonceTakenError when a live attempt holds
// the nonce, and with *NonceMovedError when the nonce is not below the
// wallet's next nonce (it was never assigned, so it is no gap).
func (s *Store) AttemptStoreNoop(ctx context.Context, p AttemptStoreNoopParams) error {
	if p.Tx.TaskID != "" {
		return fmt.Errorf("storing a no-op: it has task %q", p.Tx.TaskID)
	}
	sender := lowerHex(p.Sender)
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		next, err := one(q.WalletNonceGet(ctx, dbsqlc.WalletNonceGetParams{ChainID: p.ChainID, Sender: sender}))
		switch {
		case errors.Is(err, ErrNotFound) || err == nil && p.Tx.Nonce >= next.NextNonce:
			return &NonceMovedError{ChainID: p.ChainID, Sender: sender, Expected: p.Tx.Nonce + 1}
		case err != nil:
			return fmt.Errorf("reading the next nonce of %s: %w", WalletShardKey(p.ChainID, sender), err)
		}
		return insertOne(ctx, q, p.Now, p.ChainID, sender, p.Tx)
	})
}

func insertOne(ctx context.Context, q *dbsqlc.Queries, now time.Time, chainID int64, sender string, a SignedTx) error {
	if a.GasLimit == 0 || a.GasLimit > 1<<63-1 {
		return fmt.Errorf("storing an attempt: gas limit %d out of range", a.GasLimit)
	}
	ins := dbsqlc.AttemptInsertOneParams{
		ChainID: chainID, TxHash: lowerHex(a.TxHash), Sender: sender, Nonce: a.Nonce, Raw: a.Raw,
		GasLimit: int64(a.GasLimit), MaxFee: numericFromBig(a.MaxFeePerGas), MaxTip: numericFromBig(a.MaxPriorityFeePerGas), Now: now,
	}
	if a.TaskID != "" {
		ins.TaskID = &a.TaskID
	}
	if err := q.AttemptInsertOne(ctx, ins); err != nil {
		if pgUniqueViolation(err, "tx_attempts_live_nonce") {
			return &NonceTakenError{ChainID: chainID, Sender: sender}
		}
		return fmt.Errorf("storing attempt %s of %s: %w", ins.TxHash, WalletShardKey(chainID, sender), err)
	}
	return nil
}

// TaskMarkPriceCapped records that a gas bump of the executing task was
// refused by the price cap; it reports whether this is news (the first time
// since the task's last bump).
func (s *Store) TaskMarkPriceCapped(ctx context.Context, now time.Time, id string) (bool, error) {
	n, err := s.q.TaskMarkPriceCapped(ctx, dbsqlc.TaskMarkPriceCappedParams{Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("marking task %q price-capped: %w", id, err)
	}
	return n > 0, nil
}

// WalletNonceResetParams move a wallet's next nonce.
type WalletNonceResetParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// From is the next nonce as read; To the one it moves to.
	From, To int64
	// Record: a nonce reset, kept on the wallet's health row (when, from,
	// to); otherwise a quiet trim of freed nonces at the top.
	Record bool
}

// WalletNonceReset moves the wallet's next nonce from p.From to p.To, down
// or up, only if it is still p.From and no live attempt sits at or above
// p.To (no nonce in flight is skipped over or handed out twice). It reports
// whether it moved.
func (s *Store) WalletNonceReset(ctx context.Context, p WalletNonceResetParams) (bool, error) {
	if p.To < 0 {
		return false, fmt.Errorf("resetting a next nonce to %d", p.To)
	}
	sender := lowerHex(p.Sender)
	var moved bool
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		n, err := q.WalletNonceReset(ctx, dbsqlc.WalletNonceResetParams{ToNonce: p.To, Now: p.Now, ChainID: p.ChainID, Sender: sender, FromNonce: p.From})
		if err != nil {
			return fmt.Errorf("moving the next nonce of %s from %d to %d: %w", WalletShardKey(p.ChainID, sender), p.From, p.To, err)
		}
		moved = n > 0
		if !moved || !p.Record {
			return nil
		}
		if err := q.WalletHealthRecordReset(ctx, dbsqlc.WalletHealthRecordResetParams{ChainID: p.ChainID, Sender: sender, Now: p.Now, FromNonce: p.From, ToNonce: p.To}); err != nil {
			return fmt.Errorf("recording the nonce reset of %s: %w", WalletShardKey(p.ChainID, sender), err)
		}
		return nil
	})
	return moved, err
}

// WalletHealth is one row of ledgerq.wallet_health: seed 003's eoa_health.
type WalletHealth struct {
	ChainID int64
	Sender  string
	// ChainNonce is the chain's nonce as confirm last read it, unmoved since
	// ChainNonceSince (both nil before the first read).
	ChainNonce      *int64
	ChainNonceSince *time.Time
	// Balance as read at BalanceAt (both nil before the first read;
	// BalanceAt nil after an insufficient-funds failure asks for a new read).
	Balance   *big.Int
	BalanceAt *time.Time
	// Threshold: sending pauses while the balance is below it (what a plain
	// transfer cost at the fees read with the balance).
	Threshold *big.Int
	// ChainHead is the chain's latest block as the last confirm read it.
	ChainHead *int64
	Paused    bool
	// Resets counts nonce resets; the last one's time and nonces.
	Resets                     int
	LastResetAt                *time.Time
	LastResetFrom, LastResetTo *int64
	CreatedAt, UpdatedAt       time.Time
}

func healthFromRow(r dbsqlc.LedgerqWalletHealth) WalletHealth {
	h := WalletHealth{
		ChainID: r.ChainID, Sender: r.Sender, ChainNonce: r.ChainNonce, ChainNonceSince: utcPtr(r.ChainNonceSince),
		BalanceAt: utcPtr(r.BalanceAt), Threshold: bigFromNumeric(r.ThresholdWei), Paused: r.Paused, ChainHead: r.ChainHead,
		Resets: int(r.Resets), LastResetAt: utcPtr(r.LastResetAt), LastResetFrom: r.LastResetFrom, LastResetTo: r.LastResetTo,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	if r.BalanceWei.Valid {
		h.Balance = bigFromNumeric(r.BalanceWei)
	}
	return h
}

// WalletHealthGet returns the wallet's health row, or ErrNotFound before
// its first confirm or balance read.
func (s *Store) WalletHealthGet(ctx context.Context, chainID int64, sender string) (WalletHealth, error) {
	row, err := one(s.q.WalletHealthGet(ctx, dbsqlc.WalletHealthGetParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return WalletHealth{}, fmt.Errorf("reading the health of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return healthFromRow(row), nil
}

// WalletHealthObserveNonce records the chain's nonce and head as confirm
// read them; the time the nonce was first seen moves only when it changed.
func (s *Store) WalletHealthObserveNonce(ctx context.Context, now time.Time, chainID int64, sender string, nonce, head int64) error {
	if err := s.q.WalletHealthObserveNonce(ctx, dbsqlc.WalletHealthObserveNonceParams{ChainID: chainID, Sender: lowerHex(sender), ChainNonce: nonce, ChainHead: head, Now: now}); err != nil {
		return fmt.Errorf("recording the chain's nonce of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return nil
}

// WalletHealthSetBalance records the wallet's balance as read and the
// threshold computed with it, and whether sending pauses (balance below the
// threshold); it returns the row.
func (s *Store) WalletHealthSetBalance(ctx context.Context, now time.Time, chainID int64, sender string, balance, threshold *big.Int) (WalletHealth, error) {
	row, err := one(s.q.WalletHealthSetBalance(ctx, dbsqlc.WalletHealthSetBalanceParams{
		ChainID: chainID, Sender: lowerHex(sender), Balance: numericFromBig(balance), Threshold: numericFromBig(threshold), Now: now,
	}))
	if err != nil {
		return WalletHealth{}, fmt.Errorf("recording the balance of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return healthFromRow(row), nil
}

// WalletHealthBalanceStale asks for a new balance read before the wallet's
// next send (a send was refused for insufficient funds).
func (s *Store) WalletHealthBalanceStale(ctx context.Context, now time.Time, chainID int64, sender string) error {
	if err := s.q.WalletHealthBalanceStale(ctx, dbsqlc.WalletHealthBalanceStaleParams{ChainID: chainID, Sender: lowerHex(sender), Now: now}); err != nil {
		return fmt.Errorf("marking the balance of %s stale: %w", WalletShardKey(chainID, sender), err)
	}
	return nil
}
