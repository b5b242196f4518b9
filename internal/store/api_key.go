package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// APIKeyTokenPrefix starts every API key token, so that a token found in a
// log or a repository is recognisable (and secret scanners can match it).
const APIKeyTokenPrefix = "lq_"

// apiKeyTokenBytes is the token's entropy: 32 random bytes.
const apiKeyTokenBytes = 32

// apiKeyTokenLen is a token's length: the prefix and 32 bytes in unpadded
// base64url.
var apiKeyTokenLen = len(APIKeyTokenPrefix) + base64.RawURLEncoding.EncodedLen(apiKeyTokenBytes)

// APIKey is one row of ledgerq.api_keys, without the token's hash: nothing
// in it opens the API.
type APIKey struct {
	ID   string
	Name string
	// Wallets are the names of the wallets the key may use.
	Wallets   []string
	CreatedAt time.Time
	// RevokedAt is nil while the key is valid.
	RevokedAt *time.Time
}

// Allows reports whether the key is scoped to wallet.
func (k APIKey) Allows(wallet string) bool { return slices.Contains(k.Wallets, wallet) }

func apiKeyFromRow(r dbsqlc.LedgerqApiKey) APIKey {
	return APIKey{ID: r.ID, Name: r.Name, Wallets: r.WalletIds, CreatedAt: r.CreatedAt.UTC(), RevokedAt: utcPtr(r.RevokedAt)}
}

// apiKeyHash is what the table stores of a token.
func apiKeyHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// APIKeyCreateParams is a new key.
type APIKeyCreateParams struct {
	Now  time.Time
	Name string
	// Wallets the key may use: one or more wallet names.
	Wallets []string
}

// APIKeyCreate stores a new key and returns it with its token. The token is
// returned this once: only its SHA-256 is stored.
func (s *Store) APIKeyCreate(ctx context.Context, p APIKeyCreateParams) (APIKey, string, error) {
	var raw [apiKeyTokenBytes]byte
	// crypto/rand.Read never returns an error (Go 1.24+); it panics instead.
	_, _ = rand.Read(raw[:])
	token := APIKeyTokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	// Never nil: no wallets is for the table's CHECK to refuse, not a NULL.
	wallets := append([]string{}, slices.Compact(slices.Sorted(slices.Values(p.Wallets)))...)
	row, err := one(s.q.APIKeyInsert(ctx, dbsqlc.APIKeyInsertParams{
		ID: newUUIDv7(p.Now), Name: p.Name, TokenHash: apiKeyHash(token), WalletIds: wallets, Now: p.Now,
	}))
	if err != nil {
		return APIKey{}, "", fmt.Errorf("storing API key %q: %w", p.Name, err)
	}
	return apiKeyFromRow(row), token, nil
}

// APIKeyLookup returns the valid key whose token is token. An unknown,
// malformed or revoked token is ErrNotFound: the three are one to a client.
func (s *Store) APIKeyLookup(ctx context.Context, token string) (APIKey, error) {
	if len(token) != apiKeyTokenLen || !strings.HasPrefix(token, APIKeyTokenPrefix) {
		// No token ledgerq made: no need to ask the database.
		return APIKey{}, ErrNotFound
	}
	row, err := one(s.q.APIKeyGetByTokenHash(ctx, apiKeyHash(token)))
	if err != nil {
		return APIKey{}, fmt.Errorf("looking up an API key: %w", err)
	}
	return apiKeyFromRow(row), nil
}

// apiKeyID is the form of a key id (the table's api_keys_id_format).
var apiKeyID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// APIKeyGet returns the key id, revoked or not.
func (s *Store) APIKeyGet(ctx context.Context, id string) (APIKey, error) {
	if !apiKeyID.MatchString(id) {
		return APIKey{}, fmt.Errorf("reading API key %q: %w", id, ErrNotFound)
	}
	row, err := one(s.q.APIKeyGet(ctx, id))
	if err != nil {
		return APIKey{}, fmt.Errorf("reading API key %q: %w", id, err)
	}
	return apiKeyFromRow(row), nil
}

// APIKeyList returns the keys, oldest first; revoked ones only with
// includeRevoked.
func (s *Store) APIKeyList(ctx context.Context, includeRevoked bool) ([]APIKey, error) {
	rows, err := s.q.APIKeyList(ctx, includeRevoked)
	if err != nil {
		return nil, fmt.Errorf("listing API keys: %w", err)
	}
	return fromRows(rows, apiKeyFromRow), nil
}

// APIKeyRevokeParams name the key to revoke.
type APIKeyRevokeParams struct {
	Now time.Time
	ID  string
}

// APIKeyRevoke revokes the key: it returns the key and true. A key already
// revoked is left as it was (its first revocation time kept): it returns the
// key and false. A missing key is ErrNotFound.
func (s *Store) APIKeyRevoke(ctx context.Context, p APIKeyRevokeParams) (APIKey, bool, error) {
	if !apiKeyID.MatchString(p.ID) {
		return APIKey{}, false, fmt.Errorf("revoking API key %q: %w", p.ID, ErrNotFound)
	}
	row, err := one(s.q.APIKeyRevoke(ctx, dbsqlc.APIKeyRevokeParams{Now: p.Now, ID: p.ID}))
	switch {
	case err == nil:
		return apiKeyFromRow(row), true, nil
	case !errors.Is(err, ErrNotFound):
		return APIKey{}, false, fmt.Errorf("revoking API key %q: %w", p.ID, err)
	}
	row, err = one(s.q.APIKeyGet(ctx, p.ID))
	if err != nil {
		return APIKey{}, false, fmt.Errorf("revoking API key %q: %w", p.ID, err)
	}
	return apiKeyFromRow(row), false, nil
}
