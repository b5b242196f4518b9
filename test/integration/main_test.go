// Package integration holds ledgerq's end-to-end tests: they build the real
// binary, start it as processes (dev, serve, once, migrate, simledger) and
// talk to them over HTTP, as an operator or a cron job would. Rule tests live
// beside the code they test. The server comes from package testdb
// (LEDGERQ_TEST_DATABASE_URL, testcontainers, or the local PostgreSQL
// binaries); each test gets its own database.
package integration

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// eventually polls cond every 20 ms until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval of this wait on a condition
	}
}

// reachableTempDir returns a new temporary directory that other users can
// enter: run as root, ledgerq dev runs PostgreSQL as an unprivileged user, and
// t.TempDir's parent is private to root.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ledgerq-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
