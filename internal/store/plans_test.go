package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// query is one named query of queries/*.sql.
type query struct {
	name string
	file string
	body string // its SQL, without comment lines
}

// sourceQueries parses the `-- name:` sections of queries/*.sql.
func sourceQueries(t *testing.T) []query {
	t.Helper()
	files, err := filepath.Glob("../../queries/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no queries/*.sql found from %s", must(os.Getwd()))
	var out []query
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, section := range strings.Split(string(src), "-- name: ")[1:] {
			name, rest, _ := strings.Cut(section, " ")
			var body []string
			for _, line := range strings.Split(rest, "\n")[1:] {
				if !strings.HasPrefix(strings.TrimSpace(line), "--") {
					body = append(body, line)
				}
			}
			out = append(out, query{name: name, file: filepath.Base(f), body: strings.Join(body, "\n")})
		}
	}
	return out
}

func must[T any](v T, _ error) T { return v }

// isClaim reports whether q claims work: its name says so, or it locks rows
// with SKIP LOCKED (STYLE: a claim is a CTE that selects … FOR UPDATE SKIP
// LOCKED).
func (q query) isClaim() bool {
	return strings.Contains(q.name, "Claim") ||
		regexp.MustCompile(`(?i)FOR\s+UPDATE\s+SKIP\s+LOCKED`).MatchString(q.body)
}

// generatedSQL returns the SQL sqlc generated for every query, by name: the
// statements the store really sends, with $n parameters.
func generatedSQL(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("internal/dbsqlc/*.sql.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	re := regexp.MustCompile("(?s)const \\w+ = `-- name: (\\w+) :\\w+\\n(.*?)`")
	out := map[string]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			out[m[1]] = m[2]
		}
	}
	return out
}

// planDB is a test's own database, filled with the rows a test's plans are
// checked behind, and one connection that explains the generated queries.
type planDB struct {
	t         *testing.T
	ctx       context.Context
	db        *testdb.DB
	t0        time.Time
	generated map[string]string
	conn      *pgxpool.Conn
	enums     map[uint32]bool
	// at is the time bound to the timestamp parameters of the queries it
	// names, instead of t0.
	at map[string]time.Time
}

// newPlanDB gives the test its own database; its work there must end
// within timeout.
func newPlanDB(t *testing.T, timeout time.Duration) *planDB {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return &planDB{t: t, ctx: ctx, db: testdb.New(t), t0: testfactory.Start(), generated: generatedSQL(t)}
}

// exec runs a statement that sets the rows up; $1 is usually p.t0.
func (p *planDB) exec(sql string, args ...any) {
	p.t.Helper()
	_, err := p.db.Store.DB().Exec(p.ctx, sql, args...)
	require.NoError(p.t, err)
}

// plan returns (and logs) the EXPLAIN of the generated query name, its
// parameters bound by paramValue and its enum parameters left NULL (an
// optional filter, as the API leaves it).
func (p *planDB) plan(phase, name string) string {
	t := p.t
	t.Helper()
	if p.conn == nil {
		conn, err := p.db.Store.Conns().Acquire(p.ctx)
		require.NoError(t, err)
		t.Cleanup(conn.Release)
		p.conn, p.enums = conn, enumOIDs(p.ctx, t, conn)
	}
	sql, ok := p.generated[name]
	require.True(t, ok, "query %s not found in the generated code (run sqlc generate)", name)
	desc, err := p.conn.Conn().Prepare(p.ctx, "", sql)
	require.NoError(t, err, "%s, %s", phase, name)
	args := make([]any, len(desc.ParamOIDs))
	t0 := p.t0
	if at, ok := p.at[name]; ok {
		t0 = at
	}
	for i, oid := range desc.ParamOIDs {
		if !p.enums[oid] {
			args[i] = paramValue(t, name, i, oid, t0)
		}
	}
	rows, err := p.conn.Query(p.ctx, "EXPLAIN "+sql, args...)
	require.NoError(t, err, "%s, %s", phase, name)
	var plan []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan = append(plan, line)
	}
	require.NoError(t, rows.Err(), "%s, %s", phase, name)
	require.NotEmpty(t, plan, "%s, %s", phase, name)
	text := strings.Join(plan, "\n")
	t.Logf("EXPLAIN %s, %s:\n%s", phase, name, text)
	return text
}

// addBusyWalletLane adds a busy wallet lane: waiting tasks of 100 wallets,
// executing ones with their attempts, signed or sent, some of them with the
// error of their last broadcast.
func (p *planDB) addBusyWalletLane() {
	p.t.Helper()
	p.exec(`
		INSERT INTO ledgerq.wallet_tasks (id, wallet_id, chain_id, sender, status, to_address, request_hash,
			created_at, updated_at, started_at)
		SELECT md5('busy' || g)::uuid::text, 'w' || (g % 100), 1, '0x' || lpad(to_hex(g % 100), 40, '0'),
			g % 2, '0x' || lpad('b', 40, '0'), sha256(g::text::bytea), $1, $1, CASE WHEN g % 2 = 1 THEN $1::timestamptz END
		FROM generate_series(1, 6000) g`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit,
			max_fee_per_gas, max_priority_fee_per_gas, state, created_at, updated_at, sent_at, last_error)
		SELECT 1, '0x' || lpad(to_hex(g), 64, '0'), md5('busy' || g)::uuid::text, '0x' || lpad(to_hex(g % 100), 40, '0'),
			g, '\x01', 21000, 2, 1, CASE WHEN g % 4 = 1 THEN 'signed' ELSE 'sent' END::ledgerq.tx_attempt_state,
			$1, $1, CASE WHEN g % 4 = 3 THEN $1::timestamptz END, CASE WHEN g % 8 = 3 THEN 'timeout' END
		FROM generate_series(1, 6000) g WHERE g % 2 = 1`, p.t0)
	// Policy refusals of a client refused again and again, over days.
	p.exec(`
		INSERT INTO ledgerq.wallet_policy_refusals (wallet_id, at, rule, to_address, value_wei, detail)
		SELECT 'w' || (g % 100), $1::timestamptz - g * interval '10 seconds', 'max_value', '0x' || lpad('b', 40, '0'), g, '{}'
		FROM generate_series(1, 50000) g`, p.t0)
	p.exec(`ANALYZE ledgerq.wallet_policy_refusals`)
}

// addDoneTasks adds 50 000 done tasks with their confirmed attempts, and
// analyzes their tables.
func (p *planDB) addDoneTasks() {
	p.t.Helper()
	p.exec(`
		INSERT INTO ledgerq.wallet_tasks (id, wallet_id, chain_id, sender, status, to_address, request_hash,
			tx_hash, created_at, updated_at, started_at, finished_at)
		SELECT md5('done' || g)::uuid::text, 'w' || (g % 100), 1, '0x' || lpad(to_hex(g % 100), 40, '0'),
			3, '0x' || lpad('b', 40, '0'), sha256(g::text::bytea), '0x' || lpad(to_hex(100000 + g), 64, '0'),
			$1, $1, $1, $1
		FROM generate_series(1, 50000) g`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit,
			max_fee_per_gas, max_priority_fee_per_gas, state, created_at, updated_at, sent_at, mined_at, confirmed_at)
		SELECT 1, '0x' || lpad(to_hex(100000 + g), 64, '0'), md5('done' || g)::uuid::text,
			'0x' || lpad(to_hex(g % 100), 40, '0'), 100000 + g, '\x01', 21000, 2, 1, 'confirmed', $1, $1, $1, $1, $1
		FROM generate_series(1, 50000) g`, p.t0)
	p.exec(`ANALYZE ledgerq.wallet_tasks, ledgerq.tx_attempts`)
}

