package integration

// Ethereum clients that are not ledgerq's code — ethers v6 and viem from
// npm (test/clients, pinned in its package-lock.json) — against the builder
// lane's POST /rpc, run with node --test: their default send-and-wait flows,
// the error classes ethers raises for geth's refusals, and a burst of 20
// senders × 25 that must run exactly once by the chain's blocks. Node is
// needed; without it the test is skipped, except in CI (CI set), where it
// fails.

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// clientsDir is test/clients, with its packages installed (npm ci) once.
func clientsDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not installed; CI runs the client tests")
		}
		t.Skip("node is not installed: the ethers and viem client tests need it")
	}
	dir, err := filepath.Abs(filepath.Join("..", "clients"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ethers")); err != nil {
		npm, err := exec.LookPath("npm")
		require.NoError(t, err, "npm is needed to install test/clients' packages")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm ci in test/clients:\n%s", out)
	}
	return dir
}

// runClientTests runs node --test in test/clients against rpcURL.
func runClientTests(t *testing.T, dir, rpcURL string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-concurrency=1", "--test-reporter=spec")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"LEDGERQ_RPC_URL=" + rpcURL, "NO_COLOR=1"}, env...)...)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test against %s:\n%s", rpcURL, out)
	require.NoError(t, err, "the client tests failed")
}

// The builder lane as `serve --builder` runs it against a JAM chain in
// another process (`simledger --kind jam`, which serves its EVM's JSON-RPC
// at /evm).
func TestClients_EthersAndViemAgainstServeAndAJAMChainProcess(t *testing.T) {
	dir := clientsDir(t)
	runClientTests(t, dir, serveBuilderOnAJAMChainProcess(t)+"/rpc")
}

// serveBuilderOnAJAMChainProcess starts `simledger --kind jam` (500 ms
// slots) and `serve --builder` in front of it on a database of its own,
// and returns serve's API URL.
func serveBuilderOnAJAMChainProcess(t *testing.T) string {
	t.Helper()
	dbURL := testdb.New(t).URL
	addr := testproc.FreeAddr(t)
	chain := testproc.Start(t, t.TempDir(), nil, "simledger", "--kind", "jam", "--addr", addr, "--log-level", "warn",
		"--jam-slot-length", "500ms")
	jamURL := "http://" + addr
	testproc.WaitHTTP(t, chain, jamURL+"/debug/stats", http.StatusOK, time.Minute)
	_, api := testproc.StartReady(t, t.TempDir(), []string{"DATABASE_URL=" + dbURL},
		"serve", "--builder", "--builder-ledger-url", jamURL, "--poll-interval", "100ms", "--log-level", "warn")
	return api
}

// The builder lane as `ledgerq dev` runs it: the simulated JAM chain in the
// same process, journaled in the data directory (here beside the test's
// database), with the development mnemonic's accounts funded.
func TestClients_EthersAndViemAgainstLedgerqDev(t *testing.T) {
	dir := clientsDir(t)
	dbURL := testdb.New(t).URL
	_, api := testproc.StartReady(t, t.TempDir(), []string{"DATABASE_URL=" + dbURL},
		"dev", "--data-dir", t.TempDir(), "--builder-sim-slot-length", "1s", "--log-level", "warn")
	runClientTests(t, dir, api+"/rpc")
}
