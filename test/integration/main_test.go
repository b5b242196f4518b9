// Package integration holds ledgerq's end-to-end tests: they build the real
// binary, start it as processes (dev, serve, once, migrate, simledger) and
// talk to them over HTTP, as an operator or a cron job would. Rule tests live
// beside the code they test. The server comes from package testdb
// (LEDGERQ_TEST_DATABASE_URL, testcontainers, or the local PostgreSQL
// binaries); each test gets its own database.
package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testproc"
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

// devRun is `ledgerq dev` on a data directory of the test's and one address,
// so that a test can stop it and start it again on the same data.
type devRun struct {
	t       *testing.T
	work    string // the processes' working directory
	dataDir string
	addr    string
}

func newDevRun(t *testing.T) *devRun {
	t.Helper()
	work := reachableTempDir(t)
	return &devRun{t: t, work: work, dataDir: filepath.Join(work, "data"), addr: testproc.FreeAddr(t)}
}

// start starts dev, with args added to its data directory and address, and
// waits until its /readyz answers 200.
func (d *devRun) start(args ...string) *testproc.Proc {
	d.t.Helper()
	p := testproc.Start(d.t, d.work, nil, append([]string{"dev", "--data-dir", d.dataDir, "--api-addr", d.addr}, args...)...)
	testproc.WaitHTTP(d.t, p, "http://"+d.addr+"/readyz", http.StatusOK, 2*time.Minute)
	return p
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
