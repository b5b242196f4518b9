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
