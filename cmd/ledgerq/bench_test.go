package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bench batches asks about a batch when the simulated ledger commits it,
// unless --batch-first-check (or its variable) says otherwise: a first check
// half a second after a ledger that commits at once measured the wait,
// not the lane.
func TestBenchBatches_FirstCheckFollowsTheSimulatedCommitDelayUnlessGiven(t *testing.T) {
	url := []string{"--database-url", "postgres://u@127.0.0.1/db"}
	for _, tc := range []struct {
		args []string
		env  string
		want time.Duration
	}{
		{[]string{"--batch-sim-commit-delay", "0"}, "", 0},
		{[]string{"--batch-sim-commit-delay", "250ms"}, "", 250 * time.Millisecond},
		{nil, "", 500 * time.Millisecond},
		{[]string{"--batch-sim-commit-delay", "0", "--batch-first-check", "2s"}, "", 2 * time.Second},
		{[]string{"--batch-sim-commit-delay", "0"}, "1s", time.Second},
	} {
		t.Setenv("LEDGERQ_BATCH_FIRST_CHECK", tc.env)
		cfg, _, err := parseBenchBatches(append(tc.args, url...))
		require.NoError(t, err, "%v", tc.args)
		require.Equal(t, tc.want, cfg.Node.Batch.FirstCheck, "%v, LEDGERQ_BATCH_FIRST_CHECK=%q", tc.args, tc.env)
	}
}
