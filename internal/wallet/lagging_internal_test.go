package wallet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The best head: a lower head is lagging until no answer has reached the
// best for the window; then the chain is believed to have gone back.
func TestHeadWatch_ALowerHeadLagsUntilTheWindowPassesWithoutTheBest(t *testing.T) {
	t.Parallel()
	const window = 30 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var w headWatch
	steps := []struct {
		after   time.Duration
		head    uint64
		lagging bool
		best    uint64
	}{
		{0, 10, false, 10},
		{time.Second, 8, true, 10},
		{10 * time.Second, 10, false, 10}, // a caught-up node answers: the window starts again
		{35 * time.Second, 8, true, 10},
		{41 * time.Second, 8, false, 8}, // nothing reached 10 for the window: the chain went back
		{42 * time.Second, 9, false, 9},
		{43 * time.Second, 7, true, 9},
	}
	for i, s := range steps {
		require.Equal(t, s.lagging, w.observe(s.head, t0.Add(s.after), window), "step %d", i)
		require.Equal(t, s.best, w.best, "step %d", i)
	}
}