// Rounds that are not claims but run as often: the queuer's round, admission
// (every transaction that frees a service), the reconciliation scan, the
// depth every metrics scrape reads, the outcomes of every round, intake and
// its read of the known ids; and the API's reads of batches by the client's
// id, whose index is on another table than the rows (batch_payloads).
var indexDrivenRounds = []string{
	"BatchQueueRetries", "BatchAdmit", "BatchServiceListIdle", "BatchDepthByState",
	"BatchRecordSubmitMany", "BatchRecordStatusMany", "BatchInsertMany", "BatchGetMany",
	"BatchServiceLockForIntake", "BatchServiceFilterIdle",
	"BatchGet", "BatchList", "BatchListByService",
	"ShardSchedule", "ShardRelease", "ShardExtendLease", "ShardHeld",
	"TaskGetByIdempotencyKey", "TaskGet", "TaskList", "TaskCancel",
	"TaskNextWaitingPriority", "TaskNextWaitingFIFO", "TaskStartMany", "TaskFinishDone", "TaskFinishError",
	"WalletNonceAdvance", "AttemptListUnsent", "AttemptListSentBelow", "AttemptMarkSent", "AttemptConfirm", "AttemptDropByTask",
}

// Rounds that read every waiting batch by design (the depth a scrape
// reports): on a table of little but waiting batches a scan is their right
// plan, so only the phase with terminal rows checks them.
var readsEveryWaitingRow = map[string]bool{"BatchDepthByState": true}

// filledLast are the rounds whose table the test fills only for its last
// phase (addWebhookHistory), which checks them.
var filledLast = map[string]bool{"WebhookDeliveryDeleteEnded": true}

// Every claim (found in queries/*.sql by itself, so a new lane's claims are
// covered without editing this test) and every other frequent round is
// index-driven: on a busy lane, and again with many terminal batches in the
// table, no plan scans a table. A lane whose claims read another table adds its terminal rows here.
func TestQueries_ClaimsAndRoundsAreIndexDrivenAndNeverScanTerminalRows(t *testing.T) {
	t.Parallel()
	p := newPlanDB(t, 2*time.Minute)
	// A busy lane: thousands of batches in each waiting state, so that the
	// planner expects a claim to find a full batch of rows (with one or two
	// candidates it picks nested loops that hide a join by hash over the
	// whole table).
	p.exec(`
		WITH b AS (
		INSERT INTO ledgerq.batches (service_id, created_at, submitted, status, queued_at,
			claim_expires_at, attempts, last_submitted_at, next_check_at, received_at, updated_at)
		SELECT 'busy-' || g, $1, k.submitted, k.status::ledgerq.batch_status, k.queued_at,
			k.claim_expires_at, k.attempts, k.last_submitted_at, k.next_check_at, $1, $1
		FROM generate_series(1, 3000) g,
		LATERAL (VALUES
			(false, NULL, $1::timestamptz, NULL::timestamptz, 0, NULL::timestamptz, NULL::timestamptz),
			(true, NULL, NULL, $1, 1, $1, NULL),
			(true, 'pending', NULL, NULL, 1, $1, $1),
			(false, 'delayed', NULL, NULL, 1, $1, NULL),
			(false, NULL, NULL, NULL, 0, NULL, NULL)
		) AS k(submitted, status, queued_at, claim_expires_at, attempts, last_submitted_at, next_check_at)
		WHERE g % 5 = (CASE WHEN k.status = 'pending' THEN 2 WHEN k.status = 'delayed' THEN 3
			WHEN k.submitted THEN 1 WHEN k.queued_at IS NOT NULL THEN 0 ELSE 4 END)
		RETURNING seq, service_id
		)
		INSERT INTO ledgerq.batch_payloads (seq, id, service_id, payload)
		SELECT b.seq, b.service_id, b.service_id, '\x00' FROM b`, p.t0)
	p.addBusyWalletLane()
	p.exec(`ANALYZE ledgerq.wallet_tasks, ledgerq.tx_attempts, ledgerq.batch_payloads`)
	// The other tables' claims and retention rounds (which lock with SKIP
	// LOCKED too) read behind their own history from the start.
	p.addHistory()
	clk := testfactory.NewClock()
	testfactory.New(t, p.db.Store, clk).PutBatches(
		testfactory.Batch{ID: "a1", ServiceID: "a"},
		testfactory.Batch{ID: "p1", ServiceID: "p", Submitted: true, Status: store.BatchStatusPending},
	)

	var names []string
	for _, q := range sourceQueries(t) {
		if q.isClaim() {
			names = append(names, q.name)
		}
	}
	require.NotEmpty(t, names, "found no claim query in queries/*.sql")
	t.Logf("claim queries: %s", strings.Join(names, ", "))
	names = append(names, indexDrivenRounds...)

	explainAll := func(phase string, busyOnly bool) {
		t.Helper()
		p.exec(`ANALYZE ledgerq.batches`)
		for _, name := range names {
			if busyOnly && readsEveryWaitingRow[name] || filledLast[name] {
				continue
			}
			// The claims that check holders' liveness locks read pg_database
			// once per statement, for the current database's oid: a catalog
			// of a few rows, not a table of ours.
			ours := strings.ReplaceAll(p.plan(phase, name), "Seq Scan on pg_database", "")
			require.NotContains(t, ours, "Seq Scan", "%s: %s scans a table", phase, name)
		}
	}
	explainAll("a busy lane", true)
	p.exec(`
		WITH b AS (
		INSERT INTO ledgerq.batches (service_id, created_at, submitted, status, attempts,
			last_submitted_at, finished_at, received_at, updated_at)
		SELECT 'svc-' || (g % 500), $1, true, 'committed', 1, $1, $1, $1, $1
		FROM generate_series(1, 50000) g
		RETURNING seq, service_id
		)
		INSERT INTO ledgerq.batch_payloads (seq, id, service_id, payload)
		SELECT b.seq, 'done-' || b.seq, b.service_id, '\x00' FROM b`, p.t0)
	p.exec(`ANALYZE ledgerq.batch_payloads`)
	p.addDoneTasks()
	explainAll("a busy lane and 50 000 terminal batches", false)

	// Every table a retention round deletes from, and every table a
	// console chart reads, with a long history behind its live rows
	// (addHistory, and the phases above): each round reads the rows it
	// deletes (the whole history is past its cutoff, t0: a backlog), and
	// each chart the minutes it draws (since a minute after the history),
	// through an index on the time it reads.
	p.addWebhookHistory()
	p.at = map[string]time.Time{}
	for _, name := range perMinuteCharts {
		p.at[name] = p.t0.Add(time.Minute)
	}
	const phase = "a long history in every table"
	for _, name := range append(slices.Clone(retentionRounds), perMinuteCharts...) {
		require.NotContains(t, p.plan(phase, name), "Seq Scan", "%s: %s scans a table", phase, name)
	}
}

