package ratelimit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
)

var (
	perSecond50Burst100 = Rate{Count: 50, Period: time.Second, Burst: 100}
	perSecond1Burst1    = Rate{Count: 1, Period: time.Second, Burst: 1}
)

type bundle struct {
	clock   *clock.Fake
	limiter *Limiter
}

func setup(t *testing.T, cfg Config) bundle {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cfg.Clock = clk
	l, err := New(cfg)
	require.NoError(t, err)
	return bundle{clock: clk, limiter: l}
}

// allowN calls Allow n times and returns how many were allowed.
func allowN(l *Limiter, key string, r Rate, n int) int {
	allowed := 0
	for range n {
		if ok, _ := l.Allow(key, r); ok {
			allowed++
		}
	}
	return allowed
}

func TestLimiter_AllowsTheBurstThenRefusesUntilTheNextToken(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	require.Equal(t, 100, allowN(b.limiter, "key-a", perSecond50Burst100, 100))

	ok, retryAfter := b.limiter.Allow("key-a", perSecond50Burst100)
	require.False(t, ok)
	require.Equal(t, 20*time.Millisecond, retryAfter, "one token comes back every 1/50 s")
	require.Equal(t, "1", RetryAfterSeconds(retryAfter))

	b.clock.Advance(5 * time.Millisecond)
	ok, retryAfter = b.limiter.Allow("key-a", perSecond50Burst100)
	require.False(t, ok)
	require.Equal(t, 15*time.Millisecond, retryAfter, "a refusal takes no token")
}

func TestLimiter_RefillsAtTheRateUpToTheBurst(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	require.Equal(t, 100, allowN(b.limiter, "key-a", perSecond50Burst100, 101))

	b.clock.Advance(20 * time.Millisecond)
	require.Equal(t, 1, allowN(b.limiter, "key-a", perSecond50Burst100, 5))

	b.clock.Advance(time.Second)
	require.Equal(t, 50, allowN(b.limiter, "key-a", perSecond50Burst100, 200))

	b.clock.Advance(time.Hour)
	require.Equal(t, 100, allowN(b.limiter, "key-a", perSecond50Burst100, 200), "a long rest refills the burst, no more")
}

func TestLimiter_KeysHaveIndependentBuckets(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ok, _ := b.limiter.Allow("key-a", perSecond1Burst1)
	require.True(t, ok)
	ok, _ = b.limiter.Allow("key-a", perSecond1Burst1)
	require.False(t, ok)

	ok, _ = b.limiter.Allow("key-b", perSecond1Burst1)
	require.True(t, ok, "key-a's empty bucket is not key-b's")
	require.Equal(t, 2, b.limiter.Len())
}

func TestLimiter_UnlimitedRateAllowsEverythingAndTracksNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	unlimited, err := ParseRate("0")
	require.NoError(t, err)
	for i := range 10_000 {
		ok, retryAfter := b.limiter.Allow(fmt.Sprint("key-", i%3), unlimited)
		require.True(t, ok)
		require.Zero(t, retryAfter)
	}
	require.Zero(t, b.limiter.Len())
}

func TestLimiter_AFloodOfDistinctKeysStaysWithinMaxKeys(t *testing.T) {
	t.Parallel()
	const maxKeys = 1000
	b := setup(t, Config{MaxKeys: maxKeys})
	hourly := Rate{Count: 1, Period: time.Hour, Burst: 1}
	ok, _ := b.limiter.Allow("abuser", hourly)
	require.True(t, ok)

	for i := range 100_000 {
		// The clock stands still: no flood bucket is full, so only the cap
		// can make room.
		ok, _ := b.limiter.Allow(fmt.Sprint("10.0.", i/256, ".", i%256), hourly)
		require.True(t, ok)
		if i%1000 == 0 {
			require.LessOrEqual(t, b.limiter.Len(), maxKeys)
		}
		// A key that keeps being refused is in use and keeps its bucket.
		ok, _ = b.limiter.Allow("abuser", hourly)
		require.False(t, ok, "after %d flood keys", i+1)
	}
	require.LessOrEqual(t, b.limiter.Len(), maxKeys)
	require.Greater(t, b.limiter.Len(), maxKeys/2, "the cap is shared by the shards, not lost to them")
}

func TestLimiter_FullBucketsAreDroppedAsItGoes(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for i := range 1000 {
		ok, _ := b.limiter.Allow(fmt.Sprint("old-", i), perSecond1Burst1)
		require.True(t, ok)
	}
	require.Equal(t, 1000, b.limiter.Len())

	b.clock.Advance(time.Second)
	for i := range 3000 {
		ok, _ := b.limiter.Allow(fmt.Sprint("new-", i), perSecond1Burst1)
		require.True(t, ok)
	}
	require.Equal(t, 3000, b.limiter.Len(), "the old keys' buckets, full again, were dropped")
}

