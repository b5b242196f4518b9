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
	"unicode"
	"unicode/utf8"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// APIKeyTokenPrefix starts every API key token, so that a token found in a
// log or a repository is recognisable (and secret scanners can match it).
const APIKeyTokenPrefix = "lq_"

// secretTokenBytes is the entropy of a token ledgerq makes (an API key's,
// a console session's): 32 random bytes.
const secretTokenBytes = 32

// APIKey is one row of ledgerq.api_keys, without the token's hash: nothing
// in it opens the API.
type APIKey struct {
	ID   string
	Name string
	// Scopes are what the key opens, sorted.
	Scopes    []Scope
	CreatedAt time.Time
	// RevokedAt is nil while the key is valid.
	RevokedAt *time.Time
}

// Scope is one thing a key opens.
type Scope string

// The scopes. A key holds one or more; admin holds every other.
const (
	// ScopeAdmin opens everything: every route, the console and its
	// actions.
	ScopeAdmin Scope = "admin"
	// ScopeRead opens every read: the GET routes of every lane, /metrics,
	// the console's pages (not its actions).
	ScopeRead Scope = "read"
	// ScopePoolWrite opens the builder lane's intake: POST /v1/pool/txs
	// (and /rpc when it requires a key).
	ScopePoolWrite Scope = "pool:write"
	// ScopeAnyService opens the batch lane for every service.
	ScopeAnyService Scope = "service:*"
)

// Scope prefixes: a wallet's and a service's.
const (
	walletScopePrefix  = "wallet:"
	serviceScopePrefix = "service:"
)

// WalletScope opens the routes of wallet name.
func WalletScope(name string) Scope { return Scope(walletScopePrefix + name) }

// WalletScopes are the scopes of the wallets names.
func WalletScopes(names ...string) []Scope {
	out := make([]Scope, len(names))
	for i, n := range names {
		out[i] = WalletScope(n)
	}
	return out
}

// JoinScopes writes scopes for a message, with sep between them; no scopes
// are "(none)".
func JoinScopes(scopes []Scope, sep string) string {
	if len(scopes) == 0 {
		return "(none)"
	}
	out := make([]string, len(scopes))
	for i, sc := range scopes {
		out[i] = string(sc)
	}
	return strings.Join(out, sep)
}

// ServiceScope opens the batch lane for service id: posting its batches and
// reading them.
func ServiceScope(id string) Scope { return Scope(serviceScopePrefix + id) }

var walletName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ParseScope reads a scope as ledgerq keys create takes it (--scope), with
// the error a user needs to fix it. It is the table's api_keys_scopes_valid
// in Go.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); {
	case sc == ScopeAdmin, sc == ScopeRead, sc == ScopePoolWrite, sc == ScopeAnyService:
		return sc, nil
	case strings.HasPrefix(s, walletScopePrefix):
		if !walletName.MatchString(s[len(walletScopePrefix):]) {
			return "", fmt.Errorf("scope %q: a wallet name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", s)
		}
		return sc, nil
	case strings.HasPrefix(s, serviceScopePrefix):
		id := s[len(serviceScopePrefix):]
		if id == "" || utf8.RuneCountInString(id) > 256 || !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl) {
			return "", fmt.Errorf("scope %q: a service id is 1 to 256 characters without control characters", s)
		}
		return sc, nil
	}
	return "", fmt.Errorf("scope %q: want admin, read, pool:write, service:* , service:ID or wallet:NAME", s)
}

// Has reports whether the key holds scope, or admin.
func (k APIKey) Has(scope Scope) bool {
	return slices.Contains(k.Scopes, ScopeAdmin) || slices.Contains(k.Scopes, scope)
}

// AllowsWallet reports whether the key opens wallet's routes.
func (k APIKey) AllowsWallet(wallet string) bool { return k.Has(WalletScope(wallet)) }

// AllowsService reports whether the key opens service's batches.
func (k APIKey) AllowsService(service string) bool {
	return k.Has(ScopeAnyService) || k.Has(ServiceScope(service))
}

// Wallets returns the wallets the key names (admin opens every wallet
// without naming one).
func (k APIKey) Wallets() []string {
	var out []string
	for _, s := range k.Scopes {
		if name, ok := strings.CutPrefix(string(s), walletScopePrefix); ok {
			out = append(out, name)
		}
	}
	return out
}

func apiKeyFromRow(r dbsqlc.LedgerqApiKey) APIKey {
	scopes := make([]Scope, len(r.Scopes))
	for i, s := range r.Scopes {
		scopes[i] = Scope(s)
	}
	return APIKey{ID: r.ID, Name: r.Name, Scopes: scopes, CreatedAt: r.CreatedAt.UTC(), RevokedAt: utcPtr(r.RevokedAt)}
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
	// Scopes are what the key opens: one or more (ParseScope).
	Scopes []Scope
}

// APIKeyCreate stores a new key and returns it with its token. The token is
// returned this once: only its SHA-256 is stored.
func (s *Store) APIKeyCreate(ctx context.Context, p APIKeyCreateParams) (APIKey, string, error) {
	scopes := make([]string, 0, len(p.Scopes))
	for _, sc := range p.Scopes {
		if _, err := ParseScope(string(sc)); err != nil {
			return APIKey{}, "", fmt.Errorf("storing API key %q: %w", p.Name, err)
		}
		scopes = append(scopes, string(sc))
	}
	// Never nil: no scope is for the table's CHECK to refuse, not a NULL.
	scopes = slices.Compact(slices.Sorted(slices.Values(scopes)))
	if scopes == nil {
		scopes = []string{}
	}
	token := newSecretToken(APIKeyTokenPrefix)
	row, err := one(s.q.APIKeyInsert(ctx, dbsqlc.APIKeyInsertParams{
		ID: newUUIDv7(p.Now), Name: p.Name, TokenHash: apiKeyHash(token), Scopes: scopes, Now: p.Now,
	}))
	if err != nil {
		return APIKey{}, "", fmt.Errorf("storing API key %q: %w", p.Name, err)
	}
	return apiKeyFromRow(row), token, nil
}

// newSecretToken is prefix and 32 random bytes in unpadded base64url.
func newSecretToken(prefix string) string {
	var raw [secretTokenBytes]byte
	// crypto/rand.Read never returns an error (Go 1.24+); it panics instead.
	_, _ = rand.Read(raw[:])
	return prefix + base64.RawURLEncoding.EncodeToString(raw[:])
}

// isSecretToken reports whether token has the form newSecretToken(prefix)
// gives: one that has not was never made by ledgerq, and needs no look-up.
func isSecretToken(token, prefix string) bool {
	rest, ok := strings.CutPrefix(token, prefix)
	return ok && len(rest) == base64.RawURLEncoding.EncodedLen(secretTokenBytes)
}

// APIKeyLookup returns the valid key whose token is token. An unknown,
// malformed or revoked token is ErrNotFound: the three are one to a client.
func (s *Store) APIKeyLookup(ctx context.Context, token string) (APIKey, error) {
	if !isSecretToken(token, APIKeyTokenPrefix) {
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