// retentionRounds are the retention rounds' deletes; perMinuteCharts the
// console's charts of what ended per minute.
var (
	retentionRounds = []string{
		"BatchDeleteFinished", "TaskDeleteFinished", "WalletPolicyRefusalDeleteOld",
		"BundleDeleteFinished", "PoolTxDeleteFinished", "WebhookDeliveryDeleteEnded", "AuditDeleteOld", "ConsoleSessionDeleteEnded",
	}
	perMinuteCharts = []string{"BatchFinishedPerMinute", "TaskFinishedPerMinute", "AttemptMinedPerMinute", "BundleEndedPerMinute"}
)

// addHistory adds, before t0, the history of the tables beside the batch
// and wallet lanes': 50 000 finalized bundles with their work packages and
// transactions behind 2000 dropped and 100 queued ones, 20 000 replaced
// and dropped pool transactions behind 500 pending, 50 000 audit rows, and
// 10 000 console sessions that expired or were logged out behind 100 live
// ones; then it analyzes those tables.
func (p *planDB) addHistory() {
	p.t.Helper()
	h := `'0x' || lpad(to_hex(g), 64, '0')`
	p.exec(`INSERT INTO ledgerq.builder_chains (chain_id, processed_slot, created_at, updated_at) VALUES (100, 1, $1, $1)`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.bundles (chain_id, number, parent, hash, state, version, guaranteed_hash, guaranteed_version,
			accumulated_slot, next_submit_at, tx_count, created_at, guaranteed_at, accumulated_at, finalized_at, updated_at)
		SELECT 100, g, `+h+`, `+h+`, 'finalized', 1, `+h+`, 1, g, t, 1, t, t, t, t, t
		FROM generate_series(1, 50000) g, LATERAL (SELECT $1::timestamptz - (50001 - g) * interval '1 second' AS t) s`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.bundles (chain_id, number, parent, hash, state, version, drop_reason, next_submit_at, tx_count,
			created_at, updated_at)
		SELECT 100, g, `+h+`, `+h+`, 'dropped', 3, 'no guarantee', t, 1, t, t
		FROM generate_series(1, 2000) g, LATERAL (SELECT $1::timestamptz - g * interval '20 seconds' AS t) s`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.bundles (chain_id, number, parent, hash, state, version, anchor_slot, anchor_hash,
			next_submit_at, tx_count, created_at, updated_at)
		SELECT 100, g, `+h+`, `+h+`, 'queued', 1, 1, `+h+`, $1, 1, $1, $1
		FROM generate_series(50001, 50100) g`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.bundle_versions (package_hash, bundle_id, version, core, anchor_slot, anchor_hash, submitted_at, outcome, guaranteed_slot)
		SELECT '0x' || lpad(to_hex(b.id), 64, '0'), b.id, 1, 0, 1, b.hash, b.created_at, 'sent', b.number
		FROM ledgerq.bundles b WHERE b.state = 'finalized'`)
	p.exec(`
		INSERT INTO ledgerq.pool_txs (chain_id, tx_hash, sender, nonce, tx_type, gas_fee_cap, gas_tip_cap, gas, value_wei,
			raw, state, bundle_id, bundle_block, bundle_pos, received_at, expires_at, updated_at)
		SELECT 100, '0x' || lpad(to_hex(b.number), 64, '0'), '0x' || lpad(to_hex(b.number % 100), 40, '0'), b.number, 2, 2, 1,
			21000, 0, '\x01', 'included', b.id, b.number, 0, b.created_at, b.created_at + interval '1 hour', b.created_at
		FROM ledgerq.bundles b WHERE b.state = 'finalized'`)
	p.exec(`
		INSERT INTO ledgerq.pool_txs (chain_id, tx_hash, sender, nonce, tx_type, gas_fee_cap, gas_tip_cap, gas, value_wei,
			raw, state, replaced_by, drop_reason, received_at, expires_at, updated_at)
		SELECT 100, '0x' || lpad(to_hex(100000 + g), 64, '0'), '0x' || lpad(to_hex(g % 100), 40, '0'), 100000 + g, 2, 2, 1,
			21000, 0, '\x01', CASE WHEN g % 2 = 0 THEN 'replaced' WHEN g <= 20000 THEN 'dropped' ELSE 'pending' END::ledgerq.pool_tx_state,
			CASE WHEN g % 2 = 0 THEN '0x' || lpad(to_hex(200000 + g), 64, '0') END,
			CASE WHEN g % 2 = 1 AND g <= 20000 THEN 'expired' END, t, t + interval '1 hour', t
		FROM generate_series(1, 21000) g,
		LATERAL (SELECT CASE WHEN g <= 20000 THEN $1::timestamptz - g * interval '2 seconds' ELSE $1 END AS t) s
		WHERE g <= 20000 OR g % 2 = 1`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.audit_log (at, key_name, action, target, detail)
		SELECT $1::timestamptz - g * interval '10 seconds', 'ops', 'wallet.hold', 'w' || (g % 100), '{}'
		FROM generate_series(1, 50000) g`, p.t0)
	key, _, err := p.db.Store.APIKeyCreate(p.ctx, store.APIKeyCreateParams{Now: p.t0, Name: "ops", Scopes: []store.Scope{"admin"}})
	require.NoError(p.t, err)
	p.exec(`
		INSERT INTO ledgerq.console_sessions (token_hash, key_id, created_at, expires_at, ended_at)
		SELECT sha256(g::text::bytea), $2, t - interval '12 hours',
		       CASE WHEN g <= 100 THEN $1::timestamptz + interval '1 hour' ELSE t END,
		       CASE WHEN g > 100 AND g % 10 = 0 THEN t - interval '1 hour' END
		FROM generate_series(1, 10100) g, LATERAL (SELECT $1::timestamptz - g * interval '1 minute' AS t) s`, p.t0, key.ID)
	p.exec(`ANALYZE ledgerq.builder_chains, ledgerq.bundles, ledgerq.bundle_versions, ledgerq.pool_txs,
		ledgerq.audit_log, ledgerq.api_keys, ledgerq.console_sessions, ledgerq.tx_attempts`)
}

// addWebhookHistory adds 50 000 webhook deliveries delivered before t0 to
// 2000 endpoints, behind a few due and given up, and analyzes their tables.
func (p *planDB) addWebhookHistory() {
	p.t.Helper()
	p.exec(`
		INSERT INTO ledgerq.webhook_endpoints (id, wallet_id, url, secret, created_at, updated_at)
		SELECT '00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'), 'w' || (g % 100), 'https://hooks.example/' || g,
		       'whsec_' || repeat('A', 32), $1, $1
		FROM generate_series(0, 1999) g`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.webhook_deliveries (endpoint_id, event_type, task_id, payload, created_at, next_attempt_at,
		                                        attempts, last_attempt_at, delivered_at, gave_up_at, last_status, last_error)
		SELECT '00000000-0000-4000-8000-' || lpad(to_hex(g % 2000), 12, '0'), 'confirmed', 't' || g, '{}',
		       t, t, 1, t, CASE WHEN g >= 25 THEN t END, CASE WHEN g < 5 THEN t END,
		       CASE WHEN g >= 25 THEN 200 ELSE 500 END, CASE WHEN g < 25 THEN 'HTTP 500' END
		FROM generate_series(0, 49999) g, LATERAL (SELECT $1::timestamptz - g * interval '1 second' AS t) s`, p.t0)
	p.exec(`ANALYZE ledgerq.webhook_endpoints, ledgerq.webhook_deliveries`)
}

