package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// The wallet worker's queries run in every run of every wallet's shard (and
// the Follower's every second): each is index-driven on a busy wallet lane,
// and again with 50 000 finished tasks and their confirmed attempts.
func TestWallet_WorkerQueriesAreIndexDriven(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	t0 := testfactory.Start()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Store.DB().Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	// 100 wallets with waiting and executing tasks, their attempts signed
	// or sent; next nonces of 10 000 wallets.
	exec(`
		INSERT INTO ledgerq.wallet_tasks (id, wallet_id, chain_id, sender, status, to_address, request_hash,
			created_at, updated_at, started_at)
		SELECT md5('busy' || g)::uuid::text, 'w' || (g % 100), 1, '0x' || lpad(to_hex(g % 100), 40, '0'),
			g % 2, '0x' || lpad('b', 40, '0'), sha256(g::text::bytea), $1, $1, CASE WHEN g % 2 = 1 THEN $1::timestamptz END
		FROM generate_series(1, 6000) g`, t0)
	exec(`
		INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit,
			max_fee_per_gas, max_priority_fee_per_gas, state, created_at, updated_at, sent_at, last_error)
		SELECT 1, '0x' || lpad(to_hex(g), 64, '0'), md5('busy' || g)::uuid::text, '0x' || lpad(to_hex(g % 100), 40, '0'),
			g, '\x01', 21000, 2, 1, CASE WHEN g % 4 = 1 THEN 'signed' ELSE 'sent' END::ledgerq.tx_attempt_state,
			$1, $1, CASE WHEN g % 4 = 3 THEN $1::timestamptz END, CASE WHEN g % 8 = 3 THEN 'timeout' END
		FROM generate_series(1, 6000) g WHERE g % 2 = 1`, t0)
	exec(`
		INSERT INTO ledgerq.wallet_nonces (chain_id, sender, next_nonce, created_at, updated_at)
		SELECT 1, '0x' || lpad(to_hex(g), 40, '0'), 6000, $1, $1 FROM generate_series(0, 9999) g`, t0)
	// One health row per wallet, the chain nonce of 1 % of them moved a
	// moment ago (the Follower watches those).
	exec(`
		INSERT INTO ledgerq.wallet_health (chain_id, sender, chain_nonce, chain_nonce_since, created_at, updated_at)
		SELECT 1, '0x' || lpad(to_hex(g), 40, '0'), 6000, $1::timestamptz - CASE WHEN g % 100 = 0 THEN interval '1 second' ELSE interval '1 day' END, $1, $1
		FROM generate_series(0, 9999) g`, t0)
	exec(`ANALYZE ledgerq.wallet_tasks, ledgerq.tx_attempts, ledgerq.wallet_nonces, ledgerq.wallet_health`)

	generated := generatedSQL(t)
	conn, err := db.Store.Conns().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	explainAll := func(phase string) {
		t.Helper()
		for _, name := range []string{
			"WalletNonceGet", "WalletNonceRaise", "WalletNonceListFreed", "AttemptCountLive", "AttemptListUncertain",
			"AttemptRecordBroadcast", "AttemptDrop", "TaskRequeue", "WalletListWithWork",
			"AttemptListMined", "AttemptListMinedFrom", "AttemptListSentFrom", "AttemptGetMaxHeldNonce", "AttemptReopen", "AttemptMarkMined",
		} {
			sql, ok := generated[name]
			require.True(t, ok, "query %s not found in the generated code (run sqlc generate)", name)
			desc, err := conn.Conn().Prepare(ctx, "", sql)
			require.NoError(t, err, name)
			args := make([]any, len(desc.ParamOIDs))
			for i, oid := range desc.ParamOIDs {
				args[i] = paramValue(t, name, i, oid, t0)
			}
			var plan []string
			rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
			require.NoError(t, err, name)
			for rows.Next() {
				var line string
				require.NoError(t, rows.Scan(&line))
				plan = append(plan, line)
			}
			require.NoError(t, rows.Err(), name)
			text := strings.Join(plan, "\n")
			t.Logf("EXPLAIN %s, %s:\n%s", phase, name, text)
			require.NotContains(t, text, "Seq Scan", "%s: %s scans a table", phase, name)
		}
	}
	explainAll("a busy wallet lane")
	exec(`
		INSERT INTO ledgerq.wallet_tasks (id, wallet_id, chain_id, sender, status, to_address, request_hash,
			tx_hash, created_at, updated_at, started_at, finished_at)
		SELECT md5('done' || g)::uuid::text, 'w' || (g % 100), 1, '0x' || lpad(to_hex(g % 100), 40, '0'),
			3, '0x' || lpad('b', 40, '0'), sha256(g::text::bytea), '0x' || lpad(to_hex(100000 + g), 64, '0'),
			$1, $1, $1, $1
		FROM generate_series(1, 50000) g`, t0)
	exec(`
		INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit,
			max_fee_per_gas, max_priority_fee_per_gas, state, created_at, updated_at, sent_at, confirmed_at)
		SELECT 1, '0x' || lpad(to_hex(100000 + g), 64, '0'), md5('done' || g)::uuid::text,
			'0x' || lpad(to_hex(g % 100), 40, '0'), 100000 + g, '\x01', 21000, 2, 1, 'confirmed', $1, $1, $1, $1
		FROM generate_series(1, 50000) g`, t0)
	exec(`ANALYZE ledgerq.wallet_tasks, ledgerq.tx_attempts`)
	explainAll("a busy wallet lane and 50 000 finished tasks")
}
