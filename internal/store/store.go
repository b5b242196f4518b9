// Package store is ledgerq's only door to PostgreSQL. It wraps the
// sqlc-generated package dbsqlc, converts rows to the domain types the loops and
// the API use, and turns pgx.ErrNoRows into ErrNotFound in one place.
// dbsqlc holds generated code only: the store's pipelined statements are
// queued on pgx batches through the generated methods themselves
// (pipeline.go says why sqlc's own batch methods do not fit).
package store

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// ErrNotFound is returned when a requested row does not exist.
var ErrNotFound = errors.New("not found")

// DB is what the store runs its statements on: a connection pool, or one
// transaction (NewTx). Tests also use it for SQL an operator would type.
type DB interface {
	dbsqlc.DBTX
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store is ledgerq's access to PostgreSQL.
type Store struct {
	db   DB
	pool *pgxpool.Pool // nil for a store made by NewTx
	q    *dbsqlc.Queries
	// liveness is the process's liveness lock (NewLiveness), recorded by
	// the claims made through this store; nil when it has none.
	liveness atomic.Pointer[Liveness]
	// poolGroups gathers concurrent pool intakes into shared transactions
	// (pool_group.go); nil for a store made by NewTx.
	poolGroups *poolGroups
}

// New wraps an open pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{db: pool, pool: pool, q: dbsqlc.New(pool), poolGroups: &poolGroups{}}
}

// NewTx returns a store whose every statement runs inside tx; its own
// transactions become savepoints. Rule tests use it so that rolling tx back
// leaves nothing behind.
func NewTx(tx pgx.Tx) *Store {
	return &Store{db: tx, q: dbsqlc.New(tx)}
}

// Open connects to databaseURL and returns a Store. The pool connects lazily,
// so Open succeeds while the database is down; Ping tells whether it is up.
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	return OpenPool(ctx, databaseURL, 0)
}

// OpenPool is Open with a pool of at least minConns connections (0: pgx's
// default); a larger pool_max_conns in the URL wins.
func OpenPool(ctx context.Context, databaseURL string, minConns int) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > 5*time.Second {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "ledgerq"
	}
	cfg.MaxConns = max(cfg.MaxConns, int32(minConns))
	cfg.ConnConfig.OnPgError = closeWhenReadOnly(cfg.ConnConfig.OnPgError)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating connection pool: %w", err)
	}
	return New(pool), nil
}

// closeWhenReadOnly wraps pgx's error handler (which closes a connection on
// a FATAL error) so that it also closes a connection whose server answered
// 25006: a demoted primary refuses every write for as long as the session
// lives, and the pool would hand the connection out again. Closed, it is
// dropped when released, and the next connection goes to the host that
// takes writes (target_session_attrs=read-write in a multi-host URL).
func closeWhenReadOnly(next pgconn.PgErrorHandler) pgconn.PgErrorHandler {
	return func(conn *pgconn.PgConn, err *pgconn.PgError) bool {
		if err.Code == sqlstateReadOnlyTransaction {
			return false
		}
		return next == nil || next(conn, err)
	}
}

// Conns returns the store's connection pool (pgx's), or nil for a store
// made by NewTx. Tests and tools use it for connections of their own.
func (s *Store) Conns() *pgxpool.Pool { return s.pool }

// DB returns what the store runs its statements on.
func (s *Store) DB() DB { return s.db }

// Close closes the pool (a store made by NewTx owns nothing to close).
func (s *Store) Close() {
	if s.pool != nil {
		s.pool.Close()
	}
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := s.db.Exec(ctx, ";"); err != nil {
		return fmt.Errorf("pinging database: %w", err)
	}
	return nil
}

// txAttempts bounds how often withTx runs a transaction that PostgreSQL
// aborted to break a deadlock or a serialization failure.
const txAttempts = 5

// SQLSTATEs of the transactions PostgreSQL aborts so that another can go on:
// running them again is the documented answer.
const (
	sqlstateSerializationFailure = "40001"
	sqlstateDeadlockDetected     = "40P01"
	// A lock wait past lock_timeout.
	sqlstateLockNotAvailable = "55P03"
)

// withTx runs fn in a transaction (inTx) with the queries bound to it.
//
// A transaction PostgreSQL aborted as a deadlock victim (40P01) or for a
// serialization failure (40001) is run again, after a short random pause,
// up to txAttempts times in all: it changed nothing, and an outcome
// transaction that gave up would leave batches the ledger accepted held
// until their lease expires. fn must therefore be safe to run again: it may
// only build its results from what its statements return.
func (s *Store) withTx(ctx context.Context, fn func(q *dbsqlc.Queries) error) error {
	return retryTx(ctx, func() error {
		return s.inTx(ctx, func(tx pgx.Tx) error { return fn(s.q.WithTx(tx)) })
	})
}

