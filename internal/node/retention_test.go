package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// The monitor role runs every retention: a once run with the builder and
// wallet lanes deletes a pool transaction dropped, a webhook delivery
// delivered, an audit row written and a console session expired long
// before their ages, and keeps what is younger.
func TestRetention_TheMonitorRoleDeletesEveryTablesOldRows(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := simBuilderConfig(t)
	reg, err := keystore.NewRegistry(keystore.Wallet{ID: "w", ChainID: 1337, Signer: testfactory.NewSigner(t)})
	require.NoError(t, err)
	c.Wallet.Registry, c.Wallet.Ledger.Kind = reg, node.WalletLedgerSim
	n, err := node.Open(ctx, c)
	require.NoError(t, err)
	t.Cleanup(n.Close)
	db := n.Store().DB()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	count := func(table string) int {
		t.Helper()
		var k int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM ledgerq.`+table).Scan(&k))
		return k
	}
	now := time.Now()
	for _, at := range []time.Time{now.AddDate(-1, 0, 0), now} {
		exec(`
			INSERT INTO ledgerq.pool_txs (chain_id, tx_hash, sender, nonce, tx_type, gas_fee_cap, gas_tip_cap, gas, value_wei,
				raw, state, drop_reason, received_at, expires_at, updated_at)
			VALUES (1337, '0x' || lpad(to_hex($2::bigint), 64, '0'), '0x00000000000000000000000000000000000000aa', $2, 2, 2, 1,
				21000, 0, '\x01', 'dropped', 'expired', $1, $1::timestamptz + interval '1 hour', $1)`, at, at.Unix())
		exec(`INSERT INTO ledgerq.audit_log (at, key_name, action, target, detail) VALUES ($1, 'ops', 'wallet.hold', 'w', '{}')`, at)
	}
	exec(`INSERT INTO ledgerq.webhook_endpoints (id, wallet_id, url, secret, created_at, updated_at)
		VALUES ('00000000-0000-4000-8000-000000000001', 'w', 'https://hooks.example/', 'whsec_' || repeat('A', 32), $1, $1)`, now)
	for _, at := range []time.Time{now.AddDate(-1, 0, 0), now} {
		exec(`INSERT INTO ledgerq.webhook_deliveries (endpoint_id, event_type, task_id, payload, created_at, next_attempt_at,
				attempts, last_attempt_at, delivered_at, last_status)
			VALUES ('00000000-0000-4000-8000-000000000001', 'confirmed', 't', '{}', $1, $1, 1, $1, $1, 200)`, at)
	}
	key, _, err := n.Store().APIKeyCreate(ctx, store.APIKeyCreateParams{Now: now.AddDate(-1, 0, 0), Name: "ops", Scopes: []store.Scope{"admin"}})
	require.NoError(t, err)
	// The live one first: a login forgets the sessions that ended before it.
	live, err := n.Store().ConsoleSessionCreate(ctx, key.ID, now, time.Hour)
	require.NoError(t, err)
	_, err = n.Store().ConsoleSessionCreate(ctx, key.ID, now.AddDate(-1, 0, 0), time.Hour)
	require.NoError(t, err)
	require.Equal(t, 2, count("console_sessions"))

	require.NoError(t, n.RunOnce(ctx))
	for _, table := range []string{"pool_txs", "audit_log", "webhook_deliveries", "console_sessions"} {
		require.Equal(t, 1, count(table), "%s: the old row is deleted, the young one kept", table)
	}
	_, err = n.Store().ConsoleSessionKey(ctx, live, now)
	require.NoError(t, err, "the live session is kept")
}
