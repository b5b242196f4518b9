package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// ConsoleSessionPrefix starts every console session token (the cookie's
// value), so that one found in a log is recognisable.
const ConsoleSessionPrefix = "lqs_"

// loginSessionsForgotten bounds the ended sessions one login deletes; the
// monitor role's rounds (ConsoleSessionDeleteEnded) delete the rest.
const loginSessionsForgotten = 100

// ConsoleSessionCreate starts a console session of the key, valid for ttl,
// and returns its token (for the cookie). Only its SHA-256 is stored. In
// the same transaction it forgets the sessions that have expired or ended
// (no longer usable), up to loginSessionsForgotten of each, so the table
// holds little more than the live ones: a login is when rows are added, so
// it is when they are kept in bounds (the monitor role's access retention
// deletes them too, for when nobody logs in).
func (s *Store) ConsoleSessionCreate(ctx context.Context, keyID string, now time.Time, ttl time.Duration) (string, error) {
	token := newSecretToken(ConsoleSessionPrefix)
	err := s.withTx(ctx, func(q *dbsqlc.Queries) error {
		if _, err := q.ConsoleSessionDeleteEnded(ctx, dbsqlc.ConsoleSessionDeleteEndedParams{Before: now, Max: loginSessionsForgotten}); err != nil {
			return err
		}
		return q.ConsoleSessionInsert(ctx, dbsqlc.ConsoleSessionInsertParams{
			TokenHash: apiKeyHash(token), KeyID: keyID, Now: now, ExpiresAt: now.Add(ttl),
		})
	})
	if err != nil {
		return "", fmt.Errorf("starting a console session of key %s: %w", keyID, err)
	}
	return token, nil
}

// ConsoleSessionKey returns the key of the session token opens: one that
// has not ended or expired, whose key is not revoked. Anything else is
// ErrNotFound.
func (s *Store) ConsoleSessionKey(ctx context.Context, token string, now time.Time) (APIKey, error) {
	if !isSecretToken(token, ConsoleSessionPrefix) {
		return APIKey{}, ErrNotFound
	}
	row, err := one(s.q.ConsoleSessionKey(ctx, dbsqlc.ConsoleSessionKeyParams{TokenHash: apiKeyHash(token), Now: now}))
	if err != nil {
		return APIKey{}, fmt.Errorf("reading a console session: %w", err)
	}
	return apiKeyFromRow(row), nil
}

// ConsoleSessionEnd ends the session (logout); an unknown or ended one is
// left alone.
func (s *Store) ConsoleSessionEnd(ctx context.Context, token string, now time.Time) error {
	if _, err := s.q.ConsoleSessionEnd(ctx, dbsqlc.ConsoleSessionEndParams{TokenHash: apiKeyHash(token), Now: now}); err != nil {
		return fmt.Errorf("ending a console session: %w", err)
	}
	return nil
}

// ConsoleSessionDeleteEnded deletes up to max sessions that expired and up
// to max that were logged out before before (the access retention), and
// returns how many. A session that can still open the console is kept.
func (s *Store) ConsoleSessionDeleteEnded(ctx context.Context, before time.Time, max int) (int64, error) {
	n, err := s.q.ConsoleSessionDeleteEnded(ctx, dbsqlc.ConsoleSessionDeleteEndedParams{Before: before, Max: int32(max)})
	if err != nil {
		return 0, fmt.Errorf("deleting ended console sessions: %w", err)
	}
	return n, nil
}