// paramValue is a value for a query parameter of type oid, for EXPLAIN: a
// time is t0, a count is 100, a number of seconds 15. A query whose parameter
// has another type fails the test until paramValue learns it.
func paramValue(t *testing.T, query string, i int, oid uint32, t0 time.Time) any {
	t.Helper()
	switch oid {
	case pgtype.TimestamptzOID, pgtype.TimestampOID:
		return t0
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		return 100
	case pgtype.Float4OID, pgtype.Float8OID, pgtype.NumericOID:
		return 15.0
	case pgtype.TextOID, pgtype.VarcharOID:
		return "x"
	case pgtype.ByteaOID:
		return []byte{0}
	case pgtype.BoolOID:
		return false
	case pgtype.IntervalOID:
		return 15 * time.Second
	case pgtype.JSONOID, pgtype.JSONBOID:
		return `{"kind":"raw"}`
	case pgtype.TextArrayOID, pgtype.VarcharArrayOID:
		return []string{"a", "p"}
	case pgtype.Int4ArrayOID:
		return []int32{1, 1}
	case pgtype.Int8ArrayOID:
		return []int64{1, 2}
	case pgtype.ByteaArrayOID:
		return [][]byte{{0}, {1}}
	case pgtype.TimestamptzArrayOID:
		return []time.Time{t0, t0}
	}
	t.Fatalf("query %s: parameter $%d has type OID %d; give paramValue a value for it", query, i+1, oid)
	return nil
}

// enumOIDs returns the OIDs of the database's enum types: EXPLAIN of a
// generated query binds its enum parameters as text cast to them.
func enumOIDs(ctx context.Context, t *testing.T, conn *pgxpool.Conn) map[uint32]bool {
	t.Helper()
	enums := map[uint32]bool{}
	rows, err := conn.Query(ctx, `SELECT oid FROM pg_type WHERE typtype = 'e'`)
	require.NoError(t, err)
	for rows.Next() {
		var oid uint32
		require.NoError(t, rows.Scan(&oid))
		enums[oid] = true
	}
	require.NoError(t, rows.Err())
	return enums
}

