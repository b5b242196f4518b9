package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// TestBenchReport_QuickBatchRoundPrintsTheTable runs bench/report.sh's
// smoke check of the batch lane and reads its table: the machine line, the
// header, a row per batch workload with a number in it, the preload over
// the lane's floor (bench/floor.sh --lane batch, no target yet), and the
// commands.
func TestBenchReport_QuickBatchRoundPrintsTheTable(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("bench/report.sh needs psql (apt-get install postgresql-client)")
	}
	river := riverCLI()
	if river == "" {
		t.Log("River's CLI is not installed (RIVER, river on PATH, ~/go/bin/river): the River row is checked to say so, without a figure")
		river = "none"
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "bench", "report.sh")
	// The script creates and drops its own databases on the test server.
	admin := testdb.New(t).AdminURL
	cmd := exec.Command(script, admin, "--quick", "--rounds", "1", "--only", "batches", "--logs", t.TempDir())
	cmd.Env = append(os.Environ(), "LEDGERQ="+testproc.Binary(t), "RIVER="+river, "LEDGERQ_BENCH_CACHE="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr:\n%s\nstdout:\n%s", &stderr, &stdout)
	out := stdout.String()

	require.Regexp(t, `(?m)^Machine: \d+ cores, [0-9.]+ GiB memory; PostgreSQL \d+\S* .*shared_buffers=\S+, synchronous_commit=\S+\)`, out)
	require.Contains(t, out, "| what | median | rounds | target | met |\n|---|---|---|---|---|\n")
	rows := regexp.MustCompile(`(?m)^\| (batch lane[^|]*) \| ([^|]*) \| ([^|]*) \| ([^|]*) \| ([^|]*) \|$`).FindAllStringSubmatch(out, -1)
	require.Len(t, rows, 5, "the batch lane's five rows:\n%s", out)
	number := regexp.MustCompile(`^[0-9]+(\.[0-9]+)? `)
	for i, r := range rows {
		what, figure, rounds, target, met := r[1], r[2], r[3], r[4], r[5]
		if i == 1 {
			require.Contains(t, what, "preloaded backlog over its floor", "the floor row follows River's")
			require.Regexp(t, `^[0-9.]+ × \([0-9]+ committed/s / [0-9]+ batches/s\)$`, figure, "row %q:\n%s\nstderr:\n%s", what, out, &stderr)
			require.Regexp(t, `^[0-9.]+$`, rounds)
			require.Equal(t, "—", target)
			require.Equal(t, "—", met)
			continue
		}
		require.True(t, strings.HasPrefix(target, "≥ "), "row %q: target %q", what, target)
		if i == 0 && river == "none" {
			require.Contains(t, figure, "River not installed", "row %q", what)
			require.Equal(t, "—", met)
			continue
		}
		require.Regexp(t, number, figure, "row %q has no figure:\n%s\nstderr:\n%s", what, out, &stderr)
		require.Regexp(t, `^[0-9.]+$`, rounds, "row %q: one round, one value", what)
		require.Contains(t, []string{"yes", "no"}, met, "row %q", what)
	}
	// The commands as written, no loop settings added (bench batches first
	// asks about a batch when the simulated ledger commits it).
	require.Contains(t, out, "- `ledgerq bench batches --mode preload --services 100 --batches-per-service 20 --batch-sim-commit-delay 0 --batch-sim-verify=false`\n")
	require.Contains(t, out, "--batch-sim-verify=false --backlog-finished 10000`\n")
	require.Contains(t, out, "- `bench/floor.sh ADMIN_URL --lane batch --rounds 1 --seconds 3`\n")
}

