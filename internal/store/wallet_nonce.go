package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// NonceMovedError says the wallet's next nonce was not the one the caller
// signed with: another writer stored attempts meanwhile (or reconciliation
// moved it). Nothing was stored; the caller reads the nonce again and signs
// again.
type NonceMovedError struct {
	ChainID  int64
	Sender   string
	Expected int64
}

func (e *NonceMovedError) Error() string {
	return fmt.Sprintf("next nonce of %s is no longer %d", WalletShardKey(e.ChainID, e.Sender), e.Expected)
}

// WalletNonceGet returns the next nonce ledgerq will assign for sender on
// chainID, or ErrNotFound before its first attempt (the caller then starts
// from the chain's pending nonce).
func (s *Store) WalletNonceGet(ctx context.Context, chainID int64, sender string) (int64, error) {
	row, err := one(s.q.WalletNonceGet(ctx, dbsqlc.WalletNonceGetParams{ChainID: chainID, Sender: lowerHex(sender)}))
	if err != nil {
		return 0, fmt.Errorf("reading the next nonce of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return row.NextNonce, nil
}

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

// WalletNonceListFreedParams select a wallet's freed nonces.
type WalletNonceListFreedParams struct {
	ChainID int64
	Sender  string
	// From is the chain's nonce: nonces below it are used.
	From int64
	Max  int
}

// WalletNonceListFreed returns up to Max nonces from p.From up to the wallet's
// next nonce that no live attempt holds (their attempt was dropped), lowest
// first: the recycled nonces, which the next send fills before it
// takes new ones so that the chain never waits on a gap. None before the
// wallet's first attempt.
func (s *Store) WalletNonceListFreed(ctx context.Context, p WalletNonceListFreedParams) ([]int64, error) {
	out, err := s.q.WalletNonceListFreed(ctx, dbsqlc.WalletNonceListFreedParams{
		FromNonce: p.From, ChainID: p.ChainID, Sender: lowerHex(p.Sender), Max: int32(p.Max),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the freed nonces of %s: %w", WalletShardKey(p.ChainID, p.Sender), err)
	}
	return out, nil
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
