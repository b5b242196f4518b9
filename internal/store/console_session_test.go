package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// A login forgets the sessions no longer usable (expired, or ended by a
// logout): the table holds the live ones, not one row per login ever.
func TestConsoleSession_ALoginForgetsExpiredAndEndedSessions(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	st := db.Store
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	key, _ := createKey(t, st, t0, "operator", "w")
	ctx := t.Context()
	sessions := func() int {
		var n int
		require.NoError(t, st.Conns().QueryRow(ctx, `SELECT count(*) FROM ledgerq.console_sessions`).Scan(&n))
		return n
	}

	expiring, err := st.ConsoleSessionCreate(ctx, key.ID, t0, time.Hour)
	require.NoError(t, err)
	ended, err := st.ConsoleSessionCreate(ctx, key.ID, t0, 3*time.Hour)
	require.NoError(t, err)
	require.NoError(t, st.ConsoleSessionEnd(ctx, ended, t0.Add(time.Minute)))
	live, err := st.ConsoleSessionCreate(ctx, key.ID, t0, 3*time.Hour)
	require.NoError(t, err)
	require.Equal(t, 3, sessions(), "nothing was past its end when these logged in")

	_, err = st.ConsoleSessionCreate(ctx, key.ID, t0.Add(2*time.Hour), time.Hour)
	require.NoError(t, err)
	require.Equal(t, 2, sessions(), "the expired and the ended session are forgotten; the live one and the new one stay")
	_, err = st.ConsoleSessionKey(ctx, live, t0.Add(2*time.Hour))
	require.NoError(t, err, "the live session still opens the console")
	_, err = st.ConsoleSessionKey(ctx, expiring, t0.Add(2*time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound)
}
