package bench

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReadRSS_ReadsThisProcesssResidentMemory(t *testing.T) {
	t.Parallel()
	rss, err := ReadRSS(os.Getpid())
	require.NoError(t, err)
	require.Greater(t, rss, int64(1<<20), "a Go test binary holds more than a MiB")
	_, err = ReadRSS(-1)
	require.Error(t, err)
}

func TestChurnReport_VerdictComparesTheLastThirdWithTheSixthToTheThird(t *testing.T) {
	t.Parallel()
	rep := &ChurnReport{Config: DefaultChurnConfig()} // 30 minutes, a sample a minute
	for m := 1; m <= 30; m++ {
		rss := int64(100 << 20) // minutes 1–19: 100 MiB, warm-up excepted
		switch {
		case m < 5:
			rss = 50 << 20
		case m >= 20:
			rss = 120 << 20
		}
		// batches holds still at 8 MiB from minute 5; audit_log grows by
		// a MiB a minute; api_keys is empty until minute 20.
		tables := map[string]int64{"batches": 8 << 20, "audit_log": int64(m) << 20, "api_keys": 0}
		if m < 5 {
			tables["batches"] = int64(m) << 20
		}
		if m >= 20 {
			tables["api_keys"] = 1 << 16
		}
		rep.Samples = append(rep.Samples, ChurnSample{At: time.Duration(m) * time.Minute, RSS: rss, BatchesCommitted: int64(m), Tables: tables})
	}
	rep.judge()
	require.Equal(t, [2]time.Duration{5 * time.Minute, 10 * time.Minute}, rep.BaselineWindow)
	require.Equal(t, [2]time.Duration{20 * time.Minute, 30 * time.Minute}, rep.EndWindow)
	require.InDelta(t, 0.2, rep.Growth, 1e-9, "120 MiB over 100 MiB")

	var out strings.Builder
	require.NoError(t, rep.WriteSummary(&out))
	require.Contains(t, out.String(), "churn: verdict: rss +20.0% (mean 100.0 MiB over 5m0s–10m0s, 120.0 MiB over 20m0s–30m0s)")
	// Tables: 8 + 7.5 (minutes 5–10) against 8 + 25 + 1/16 (20–30); the
	// audit log grew by 17.5 MiB, api_keys by 64 KiB from nothing, and
	// batches stayed.
	require.InDelta(t, 33.0625/15.5-1, rep.TablesGrowth, 1e-9)
	require.Equal(t, [2]float64{7.5 * (1 << 20), 25 * (1 << 20)}, rep.Table["audit_log"])
	require.Equal(t, [2]float64{8 << 20, 8 << 20}, rep.Table["batches"])
	require.Contains(t, out.String(), "churn: verdict: tables +113.3% (mean 15.5 MiB over 5m0s–10m0s, 33.1 MiB over 20m0s–30m0s); growing most: audit_log +17.5 MiB (+233%), api_keys +0.1 MiB\n")
}

func TestChurnReport_WithoutSamplesInAWindowHasNoVerdict(t *testing.T) {
	t.Parallel()
	rep := &ChurnReport{Config: DefaultChurnConfig(), Samples: []ChurnSample{{At: 25 * time.Minute, RSS: 1 << 20}}}
	rep.judge()
	var out strings.Builder
	require.NoError(t, rep.WriteSummary(&out))
	require.Contains(t, out.String(), "churn: verdict: n/a")
}