// The builder lane's claims and frequent rounds are index-driven on a lane
// with 50 000 finalized bundles (and their versions and transactions) behind
// a few hundred live ones: no plan scans a table.
func TestBundleQueries_ClaimsAndRoundsAreIndexDrivenBehindManyFinalizedBundles(t *testing.T) {
	t.Parallel()
	p := newPlanDB(t, 2*time.Minute)
	// 1000 chains of 2 cores each (a single chain's two core rows are
	// rightly read whole).
	p.exec(`INSERT INTO ledgerq.builder_chains (chain_id, processed_slot, created_at, updated_at)
		SELECT c, 1, $1, $1 FROM generate_series(100, 1099) c`, p.t0)
	p.exec(`INSERT INTO ledgerq.cores (chain_id, core, updated_at)
		SELECT c, g, $1 FROM generate_series(100, 1099) c, generate_series(0, 1) g`, p.t0)
	h := `'0x' || lpad(to_hex(g), 64, '0')`
	p.exec(`
		INSERT INTO ledgerq.bundles (chain_id, number, parent, hash, state, version, guaranteed_hash, guaranteed_version,
			accumulated_slot, next_submit_at, tx_count, created_at, guaranteed_at, accumulated_at, finalized_at, updated_at)
		SELECT 100, g, `+h+`, `+h+`, 'finalized', 1, `+h+`, 1, g, $1, 1, $1, $1, $1, $1, $1
		FROM generate_series(1, 50000) g`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.bundles (chain_id, number, parent, hash, state, version, anchor_slot, anchor_hash,
			next_submit_at, tx_count, created_at, updated_at)
		SELECT 100, g, `+h+`, `+h+`, 'queued', 1, 1, `+h+`, $1, 1, $1, $1
		FROM generate_series(50001, 50300) g`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.bundle_versions (package_hash, bundle_id, version, core, anchor_slot, anchor_hash, submitted_at, outcome, guaranteed_slot)
		SELECT `+h+`, g, 1, 0, 1, `+h+`, $1, 'sent', g FROM generate_series(1, 50000) g`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.pool_txs (chain_id, tx_hash, sender, nonce, tx_type, gas_fee_cap, gas_tip_cap, gas, value_wei,
			raw, state, bundle_id, bundle_block, bundle_pos, received_at, expires_at, updated_at)
		SELECT 100, `+h+`, '0x' || lpad(to_hex(g % 100), 40, '0'), g, 2, 2, 1, 21000, 0, '\x01',
			CASE WHEN g <= 50300 THEN 'included' ELSE 'pending' END::ledgerq.pool_tx_state,
			CASE WHEN g <= 50300 THEN g END, CASE WHEN g <= 50300 THEN g END, CASE WHEN g <= 50300 THEN 0 END,
			$1, $1::timestamptz + interval '1 hour', $1
		FROM generate_series(1, 51000) g`, p.t0)
	p.exec(`ANALYZE ledgerq.bundles, ledgerq.bundle_versions, ledgerq.pool_txs, ledgerq.cores, ledgerq.builder_chains`)

	const phase = "behind 50 000 finalized bundles"
	for _, name := range []string{
		"CoreClaimFree", "BundleClaimNext", "BundleCountQueued", "BundleLastLive", "BundleTxLockForCut", "BundleListTimedOut",
		"BundleFinalize", "BundleVersionGet", "BundleRequeue", "BundleListToDrop", "BundleTxListRaw", "BundleTxReturn",
		"BundleGet", "BundleList", "CoreLockOf",
	} {
		require.NotContains(t, p.plan(phase, name), "Seq Scan", "%s: %s scans a table", phase, name)
	}
}

// The wallet worker's queries run in every run of every wallet's shard (and
// the Follower's every second): each is index-driven on a busy wallet lane,
// and again with 50 000 finished tasks and their confirmed attempts.
func TestWallet_WorkerQueriesAreIndexDriven(t *testing.T) {
	t.Parallel()
	p := newPlanDB(t, 2*time.Minute)
	// 100 wallets with waiting and executing tasks, their attempts signed
	// or sent; next nonces of 10 000 wallets.
	p.addBusyWalletLane()
	p.exec(`
		INSERT INTO ledgerq.wallet_nonces (chain_id, sender, next_nonce, created_at, updated_at)
		SELECT 1, '0x' || lpad(to_hex(g), 40, '0'), 6000, $1, $1 FROM generate_series(0, 9999) g`, p.t0)
	// One health row per wallet, the chain nonce of 1 % of them moved a
	// moment ago (the Follower watches those).
	p.exec(`
		INSERT INTO ledgerq.wallet_health (chain_id, sender, chain_nonce, chain_nonce_since, created_at, updated_at)
		SELECT 1, '0x' || lpad(to_hex(g), 40, '0'), 6000, $1::timestamptz - CASE WHEN g % 100 = 0 THEN interval '1 second' ELSE interval '1 day' END, $1, $1
		FROM generate_series(0, 9999) g`, p.t0)
	p.exec(`ANALYZE ledgerq.wallet_tasks, ledgerq.tx_attempts, ledgerq.wallet_nonces, ledgerq.wallet_health`)

	explainAll := func(phase string) {
		t.Helper()
		for _, name := range []string{
			"WalletNonceGet", "WalletNonceRaise", "WalletNonceListFreed", "AttemptCountLive", "AttemptListUncertain",
			"AttemptRecordBroadcast", "AttemptDrop", "TaskRequeue", "WalletListWithWork",
			"AttemptListMined", "AttemptListMinedFrom", "AttemptListSentFrom", "AttemptGetMaxHeldNonce", "AttemptReopen", "AttemptMarkMined",
		} {
			require.NotContains(t, p.plan(phase, name), "Seq Scan", "%s: %s scans a table", phase, name)
		}
	}
	explainAll("a busy wallet lane")
	p.addDoneTasks()
	explainAll("a busy wallet lane and 50 000 finished tasks")
}

// A round's outcomes are one statement over up to a full round of rows
// (500 batches here, as --batch-submit-batch-size 500 sends). Its cost must grow
// with the rows it records, not with their square: a plan that reaches the
// updated rows by probing the whole round's seq list once per row (a nested
// loop over the locked rows whose inner index scan is `seq = ANY(…)`) costs
// about a thousand buffer hits a row at 500 rows and made whole bench runs
// four times slower. The planner picks such a plan when it expects the
// locked rows to be one or two, which the join with the unnested outcomes
// makes it expect; this test sets up that case and executes both statements
// under EXPLAIN ANALYZE.
func TestQueries_ARoundsOutcomesCostTheSameForEachOfItsRows(t *testing.T) {
	t.Parallel()
	p := newPlanDB(t, time.Minute)
	db, ctx, t0 := p.db, p.ctx, p.t0
	const rows = 500
	// 10 000 batches: the first half held by a submitter, the second half
	// pending at the ledger, every one in its first attempt.
	p.exec(`
		WITH b AS (
		INSERT INTO ledgerq.batches (service_id, created_at, submitted, status, claim_expires_at,
			attempts, last_submitted_at, next_check_at, received_at, updated_at)
		SELECT 'svc-' || g, $1::timestamptz, true, CASE WHEN g > 5000 THEN 'pending'::ledgerq.batch_status END,
			CASE WHEN g <= 5000 THEN $1::timestamptz + interval '1 minute' END, 1, $1,
			CASE WHEN g > 5000 THEN $1 END, $1, $1
		FROM generate_series(1, 10000) g
		RETURNING seq, service_id
		)
		INSERT INTO ledgerq.batch_payloads (seq, id, service_id, payload)
		SELECT b.seq, b.service_id, b.service_id, '\x00' FROM b`, t0)
	p.exec(`ANALYZE ledgerq.batches, ledgerq.batch_payloads`)

	seqsWhere := func(cond string) []int64 {
		var seqs []int64
		require.NoError(t, db.Store.DB().QueryRow(ctx,
			`SELECT array_agg(seq ORDER BY seq) FROM (SELECT seq FROM ledgerq.batches WHERE `+cond+` ORDER BY seq LIMIT $1) s`,
			rows).Scan(&seqs))
		require.Len(t, seqs, rows)
		return seqs
	}
	repeat := func(v string) []string {
		out := make([]string, rows)
		for i := range out {
			out[i] = v
		}
		return out
	}
	ones := make([]int32, rows)
	for i := range ones {
		ones[i] = 1
	}
	cases := []struct {
		query string
		args  []any
	}{
		// $1 next_check_at, $2 now, $3 seqs, $4 attempts, $5 results, $6 reasons.
		{"BatchRecordSubmitMany", []any{t0.Add(time.Second), t0, seqsWhere("status IS NULL"), ones, repeat("accepted"), repeat("")}},
		// $1 now, $2 next_check_at, $3 seqs, $4 attempts, $5 statuses, $6 reasons.
		{"BatchRecordStatusMany", []any{t0, t0.Add(time.Second), seqsWhere("status = 'pending'"), ones, repeat("committed"), repeat("")}},
	}
	for _, c := range cases {
		sql, ok := p.generated[c.query]
		require.True(t, ok, "query %s not found in the generated code", c.query)
		tx, err := db.Store.DB().Begin(ctx)
		require.NoError(t, err)
		var out []byte
		err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, c.args...).Scan(&out)
		require.NoError(t, tx.Rollback(ctx))
		require.NoError(t, err, c.query)
		var plan []struct {
			ExecutionTime float64 `json:"Execution Time"`
			Plan          struct {
				ActualRows      int64 `json:"Actual Rows"`
				SharedHitBlocks int64 `json:"Shared Hit Blocks"`
				SharedReadBlock int64 `json:"Shared Read Blocks"`
			} `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal(out, &plan))
		require.Len(t, plan, 1)
		top := plan[0].Plan
		t.Logf("%s over %d rows: %d rows updated, %d buffers hit, %d read, %.1f ms", c.query, rows, top.ActualRows,
			top.SharedHitBlocks, top.SharedReadBlock, plan[0].ExecutionTime)
		require.EqualValues(t, rows, top.ActualRows, "%s updated the wrong number of rows", c.query)
		// A row's update touches its heap page and each index's pages: tens
		// of buffers, not hundreds.
		perRow := (top.SharedHitBlocks + top.SharedReadBlock) / rows
		require.Less(t, perRow, int64(60),
			"%s touched %d buffers a row over %d rows: its plan probes the round once per row:\n%s", c.query, perRow, rows, out)
	}
}

