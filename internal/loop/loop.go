// Package loop runs ledgerq's background loops. A loop runs a round when its
// poll interval passes or a NOTIFY wakes it, runs again at once while rounds
// report more work, and backs off exponentially with jitter after errors.
//
// Stop separates "stop claiming" from "cancel in-flight work": Stop lets the
// current round finish and starts no new one; cancelling the context given to
// Start cancels the round itself.
package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// defaultMaxBackoff caps the wait after repeated errors unless
// Config.MaxBackoff says otherwise.
const defaultMaxBackoff = 30 * time.Second

// Round runs one round of a loop. more reports that the round hit its batch
// limit, so another round should follow at once.
type Round func(ctx context.Context) (more bool, err error)

// Config configures a Loop.
type Config struct {
	// Name appears in logs and errors.
	Name string
	// Interval is the poll interval: the longest a loop waits between rounds.
	Interval time.Duration
	// Wake, when set, starts a round early (a NOTIFY subscription).
	Wake <-chan struct{}
	// MaxBackoff caps the wait after repeated errors (default 30 s).
	MaxBackoff time.Duration
	Logger     *slog.Logger
	// Observe, when set, is called after every round with its duration and
	// error (metrics).
	Observe func(name string, took time.Duration, err error)
}

// Loop is a background service. Start returns at once; Stop blocks until the
// loop has ended and is safe to call more than once.
type Loop struct {
	cfg   Config
	round Round

	mu      sync.Mutex
	started bool
	stop    chan struct{}
	done    chan struct{}

	// poke starts a round early from inside the process (Poke, PokeAfter).
	poke      chan struct{}
	pokeMu    sync.Mutex
	pokeTimer *time.Timer
	pokeAt    time.Time

	rounds atomic.Int64
}

// New returns a Loop that runs round.
func New(cfg Config, round Round) *Loop {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = defaultMaxBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Loop{cfg: cfg, round: round, poke: make(chan struct{}, 1)}
}

// Poke starts a round soon, without a database round trip: another service
// of this process created work for this one. Pokes collapse like wake-ups.
func (l *Loop) Poke() {
	select {
	case l.poke <- struct{}{}:
	default:
	}
}

// PokeAfter pokes the loop after d (at once for d <= 0). Only the earliest
// pending poke is kept, so calling it once per item costs one timer.
func (l *Loop) PokeAfter(d time.Duration) {
	if d <= 0 {
		l.Poke()
		return
	}
	at := time.Now().Add(d)
	l.pokeMu.Lock()
	defer l.pokeMu.Unlock()
	if l.pokeTimer != nil && !l.pokeAt.After(at) {
		return // an earlier poke is already set
	}
	if l.pokeTimer != nil {
		l.pokeTimer.Stop()
	}
	l.pokeAt = at
	l.pokeTimer = time.AfterFunc(d, func() {
		l.pokeMu.Lock()
		l.pokeTimer = nil
		l.pokeMu.Unlock()
		l.Poke()
	})
}

// Rounds returns how many rounds have completed, successfully or not.
func (l *Loop) Rounds() int64 { return l.rounds.Load() }

// Start runs the loop in the background until Stop or until ctx is done.
func (l *Loop) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return fmt.Errorf("%s: already started", l.cfg.Name)
	}
	l.started = true
	l.stop = make(chan struct{})
	l.done = make(chan struct{})
	go l.run(ctx)
	return nil
}

// Stop stops starting rounds, waits for the current one to finish, and
// returns when the loop has ended.
func (l *Loop) Stop() {
	l.mu.Lock()
	if !l.started {
		l.mu.Unlock()
		return
	}
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	done := l.done
	l.mu.Unlock()
	<-done
}

func (l *Loop) stopped(ctx context.Context) bool {
	select {
	case <-l.stop:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func (l *Loop) run(ctx context.Context) {
	defer close(l.done)
	// A short random start delay keeps processes started together from
	// running their rounds in lockstep.
	timer := time.NewTimer(rand.N(min(l.cfg.Interval/4, 100*time.Millisecond) + 1))
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-l.stop:
			return
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.cfg.Wake:
		case <-l.poke:
		}
		if l.stopped(ctx) {
			return
		}
		began := time.Now()
		more, err := l.round(ctx)
		l.rounds.Add(1)
		if l.cfg.Observe != nil {
			l.cfg.Observe(l.cfg.Name, time.Since(began), err)
		}
		next := l.cfg.Interval
		switch {
		case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return // shutting down: not an error worth logging
		case err != nil:
			failures++
			next = l.backoff(failures)
			l.cfg.Logger.Error(l.cfg.Name+": round failed", "error", err, "failures", failures, "retry_in", next)
		case more:
			failures = 0
			next = 0
		default:
			failures = 0
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

func (l *Loop) backoff(failures int) time.Duration {
	d := 100 * time.Millisecond << min(failures-1, 16)
	if d > l.cfg.MaxBackoff || d <= 0 {
		d = l.cfg.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}
