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
	rounds := make(chan time.Time, 10)
	l := New(Config{Name: "t", Interval: time.Millisecond, MaxBackoff: time.Hour}, func(context.Context) (bool, error) {
		rounds <- time.Now()
		return false, errors.New("database down")
	})
	require.NoError(t, l.Start(context.Background()))
	defer l.Stop()
	var at []time.Time
	for range 3 {
		select {
		case r := <-rounds:
			at = append(at, r)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d rounds ran", len(at))
		}
	}
	// With a 1 ms interval and no backoff the rounds would be about 1 ms
	// apart; the backoff waits 100 ms after the first failure and 200 ms
	// after the second, with jitter down to half.
	require.GreaterOrEqual(t, at[1].Sub(at[0]), 50*time.Millisecond, "wait after the first failure")
	require.GreaterOrEqual(t, at[2].Sub(at[1]), 100*time.Millisecond, "wait after the second failure")
}

func TestLoop_ObserveSeesEveryRoundWithItsError(t *testing.T) {
	t.Parallel()
	type obs struct {
		name string
		err  error
	}
	seen := make(chan obs, 10)
	fail := errors.New("boom")
	var n atomic.Int64
	l := New(Config{Name: "batch_queuer", Interval: time.Hour, MaxBackoff: time.Millisecond,
		Observe: func(name string, _ time.Duration, err error) { seen <- obs{name, err} }},
		func(context.Context) (bool, error) {
			if n.Add(1) == 1 {
				return false, fail
			}
			return false, nil
		})
	require.NoError(t, l.Start(context.Background()))
	defer l.Stop()
	for i, want := range []error{fail, nil} {
		select {
		case o := <-seen:
			require.Equal(t, "batch_queuer", o.name)
			require.ErrorIs(t, o.err, want, "round %d", i+1)
			if want == nil {
				require.NoError(t, o.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d was not observed", i+1)
		}
	}
}

// stopSignal is a Service whose Stop first says it was called.
type stopSignal struct {
	*Loop
	called chan struct{}
}

func (s stopSignal) Stop() {
	close(s.called)
	s.Loop.Stop()
}

func TestStopAll_StopsServicesInParallel(t *testing.T) {
	t.Parallel()
	// The first service's round ends only once the last one is being
	// stopped: stopping one after the other would wait forever on the first.
	last := stopSignal{called: make(chan struct{})}
	inRound := make(chan struct{})
	first := New(Config{Name: "first", Interval: time.Hour}, func(context.Context) (bool, error) {
		close(inRound)
		<-last.called
		return false, nil
	})
	last.Loop = New(Config{Name: "last", Interval: time.Hour}, func(context.Context) (bool, error) { return false, nil })
	require.NoError(t, StartAll(context.Background(), first, last))
	<-inRound
	stopped := make(chan struct{})
	go func() { StopAll(first, last); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		close(last.called)
		t.Fatal("StopAll stopped the services one after the other")
	}
}

func TestNewService_AFullRoundIsFollowedAtOnceAndAPartialOneWaits(t *testing.T) {
	t.Parallel()
	counts := make(chan int, 10)
	var n atomic.Int64
	l := NewService("batch_submitter", time.Hour, Deps{}, 3, func(context.Context) (int, error) {
		k := []int{3, 3, 1, 3}[min(n.Add(1)-1, 3)]
		counts <- k
		return k, nil
	})
	require.NoError(t, l.Start(context.Background()))
	defer l.Stop()
	for i, want := range []int{3, 3, 1} {
		select {
		case got := <-counts:
			require.Equal(t, want, got, "round %d", i+1)
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d did not follow at once", i+1)
		}
	}
	select {
	case <-counts:
		t.Fatal("a partial round (1 of 3) was followed at once instead of waiting for the interval")
	case <-time.After(100 * time.Millisecond):
	}
}

func TestLoop_PokeStartsARoundAndPokeAfterKeepsTheEarliest(t *testing.T) {
	t.Parallel()
	ran := make(chan time.Time, 10)
	l := New(Config{Name: "t", Interval: time.Hour}, func(context.Context) (bool, error) {
		ran <- time.Now()
		return false, nil
	})
	require.NoError(t, l.Start(context.Background()))
	defer l.Stop()
	<-ran // the first round, at start
	l.Poke()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("a poke did not start a round")
	}
	began := time.Now()
	l.PokeAfter(time.Hour)
	l.PokeAfter(50 * time.Millisecond) // earlier: replaces the hour
	l.PokeAfter(time.Hour)             // later: ignored
	select {
	case at := <-ran:
		require.GreaterOrEqual(t, at.Sub(began), 50*time.Millisecond)
	case <-time.After(5 * time.Second):
		t.Fatal("PokeAfter(50ms) did not start a round")
	}
}

// A service that no NOTIFY wakes (the shard rescuer, the wallet follower,
// retention) is the only one that notices that the database is back after
// an outage: its retries never wait longer than its poll interval, or the
// rescue of a dead holder's wallet and the confirmations of sent
// transactions would wait for a backoff grown over the whole outage (up to
// 30 s). A service with a wake-up channel backs off as before: the listener
// wakes it when it reconnects.
func TestNewService_WithoutAWakeChannelRetriesAtItsIntervalAfterErrors(t *testing.T) {
	t.Parallel()
	const interval = 50 * time.Millisecond
	count := func(deps Deps) int64 {
		var n atomic.Int64
		l := NewService("t", interval, deps, 0, func(context.Context) (int, error) {
			n.Add(1)
			return 0, errors.New("database down")
		})
		require.NoError(t, l.Start(context.Background()))
		time.Sleep(1500 * time.Millisecond) // the outage the rounds fail through
		l.Stop()
		return n.Load()
	}
	// At most every 50 ms: 30 rounds in 1.5 s. Backing off from 100 ms
	// (50-100, 100-200, 200-400, 400-800 ms), at most 5.
	require.GreaterOrEqual(t, count(Deps{}), int64(12), "a service no NOTIFY wakes backed off beyond its interval")
	require.LessOrEqual(t, count(Deps{Wake: make(chan struct{})}), int64(6), "a service with a wake-up channel did not back off")
}
