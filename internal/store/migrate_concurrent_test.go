package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

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
