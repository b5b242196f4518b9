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
// (every transaction that frees a service), the reconciliation scan, and the
// depth every metrics scrape reads.
var indexDrivenRounds = []string{"BatchQueueRetries", "BatchAdmit", "BatchIdleServices", "BatchDepthByState"}

// Every claim (found in queries/*.sql by itself, so a new lane's claims are
// covered without editing this test) and every other frequent round is
// index-driven: with many terminal batches in the table, no plan scans a
// table. A lane whose claims read another table adds its terminal rows here.
func TestQueries_ClaimsAndRoundsAreIndexDrivenAndNeverScanTerminalRows(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	t0 := testfactory.Start()
	_, err := db.Store.DB().Exec(ctx, `
		INSERT INTO ledgerq.batches (id, service_id, created_at, submitted, status, attempts,
			last_submitted_at, finished_at, received_at, updated_at)
		SELECT 'done-' || g, 'svc-' || (g % 500), $1, true, 'committed', 1, $1, $1, $1, $1
		FROM generate_series(1, 50000) g`, t0)
	require.NoError(t, err)
	clk := testfactory.NewClock()
	testfactory.New(t, db.Store, clk).PutBatches(
		testfactory.Batch{ID: "a1", ServiceID: "a"},
		testfactory.Batch{ID: "p1", ServiceID: "p", Submitted: true, Status: store.BatchStatusPending},
	)
	_, err = db.Store.DB().Exec(ctx, `ANALYZE ledgerq.batches`)
	require.NoError(t, err)

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
	conn, err := db.Store.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, name := range names {
		sql, ok := generated[name]
		require.True(t, ok, "query %s not found in the generated code (run sqlc generate)", name)
		desc, err := conn.Conn().Prepare(ctx, "", sql)
		require.NoError(t, err, name)
		args := make([]any, len(desc.ParamOIDs))
		for i, oid := range desc.ParamOIDs {
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
		require.NotEmpty(t, plan, name)
		require.NotContains(t, text, "Seq Scan", "%s scans a table", name)
	}
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
	}
	t.Fatalf("query %s: parameter $%d has type OID %d; give paramValue a value for it", query, i+1, oid)
	return nil
}
