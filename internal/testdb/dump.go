package testdb

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgerq/ledgerq/internal/store"
)

// pgTool finds a PostgreSQL client program: on the PATH, else in the
// Debian server packages' directory. The test is skipped without it.
func pgTool(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) == 0 {
		t.Skipf("testdb: %s not found: the test needs PostgreSQL's client programs", name)
	}
	return matches[len(matches)-1]
}

// Dump backs the database at dbURL up as the operations guide says
// (pg_dump -Fc -n ledgerq), while its stores stay open, and returns the
// dump's path (removed when t ends).
func Dump(t testing.TB, dbURL string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ledgerq.dump")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, pgTool(t, "pg_dump"), "-Fc", "-n", "ledgerq", "-f", out, dbURL).CombinedOutput()
	if err != nil {
		t.Fatalf("testdb: pg_dump: %v: %s", err, b)
	}
	return out
}

// Restore restores a Dump into a new empty database (pg_restore
// --no-owner), dropped when t ends, and opens a store on it.
func Restore(t testing.TB, dump string) *DB {
	t.Helper()
	dbURL := NewEmpty(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, pgTool(t, "pg_restore"), "--no-owner", "-d", dbURL, dump).CombinedOutput()
	if err != nil {
		t.Fatalf("testdb: pg_restore: %v: %s", err, b)
	}
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatalf("testdb: opening the restored database: %v", err)
	}
	t.Cleanup(st.Close)
	return &DB{URL: dbURL, Store: st}
}
