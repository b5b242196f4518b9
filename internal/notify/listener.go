// Package notify delivers PostgreSQL notifications to ledgerq's loops. One
// Listener per process holds one connection that LISTENs on every channel a
// loop subscribed to. Notifications only shorten latency: every loop also
// polls, so a lost notification (or a connection pooler that drops them) costs
// time, never work.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listener holds a LISTEN connection and fans notifications out to
// subscribers. It reconnects with backoff after losing its connection and
// then wakes every subscriber, since notifications sent meanwhile are lost.
type Listener struct {
	connString string
	logger     *slog.Logger

	mu   sync.Mutex
	subs map[string][]chan struct{}

	connected chan struct{} // closed and replaced on each (re)connect; for tests
	connMu    sync.Mutex
	conn      *pgx.Conn

	cancel context.CancelFunc
	done   chan struct{}
}

// NewListener returns a Listener for the database at connString.
func NewListener(connString string, logger *slog.Logger) *Listener {
	return &Listener{
		connString: connString,
		logger:     logger,
		subs:       map[string][]chan struct{}{},
		connected:  make(chan struct{}),
	}
}

// Subscribe returns a channel that receives a value when channel is notified.
// The channel has a buffer of one and sends never block, so a burst of
// notifications collapses into one wake-up. Subscribe before Start.
func (l *Listener) Subscribe(channel string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{}, 1)
	l.subs[channel] = append(l.subs[channel], ch)
	return ch
}

// Start connects and listens in the background until Stop. It returns at once.
func (l *Listener) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	l.done = make(chan struct{})
	go l.run(ctx)
	return nil
}

// Stop closes the connection and waits for the listener to end. Safe to call
// twice.
func (l *Listener) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}

// Connected returns a channel closed once the listener is (re)connected after
// the call; tests use it to wait for LISTEN to be in place.
func (l *Listener) Connected() <-chan struct{} {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	return l.connected
}

// BackendPID returns the process id of the listener's server connection, or
// 0 when not connected.
func (l *Listener) BackendPID() uint32 {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.conn == nil {
		return 0
	}
	return l.conn.PgConn().PID()
}

func (l *Listener) run(ctx context.Context) {
	defer close(l.done)
	attempt := 0
	for ctx.Err() == nil {
		listened, err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			// A connection that listened and was then lost is a new
			// outage: its first reconnect waits the shortest backoff,
			// not one grown over every outage since the start.
			attempt = 0
		}
		attempt++
		delay := backoff(attempt)
		l.logger.Warn("notify: listener connection lost, reconnecting", "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// maxBackoff caps the wait between two connection attempts. The listener's
// reconnect wakes every loop that backed off while the database was away
// (a restart, a failover), so it keeps trying about once a second: the
// loops resume within a second of the database's return, not after a
// backoff grown over the outage. An attempt on a server that is down is
// cheap.
const maxBackoff = time.Second

// backoff is the wait before connection attempt number attempt (from 1) of
// an outage: 50-100 ms, doubling, up to maxBackoff (with jitter down to
// half).
func backoff(attempt int) time.Duration {
	d := min(100*time.Millisecond<<min(attempt-1, 10), maxBackoff)
	return d/2 + rand.N(d/2+1)
}

// listen connects, LISTENs on every channel and waits for notifications
// until the connection fails. listened reports whether it got as far as
// listening.
func (l *Listener) listen(ctx context.Context) (listened bool, err error) {
	connectCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.Connect(connectCtx, l.connString)
	cancel()
	if err != nil {
		return false, fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	for _, ch := range l.channels() {
		// LISTEN takes no bind parameters; the channel is quoted as an identifier.
		listenCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := conn.Exec(listenCtx, "LISTEN "+pgx.Identifier{ch}.Sanitize())
		cancel()
		if err != nil {
			return false, fmt.Errorf("listening on %s: %w", ch, err)
		}
	}

	l.connMu.Lock()
	l.conn = conn
	close(l.connected)
	l.connected = make(chan struct{})
	l.connMu.Unlock()
	defer func() {
		l.connMu.Lock()
		l.conn = nil
		l.connMu.Unlock()
	}()

	// Anything sent while we were not listening is lost: wake everyone once.
	l.wakeAll()

	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return true, err
			}
			return true, fmt.Errorf("waiting for notification: %w", err)
		}
		l.wake(n.Channel)
	}
}

func (l *Listener) wake(channel string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.subs[channel] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// channels returns the subscribed channels, read under the lock so that
// LISTEN and waking run without it.
func (l *Listener) channels() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Collect(maps.Keys(l.subs))
}

func (l *Listener) wakeAll() {
	for _, ch := range l.channels() {
		l.wake(ch)
	}
}
