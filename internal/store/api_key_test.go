package store_test

import (
	"crypto/sha256"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func createKey(t *testing.T, st *store.Store, now time.Time, name string, wallets ...string) (store.APIKey, string) {
	t.Helper()
	k, token, err := st.APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: now, Name: name, Scopes: store.WalletScopes(wallets...)})
	require.NoError(t, err)
	return k, token
}

// The token is shown once: the table holds its SHA-256 and nothing else of
// it, so a copy of the database opens nothing.
func TestAPIKey_CreateReturnsAHighEntropyTokenOnceAndStoresOnlyItsHash(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	now := testfactory.Start()
	k, token := createKey(t, st, now, "ci", "main", "hot", "main")
	require.Regexp(t, `^lq_[A-Za-z0-9_-]{43}$`, token, "lq_ and 32 random bytes in base64url")
	require.Equal(t, []store.Scope{"wallet:hot", "wallet:main"}, k.Scopes, "sorted, once each")
	require.Equal(t, []string{"hot", "main"}, k.Wallets())
	require.Equal(t, now, k.CreatedAt)
	require.Nil(t, k.RevokedAt)

	var row string
	var hash []byte
	require.NoError(t, st.DB().QueryRow(t.Context(), `SELECT k::text, token_hash FROM ledgerq.api_keys k WHERE id = $1`, k.ID).Scan(&row, &hash))
	want := sha256.Sum256([]byte(token))
	require.Equal(t, want[:], hash)
	require.NotContains(t, row, strings.TrimPrefix(token, "lq_")[:16], "no part of the token is stored")

	_, other := createKey(t, st, now, "ci", "main")
	require.NotEqual(t, token, other)
}

func TestAPIKey_LookupByTokenFindsTheKeyAndAnyOtherTokenIsNotFound(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	now := testfactory.Start()
	k, token := createKey(t, st, now, "ci", "main")
	got, err := st.APIKeyLookup(t.Context(), token)
	require.NoError(t, err)
	require.Equal(t, k, got)
	require.True(t, got.AllowsWallet("main"))
	require.False(t, got.AllowsWallet("other"))
	require.False(t, got.Has(store.ScopeRead))

	// The token with one character changed, and with its letters in the
	// other case: tokens are compared exactly.
	last := "A"
	if token[len(token)-1] == 'A' {
		last = "B"
	}
	flipped := token[:len(token)-1] + last
	otherCase := "lq_" + strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z':
			return r - 'a' + 'A'
		case 'A' <= r && r <= 'Z':
			return r - 'A' + 'a'
		}
		return r
	}, token[3:])
	for _, bad := range []string{"", "lq_", flipped, otherCase, token + "x", strings.ToUpper(token), "Bearer " + token, "lq_\x00" + token[4:], "lq_\xff" + token[4:]} {
		_, err := st.APIKeyLookup(t.Context(), bad)
		require.ErrorIs(t, err, store.ErrNotFound, "%q", bad)
	}
}

func TestAPIKey_ARevokedKeyIsNotFoundAndRevokingTwiceKeepsTheFirstTime(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	now := testfactory.Start()
	k, token := createKey(t, st, now, "ci", "main")
	revoked, ok, err := st.APIKeyRevoke(t.Context(), store.APIKeyRevokeParams{Now: now.Add(time.Minute), ID: k.ID})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, now.Add(time.Minute), *revoked.RevokedAt)
	_, err = st.APIKeyLookup(t.Context(), token)
	require.ErrorIs(t, err, store.ErrNotFound, "a revoked key opens nothing")

	again, ok, err := st.APIKeyRevoke(t.Context(), store.APIKeyRevokeParams{Now: now.Add(time.Hour), ID: k.ID})
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, revoked, again)

	for _, id := range []string{"0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b", "nope", "a\x00b"} {
		_, _, err = st.APIKeyRevoke(t.Context(), store.APIKeyRevokeParams{Now: now, ID: id})
		require.ErrorIs(t, err, store.ErrNotFound, id)
	}
}

