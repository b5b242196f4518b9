package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// LivenessClass is the first key of every liveness lock: "lqlv" in ASCII.
// The view ledgerq.liveness_locks (migration 00020) lists the locks of this
// class, so the two must agree.
const LivenessClass int32 = 0x6c716c76

// livenessDraws bounds the random ids one lock attempt tries: with 2^31 ids
// and one per process, a second collision in a row means something else
// holds locks of the class.
const livenessDraws = 5

// LivenessConfig configures a process's Liveness. Zero fields take their
// defaults.
type LivenessConfig struct {
	// CheckInterval is the time between two checks of the liveness
	// connection; a lost connection is replaced, and the lock taken again,
	// at the next check (default 1 s).
	CheckInterval time.Duration
	// Timeout bounds connecting, locking and each check (default 5 s).
	Timeout time.Duration
}

// Liveness is a process's liveness lock: a session-level advisory lock
// (LivenessClass, a random positive id) held on a PostgreSQL connection of
// its own, outside the pool. PostgreSQL releases it the moment that
// connection ends, however the process dies, so a claim that records the
// id (ShardClaim, WebhookDeliveryClaim) is taken over within a rescue
// round of its holder's death instead of at the end of its lease. While the
// lock is not held (not yet taken, or its connection lost and not yet
// replaced) claims record nothing and wait for their lease, as before.
//
// Liveness is a loop.Service: every CheckInterval it checks the connection
// and, when it was lost, connects and locks again, trying the id it held
// first. Stop releases the lock.
type Liveness struct {
	*loop.Loop
	cfg        LivenessConfig
	connConfig *pgx.ConnConfig
	log        *slog.Logger

	// mu serialises rounds and Stop: only its holder touches conn.
	mu   sync.Mutex
	conn *pgx.Conn
	// last is the id held last: asked for first after a reconnect, so that
	// the process's claims in flight keep their holder.
	last int32
	// held is the id held now; 0 when none.
	held atomic.Int32
}

// NewLiveness returns the liveness lock of the process that s belongs to,
// held from its first RunOnce or Start on. s's shard and webhook claims
// record its id while it is held. A store has at most one; a store made by
// NewTx has none.
func (s *Store) NewLiveness(cfg LivenessConfig, logger *slog.Logger) (*Liveness, error) {
	if s.pool == nil {
		return nil, errors.New("liveness: a store bound to one transaction has no process of its own")
	}
	cfg.CheckInterval = cmp.Or(cfg.CheckInterval, time.Second)
	cfg.Timeout = cmp.Or(cfg.Timeout, 5*time.Second)
	if cfg.CheckInterval < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("liveness: check interval (%s) and timeout (%s) must be positive", cfg.CheckInterval, cfg.Timeout)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	connConfig := s.pool.Config().ConnConfig
	connConfig.RuntimeParams["application_name"] = cmp.Or(connConfig.RuntimeParams["application_name"], "ledgerq") + " liveness"
	l := &Liveness{cfg: cfg, connConfig: connConfig, log: logger}
	l.Loop = loop.New(loop.Config{
		Name: "liveness", Interval: cfg.CheckInterval, Logger: logger,
		// Without the lock the process's claims wait for their lease:
		// after a database outage, take it again soon.
		MaxBackoff: 5 * time.Second,
	}, func(ctx context.Context) (bool, error) { return false, l.RunOnce(ctx) })
	if !s.liveness.CompareAndSwap(nil, l) {
		return nil, errors.New("liveness: the store has one already")
	}
	return l, nil
}

// Held returns the id of the liveness lock and true while it is held (as
// far as the last check knows), or 0 and false.
func (l *Liveness) Held() (int32, bool) {
	id := l.held.Load()
	return id, id != 0
}

// RunOnce checks the liveness connection and, when it has none or lost it,
// connects and takes the lock. Node start calls it before the loops start,
// so that their first claims record the lock; tests call it directly.
func (l *Liveness) RunOnce(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		pingCtx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
		err := l.conn.Ping(pingCtx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			// Cancelled: not a lost connection.
			return ctx.Err()
		}
		l.log.Warn("liveness: connection lost, and the lock with it: other processes may take over this process's claims",
			"lock", l.held.Load(), "error", err)
		l.drop()
	}
	return l.lock(ctx)
}

// lock connects and takes a liveness lock: the last id held if it is free,
// else a random one.
func (l *Liveness) lock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, l.connConfig)
	if err != nil {
		return fmt.Errorf("liveness: connecting: %w", err)
	}
	q := dbsqlc.New(conn)
	for draw := range livenessDraws {
		id := l.last
		if draw > 0 || id == 0 {
			id = rand.Int32N(math.MaxInt32) + 1 // positive: 0 is "none"
		}
		locked, err := one(q.LivenessTryLock(ctx, dbsqlc.LivenessTryLockParams{Class: LivenessClass, ID: id}))
		if err != nil {
			l.close(conn)
			return fmt.Errorf("liveness: taking lock %d: %w", id, err)
		}
		if locked {
			if l.last != 0 && id != l.last {
				l.log.Warn("liveness: lock taken again under a new id, another session holds the old one", "lock", id, "old_lock", l.last)
			}
			l.conn, l.last = conn, id
			l.held.Store(id)
			return nil
		}
	}
	l.close(conn)
	return fmt.Errorf("liveness: %d random lock ids were all held by other sessions", livenessDraws)
}

// drop forgets the lock and closes its connection, which releases the lock
// if the session still lives. Call it with mu held.
func (l *Liveness) drop() {
	l.held.Store(0)
	if l.conn != nil {
		l.close(l.conn)
		l.conn = nil
	}
}

// close closes conn within the timeout, whatever the caller's context.
func (l *Liveness) close(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
	defer cancel()
	_ = conn.Close(ctx)
}

// Stop stops the checks and releases the lock: the process's claims left
// running are taken over at once. Stop it after the services that claim.
// Safe to call twice, and on a Liveness never started.
func (l *Liveness) Stop() {
	l.Loop.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop()
}

// livenessLock is the lock id a claim made through s records: nil when s
// has no liveness or does not hold it.
func (s *Store) livenessLock() *int32 {
	l := s.liveness.Load()
	if l == nil {
		return nil
	}
	if id, ok := l.Held(); ok {
		return &id
	}
	return nil
}
