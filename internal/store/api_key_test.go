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
	k, token, err := st.APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: now, Name: name, Wallets: wallets})
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
	require.Equal(t, []string{"hot", "main"}, k.Wallets, "sorted, once each")
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
	require.True(t, got.Allows("main"))
	require.False(t, got.Allows("other"))

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

// The table itself refuses a key without wallets, a wallet name the API
// could not route, and an empty name.
func TestAPIKey_TheTableRefusesKeysWithoutWalletsOrWithBadNames(t *testing.T) {
	t.Parallel()
	now := testfactory.Start()
	for name, p := range map[string]store.APIKeyCreateParams{
		"no wallet":       {Now: now, Name: "x"},
		"empty wallet":    {Now: now, Name: "x", Wallets: []string{""}},
		"wallet w/ space": {Now: now, Name: "x", Wallets: []string{"a b"}},
		"wallet w/ slash": {Now: now, Name: "x", Wallets: []string{"main", "../x"}},
		"long wallet":     {Now: now, Name: "x", Wallets: []string{strings.Repeat("a", 65)}},
		"empty name":      {Now: now, Name: "", Wallets: []string{"main"}},
	} {
		st := testdb.NewTx(t)
		_, _, err := st.APIKeyCreate(t.Context(), p)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, name)
		require.Equal(t, "23514", pgErr.Code, "%s: a CHECK violation, got %v", name, err)
		require.Regexp(t, regexp.MustCompile(`^api_keys_`), pgErr.ConstraintName, name)
	}
}