// The console reads the webhook outbox, which keeps every delivery for the
// retention age (--wallet-webhook-retention-age, or forever): the
// overview's counts (on every refresh) and an endpoint's page must read
// their indexes, not every delivery ever made.
func TestConsole_WebhookOutboxReadsAreIndexDrivenBehindManyDeliveries(t *testing.T) {
	t.Parallel()
	p := newPlanDB(t, 2*time.Minute)
	p.exec(`
		INSERT INTO ledgerq.webhook_endpoints (id, wallet_id, url, secret, created_at, updated_at)
		SELECT '00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'), 'w', 'https://hooks.example/' || g,
		       'whsec_' || repeat('A', 32), $1, $1
		FROM generate_series(0, 19) g`, p.t0)
	// 50 000 delivered, 20 waiting, 5 given up.
	p.exec(`
		INSERT INTO ledgerq.webhook_deliveries (endpoint_id, event_type, task_id, payload, created_at, next_attempt_at,
		                                        attempts, last_attempt_at, delivered_at, gave_up_at, last_status, last_error)
		SELECT '00000000-0000-4000-8000-' || lpad(to_hex(g % 20), 12, '0'), 'confirmed', 't' || g, '{}',
		       $1::timestamptz - g * interval '1 second', $1,
		       1, $1, CASE WHEN g >= 25 THEN $1::timestamptz END, CASE WHEN g < 5 THEN $1::timestamptz END,
		       CASE WHEN g >= 25 THEN 200 WHEN g < 5 THEN 500 END, CASE WHEN g < 5 THEN 'HTTP 500' END
		FROM generate_series(0, 49999) g`, p.t0)
	p.exec(`ANALYZE ledgerq.webhook_deliveries, ledgerq.webhook_endpoints`)
	for _, name := range []string{"WebhookDeliveryCounts", "WebhookDeliveryListByEndpoint"} {
		require.NotContains(t, p.plan("50 000 delivered", name), "Seq Scan", "%s scans the outbox", name)
	}
}

// A busy sender's intake and the TTL sweep read its live transactions, not
// its history: behind 50 000 executed (included, below the chain's nonce)
// transactions of that one sender, each reads a few pages, as it does for a
// new sender.
func TestPoolQueries_ASendersIntakeAndSweepReadItsLiveRowsNotItsHistory(t *testing.T) {
	t.Parallel()
	p := newPlanDB(t, 2*time.Minute)
	sender := "0x" + strings.Repeat("a", 40)
	h := `'0x' || lpad(to_hex(g), 64, '0')`
	p.exec(`
		INSERT INTO ledgerq.pool_txs (chain_id, tx_hash, sender, nonce, tx_type, gas_fee_cap, gas_tip_cap, gas, value_wei,
			raw, state, bundle_block, received_at, expires_at, updated_at)
		SELECT 100, `+h+`, $2, g, 2, 2, 1, 21000, 0, '\x01',
			CASE WHEN g < 50000 THEN 'included' WHEN g < 50003 THEN 'pending' ELSE 'queued' END::ledgerq.pool_tx_state,
			CASE WHEN g < 50000 THEN 1 END, $1, $1::timestamptz + interval '1 hour', $1
		FROM generate_series(0, 50004) g`, p.t0, sender)
	p.exec(`ANALYZE ledgerq.pool_txs`)
	for _, c := range []struct {
		name string
		args []any
		rows int
	}{
		{"PoolSenderLive", []any{int64(100), sender, int64(50000)}, 5},
		{"PoolTxExpire", []any{p.t0.Add(2 * time.Hour), int64(100), []string{sender}}, 5},
	} {
		rows, pages := p.analyze(c.name, c.args...)
		require.Equal(t, c.rows, rows, "%s: the sender's live transactions", c.name)
		require.Less(t, pages, 100, "%s reads the sender's history", c.name)
	}
}

// analyze runs the generated query name with args in a transaction it rolls
// back, under EXPLAIN ANALYZE, and returns the rows its top node returned and
// the buffer pages it touched (hit or read).
func (p *planDB) analyze(name string, args ...any) (rows, pages int) {
	return p.analyzePlan(name, false, args...)
}

// analyzeGeneric is analyze of the generic plan of the query name, the one
// the store runs it with when it sends GenericPlansForTx first (EXPLAIN of a
// statement with its parameters plans it for their values).
func (p *planDB) analyzeGeneric(name string, args ...any) (rows, pages int) {
	return p.analyzePlan(name, true, args...)
}

