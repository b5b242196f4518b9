package node_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// The API keeps the keys it read in memory (--api-key-cache), here for a
// minute, and a key revoked in plain SQL, by another connection, is refused
// at once all the same: the revocation's commit notifies ledgerq_api_keys
// (a trigger on the table) and the process forgets its keys. Another key,
// unchanged, goes on working.
func TestAPIKeyCache_AKeyRevokedInSQLIsRefusedAtOnceDespiteTheCache(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	cfg := node.Defaults()
	cfg.DatabaseURL = db.URL
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.API.Access.KeyCache = time.Minute
	n, srv := openServed(t, t.Context(), cfg)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	revoked, token, err := n.Store().APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: time.Now(), Name: "app", Scopes: []store.Scope{store.ScopeAdmin}})
	require.NoError(t, err)
	_, other, err := n.Store().APIKeyCreate(t.Context(), store.APIKeyCreateParams{Now: time.Now(), Name: "ops", Scopes: []store.Scope{store.ScopeAdmin}})
	require.NoError(t, err)
	get := func(token string) int {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/wallets", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get(token))
	require.Equal(t, http.StatusOK, get(token), "served from memory")
	require.Equal(t, http.StatusOK, get(other))

	_, err = n.Store().DB().Exec(t.Context(), `UPDATE ledgerq.api_keys SET revoked_at = now() WHERE id = $1`, revoked.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return get(token) == http.StatusUnauthorized }, 5*time.Second, 20*time.Millisecond,
		"the revocation is notified, well before the cache's minute")
	require.Equal(t, http.StatusOK, get(other))
}
