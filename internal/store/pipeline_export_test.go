package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// Test hooks into pipeline.go for the tests of package store_test.

// QueueMany is queueMany.
func QueueMany[P, R any](b *pgx.Batch, query func(*dbsqlc.Queries, context.Context, P) ([]R, error), arg P, out *[]R) {
	queueMany(b, query, arg, out)
}

// QueueOne is queueOne.
func QueueOne[P, R any](b *pgx.Batch, query func(*dbsqlc.Queries, context.Context, P) (R, error), arg P, out *R, found *bool) {
	queueOne(b, query, arg, out, found)
}

// QueueExec is queueExec.
func QueueExec[P any](b *pgx.Batch, query func(*dbsqlc.Queries, context.Context, P) error, arg P) {
	queueExec(b, query, arg)
}

// QueueExecRows is queueExecRows.
func QueueExecRows[P any](b *pgx.Batch, query func(*dbsqlc.Queries, context.Context, P) (int64, error), arg P, n *int64) {
	queueExecRows(b, query, arg, n)
}

// QueueGenericPlans is queueGenericPlans.
func QueueGenericPlans(b *pgx.Batch) { queueGenericPlans(b) }