// TestBenchReport_QuickWalletRoundPrintsTheTable runs bench/report.sh's
// smoke check of the wallet lane (geth left out) and reads its rows: the
// ratio to the direct sender, the HTTP intake, the enqueue-to-mined p99 at
// half the capacity the HTTP run measured, the SQL intake over the HTTP
// intake, the ceiling of the lane's rows
// alone (bench/floor.sh, pgbench), the lane over that ceiling, the
// process's CPU per task and the backlog ratio, each with a figure, and the half-capacity run's command
// with its offered rate; the rows on geth (against a direct sender, and 3
// chains × 2 nodes over 1 × 1) say geth is not installed.
func TestBenchReport_QuickWalletRoundPrintsTheTable(t *testing.T) {
	t.Parallel()
	out, stderr := quickReportWithoutGeth(t, "wallets")

	rows := regexp.MustCompile(`(?m)^\| (wallet lane[^|]*) \| ([^|]*) \| ([^|]*) \| ([^|]*) \| ([^|]*) \|$`).FindAllStringSubmatch(out, -1)
	require.Len(t, rows, 10, "the wallet lane's ten rows:\n%s", out)
	number := regexp.MustCompile(`^[0-9]+(\.[0-9]+)? `)
	for _, r := range rows {
		what, figure, met := r[1], r[2], r[5]
		if strings.Contains(what, "geth") {
			require.Contains(t, figure, "geth not installed", "row %q", what)
			if strings.Contains(what, "vs a direct sender, geth") {
				require.Equal(t, "≥ 0.95 ×", r[4], "on geth the lane stays at 0.95 × a direct sender (issue 43)")
			}
			continue
		}
		require.Regexp(t, number, figure, "row %q has no figure:\n%s\nstderr:\n%s", what, out, stderr)
		if strings.Contains(what, "rows alone in PostgreSQL") {
			// A ceiling, no target: compared with the direct sender.
			require.Regexp(t, `^[0-9]+ tasks/s$`, figure)
			require.Contains(t, what, "× the direct sender's mined/s")
			require.Equal(t, "—", met)
			continue
		}
		require.Contains(t, []string{"yes", "no"}, met, "row %q", what)
	}
	cpu := rows[1]
	require.Contains(t, cpu[1], "ledgerq's own CPU per task", "the process's CPU follows the simulated chain's row")
	require.Regexp(t, `^[0-9]+\.[0-9]{3} ms$`, cpu[2])
	require.Equal(t, "≤ 0.35 ms", cpu[4])
	require.Contains(t, rows[6][1], "rows alone in PostgreSQL", "the ceiling follows the latency row")
	over := rows[7]
	require.Contains(t, over[1], "wallet lane over its floor", "the lane over its floor follows the ceiling")
	require.Regexp(t, `^[0-9]+\.[0-9]{2} × \([0-9]+ tasks/s / [0-9]+ tasks/s\)$`, over[2])
	require.Equal(t, "≥ 0.6 ×", over[4])
	require.Contains(t, out, "- `bench/floor.sh ADMIN_URL --rounds 1 --seconds 3`\n")
	sql := rows[4]
	require.Contains(t, sql[1], "SQL intake over its HTTP intake", "the SQL intake follows the HTTP intake")
	require.Regexp(t, `^[0-9]+\.[0-9]{2} × \([0-9]+ tasks/s / [0-9]+ tasks/s\)$`, sql[2])
	require.Equal(t, "≥ 1.0 ×", sql[4])
	require.Contains(t, out, "- `ledgerq bench wallets --mode sql --ingest-workers 16 --wallets 3 --tasks-per-wallet 50`\n")
	half := rows[5]
	require.Contains(t, half[1], "enqueue→mined p99 at half the capacity")
	require.Regexp(t, `^[0-9]+ ms$`, half[2])
	require.Equal(t, "≤ 600 ms", half[4])
	require.Regexp(t, "(?m)^- `ledgerq bench wallets --mode http --ingest-workers 16 --wallets 3 --tasks-per-wallet 50 --rate [0-9]+`$", out)
	chains := rows[9]
	require.Contains(t, chains[1], "3 chains × 2 nodes over 1 chain × 1 node on geth", "the row of several chains comes last")
	require.Equal(t, "≥ 0.9 ×", chains[4])
}

// TestBenchReport_QuickBuilderRoundPrintsTheIntakeOverItsFloor runs
// bench/report.sh's smoke check of the builder lane without geth and reads
// the row of the /rpc intake over its floor (bench/floor.sh --lane
// builder): the ratio with both figures, its target, whether it is met,
// and the floor's command.
func TestBenchReport_QuickBuilderRoundPrintsTheIntakeOverItsFloor(t *testing.T) {
	t.Parallel()
	out, stderr := quickReportWithoutGeth(t, "builder")

	rows := regexp.MustCompile(`(?m)^\| (builder lane /rpc intake over its floor[^|]*) \| ([^|]*) \| ([^|]*) \| ([^|]*) \| ([^|]*) \|$`).FindAllStringSubmatch(out, -1)
	require.Len(t, rows, 1, "the builder floor's row:\n%s\nstderr:\n%s", out, stderr)
	r := rows[0]
	require.Regexp(t, `^[0-9.]+ × \([0-9]+ tx/s / [0-9]+ tx/s\)$`, r[2])
	require.Regexp(t, `^[0-9.]+$`, r[3])
	require.Equal(t, "≥ 0.7 ×", r[4])
	require.Contains(t, []string{"yes", "no"}, r[5], "without geth the target is read against the floor")
	require.Contains(t, out, "- `bench/floor.sh ADMIN_URL --lane builder --rounds 1 --seconds 3`\n")
}

// riverCLI is River's CLI as bench/report.sh would find it without
// building it, or "".
func riverCLI() string {
	if r := os.Getenv("RIVER"); r != "" {
		return r
	}
	if p, err := exec.LookPath("river"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		if p := filepath.Join(home, "go", "bin", "river"); isExecutable(p) {
			return p
		}
	}
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// quickReportWithoutGeth runs bench/report.sh's smoke check of one lane
// with geth left out (a backlog of 1000) and returns its stdout and stderr.
func quickReportWithoutGeth(t *testing.T, lane string) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("bench/report.sh needs psql (apt-get install postgresql-client)")
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "bench", "report.sh")
	admin := testdb.New(t).AdminURL
	cmd := exec.Command(script, admin, "--quick", "--rounds", "1", "--only", lane, "--backlog", "1000", "--logs", t.TempDir())
	cmd.Env = append(os.Environ(), "LEDGERQ="+testproc.Binary(t), "GETH=", "LEDGERQ_TEST_GETH=", "PATH=/usr/bin:/bin", "LEDGERQ_BENCH_CACHE="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr:\n%s\nstdout:\n%s", &stderr, &stdout)
	return stdout.String(), stderr.String()
}
