package store_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
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

// Every claim (found in queries/*.sql by itself, so a new lane's claims are
// covered without editing this test) and every other frequent round is
// index-driven: on a busy lane, and again with many terminal batches in the
// table, no plan scans a table. A lane whose claims read another table adds its terminal rows here.
func TestQueries_ClaimsAndRoundsAreIndexDrivenAndNeverScanTerminalRows(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	t0 := testfactory.Start()
	// A busy lane: thousands of batches in each waiting state, so that the
	// planner expects a claim to find a full batch of rows (with one or two
	// candidates it picks nested loops that hide a join by hash over the
	// whole table).
	_, err := db.Store.DB().Exec(ctx, `
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
		SELECT b.seq, b.service_id, b.service_id, '\x00' FROM b`, t0)
	require.NoError(t, err)
	// A busy wallet lane: waiting tasks of 100 wallets, executing ones with
	// their attempts, signed or sent.
	_, err = db.Store.DB().Exec(ctx, `
		INSERT INTO ledgerq.wallet_tasks (id, wallet_id, chain_id, sender, status, to_address, request_hash,
			created_at, updated_at, started_at)
		SELECT md5('busy' || g)::uuid::text, 'w' || (g % 100), 1, '0x' || lpad(to_hex(g % 100), 40, '0'),
			g % 2, '0x' || lpad('b', 40, '0'), sha256(g::text::bytea), $1, $1, CASE WHEN g % 2 = 1 THEN $1::timestamptz END
		FROM generate_series(1, 6000) g`, t0)
	require.NoError(t, err)
	_, err = db.Store.DB().Exec(ctx, `
		INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit,
			max_fee_per_gas, max_priority_fee_per_gas, state, created_at, updated_at, sent_at)
		SELECT 1, '0x' || lpad(to_hex(g), 64, '0'), md5('busy' || g)::uuid::text, '0x' || lpad(to_hex(g % 100), 40, '0'),
			g, '\x01', 21000, 2, 1, CASE WHEN g % 4 = 1 THEN 'signed' ELSE 'sent' END::ledgerq.tx_attempt_state,
			$1, $1, CASE WHEN g % 4 = 3 THEN $1::timestamptz END
		FROM generate_series(1, 6000) g WHERE g % 2 = 1`, t0)
	require.NoError(t, err)
	_, err = db.Store.DB().Exec(ctx, `ANALYZE ledgerq.wallet_tasks, ledgerq.tx_attempts, ledgerq.batch_payloads`)
	require.NoError(t, err)
	clk := testfactory.NewClock()
	testfactory.New(t, db.Store, clk).PutBatches(
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

	generated := generatedSQL(t)
	conn, err := db.Store.Conns().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	enums := enumOIDs(ctx, t, conn)
	explainAll := func(phase string, busyOnly bool) {
		t.Helper()
		_, err := db.Store.DB().Exec(ctx, `ANALYZE ledgerq.batches`)
		require.NoError(t, err)
		for _, name := range names {
			if busyOnly && readsEveryWaitingRow[name] {
				continue
			}
			sql, ok := generated[name]
			require.True(t, ok, "query %s not found in the generated code (run sqlc generate)", name)
			desc, err := conn.Conn().Prepare(ctx, "", sql)
			require.NoError(t, err, "%s, %s", phase, name)
			args := make([]any, len(desc.ParamOIDs))
			for i, oid := range desc.ParamOIDs {
				if enums[oid] {
					continue // NULL: an optional filter, as the API leaves it
				}
				args[i] = paramValue(t, name, i, oid, t0)
			}
			rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
			require.NoError(t, err, "%s, %s", phase, name)
			var plan []string
			for rows.Next() {
				var line string
				require.NoError(t, rows.Scan(&line))
				plan = append(plan, line)
			}
			require.NoError(t, rows.Err(), "%s, %s", phase, name)
			text := strings.Join(plan, "\n")
			t.Logf("EXPLAIN %s, %s:\n%s", phase, name, text)
			require.NotEmpty(t, plan, "%s, %s", phase, name)
			// The claims that check holders' liveness locks read pg_database
			// once per statement, for the current database's oid: a catalog
			// of a few rows, not a table of ours.
			ours := strings.ReplaceAll(text, "Seq Scan on pg_database", "")
			require.NotContains(t, ours, "Seq Scan", "%s: %s scans a table", phase, name)
		}
	}
	explainAll("a busy lane", true)
	_, err = db.Store.DB().Exec(ctx, `
		WITH b AS (
		INSERT INTO ledgerq.batches (service_id, created_at, submitted, status, attempts,
			last_submitted_at, finished_at, received_at, updated_at)
		SELECT 'svc-' || (g % 500), $1, true, 'committed', 1, $1, $1, $1, $1
		FROM generate_series(1, 50000) g
		RETURNING seq, service_id
		)
		INSERT INTO ledgerq.batch_payloads (seq, id, service_id, payload)
		SELECT b.seq, 'done-' || b.seq, b.service_id, '\x00' FROM b`, t0)
	require.NoError(t, err)
	_, err = db.Store.DB().Exec(ctx, `ANALYZE ledgerq.batch_payloads`)
	require.NoError(t, err)
	// And 50 000 done tasks with their confirmed attempts.
	_, err = db.Store.DB().Exec(ctx, `
		INSERT INTO ledgerq.wallet_tasks (id, wallet_id, chain_id, sender, status, to_address, request_hash,
			tx_hash, created_at, updated_at, started_at, finished_at)
		SELECT md5('done' || g)::uuid::text, 'w' || (g % 100), 1, '0x' || lpad(to_hex(g % 100), 40, '0'),
			3, '0x' || lpad('b', 40, '0'), sha256(g::text::bytea), '0x' || lpad(to_hex(100000 + g), 64, '0'),
			$1, $1, $1, $1
		FROM generate_series(1, 50000) g`, t0)
	require.NoError(t, err)
	_, err = db.Store.DB().Exec(ctx, `
		INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit,
			max_fee_per_gas, max_priority_fee_per_gas, state, created_at, updated_at, sent_at, confirmed_at)
		SELECT 1, '0x' || lpad(to_hex(100000 + g), 64, '0'), md5('done' || g)::uuid::text,
			'0x' || lpad(to_hex(g % 100), 40, '0'), 100000 + g, '\x01', 21000, 2, 1, 'confirmed', $1, $1, $1, $1
		FROM generate_series(1, 50000) g`, t0)
	require.NoError(t, err)
	_, err = db.Store.DB().Exec(ctx, `ANALYZE ledgerq.wallet_tasks, ledgerq.tx_attempts`)
	require.NoError(t, err)
	explainAll("a busy lane and 50 000 terminal batches", false)
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
