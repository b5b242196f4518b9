package loop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLoop_RunsAtStartThenOnWakeAndNotBeforeTheInterval(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 10)
	wake := make(chan struct{}, 1)
	l := New(Config{Name: "t", Interval: time.Hour, Wake: wake}, func(context.Context) (bool, error) {
		ran <- struct{}{}
		return false, nil
	})
	require.NoError(t, l.Start(context.Background()))
	defer l.Stop()
	<-ran
	select {
	case <-ran:
		t.Fatal("ran again before the interval without a wake-up")
	case <-time.After(200 * time.Millisecond):
	}
	wake <- struct{}{}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("a wake-up did not start a round")
	}
}

func TestLoop_RunsAgainAtOnceWhileRoundsReportMoreWork(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	done := make(chan struct{})
	l := New(Config{Name: "t", Interval: time.Hour}, func(context.Context) (bool, error) {
		if n.Add(1) == 5 {
			close(done)
		}
		return n.Load() < 5, nil
	})
	require.NoError(t, l.Start(context.Background()))
	defer l.Stop()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("only %d rounds ran", n.Load())
	}
}

func TestLoop_StopLetsTheRoundInFlightFinishAndStartsNoOther(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	var finished, rounds atomic.Int64
	l := New(Config{Name: "t", Interval: time.Millisecond}, func(ctx context.Context) (bool, error) {
		if rounds.Add(1) == 1 {
			close(started)
			<-release
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		finished.Add(1)
		return true, nil
	})
	require.NoError(t, l.Start(context.Background()))
	<-started
	stopped := make(chan struct{})
	go func() { l.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a round was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-stopped
	require.EqualValues(t, 1, finished.Load(), "the round in flight finished, uncancelled")
	require.EqualValues(t, 1, rounds.Load(), "no round started after Stop")
	l.Stop() // safe twice
}

func TestLoop_BacksOffAfterErrors(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	l := New(Config{Name: "t", Interval: time.Millisecond, MaxBackoff: time.Hour}, func(context.Context) (bool, error) {
		n.Add(1)
		return false, errors.New("database down")
	})
	require.NoError(t, l.Start(context.Background()))
	time.Sleep(500 * time.Millisecond) // a fixed window to count rounds in; nothing waits for a round
	l.Stop()
	// With a 1 ms interval and no backoff this would be hundreds of rounds;
	// backing off from 100 ms (with jitter down to half) allows at most a few.
	require.LessOrEqual(t, n.Load(), int64(5), "rounds after errors: %d", n.Load())
	require.GreaterOrEqual(t, n.Load(), int64(1))
}

func TestBackoff_GrowsAndIsCapped(t *testing.T) {
	t.Parallel()
	l := New(Config{Name: "t", MaxBackoff: 2 * time.Second}, nil)
	for failures, max := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 10: 2 * time.Second, 100: 2 * time.Second} {
		for range 20 {
			d := l.backoff(failures)
			require.LessOrEqual(t, d, max, "failures=%d", failures)
			require.GreaterOrEqual(t, d, max/2, "failures=%d", failures)
		}
	}
}

func TestLoop_CancellingTheStartContextEndsTheLoop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	l := New(Config{Name: "t", Interval: time.Hour}, func(context.Context) (bool, error) { return false, nil })
	require.NoError(t, l.Start(ctx))
	cancel()
	done := make(chan struct{})
	go func() { l.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("loop did not end after its context was cancelled")
	}
	require.Error(t, l.Start(context.Background()), "a loop starts once")
}
