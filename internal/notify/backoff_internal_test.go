package notify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The listener's reconnect is what wakes the loops that backed off while
// the database was away (a failover takes seconds): however long the outage,
// it tries again within a second, so the loops resume within about a second
// of the new primary instead of after a backoff grown over the outage. An
// attempt is one connection to a server that is down: cheap.
func TestBackoff_StartsShortAndNeverExceedsASecond(t *testing.T) {
	t.Parallel()
	for attempt := 1; attempt <= 20; attempt++ {
		for range 50 {
			d := backoff(attempt)
			require.LessOrEqual(t, d, maxBackoff, "attempt %d", attempt)
			require.Positive(t, d, "attempt %d", attempt)
		}
	}
	require.LessOrEqual(t, maxBackoff, time.Second)
	require.LessOrEqual(t, backoff(1), 100*time.Millisecond, "the first reconnect is prompt")
}