func TestAPIKey_ListIsOldestFirstAndHoldsRevokedKeysOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	now := testfactory.Start()
	a, _ := createKey(t, st, now, "a", "main")
	b, _ := createKey(t, st, now.Add(time.Second), "b", "main")
	c, _ := createKey(t, st, now.Add(2*time.Second), "c", "main")
	_, _, err := st.APIKeyRevoke(t.Context(), store.APIKeyRevokeParams{Now: now.Add(3 * time.Second), ID: b.ID})
	require.NoError(t, err)
	valid, err := st.APIKeyList(t.Context(), false)
	require.NoError(t, err)
	require.Equal(t, []string{a.ID, c.ID}, keyIDs(valid))
	all, err := st.APIKeyList(t.Context(), true)
	require.NoError(t, err)
	require.Equal(t, []string{a.ID, b.ID, c.ID}, keyIDs(all))
}

func keyIDs(keys []store.APIKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.ID
	}
	return out
}

// A key without scopes, with a wallet name the API could not route, or
// without a name is refused: a bad scope before the database is asked
// (ParseScope), the rest by the table itself.
func TestAPIKey_TheTableRefusesKeysWithoutWalletsOrWithBadNames(t *testing.T) {
	t.Parallel()
	now := testfactory.Start()
	for name, p := range map[string]store.APIKeyCreateParams{
		"empty wallet":    {Now: now, Name: "x", Scopes: store.WalletScopes("")},
		"wallet w/ space": {Now: now, Name: "x", Scopes: store.WalletScopes("a b")},
		"wallet w/ slash": {Now: now, Name: "x", Scopes: store.WalletScopes("main", "../x")},
		"long wallet":     {Now: now, Name: "x", Scopes: store.WalletScopes(strings.Repeat("a", 65))},
	} {
		st := testdb.NewTx(t)
		_, _, err := st.APIKeyCreate(t.Context(), p)
		require.ErrorContains(t, err, "scope", name)
	}
	for name, p := range map[string]store.APIKeyCreateParams{
		"no scope":   {Now: now, Name: "x"},
		"empty name": {Now: now, Name: "", Scopes: store.WalletScopes("main")},
	} {
		st := testdb.NewTx(t)
		_, _, err := st.APIKeyCreate(t.Context(), p)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, name)
		require.Equal(t, "23514", pgErr.Code, "%s: a CHECK violation, got %v", name, err)
		require.Regexp(t, regexp.MustCompile(`^api_keys_`), pgErr.ConstraintName, name)
	}
}

// Scopes: admin holds every other; read, pool:write and a service's scope
// open what they name and nothing else; service:* opens every service.
func TestAPIKey_ScopesOpenWhatTheyNameAndAdminOpensEverything(t *testing.T) {
	t.Parallel()
	k := func(scopes ...store.Scope) store.APIKey { return store.APIKey{Scopes: scopes} }
	admin := k(store.ScopeAdmin)
	for _, sc := range []store.Scope{store.ScopeRead, store.ScopePoolWrite, store.ScopeAnyService, store.WalletScope("main")} {
		require.True(t, admin.Has(sc), sc)
	}
	require.True(t, admin.AllowsService("orders"))
	require.True(t, admin.AllowsWallet("main"))

	svc := k(store.ServiceScope("orders"), store.ScopeRead)
	require.True(t, svc.AllowsService("orders"))
	require.False(t, svc.AllowsService("payments"))
	require.False(t, svc.Has(store.ScopePoolWrite))
	require.False(t, svc.AllowsWallet("main"))
	require.True(t, k(store.ScopeAnyService).AllowsService("payments"))
	require.False(t, k(store.ScopeAnyService).Has(store.ScopeRead))

	for _, good := range []string{"admin", "read", "pool:write", "service:*", "service:orders eu", "wallet:main-2"} {
		sc, err := store.ParseScope(good)
		require.NoError(t, err, good)
		require.Equal(t, store.Scope(good), sc)
	}
	for _, bad := range []string{"", "Admin", "pool", "pool:read", "service:", "service:a\nb", "wallet:", "wallet:a/b", "wallet:" + strings.Repeat("a", 65)} {
		_, err := store.ParseScope(bad)
		require.Error(t, err, "%q", bad)
	}
}

// The table holds the same rule as ParseScope: it refuses what the Go
// check refuses, for a row written by SQL.
func TestAPIKey_TheTableRefusesScopesOutsideTheModel(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"superuser", "wallet:a b", "service:", "read "} {
		st := testdb.NewTx(t)
		_, err := st.DB().Exec(t.Context(), `INSERT INTO ledgerq.api_keys (id, name, token_hash, scopes, created_at)
			VALUES ('0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b', 'x', sha256('x'), ARRAY[$1], now())`, bad)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, bad)
		require.Equal(t, "api_keys_scopes_valid", pgErr.ConstraintName, bad)
	}
}
