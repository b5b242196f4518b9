package store_test

import (
	"context"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
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

func TestMigrator_UpDownUpOnAFreshDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := testdb.NewEmpty(t)
	st, err := store.Open(ctx, u)
	require.NoError(t, err)
	defer st.Close()
	m, err := st.NewMigrator(nil)
	require.NoError(t, err)
	defer m.Close()
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

func TestMigrations_EveryTableViewAndColumnHasAComment(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// The relations the check covers: were this empty (the schema renamed,
	// say), the check below would pass on nothing.
	rows, err := st.DB().Query(ctx, `
		SELECT c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'ledgerq'
		WHERE c.relkind IN ('r', 'v', 'p')`)
	require.NoError(t, err)
	checked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Subset(t, checked, []string{"batches", "batch_overview"}, "the check covers the batch lane's table and view")

	rows, err = st.DB().Query(ctx, `
		SELECT c.relname || coalesce('.' || a.attname, '')
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'ledgerq'
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE c.relkind IN ('r', 'v', 'p')
		  AND (obj_description(c.oid, 'pg_class') IS NULL
		       OR (a.attname IS NOT NULL AND col_description(c.oid, a.attnum) IS NULL))
		ORDER BY 1`)
	require.NoError(t, err)
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, missing, "tables, views or columns without a COMMENT")
}
