package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// The builder lane's claims and frequent rounds are index-driven on a lane
// with 50 000 finalized bundles (and their versions and transactions) behind
// a few hundred live ones: no plan scans a table.
func TestBundleQueries_ClaimsAndRoundsAreIndexDrivenBehindManyFinalizedBundles(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	t0 := testfactory.Start()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Store.DB().Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	// 1000 chains of 2 cores each (a single chain's two core rows are
	// rightly read whole).
	exec(`INSERT INTO ledgerq.builder_chains (chain_id, processed_slot, created_at, updated_at)
		SELECT c, 1, $1, $1 FROM generate_series(100, 1099) c`, t0)
	exec(`INSERT INTO ledgerq.cores (chain_id, core, updated_at)
		SELECT c, g, $1 FROM generate_series(100, 1099) c, generate_series(0, 1) g`, t0)
	h := `'0x' || lpad(to_hex(g), 64, '0')`
	exec(`
		INSERT INTO ledgerq.bundles (chain_id, number, parent, hash, state, version, guaranteed_hash, guaranteed_version,
			accumulated_slot, next_submit_at, tx_count, created_at, guaranteed_at, accumulated_at, finalized_at, updated_at)
		SELECT 100, g, `+h+`, `+h+`, 'finalized', 1, `+h+`, 1, g, $1, 1, $1, $1, $1, $1, $1
		FROM generate_series(1, 50000) g`, t0)
	exec(`
		INSERT INTO ledgerq.bundles (chain_id, number, parent, hash, state, version, anchor_slot, anchor_hash,
			next_submit_at, tx_count, created_at, updated_at)
		SELECT 100, g, `+h+`, `+h+`, 'queued', 1, 1, `+h+`, $1, 1, $1, $1
		FROM generate_series(50001, 50300) g`, t0)
	exec(`
		INSERT INTO ledgerq.bundle_versions (package_hash, bundle_id, version, core, anchor_slot, anchor_hash, submitted_at, outcome, guaranteed_slot)
		SELECT `+h+`, g, 1, 0, 1, `+h+`, $1, 'sent', g FROM generate_series(1, 50000) g`, t0)
	exec(`
		INSERT INTO ledgerq.pool_txs (chain_id, tx_hash, sender, nonce, tx_type, gas_fee_cap, gas_tip_cap, gas, value_wei,
			raw, state, bundle_id, bundle_block, bundle_pos, received_at, expires_at, updated_at)
		SELECT 100, `+h+`, '0x' || lpad(to_hex(g % 100), 40, '0'), g, 2, 2, 1, 21000, 0, '\x01',
			CASE WHEN g <= 50300 THEN 'included' ELSE 'pending' END::ledgerq.pool_tx_state,
			CASE WHEN g <= 50300 THEN g END, CASE WHEN g <= 50300 THEN g END, CASE WHEN g <= 50300 THEN 0 END,
			$1, $1::timestamptz + interval '1 hour', $1
		FROM generate_series(1, 51000) g`, t0)
	exec(`ANALYZE ledgerq.bundles, ledgerq.bundle_versions, ledgerq.pool_txs, ledgerq.cores, ledgerq.builder_chains`)

	generated := generatedSQL(t)
	conn, err := db.Store.Conns().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	enums := enumOIDs(ctx, t, conn)
	for _, name := range []string{
		"CoreClaimFree", "BundleClaimNext", "BundleCountQueued", "BundleLastLive", "BundleTxLockForCut", "BundleListTimedOut",
		"BundleFinalize", "BundleVersionGet", "BundleRequeue", "BundleListToDrop", "BundleTxListRaw", "BundleTxReturn",
		"BundleGet", "BundleList", "CoreLockOf",
	} {
		sql, ok := generated[name]
		require.True(t, ok, "query %s not found in the generated code (run sqlc generate)", name)
		desc, err := conn.Conn().Prepare(ctx, "", sql)
		require.NoError(t, err, name)
		args := make([]any, len(desc.ParamOIDs))
		for i, oid := range desc.ParamOIDs {
			if enums[oid] {
				continue
			}
			args[i] = paramValue(t, name, i, oid, t0)
		}
		rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
		require.NoError(t, err, name)
		var plan []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan = append(plan, line)
		}
		require.NoError(t, rows.Err(), name)
		text := strings.Join(plan, "\n")
		t.Logf("EXPLAIN %s:\n%s", name, text)
		require.NotContains(t, text, "Seq Scan", "%s scans a table", name)
	}
}