// sendTx sends the statements build queues as one transaction in one round
// trip: a batch sent on the pool runs as one implicit transaction (on a
// store made by NewTx, in a savepoint of its transaction). Like withTx, it
// runs again a transaction aborted by a deadlock or a serialization failure;
// build is called for each attempt.
func (s *Store) sendTx(ctx context.Context, build func(b *pgx.Batch)) error {
	return retryTx(ctx, func() error {
		b := &pgx.Batch{}
		build(b)
		if s.pool != nil {
			return s.pool.SendBatch(ctx, b).Close()
		}
		return s.inTx(ctx, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	})
}

// claimLockTimeout is the longest a claim waits for a lock. A claim skips
// the rows other transactions hold (SKIP LOCKED), but PostgreSQL still
// waits in one place whatever the wait policy: locking a row whose version
// the claim found was updated meanwhile, it follows the update chain and
// waits for whoever locks a newer version. The claim holds the rows it took
// before, in its index's order, while the outcome statements lock theirs in
// primary-key order, so that wait can close a cycle. Giving it up well
// inside PostgreSQL's deadlock_timeout (1 s by default) breaks the cycle
// before a deadlock is detected; the claim runs again.
const claimLockTimeout = "100ms"

// claimAttempts is how many times a claim that gave up a lock wait runs.
const claimAttempts = 3

// sendTxWith is sendTx with set's statements first (queueSettings).
func (s *Store) sendTxWith(ctx context.Context, set, build func(b *pgx.Batch)) error {
	return s.sendTx(ctx, func(b *pgx.Batch) {
		s.queueSettings(b, set)
		build(b)
	})
}

// queueSettings queues set's statements, settings for the transaction only
// (set_config(…, true)) that apply to the statements queued after them. On a
// store made by NewTx, whose statements run in its caller's transaction,
// set is left out, so that the caller's settings stay its own.
func (s *Store) queueSettings(b *pgx.Batch, set func(b *pgx.Batch)) {
	if s.pool != nil {
		set(b)
	}
}

// sendClaim sends a claim's statements as sendTxWith does, with
// ClaimSettingsForTx(claimLockTimeout), and runs them again when they gave
// up a lock wait (lock_not_available), up to claimAttempts times. build is
// called for each attempt.
func (s *Store) sendClaim(ctx context.Context, build func(b *pgx.Batch)) error {
	settings := func(b *pgx.Batch) { queueExec(b, (*dbsqlc.Queries).ClaimSettingsForTx, claimLockTimeout) }
	for attempt := 1; ; attempt++ {
		err := s.sendTxWith(ctx, settings, build)
		if attempt == claimAttempts || sqlstateOf(err) != sqlstateLockNotAvailable {
			return err
		}
	}
}

// sendRows sends the one statement queue queues with send (sendClaim, or
// sendTxWith bound to its settings) and returns its rows, those of the
// attempt that ran last: queue appends them to out, which each attempt
// empties first.
func sendRows[R any](ctx context.Context, send func(context.Context, func(*pgx.Batch)) error, queue func(b *pgx.Batch, out *[]R)) ([]R, error) {
	var rows []R
	err := send(ctx, func(b *pgx.Batch) {
		rows = rows[:0]
		queue(b, &rows)
	})
	return rows, err
}

// sqlstateOf is err's SQLSTATE when the server answered it, else "".
func sqlstateOf(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// outcomeUnknown reports whether err failed a statement without an answer
// from the server after the statement may have reached it (a connection
// lost or cut, a timeout), so that whether it took effect is unknown. An
// error the server answered with, or one raised before anything was sent,
// is not.
func outcomeUnknown(err error) bool {
	var pgErr *pgconn.PgError
	return err != nil && !errors.As(err, &pgErr) && !errors.Is(err, ErrNotFound) && !pgconn.SafeToRetry(err)
}

// answerLost reports whether err is a write's failure for want of the
// database's answer (a connection lost or cut, a deadline passed) after
// the write may have reached it: outcomeUnknown, and not a refusal of
// ledgerq's own.
func answerLost(err error) bool {
	return outcomeUnknown(err) && (IsUnavailable(err) || errors.Is(err, context.Canceled))
}

// storedAfterAllWait is how long a write whose outcome is unknown is looked
// for before its caller is answered "database unavailable".
const storedAfterAllWait = 5 * time.Second

// readAfterAll reads back a row a write whose outcome is unknown may have
// stored, again while the database cannot be reached, until ctx ends. ok
// is false when the row is not there (ErrNotFound), or could not be read
// before ctx ended.
func readAfterAll[T any](ctx context.Context, read func(context.Context) (T, error)) (row T, ok bool) {
	for pause := 20 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		row, err := read(ctx)
		switch {
		case err == nil:
			return row, true
		case errors.Is(err, ErrNotFound):
			return row, false
		}
		select {
		case <-ctx.Done():
			return row, false
		case <-time.After(pause):
		}
	}
}

// retryTx runs a transaction, and again when it was aborted by a deadlock
// or a serialization failure, up to txAttempts times.
func retryTx(ctx context.Context, run func() error) error {
	for attempt := 1; ; attempt++ {
		err := run()
		if err == nil || !retryableTx(err) {
			return err
		}
		if attempt == txAttempts {
			return fmt.Errorf("transaction aborted %d times: %w", attempt, err)
		}
		// Transactions that collided once would collide again if they ran
		// again in step.
		pause := time.Duration(attempt) * (5*time.Millisecond + rand.N(20*time.Millisecond))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

// retryableTx reports whether err aborted a transaction that may simply run
// again.
func retryableTx(err error) bool {
	code := sqlstateOf(err)
	return code == sqlstateDeadlockDetected || code == sqlstateSerializationFailure
}

// inTx runs fn in one transaction and commits it when fn returns nil. The
// rollback runs under context.WithoutCancel, so a cancelled ctx never leaves
// a transaction open on the connection.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing transaction: %w", err)
	}
	return nil
}

// inSnapshot runs fn's reads in one read-only REPEATABLE READ transaction,
// so that they all see the database as of the first. A store made by NewTx
// runs them in its own transaction as they come.
func (s *Store) inSnapshot(ctx context.Context, fn func(q *dbsqlc.Queries) error) error {
	if s.pool == nil {
		return fn(s.q)
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("beginning a read-only transaction: %w", err)
	}
	// Only reads: ending it either way changes nothing.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return fn(s.q.WithTx(tx))
}

// one is the single place where pgx.ErrNoRows becomes ErrNotFound: every
// single-row read goes through it, so no caller ever sees pgx's error.
func one[T any](row T, err error) (T, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return row, ErrNotFound
	}
	return row, err
}

