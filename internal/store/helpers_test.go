package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// txRows gives a rule test a store on a transaction that is rolled back
// when the test ends, a fake clock at testfactory.Start, and a factory that
// writes rows there by that clock.
func txRows(t *testing.T) (*store.Store, *clock.Fake, *testfactory.Factory) {
	t.Helper()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	return st, clk, testfactory.New(t, st, clk)
}

// committedRows gives a test its own database, for what needs real commits
// (NOTIFY, concurrent transactions), a fake clock at testfactory.Start, and
// a factory that writes rows there by that clock.
func committedRows(t *testing.T) (*testdb.DB, *clock.Fake, *testfactory.Factory) {
	t.Helper()
	db := testdb.New(t)
	clk := testfactory.NewClock()
	return db, clk, testfactory.New(t, db.Store, clk)
}

// execUndone runs one statement on a store from testdb.NewTx inside a
// savepoint it rolls back, so a statement the database refuses leaves the
// test's transaction usable, and returns the statement's error.
func execUndone(t *testing.T, st *store.Store, sql string, args ...any) error {
	t.Helper()
	_, err := st.DB().Exec(t.Context(), `SAVEPOINT undone`)
	require.NoError(t, err)
	_, execErr := st.DB().Exec(t.Context(), sql, args...)
	_, err = st.DB().Exec(t.Context(), `ROLLBACK TO SAVEPOINT undone`)
	require.NoError(t, err)
	return execErr
}

// oneConnectionStore opens a store on url whose calls all run on one
// connection: every other connection of its pool is held until the test
// ends.
func oneConnectionStore(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	for range st.Conns().Config().MaxConns - 1 {
		c, err := st.Conns().Acquire(t.Context())
		require.NoError(t, err)
		t.Cleanup(c.Release)
	}
	return st
}

// plans counts how a prepared statement was planned on its connection.
type plans struct{ generic, custom int64 }

// preparedPlans returns, by query name, how the statements prepared on the
// one connection of st (oneConnectionStore) whose names start with prefix
// were planned.
func preparedPlans(t *testing.T, st *store.Store, prefix string) map[string]plans {
	t.Helper()
	c, err := st.Conns().Acquire(t.Context())
	require.NoError(t, err)
	defer c.Release()
	rows, err := c.Query(t.Context(), `
		SELECT substring(statement FROM '-- name: (\w+)'), generic_plans, custom_plans
		FROM pg_prepared_statements WHERE statement LIKE '-- name: ' || $1 || '%'`, prefix)
	require.NoError(t, err)
	got := map[string]plans{}
	for rows.Next() {
		var name string
		var p plans
		require.NoError(t, rows.Scan(&name, &p.generic, &p.custom))
		got[name] = p
	}
	require.NoError(t, rows.Err())
	return got
}
