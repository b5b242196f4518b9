package wallet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/workers"
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

// A chain nonce read below one already read is a lagging node's while the
// head has not gone below the one it was read with and a read reached the
// higher one within the window; a head gone back, or the window passed
// without it, makes the lower one believed.
func TestTrustChainNonce_ALowerNonceIsBelievedOnlyWithTheHeadBackOrAfterTheWindow(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := Config{Clock: clk}.WithDefaults()
	s := &Shard{job: &Job{cfg: cfg, nonces: map[string]nonceSeen{}}, Claim: workers.Claim{Key: "wallet:1337:0x01"}}
	trust := func(nonce, head uint64) (uint64, bool) { return s.TrustChainNonce(nonce, head) }

	n, lagging := trust(10, 100)
	require.Equal(t, uint64(10), n)
	require.False(t, lagging)
	n, lagging = trust(7, 101)
	require.Equal(t, uint64(10), n, "lower with the head not back: a lagging node's")
	require.True(t, lagging)
	clk.Advance(cfg.RewindAfter / 2)
	_, _ = trust(10, 102) // a caught-up read: the window starts again
	clk.Advance(cfg.RewindAfter / 2)
	n, lagging = trust(7, 103)
	require.Equal(t, uint64(10), n)
	require.True(t, lagging)
	n, lagging = trust(7, 99)
	require.Equal(t, uint64(7), n, "the head went below the one 10 was read with: the chain went back")
	require.False(t, lagging)

	_, _ = trust(10, 110)
	clk.Advance(cfg.RewindAfter)
	n, lagging = trust(8, 120)
	require.Equal(t, uint64(8), n, "no read reached 10 for the window: believed")
	require.False(t, lagging)

	_, _ = trust(12, 130)
	s.ForgetChainNonce()
	n, _ = trust(9, 131)
	require.Equal(t, uint64(9), n, "forgotten after the chain showed blocks gone")
}