// IsUnavailable reports whether err means the database could not be reached
// or the connection to it was lost (a restart, a crash, a terminated backend,
// a network cut), as opposed to the database refusing a statement: the
// request or round may succeed if tried again later.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return unavailableCode(pgErr.Code)
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), pgconn.SafeToRetry(err), pgconn.Timeout(err),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, pgconn.ErrConnClosed):
		return true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		// The server closed the connection mid-message or between messages:
		// pgx returns the read error as it is.
		return true
	case errors.As(err, &netErr):
		// *net.OpError (connection reset by peer, broken pipe, refused) and
		// the other errors of the network: the database is out of reach.
		return true
	}
	for _, errno := range []syscall.Errno{syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.ECONNABORTED,
		syscall.EPIPE, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// sqlstateReadOnlyTransaction is what a server that no longer takes writes
// answers one: a primary being demoted (pg_auto_failover sets
// default_transaction_read_only first) or a standby. ledgerq never asks for
// a read-only transaction, so it always means "the primary is elsewhere".
const sqlstateReadOnlyTransaction = "25006"

// unavailableCode reports whether a SQLSTATE says the server cannot serve now
// rather than that it refuses the statement.
func unavailableCode(code string) bool {
	if strings.HasPrefix(code, "08") { // connection exception
		return true
	}
	switch code {
	case "57P01", "57P02", "57P03", // admin shutdown, crash shutdown, cannot connect now
		"53300", // too many connections
		"57014", // query canceled: statement_timeout, or the cancel sent when a deadline passed
		sqlstateReadOnlyTransaction:
		return true
	}
	return false
}

// newUUIDv7 returns a UUIDv7 (RFC 9562), the id of tasks and API keys: 48
// bits of Unix milliseconds, then random bits, so ids sort roughly by
// creation time and keyset pages follow it. Generated here rather than by
// PostgreSQL (15 has no uuidv7()), from the caller's now.
func newUUIDv7(now time.Time) string {
	var b [16]byte
	// crypto/rand.Read never returns an error (Go 1.24+); it panics instead.
	_, _ = crand.Read(b[6:])
	ms := uint64(now.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// lowerHex lower-cases an 0x-prefixed hex string (addresses and hashes are
// stored lower-case, so a checksummed address finds the same rows).
func lowerHex(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'F' || c == 'X' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

func numericFromBig(v *big.Int) pgtype.Numeric {
	if v == nil {
		v = new(big.Int)
	}
	return pgtype.Numeric{Int: new(big.Int).Set(v), Valid: true}
}

// bigFromNumeric converts an integral numeric (numeric(78,0) columns).
func bigFromNumeric(n pgtype.Numeric) *big.Int {
	if !n.Valid || n.Int == nil {
		return new(big.Int)
	}
	v := new(big.Int).Set(n.Int)
	switch {
	case n.Exp > 0:
		v.Mul(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.Exp)), nil))
	case n.Exp < 0:
		v.Quo(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-n.Exp)), nil))
	}
	return v
}

// pgUniqueViolation reports whether err is a unique violation of the named
// constraint or index.
func pgUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

// deref returns what p points to, or the zero value for nil: a NULL
// column becomes the domain type's zero value.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// fromRows converts the rows a query returned to domain values.
func fromRows[R, T any](rows []R, convert func(R) T) []T {
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = convert(r)
	}
	return out
}

// byKey converts the rows a query returned to domain values by key.
func byKey[R any, K comparable, V any](rows []R, entry func(R) (K, V)) map[K]V {
	out := make(map[K]V, len(rows))
	for _, r := range rows {
		k, v := entry(r)
		out[k] = v
	}
	return out
}

// utcPtr returns t in UTC: pgx returns times in the local zone.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
