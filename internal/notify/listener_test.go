package notify_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// probeChannel is a channel no loop listens on; tests notify it after another
// notification and wait for it, to know that the listener has handled that
// other one (a connection's notifications arrive in the order they were sent).
const probeChannel = "ledgerq_test_probe"

// roundCounter is a loop round that reports each run on a channel.
func roundCounter() (loop.Round, <-chan struct{}) {
	ran := make(chan struct{}, 100)
	return func(context.Context) (bool, error) {
		ran <- struct{}{}
		return false, nil
	}, ran
}

// waitSignal waits for a value on ch, or fails the test after within.
func waitSignal[T any](t *testing.T, ch <-chan T, within time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("nothing within %s: %s", within, what)
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// startListener starts a listener subscribed to channels, waits until it
// listens, and takes the wake-up every subscriber gets on connecting: after
// it, only a notification (or a reconnect) wakes a subscription. It returns
// the listener and the subscriptions, in the order of channels.
// terminateListener ends the listener's backend, as a failover or a restart
// does. It returns the backend's pid and the listener's Connected channel
// from before, closed when it has reconnected.
func terminateListener(t *testing.T, db *testdb.DB, l *notify.Listener) (pid uint32, reconnected <-chan struct{}) {
	t.Helper()
	pid = l.BackendPID()
	require.NotZero(t, pid)
	reconnected = l.Connected()
	var killed bool
	require.NoError(t, db.Store.DB().QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, int(pid)).Scan(&killed))
	require.True(t, killed)
	return pid, reconnected
}

func startListener(t *testing.T, dbURL string, channels ...string) (*notify.Listener, []<-chan struct{}) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	l := notify.NewListener(dbURL, logger)
	subs := make([]<-chan struct{}, len(channels))
	for i, ch := range channels {
		subs[i] = l.Subscribe(ch)
	}
	connected := l.Connected()
	require.NoError(t, l.Start(t.Context()))
	t.Cleanup(l.Stop)
	waitSignal(t, connected, 20*time.Second, "the listener connects")
	for i, sub := range subs {
		waitSignal(t, sub, 5*time.Second, "the wake-up on connecting of "+channels[i])
	}
	return l, subs
}

func TestListener_WakesALoopOnNotifyWellBeforeItsPollInterval(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	_, subs := startListener(t, db.URL, notify.BatchQueuer, probeChannel)
	wake, probe := subs[0], subs[1]

	const interval = 10 * time.Second
	round, ran := roundCounter()
	lp := loop.New(loop.Config{Name: "test", Interval: interval, Wake: wake}, round)
	require.NoError(t, lp.Start(t.Context()))
	t.Cleanup(lp.Stop)
	waitSignal(t, ran, 5*time.Second, "the first round runs at start")

	// The next poll round is an interval away: a round well before it was
	// woken by the notification. Without one, the poll round comes and the
	// time check fails.
	began := time.Now()
	require.NoError(t, db.Store.Notify(t.Context(), notify.BatchQueuer))
	waitSignal(t, ran, 2*interval, "a round after NOTIFY")
	require.Less(t, time.Since(began), interval/2, "the round came at the poll interval: NOTIFY did not wake the loop")

	// Another channel's notification does not wake it. The loop is stopped
	// first, so that a wake-up, were there one, stays in its channel to be
	// seen; the probe, notified after, says the listener has handled it.
	lp.Stop()
	drain(wake)
	require.NoError(t, db.Store.Notify(t.Context(), notify.BatchMonitor))
	require.NoError(t, db.Store.Notify(t.Context(), probeChannel))
	waitSignal(t, probe, 5*time.Second, "the probe notification")
	require.Zero(t, len(wake), "a notification on another channel woke the loop")
}

func TestListener_ReconnectsAfterItsConnectionIsKilledWhileTheLoopKeepsPolling(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	l, subs := startListener(t, db.URL, notify.BatchSubmitter)

	round, ran := roundCounter()
	lp := loop.New(loop.Config{Name: "test", Interval: 200 * time.Millisecond, Wake: subs[0]}, round)
	require.NoError(t, lp.Start(t.Context()))
	t.Cleanup(lp.Stop)

	pid, reconnected := terminateListener(t, db, l)

	// Rounds go on at the poll interval while the listener is down.
	drain(ran)
	for i := range 3 {
		waitSignal(t, ran, 2*time.Second, "poll round "+strconv.Itoa(i))
	}

	waitSignal(t, reconnected, 20*time.Second, "the listener reconnects")
	require.NotEqual(t, pid, l.BackendPID())
}

// A listener that lost its connection many times over a process's life —
// a failover, a restart, another failover — reconnects each time as soon
// as it did the first time: the backoff grows over the failed attempts of
// one outage, not over every outage since the process started. Until the
// listener is back, loops that backed off during the outage are not woken.
func TestListener_ReconnectsPromptlyAfterEachOfManyLostConnections(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	l, _ := startListener(t, db.URL, notify.BatchSubmitter)

	// The first reconnect of an outage waits 50-100 ms; from the fifth on,
	// were the backoff to keep growing over outages, 0.5-1 s.
	const losses, within = 8, 500 * time.Millisecond
	for i := range losses {
		pid, reconnected := terminateListener(t, db, l)
		waitSignal(t, reconnected, within, fmt.Sprintf("the listener reconnects after losing its connection the %d. time", i+1))
		require.NotEqual(t, pid, l.BackendPID())
	}
}
