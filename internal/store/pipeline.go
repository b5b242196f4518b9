package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// Queueing generated queries on a pgx.Batch.
//
// The store pipelines a transaction's statements: it queues several
// different queries on one pgx.Batch (a claim after its settings, an
// intake's lock and reads, its writes, admission and wake-up), so that they
// reach the server in one round trip. sqlc's batch annotations (:batchexec,
// :batchone, :batchmany) cannot express that: each generated batch method
// builds a batch of its one query, repeated once per argument, and sends it
// itself, so two of them are two round trips.
//
// Nor is a query restated here. The queue functions below queue a query by
// calling its generated method twice: when queueing, on a DBTX that records
// the SQL and arguments the method passes (capture), and when the batch's
// results are read, on a DBTX that hands the method the statement's result
// (replay), so that the generated code scans it. A query's argument order
// and columns are therefore the generated code's only; reordering them in
// queries/*.sql and regenerating changes both calls alike.
// TestPipeline_EveryQueuedQueryReadsWhatItsGeneratedMethodReads compares
// every query queued here with its generated method run alone.

// errQueued is what capture answers a generated method: the statement was
// recorded, not run.
var errQueued = errors.New("store: statement queued on a batch, not run")

// capture is the DBTX a generated method is called on to queue its
// statement: it records the statement instead of running it.
type capture struct {
	sql  string
	args []any
}

func (c *capture) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.sql, c.args = sql, args
	return pgconn.CommandTag{}, errQueued
}

func (c *capture) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.sql, c.args = sql, args
	return nil, errQueued
}

func (c *capture) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	c.sql, c.args = sql, args
	return errRow{errQueued}
}

// errRow is a row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// captured queues the statement call passes to its DBTX on b and returns
// it, so that its result can be replayed into the same method. A method
// that ran anything else than its one statement is a bug here: it panics.
func captured(b *pgx.Batch, call func(q *dbsqlc.Queries) error) *pgx.QueuedQuery {
	var c capture
	if err := call(dbsqlc.New(&c)); !errors.Is(err, errQueued) || c.sql == "" {
		panic(fmt.Sprintf("store: queueing a generated query: it did not pass its one statement to its DBTX (%v)", err))
	}
	return b.Queue(c.sql, c.args...)
}

// replay is the DBTX a generated method is called on when its queued
// statement's result is read: it answers the statement with that result.
type replay struct {
	sql  string
	rows pgx.Rows
	row  pgx.Row
	tag  pgconn.CommandTag
}

func (r *replay) check(sql string) error {
	if sql != r.sql {
		return fmt.Errorf("store: a queued statement's result replayed into another statement")
	}
	return nil
}

func (r *replay) Exec(_ context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	return r.tag, r.check(sql)
}

func (r *replay) Query(_ context.Context, sql string, _ ...any) (pgx.Rows, error) {
	return r.rows, r.check(sql)
}

func (r *replay) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	if err := r.check(sql); err != nil {
		return errRow{err}
	}
	return r.row
}

// Each queue function takes a generated method as a method expression,
// (*dbsqlc.Queries).BatchList and the like, and its argument. The context
// passed to the method reaches only capture and replay.

// queueMany queues a :many query; out is set to its rows when the batch's
// results are read.
func queueMany[P, R any](b *pgx.Batch, query func(*dbsqlc.Queries, context.Context, P) ([]R, error), arg P, out *[]R) {
	qq := captured(b, func(q *dbsqlc.Queries) error { _, err := query(q, context.Background(), arg); return err })
	qq.Query(func(rows pgx.Rows) error {
		got, err := query(dbsqlc.New(&replay{sql: qq.SQL, rows: rows}), context.Background(), arg)
		*out = got
		return err
	})
}

// queueOne queues a :one query; its row is set into out when the batch's
// results are read. found, when not nil, says whether there was a row, and
// no row is then no error.
func queueOne[P, R any](b *pgx.Batch, query func(*dbsqlc.Queries, context.Context, P) (R, error), arg P, out *R, found *bool) {
	qq := captured(b, func(q *dbsqlc.Queries) error { _, err := query(q, context.Background(), arg); return err })
	qq.QueryRow(func(row pgx.Row) error {
		got, err := one(query(dbsqlc.New(&replay{sql: qq.SQL, row: row}), context.Background(), arg))
		if found != nil {
			*found = err == nil
			if errors.Is(err, ErrNotFound) {
				return nil
			}
		}
		*out = got
		return err
	})
}

// queueExec queues an :exec query.
func queueExec[P any](b *pgx.Batch, query func(*dbsqlc.Queries, context.Context, P) error, arg P) {
	captured(b, func(q *dbsqlc.Queries) error { return query(q, context.Background(), arg) })
}

// queueExecRows queues an :execrows query; the number of rows it changed is
// set into n (when not nil) when the batch's results are read.
func queueExecRows[P any](b *pgx.Batch, query func(*dbsqlc.Queries, context.Context, P) (int64, error), arg P, n *int64) {
	qq := captured(b, func(q *dbsqlc.Queries) error { _, err := query(q, context.Background(), arg); return err })
	if n == nil {
		return
	}
	qq.Exec(func(tag pgconn.CommandTag) error {
		got, err := query(dbsqlc.New(&replay{sql: qq.SQL, tag: tag}), context.Background(), arg)
		*n = got
		return err
	})
}

// noArg is query, a method without arguments, with an empty one, for
// queueExec.
func noArg(query func(*dbsqlc.Queries, context.Context) error) func(*dbsqlc.Queries, context.Context, struct{}) error {
	return func(q *dbsqlc.Queries, ctx context.Context, _ struct{}) error { return query(q, ctx) }
}

// queueGenericPlans queues GenericPlansForTx.
func queueGenericPlans(b *pgx.Batch) {
	queueExec(b, noArg((*dbsqlc.Queries).GenericPlansForTx), struct{}{})
}