func (p *planDB) analyzePlan(name string, generic bool, args ...any) (rows, pages int) {
	t := p.t
	t.Helper()
	var out []struct {
		Plan struct {
			Rows int `json:"Actual Rows"`
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	raw := p.explainAnalyze(name, generic, args...)
	require.NoError(t, json.Unmarshal(raw, &out), name)
	require.Len(t, out, 1, name)
	t.Logf("EXPLAIN ANALYZE %s: %s", name, raw)
	return out[0].Plan.Rows, out[0].Plan.Hit + out[0].Plan.Read
}

// explainAnalyze runs the generated query name under EXPLAIN (ANALYZE,
// BUFFERS, FORMAT JSON) in a transaction it rolls back, planned generic if
// generic, and returns the plan.
func (p *planDB) explainAnalyze(name string, generic bool, args ...any) []byte {
	t := p.t
	t.Helper()
	sql, ok := p.generated[name]
	require.True(t, ok, "query %s not found in the generated code (run sqlc generate)", name)
	tx, err := p.db.Store.Conns().Begin(p.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(p.ctx)) }()
	explain := "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
	if generic {
		_, err = tx.Exec(p.ctx, `SET LOCAL plan_cache_mode = force_generic_plan`)
		require.NoError(t, err)
		_, err = tx.Exec(p.ctx, "PREPARE analyzed AS "+sql)
		require.NoError(t, err, name)
		// EXPLAIN EXECUTE takes no parameters of its own: the values go in as
		// literals.
		values := make([]string, len(args))
		for i, a := range args {
			switch v := a.(type) {
			case string:
				values[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
			case int:
				values[i] = fmt.Sprint(v)
			default:
				t.Fatalf("analyzeGeneric: no literal for %T", a)
			}
		}
		sql, args = "EXECUTE analyzed("+strings.Join(values, ", ")+")", nil
	}
	var raw []byte
	require.NoError(t, tx.QueryRow(p.ctx, explain+sql, args...).Scan(&raw), name)
	return raw
}

// A wallet that has sent for years has a long history of confirmed
// attempts. What the wallet's shard reads in every run — its in-flight
// budget, its uncertain, sent and mined attempts, its nonces — must read its
// live attempts, not that history: a plan that reaches them through
// tx_attempts_nonce (every attempt of the sender) and filters on the state
// costs a page per few hundred attempts, in every run.
func TestWallet_ASendersShardReadsItsLiveAttemptsNotItsHistory(t *testing.T) {
	t.Parallel()
	p := newPlanDB(t, 2*time.Minute)
	sender := "0x" + strings.Repeat("b", 40)
	p.exec(`
		INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, sender, nonce, raw, gas_limit, max_fee_per_gas, max_priority_fee_per_gas,
			state, created_at, updated_at, sent_at, mined_block, mined_block_hash, mined_at, confirmed_at)
		SELECT 1, '0x' || lpad(to_hex(g), 64, '0'), $2, g, '\x01', 21000, 2, 1,
			CASE WHEN g < 50000 THEN 'confirmed' WHEN g < 50003 THEN 'mined' WHEN g < 50005 THEN 'sent' ELSE 'signed' END::ledgerq.tx_attempt_state,
			$1, $1, CASE WHEN g < 50005 THEN $1::timestamptz END,
			CASE WHEN g < 50003 THEN g END, CASE WHEN g < 50003 THEN '0x' || lpad(to_hex(g), 64, '0') END,
			CASE WHEN g < 50003 THEN $1::timestamptz END, CASE WHEN g < 50000 THEN $1::timestamptz END
		FROM generate_series(0, 50006) g`, p.t0, sender)
	p.exec(`INSERT INTO ledgerq.wallet_nonces (chain_id, sender, next_nonce, created_at, updated_at) VALUES (1, $2, 50007, $1, $1)`, p.t0, sender)
	p.exec(`ANALYZE ledgerq.tx_attempts, ledgerq.wallet_nonces`)
	for _, c := range []struct {
		name string
		args []any
	}{
		{"AttemptCountLive", []any{int64(1), sender}},
		{"AttemptListUncertain", []any{int64(1), sender, int64(50000), int32(100)}},
		{"AttemptListSentFrom", []any{int64(1), sender, int64(50000), int32(100)}},
		{"AttemptListSentBelow", []any{int64(1), sender, int64(50004), int32(100)}},
		{"AttemptListMined", []any{int64(1), sender, int32(100)}},
		{"AttemptGetMaxHeldNonce", []any{int64(1), sender}},
		{"AttemptListUnknownNonces", []any{int64(50002), int64(1), sender, int32(100)}},
		{"WalletNonceListFreed", []any{int64(50000), int64(1), sender, int32(100)}},
	} {
		_, pages := p.analyze(c.name, c.args...)
		require.Less(t, pages, 100, "%s reads the sender's history", c.name)
	}
}

// GET /v1/batches?status=… pages through batch_payloads' ids and filters on
// the state row. Right after a burst (a backlog worked down, every batch
// committed within seconds) the table's statistics still say the status is
// rare, and the planner read every batch of that status, probed its payload
// row and sorted them all, for one page: 300 000 pages for a page of 1000
// out of 100 000. A page reads its ids in order and stops when it is full.
func TestBatchList_AStatusFilterReadsAPageNotTheTable(t *testing.T) {
	t.Parallel()
	p := newPlanDB(t, 2*time.Minute)
	p.exec(`
		WITH g AS (SELECT nextval('ledgerq.batch_seq') AS seq, g FROM generate_series(1, 30000) g),
		ins AS (
			INSERT INTO ledgerq.batches (seq, service_id, created_at, received_at, updated_at)
			SELECT g.seq, 's' || (g.g % 300), $1, $1, $1 FROM g
		)
		INSERT INTO ledgerq.batch_payloads (seq, id, service_id, payload)
		SELECT g.seq, 'b' || lpad(g.g::text, 6, '0'), 's' || (g.g % 300), '\x00' FROM g`, p.t0)
	p.exec(`ANALYZE ledgerq.batches, ledgerq.batch_payloads`)
	// The burst: every batch committed, the statistics not yet told.
	p.exec(`UPDATE ledgerq.batches SET submitted = true, status = 'committed', attempts = 1,
		last_submitted_at = $1, finished_at = $1`, p.t0)

	// The store runs the list with a generic plan (see BatchList).
	rows, pages := p.analyzeGeneric("BatchList", "committed", "", 100)
	require.Equal(t, 100, rows)
	require.Less(t, pages, 1000, "a page of 100 read %d pages", pages)

	// And the store does run it with a generic plan.
	st := oneConnectionStore(t, p.db.URL)
	for range 2 {
		page, err := st.BatchList(p.ctx, store.BatchListParams{Status: store.BatchStatusCommitted, Limit: 100})
		require.NoError(t, err)
		require.Len(t, page, 100)
	}
	require.Equal(t, map[string]plans{"BatchList": {generic: 2}}, preparedPlans(t, st, "BatchList"))
}

// A lane that starts on a new database runs its first minutes before
// autovacuum has analyzed a table: the planner knows the tables' sizes but
// not that every row is on one chain, so it takes `chain_id = …` for a
// filter that keeps one row in two hundred. A round's statement over its
// attempts or tasks must still reach its own rows by key, whatever the
// lane holds beside them: a plan that walks every live attempt of the
// chain and, for each, the round's unnested list again (what the confirm
// round did: a nested loop with the list inside, run 434 times over 72
// hashes for 72 confirmed attempts) costs the lane times the round.
// Each statement here runs under EXPLAIN ANALYZE on never-analyzed tables
// holding 6000 tasks of 10 wallets, and must read (rows its table scans
// returned or filtered out, and its joins compared and threw away, over
// all their loops) a few rows for each row of its round.
func TestWallet_OnANewDatabaseRoundsAndRunsReadTheirOwnRows(t *testing.T) {
	t.Parallel()
	p := newPlanDB(t, time.Minute)
	sender := func(w int) string { return fmt.Sprintf("0x%040x", w) }
	// 10 wallets; each with 300 waiting tasks and 300 executing ones, whose
	// attempts are signed (one in three) or sent. No ANALYZE.
	p.exec(`
		INSERT INTO ledgerq.wallet_tasks (id, wallet_id, chain_id, sender, status, to_address, request_hash,
			created_at, updated_at, started_at)
		SELECT md5('new' || g)::uuid::text, 'w' || (g % 10), 1337, '0x' || lpad(to_hex(g % 10), 40, '0'),
			(g / 10) % 2, '0x' || lpad('b', 40, '0'), sha256(g::text::bytea), $1, $1,
			CASE WHEN (g / 10) % 2 = 1 THEN $1::timestamptz END
		FROM generate_series(0, 5999) g`, p.t0)
	p.exec(`
		INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit,
			max_fee_per_gas, max_priority_fee_per_gas, state, created_at, updated_at, sent_at)
		SELECT 1337, '0x' || lpad(to_hex(g), 64, '0'), md5('new' || g)::uuid::text, '0x' || lpad(to_hex(g % 10), 40, '0'),
			g / 10, '\x01', 21000, 2, 1, CASE WHEN g % 3 = 0 THEN 'signed' ELSE 'sent' END::ledgerq.tx_attempt_state,
			$1, $1, CASE WHEN g % 3 <> 0 THEN $1::timestamptz END
		FROM generate_series(0, 5999) g WHERE (g / 10) % 2 = 1`, p.t0)
	var analyzed int
	require.NoError(t, p.db.Store.DB().QueryRow(p.ctx, `
		SELECT count(*) FROM pg_class WHERE oid IN ('ledgerq.wallet_tasks'::regclass, 'ledgerq.tx_attempts'::regclass)
		AND reltuples >= 0`).Scan(&analyzed))
	require.Zero(t, analyzed, "the tables must not have been analyzed")

	// The round's rows: 30 of wallet 3's, by kind.
	list := func(sql string) []string {
		rows, err := p.db.Store.DB().Query(p.ctx, sql+` LIMIT 30`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Len(t, out, 30)
		return out
	}
	w := sender(3)
	waiting := list(`SELECT id FROM ledgerq.wallet_tasks WHERE sender = '` + w + `' AND status = 0 ORDER BY id`)
	executing := list(`SELECT id FROM ledgerq.wallet_tasks WHERE sender = '` + w + `' AND status = 1 ORDER BY id`)
	signed := list(`SELECT tx_hash FROM ledgerq.tx_attempts WHERE sender = '` + w + `' AND state = 'signed' ORDER BY nonce`)
	sent := list(`SELECT tx_hash FROM ledgerq.tx_attempts WHERE sender = '` + w + `' AND state = 'sent' ORDER BY nonce`)
	blocks, blockHashes, reverted := make([]int64, 30), make([]string, 30), make([]bool, 30)
	gasUsed, prices := make([]int64, 30), make([]string, 30)
	for i := range blocks {
		blocks[i], blockHashes[i] = int64(100+i), fmt.Sprintf("0x%064x", 100+i)
		gasUsed[i], prices[i] = 21000, "1000000000"
	}
	for _, c := range []struct {
		query string
		args  []any
	}{
		// In the order of the generated statements' parameters.
		{"AttemptConfirmFinalMany", []any{p.t0, blocks, sent, blockHashes, gasUsed, prices, int64(1337), reverted}},
		{"AttemptMarkSent", []any{p.t0, nil, signed, int64(1337)}},
		{"TaskStartMany", []any{p.t0, waiting, int64(1337), w}},
		{"TaskGetMany", []any{executing}},
	} {
		read := p.rowsRead(c.query, c.args...)
		require.GreaterOrEqual(t, read, 30, "%s did not reach the round's rows", c.query)
		assert.Less(t, read/30, 5, "%s read %d rows for a round of 30: its plan reads the lane, not the round", c.query, read)
	}

	// What every run of a wallet's shard reads once, its highest held nonce
	// and the nonces the chain used that no attempt holds (none here), must
	// read the wallet's attempts in flight, not its history: a wallet with
	// 5000 confirmed attempts and 50 sent.
	h := sender(12)
	p.exec(`
		INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, sender, nonce, raw, gas_limit,
			max_fee_per_gas, max_priority_fee_per_gas, state, created_at, updated_at, sent_at, confirmed_at)
		SELECT 1337, '0x' || lpad(to_hex(100000 + g), 64, '0'), $2, g, '\x01', 21000, 2, 1,
			CASE WHEN g < 5000 THEN 'confirmed' ELSE 'sent' END::ledgerq.tx_attempt_state,
			$1, $1, $1, CASE WHEN g < 5000 THEN $1::timestamptz END
		FROM generate_series(0, 5049) g`, p.t0, h)
	p.exec(`INSERT INTO ledgerq.wallet_nonces (chain_id, sender, next_nonce, created_at, updated_at) VALUES (1337, $2, 5050, $1, $1)`, p.t0, h)
	for _, c := range []struct {
		query string
		args  []any
	}{
		{"AttemptGetMaxHeldNonce", []any{int64(1337), h}},
		{"AttemptListUnknownNonces", []any{int64(5049), int64(1337), h, int32(100)}},
	} {
		read := p.rowsRead(c.query, c.args...)
		assert.Less(t, read, 200, "%s read %d rows: its plan reads the wallet's history, not what it has in flight", c.query, read)
	}
}

// rowsRead runs the generated query name under EXPLAIN ANALYZE
// (explainAnalyze), and returns the rows its plan's table scans
// returned or filtered out, and its joins compared and threw away, over all
// their loops.
func (p *planDB) rowsRead(name string, args ...any) (read int) {
	t := p.t
	t.Helper()
	raw := p.explainAnalyze(name, false, args...)
	type node struct {
		Type          string  `json:"Node Type"`
		Rows          float64 `json:"Actual Rows"`
		Loops         float64 `json:"Actual Loops"`
		Removed       float64 `json:"Rows Removed by Filter"`
		JoinRemoved   float64 `json:"Rows Removed by Join Filter"`
		RecheckRemove float64 `json:"Rows Removed by Index Recheck"`
		Plans         []json.RawMessage
	}
	var out []struct {
		Plan json.RawMessage `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &out), name)
	require.Len(t, out, 1, name)
	var walk func(json.RawMessage)
	walk = func(m json.RawMessage) {
		var n node
		require.NoError(t, json.Unmarshal(m, &n), name)
		switch n.Type {
		case "Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Tid Scan", "Tid Range Scan":
			read += int((n.Rows + n.Removed + n.RecheckRemove) * n.Loops)
		}
		read += int(n.JoinRemoved * n.Loops) // a join's rows compared and thrown away
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(out[0].Plan)
	t.Logf("EXPLAIN ANALYZE %s: %d rows read: %s", name, read, raw)
	return read
}
