package store_test

import (
	"context"
	"errors"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/migrations"
)

// embeddedVersions returns the versions of the migrations the binary embeds,
// in order: goose's version is a file name's leading number.
func embeddedVersions(t *testing.T) []int64 {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no migration is embedded")
	var versions []int64
	for _, f := range files {
		digits, _, ok := strings.Cut(f, "_")
		require.True(t, ok, "migration %s has no version prefix", f)
		v, err := strconv.ParseInt(digits, 10, 64)
		require.NoError(t, err, "migration %s", f)
		versions = append(versions, v)
	}
	slices.Sort(versions)
	return versions
}

// freshMigrator returns a store on a new, empty database and its migrator,
// both closed when the test ends.
func freshMigrator(t *testing.T) (*store.Store, *store.Migrator) {
	t.Helper()
	st, err := store.Open(t.Context(), testdb.NewEmpty(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	m, err := st.NewMigrator(nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return st, m
}

func TestMigrator_UpDownUpOnAFreshDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, m := freshMigrator(t)
	versions := embeddedVersions(t)

	tables := func() []string {
		rows, err := st.DB().Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'ledgerq' ORDER BY 1`)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}

	res, err := m.Up(ctx)
	require.NoError(t, err)
	require.Len(t, res, len(versions), "every embedded migration is applied")
	require.Equal(t, versions[len(versions)-1], m.LatestVersion())
	require.Contains(t, tables(), "batches")
	require.Contains(t, tables(), "goose_db_version", "goose's version table lives in the ledgerq schema")

	_, err = m.DownTo(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"goose_db_version"}, tables(), "down removes everything the migrations made")
	current, _, err := m.Versions(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 0, current)

	_, err = m.Up(ctx)
	require.NoError(t, err)
	require.Contains(t, tables(), "batches")
	current, latest, err := m.Versions(ctx)
	require.NoError(t, err)
	require.Equal(t, latest, current)
}

// queryCatalog runs a read of the schema's catalog on st, within a
// minute, and returns its rows as scan reads them.
func queryCatalog[T any](t *testing.T, st *store.Store, scan pgx.RowToFunc[T], sql string) []T {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rows, err := st.DB().Query(ctx, sql)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, scan)
	require.NoError(t, err)
	return out
}

func TestMigrations_EveryTableViewAndColumnHasAComment(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	// The relations the check covers: were this empty (the schema renamed,
	// say), the check below would pass on nothing.
	checked := queryCatalog(t, st, pgx.RowTo[string], `
		SELECT c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'ledgerq'
		WHERE c.relkind IN ('r', 'v', 'p')`)
	require.Subset(t, checked, []string{"batches", "batch_overview"}, "the check covers the batch lane's table and view")

	missing := queryCatalog(t, st, pgx.RowTo[string], `
		SELECT c.relname || coalesce('.' || a.attname, '')
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'ledgerq'
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE c.relkind IN ('r', 'v', 'p')
		  AND (obj_description(c.oid, 'pg_class') IS NULL
		       OR (a.attname IS NOT NULL AND col_description(c.oid, a.attnum) IS NULL))
		ORDER BY 1`)
	require.Empty(t, missing, "tables, views or columns without a COMMENT")
}

// The rows of a lane in every state, as migration 00010's schema held them:
// an id, a service, the state columns and, but for one row written by hand,
// a payload.
type oldBatchRow struct {
	id, service, state string
	createdAt          time.Time
	payload            []byte // nil: no batch_payloads row
}

// Issue 7: migration 00011 keys ledgerq.batches by a bigint and moves the
// client's id to batch_payloads. A database holding batches in every state
// keeps every one of them, each state, payload and id intact; the lane goes
// on from there (the tie on created_at still broken by id, every batch
// finished); and the Down gives the rows their ids back.
func TestMigration00011_UpgradeKeepsBatchesInEveryStateAndDownRestoresTheirIDs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, m := freshMigrator(t)
	_, err := m.Up(ctx)
	require.NoError(t, err)
	_, err = m.DownTo(ctx, 10)
	require.NoError(t, err)

	// Times in the past, so that the held batch's lease has run out and the
	// pending one is due when the lane runs on below.
	t0 := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	sets := map[string]string{
		"new":       ``,
		"queued":    `queued_at = $1`,
		"held":      `submitted = true, claim_expires_at = $1, attempts = 1, last_submitted_at = $1`,
		"pending":   `submitted = true, status = 'pending', attempts = 1, last_submitted_at = $1, next_check_at = $1`,
		"unknown":   `status = 'unknown', attempts = 1, last_submitted_at = $1`,
		"delayed":   `status = 'delayed', attempts = 2, last_submitted_at = $1, last_error = 'busy'`,
		"committed": `submitted = true, status = 'committed', attempts = 1, last_submitted_at = $1, finished_at = $1`,
		"valid":     `submitted = true, status = 'valid', attempts = 1, last_submitted_at = $1, finished_at = $1`,
		"invalid":   `submitted = true, status = 'invalid', attempts = 1, last_submitted_at = $1, finished_at = $1, last_error = 'bad nonce'`,
	}
	var old []oldBatchRow
	for state := range sets {
		old = append(old, oldBatchRow{id: "b-" + state, service: "s-" + state, state: state, createdAt: t0, payload: []byte("payload " + state)})
	}
	// Two never-sent batches of one service created at once, the greater id
	// stored first; and a row an operator wrote without its payload row.
	old = append(old,
		oldBatchRow{id: "tie-b", service: "s-tie", state: "new", createdAt: t0, payload: []byte("b")},
		oldBatchRow{id: "tie-a", service: "s-tie", state: "new", createdAt: t0, payload: []byte("a")},
		oldBatchRow{id: "bare", service: "s-bare", state: "new", createdAt: t0.Add(-time.Minute)},
	)
	for _, r := range old {
		_, err := st.DB().Exec(ctx, `INSERT INTO ledgerq.batches (id, service_id, created_at, received_at, updated_at)
			VALUES ($1, $2, $3, $3, $3)`, r.id, r.service, r.createdAt)
		require.NoError(t, err, r.id)
		if set := sets[r.state]; set != "" {
			_, err = st.DB().Exec(ctx, `UPDATE ledgerq.batches SET `+set+` WHERE id = $2`, t0, r.id)
			require.NoError(t, err, r.id)
		}
		if r.payload != nil {
			_, err = st.DB().Exec(ctx, `INSERT INTO ledgerq.batch_payloads (id, service_id, payload) VALUES ($1, $2, $3)`, r.id, r.service, r.payload)
			require.NoError(t, err, r.id)
		}
	}
	// What every row says, read the same way before and after: its state by
	// the batch_overview's names, and its columns.
	type summary struct {
		Service, State, LastError string
		Attempts                  int
		Submitted, Leased, Due    bool
		Finished                  bool
	}
	want := map[string]summary{}
	rows, err := st.DB().Query(ctx, `
		SELECT id, service_id, coalesce(status::text, CASE WHEN submitted THEN 'held' WHEN queued_at IS NOT NULL THEN 'queued' ELSE 'new' END),
			coalesce(last_error, ''), attempts, submitted, claim_expires_at IS NOT NULL, next_check_at IS NOT NULL, finished_at IS NOT NULL
		FROM ledgerq.batches`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var s summary
		require.NoError(t, rows.Scan(&id, &s.Service, &s.State, &s.LastError, &s.Attempts, &s.Submitted, &s.Leased, &s.Due, &s.Finished))
		want[id] = s
	}
	require.NoError(t, rows.Err())
	require.Len(t, want, len(old))
	for _, r := range old {
		require.Equal(t, r.state, want[r.id].State, "the fixture of %s", r.id)
	}

	_, err = m.Up(ctx)
	require.NoError(t, err)

	ids := make([]string, len(old))
	for i, r := range old {
		ids[i] = r.id
	}
	stored, err := st.BatchGetMany(ctx, ids)
	require.NoError(t, err)
	require.Len(t, stored, len(old), "every batch is still there, found by its id")
	byID := map[string]store.BatchWithPayload{}
	seqs := map[int64]bool{}
	for _, b := range stored {
		byID[b.ID] = b
		require.NotZero(t, b.Seq, b.ID)
		require.False(t, seqs[b.Seq], "%s: seq %d given twice", b.ID, b.Seq)
		seqs[b.Seq] = true
	}
	for _, r := range old {
		b := byID[r.id]
		state := string(b.Status)
		switch {
		case b.Status != store.BatchStatusNone:
		case b.Submitted:
			state = "held"
		case b.QueuedAt != nil:
			state = "queued"
		default:
			state = "new"
		}
		got := summary{
			Service: b.ServiceID, State: state, LastError: b.LastError, Attempts: b.Attempts, Submitted: b.Submitted,
			Leased: b.ClaimExpiresAt != nil, Due: b.NextCheckAt != nil, Finished: b.FinishedAt != nil,
		}
		require.Equal(t, want[r.id], got, r.id)
		require.Equal(t, r.createdAt, b.CreatedAt, r.id)
		require.Equal(t, string(r.payload), string(b.Payload), "%s: its payload", r.id)
	}

	// The lane goes on: a batch posted now gets a seq of its own, and the
	// tie of s-tie is broken by id, tie-a first.
	id, payload := testfactory.SignedBatch(t)
	ins, err := st.BatchInsert(ctx, store.BatchInsertParams{Now: time.Now().UTC(), Batches: []store.NewBatch{{ID: id, ServiceID: "s-after", Payload: payload}}})
	require.NoError(t, err)
	require.False(t, seqs[ins[0].Batch.Seq], "the sequence continues after the upgraded rows")
	_, err = st.BatchQueue(ctx, store.BatchQueueParams{Now: time.Now().UTC(), Reconcile: true, ReconcileMax: 100})
	require.NoError(t, err)
	tieA, err := st.BatchGet(ctx, "tie-a")
	require.NoError(t, err)
	tieB, err := st.BatchGet(ctx, "tie-b")
	require.NoError(t, err)
	require.NotNil(t, tieA.QueuedAt, "tie-a, the smaller id, is admitted")
	require.Nil(t, tieB.QueuedAt, "tie-b waits for tie-a")
	drainLane(t, st)

	// Down: the rows keep their ids, their payloads are found by id again.
	_, err = m.DownTo(ctx, 10)
	require.NoError(t, err)
	rows, err = st.DB().Query(ctx, `
		SELECT b.id, b.status::text, coalesce(p.payload, '\x') FROM ledgerq.batches b
		LEFT JOIN ledgerq.batch_payloads p ON p.id = b.id ORDER BY b.id`)
	require.NoError(t, err)
	got := map[string]string{}
	for rows.Next() {
		var id, status string
		var payload []byte
		require.NoError(t, rows.Scan(&id, &status, &payload))
		got[id] = string(payload)
		require.Contains(t, []string{"committed", "valid", "invalid"}, status, "%s drained before the Down", id)
	}
	require.NoError(t, rows.Err())
	wantDown := map[string]string{id: string(payload)}
	for _, r := range old {
		wantDown[r.id] = string(r.payload)
	}
	require.Equal(t, wantDown, got)
	_, err = m.Up(ctx)
	require.NoError(t, err, "up again after the down")
}

// Issue 8, defect 6: processes started together on a fresh database
// serialise their migrations (README), creating the schema included: none
// fails, and the schema ends at the latest version. Each migrator has its
// own pool, as separate processes do; all start at once. A fresh database
// per round, several rounds: the window is a few milliseconds wide.
func TestMigrator_ConcurrentMigratorsOnAFreshDatabaseAllSucceed(t *testing.T) {
	t.Parallel()
	const migrators, rounds = 5, 4
	versions := embeddedVersions(t)
	for round := range rounds {
		u := testdb.NewEmpty(t)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		ms := make([]*store.Migrator, migrators)
		for i := range ms {
			st, err := store.Open(ctx, u)
			require.NoError(t, err)
			defer st.Close()
			// Connected before the start, so that they all begin at once.
			require.NoError(t, st.Ping(ctx))
			m, err := st.NewMigrator(nil)
			require.NoError(t, err)
			defer m.Close()
			ms[i] = m
		}
		start := make(chan struct{})
		errs := make([]error, migrators)
		applied := make([]int, migrators)
		var wg sync.WaitGroup
		for i, m := range ms {
			wg.Go(func() {
				<-start
				res, err := m.Up(ctx)
				errs[i], applied[i] = err, len(res)
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "round %d", round)
		total := 0
		for _, n := range applied {
			total += n
		}
		require.Equal(t, len(versions), total, "round %d: each migration is applied once, by one of the migrators", round)
		current, latest, err := ms[0].Versions(ctx)
		require.NoError(t, err)
		require.Equal(t, versions[len(versions)-1], latest)
		require.Equal(t, latest, current, "round %d", round)
		cancel()
	}
}

// Readiness probes ask for the version while another process may be
// migrating: asking creates nothing, neither the schema nor goose's version
// table (whose creation only a migrator holding the lock may attempt).
func TestMigrator_VersionsCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, m := freshMigrator(t)
	exists := func(regtype, object string) bool {
		var found bool
		require.NoError(t, st.DB().QueryRow(ctx, `SELECT `+regtype+`($1) IS NOT NULL`, object).Scan(&found))
		return found
	}

	// A fresh database, and one where a migrator has created the schema only.
	for _, step := range []string{"a fresh database", "the schema alone"} {
		if step == "the schema alone" {
			_, err := st.DB().Exec(ctx, `CREATE SCHEMA ledgerq`)
			require.NoError(t, err)
		}
		current, latest, err := m.Versions(ctx)
		require.NoError(t, err, step)
		require.Zero(t, current, step)
		require.Equal(t, m.LatestVersion(), latest, step)
		require.False(t, exists("to_regclass", store.MigrationTable), "%s: asking for the version created goose's table", step)
	}
	require.True(t, exists("to_regnamespace", "ledgerq"))
}

// sourceCitation matches a comment that names a rule by an internal document
// (a numbered source, "the seed's", a design document or one of its sections)
// rather than by what it does. Operators read these comments with \d+ and
// have none of those documents.
var sourceCitation = regexp.MustCompile(`(?i)\bseeds?\b|DESIGN|§`)

func TestMigrations_NoCommentCitesAnInternalDocument(t *testing.T) {
	t.Parallel()
	type comment struct{ object, text string }
	// Every comment on an object of the ledgerq schema, or on the schema
	// itself: tables, views, columns, types, indexes, functions, constraints.
	comments := queryCatalog(t, testdb.NewTx(t), func(r pgx.CollectableRow) (comment, error) {
		var c comment
		err := r.Scan(&c.object, &c.text)
		return c, err
	}, `
		SELECT o.type || ' ' || o.identity, d.description
		FROM pg_description d
		CROSS JOIN LATERAL pg_identify_object(d.classoid, d.objoid, d.objsubid) o
		WHERE o.schema = 'ledgerq' OR (o.type = 'schema' AND o.identity = 'ledgerq')
		ORDER BY 1`)
	objects := make([]string, 0, len(comments))
	var citing []string
	for _, c := range comments {
		objects = append(objects, c.object)
		if sourceCitation.MatchString(c.text) {
			citing = append(citing, c.object+": "+c.text)
		}
	}
	// Were the query to find nothing (the schema renamed, say), the check
	// below would pass on nothing.
	require.Subset(t, objects, []string{
		"table ledgerq.batches",
		"table column ledgerq.wallet_tasks.status",
		"type ledgerq.batch_status",
		"view ledgerq.batch_overview",
	}, "the check covers tables, columns, types and views")
	require.Empty(t, citing, "comments that cite an internal document instead of saying what the rule is:\n%s", strings.Join(citing, "\n"))
}