func TestLimiter_AClockGoneBackLocksNoKeyOutForTheDifference(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ok, _ := b.limiter.Allow("key-a", perSecond1Burst1)
	require.True(t, ok)

	b.clock.Advance(-time.Hour)
	ok, retryAfter := b.limiter.Allow("key-a", perSecond1Burst1)
	require.False(t, ok)
	require.LessOrEqual(t, retryAfter, time.Second)
	ok, _ = b.limiter.Allow("key-new", perSecond1Burst1)
	require.True(t, ok, "a new key's bucket is full whatever the clock says")

	b.clock.Advance(retryAfter)
	ok, _ = b.limiter.Allow("key-a", perSecond1Burst1)
	require.True(t, ok)
}

func TestLimiter_AKeysBucketCarriesOverWhenItsRateChanges(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	require.Equal(t, 100, allowN(b.limiter, "key-a", perSecond50Burst100, 100))
	ok, retryAfter := b.limiter.Allow("key-a", perSecond1Burst1)
	require.False(t, ok, "the bucket spent at the old rate is still spent")
	require.Equal(t, time.Second, retryAfter, "at most one token of the new rate away")
}

func TestLimiter_ConcurrentCallsShareOneBucketExactly(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	// small evicts all the time; b.limiter never does, so that its shared
	// bucket cannot be dropped and refilled under the test.
	small, err := New(Config{MaxKeys: 64, Clock: b.clock})
	require.NoError(t, err)
	hourly100 := Rate{Count: 1, Period: time.Hour, Burst: 100}
	var allowed, overCap atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				if ok, _ := b.limiter.Allow("shared", hourly100); ok {
					allowed.Add(1)
				}
				key := fmt.Sprint("g", g, "-", i)
				b.limiter.Allow(key, hourly100)
				small.Allow(key, hourly100)
				if i%100 == 0 {
					b.clock.Advance(time.Millisecond)
					if n := small.Len(); n > 64 {
						overCap.Store(int64(n))
					}
				}
			}
		})
	}
	wg.Wait()
	// 80 ms passed in all: far less than one token's hour.
	require.Equal(t, int64(100), allowed.Load())
	require.Equal(t, 8001, b.limiter.Len())
	require.Zero(t, overCap.Load(), "keys tracked over the cap")
	require.LessOrEqual(t, small.Len(), 64)
}

func TestNew_RejectsANegativeMaxKeys(t *testing.T) {
	t.Parallel()
	_, err := New(Config{MaxKeys: -1})
	require.ErrorContains(t, err, "rate limit max keys must not be negative, got -1")
}

func TestRetryAfterSeconds_RoundsUpToWholeSecondsAtLeastOne(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                             "1",
		time.Nanosecond:               "1",
		20 * time.Millisecond:         "1",
		time.Second:                   "1",
		time.Second + time.Nanosecond: "2",
		90 * time.Second:              "90",
		time.Hour - time.Millisecond:  "3600",
		time.Duration(1<<63 - 1):      "9223372037",
	} {
		require.Equal(t, want, RetryAfterSeconds(d), d.String())
	}
}

func BenchmarkAllow(b *testing.B) {
	generous := Rate{Count: 1_000_000_000, Period: time.Second, Burst: 1_000_000}
	b.Run("one key allowed", func(b *testing.B) {
		l, _ := New(Config{})
		for b.Loop() {
			l.Allow("api-key-0123456789", generous)
		}
	})
	b.Run("one key refused", func(b *testing.B) {
		l, _ := New(Config{})
		for b.Loop() {
			l.Allow("api-key-0123456789", perSecond1Burst1)
		}
	})
	b.Run("1k keys", func(b *testing.B) { benchAllowKeys(b, Config{}, 1000, perSecond50Burst100) })
	b.Run("distinct keys over the cap", func(b *testing.B) { benchAllowKeys(b, Config{MaxKeys: 10_000}, 1_000_000, perSecond1Burst1) })
	b.Run("1k keys parallel", func(b *testing.B) {
		l, _ := New(Config{})
		keys := benchKeys(1000)
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(1)) * 7919
			for pb.Next() {
				l.Allow(keys[i%len(keys)], perSecond50Burst100)
				i++
			}
		})
	})
}

// benchAllowKeys measures Allow on a limiter of cfg, over n keys in turn.
func benchAllowKeys(b *testing.B, cfg Config, n int, rate Rate) {
	l, _ := New(cfg)
	keys := benchKeys(n)
	i := 0
	for b.Loop() {
		l.Allow(keys[i%len(keys)], rate)
		i++
	}
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("203.0.%d.%d#%d", i/256%256, i%256, i)
	}
	return keys
}
