package console

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
)

func TestCharts_ThroughputIsPerSecondAndLatencyBreaksWhereNothingEnded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 30, 20, 0, time.UTC)
	m := func(ago int) time.Time { return now.Truncate(time.Minute).Add(-time.Duration(ago) * time.Minute) }
	h := store.LaneHistory{
		Batches: []store.MinuteCount{
			{Minute: m(3), State: "committed", Items: 120, P50: 0.5, P99: 2},
			{Minute: m(2), State: "invalid", Items: 6},
			{Minute: m(1), State: "committed", Items: 60, P50: 0.25, P99: 1},
			{Minute: m(90), State: "committed", Items: 999}, // outside the window
		},
	}
	cs := charts(h, now)
	require.Len(t, cs, 4)
	thr := cs[0]
	require.Len(t, thr.Minutes, 60)
	require.Equal(t, m(0), thr.Minutes[59], "the window ends with the current minute")
	require.InDelta(t, 2.0, thr.Series[0].Values[56], 1e-9, "120 batches in a minute are 2/s")
	require.InDelta(t, 1.0, thr.Series[0].Values[58], 1e-9)
	require.Zero(t, thr.Series[0].Values[57], "invalid batches are not committed")

	lat := cs[1]
	require.Equal(t, []bool{true, false, true}, lat.Series[0].Has[56:59], "no latency in a minute where no batch was committed")
	svg := string(lat.SVG())
	require.Equal(t, 4, strings.Count(svg, `class="dot `), "two lone minutes, two series: dots, not a line through zero")
	require.NotContains(t, svg, "<polyline")
	rows := lat.Rows()
	require.Len(t, rows, 2)
	require.Equal(t, []string{"0.5", "2"}, rows[0].Values)
	require.False(t, lat.Empty())
	require.True(t, cs[2].Empty(), "no task ended")
}

func TestNiceCeil(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]float64{0: 1, 0.07: 0.1, 0.3: 0.5, 1: 1, 1.2: 2, 3: 5, 7: 10, 42: 50} {
		require.InDelta(t, want, niceCeil(v), 1e-9, "%v", v)
	}
}

func TestTargetLink(t *testing.T) {
	t.Parallel()
	for target, want := range map[string]string{
		"wallet/main":                 "/ui/wallets/main",
		"wallet/main/task/abc":        "/ui/wallets/main/tasks/abc",
		"webhook_delivery/msg_1":      "",
		"wallet/a b/task/x":           "/ui/wallets/a%20b/tasks/x",
		"something/else/entirely/now": "",
	} {
		require.Equal(t, want, targetLink(target), target)
	}
}
