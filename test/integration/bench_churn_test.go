package integration

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// TestBenchChurn_ReportsServesMemoryAndEveryLanesProgress runs a short
// `ledgerq bench churn`: it must print serve's RSS and the ledgerq tables'
// size every interval, see work finish on all three lanes through the HTTP
// API, and end with a verdict on each.
func TestBenchChurn_ReportsServesMemoryAndEveryLanesProgress(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t).URL
	p := testproc.Start(t, t.TempDir(), nil, "bench", "churn", "--database-url", dbURL,
		"--duration", "20s", "--interval", "5s", "--batch-rate", "50", "--wallet-rate", "5", "--builder-rate", "5")
	require.Equal(t, 0, p.Wait(t, 2*time.Minute), "stderr:\n%s\nstdout:\n%s", p.Stderr, p.Stdout)

	samples := regexp.MustCompile(`(?m)^churn: +\S+ +rss +([0-9.]+) MiB +tables +([0-9.]+) MiB +batches committed (\d+) \(posted \d+\) +tasks done (\d+) \(posted \d+\) +txs finalized (\d+)`).
		FindAllStringSubmatch(p.Stderr.String(), -1)
	require.GreaterOrEqual(t, len(samples), 3, "a sample every 5 s of 20 s; stderr:\n%s", p.Stderr)
	for _, s := range samples {
		rss, err := strconv.ParseFloat(s[1], 64)
		require.NoError(t, err)
		require.Greater(t, rss, 1.0, "serve's RSS in MiB: %s", s[0])
		tables, err := strconv.ParseFloat(s[2], 64)
		require.NoError(t, err)
		require.Greater(t, tables, 0.5, "the migrated tables with their indexes, in MiB: %s", s[0])
	}
	last := samples[len(samples)-1]
	for i, lane := range []string{"batches committed", "tasks done", "txs finalized"} {
		n, err := strconv.Atoi(last[3+i])
		require.NoError(t, err)
		require.Positive(t, n, "%s by the last sample: %s", lane, last[0])
	}
	out := p.Stdout.String()
	require.Regexp(t, `churn: errors: batches 0, tasks 0, txs 0`, out)
	require.Regexp(t, `churn: verdict: rss [-+][0-9.]+% \(mean [0-9.]+ MiB over`, out)
	require.Regexp(t, `churn: verdict: tables [-+][0-9.]+% \(mean [0-9.]+ MiB over .*\); (growing most: \w+ \+|no table grew)`, out)
}
