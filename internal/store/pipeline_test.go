package store_test

import (
	"context"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// pipelineCase is one generated query queued on a batch (queue, which
// returns what the batch read once it is sent) and run alone by its
// generated method (direct).
type pipelineCase struct {
	query  string // the generated method's name
	queue  func(b *pgx.Batch) (read func() any)
	direct func(ctx context.Context, q *dbsqlc.Queries) (any, error)
	// reads says the case must read something (rows, a row, rows
	// changed), so that comparing the two is not comparing nothing.
	reads bool
}

// methodName is the name of a generated method given as a method
// expression, (*dbsqlc.Queries).BatchList and the like.
func methodName(query any) string {
	name := runtime.FuncForPC(reflect.ValueOf(query).Pointer()).Name()
	return name[strings.LastIndex(name, ".")+1:]
}

func manyCase[P, R any](query func(*dbsqlc.Queries, context.Context, P) ([]R, error), arg P) pipelineCase {
	return pipelineCase{
		query: methodName(query), reads: true,
		queue: func(b *pgx.Batch) func() any {
			var out []R
			store.QueueMany(b, query, arg, &out)
			return func() any { return out }
		},
		direct: func(ctx context.Context, q *dbsqlc.Queries) (any, error) { return query(q, ctx, arg) },
	}
}

// oneRead is what a :one query read: its row, and whether there was one.
type oneRead[R any] struct {
	Row   R
	Found bool
}

func oneCase[P, R any](query func(*dbsqlc.Queries, context.Context, P) (R, error), arg P, found bool) pipelineCase {
	return pipelineCase{
		query: methodName(query), reads: found,
		queue: func(b *pgx.Batch) func() any {
			var r oneRead[R]
			store.QueueOne(b, query, arg, &r.Row, &r.Found)
			return func() any { return r }
		},
		direct: func(ctx context.Context, q *dbsqlc.Queries) (any, error) {
			row, err := query(q, ctx, arg)
			if errors.Is(err, pgx.ErrNoRows) {
				return oneRead[R]{}, nil
			}
			return oneRead[R]{Row: row, Found: err == nil}, err
		},
	}
}

func execCase[P any](query func(*dbsqlc.Queries, context.Context, P) error, arg P) pipelineCase {
	return pipelineCase{
		query: methodName(query),
		queue: func(b *pgx.Batch) func() any {
			store.QueueExec(b, query, arg)
			return func() any { return nil }
		},
		direct: func(ctx context.Context, q *dbsqlc.Queries) (any, error) { return nil, query(q, ctx, arg) },
	}
}

func execRowsCase[P any](query func(*dbsqlc.Queries, context.Context, P) (int64, error), arg P) pipelineCase {
	return pipelineCase{
		query: methodName(query), reads: true,
		queue: func(b *pgx.Batch) func() any {
			var n int64
			store.QueueExecRows(b, query, arg, &n)
			return func() any { return n }
		},
		direct: func(ctx context.Context, q *dbsqlc.Queries) (any, error) { return query(q, ctx, arg) },
	}
}

// pipelinedQueries are the generated methods the store queues on batches:
// the method expressions its code names.
func pipelinedQueries(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`\(\*dbsqlc\.Queries\)\.(\w+)`).FindAllStringSubmatch(string(src), -1) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// The store pipelines a transaction's statements on one pgx.Batch by
// calling each query's generated method twice, to queue it and to read its
// result (pipeline.go). Each query it queues, sent alone on a batch, reads
// and changes what its generated method run alone reads and changes: same
// arguments in the same order, same columns into the same fields.
func TestPipeline_EveryQueuedQueryReadsWhatItsGeneratedMethodReads(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	now := clk.Now()
	f := testfactory.New(t, st, clk)
	f.PutBatches(
		testfactory.Batch{ID: "queued", ServiceID: "a", Queued: true},
		testfactory.Batch{ID: "held", ServiceID: "b", Submitted: true, Attempts: 1, LastSubmittedAt: now.Add(-2 * time.Minute),
			ClaimExpiresAt: now.Add(-time.Minute)},
		testfactory.Batch{ID: "pending", ServiceID: "c", Submitted: true, Status: store.BatchStatusPending},
		testfactory.Batch{ID: "new-1", ServiceID: "d", CreatedAt: now.Add(-2 * time.Hour)},
		testfactory.Batch{ID: "new-2", ServiceID: "d"},
	)
	seq := map[string]int64{}
	rows, err := dbsqlc.New(st.DB()).BatchList(ctx, dbsqlc.BatchListParams{Max: 100})
	require.NoError(t, err)
	for _, r := range rows {
		seq[r.ID] = r.LedgerqBatch.Seq
	}
	// As ledgerq.submit_batch stores them, for BatchPayloadMarkVerified.
	_, err = st.DB().Exec(ctx, `UPDATE ledgerq.batch_payloads SET unverified = true WHERE id IN ('held', 'pending')`)
	require.NoError(t, err)
	chain := testfactory.PoolChainID
	txs := f.AddPoolTxs(testfactory.PoolTx(1, 0, 100, 10), testfactory.PoolTx(1, 1, 100, 10), testfactory.PoolTx(2, 0, 200, 20))
	numeric := func(v int64) pgtype.Numeric { return pgtype.Numeric{Int: big.NewInt(v), Valid: true} }
	to := testfactory.PoolSender(999)
	fresh := testfactory.PoolTx(3, 0, 300, 30)

	cases := []pipelineCase{
		manyCase((*dbsqlc.Queries).BatchList, dbsqlc.BatchListParams{Max: 100}),
		manyCase((*dbsqlc.Queries).BatchClaimQueued, dbsqlc.BatchClaimQueuedParams{
			Max: 10, LeaseExpiresAt: now.Add(time.Minute), Now: now,
		}),
		manyCase((*dbsqlc.Queries).BatchClaimExpiredHeld, dbsqlc.BatchClaimExpiredHeldParams{
			LeaseExpiresAt: now.Add(time.Minute), Now: now, Max: 10,
		}),
		manyCase((*dbsqlc.Queries).BatchClaimPendingForCheck, dbsqlc.BatchClaimPendingForCheckParams{
			NextCheckAt: now.Add(time.Minute), Now: now, Max: 10,
		}),
		manyCase((*dbsqlc.Queries).BatchRecordStatusMany, dbsqlc.BatchRecordStatusManyParams{
			Now: now, NextCheckAt: now.Add(time.Minute),
			Seqs: []int64{seq["held"], seq["pending"]}, Attempts: []int32{1, 1},
			Statuses: []string{"unknown", "invalid"}, Reasons: []string{"", "refused"},
		}),
		execRowsCase((*dbsqlc.Queries).BatchPayloadMarkVerified, dbsqlc.BatchPayloadMarkVerifiedParams{
			Seqs: []int64{seq["held"], seq["pending"]}, Attempts: []int32{1, 1},
		}),
		execCase((*dbsqlc.Queries).BatchServiceLock, []string{"d", "c"}),
		manyCase((*dbsqlc.Queries).BatchAdmit, dbsqlc.BatchAdmitParams{
			Claim: true, ServiceIds: []string{"d"}, Now: now, LeaseExpiresAt: now.Add(time.Minute),
		}),
		execCase((*dbsqlc.Queries).BatchWakeIfQueued, dbsqlc.BatchWakeIfQueuedParams{
			Channel: "pipeline_test", Now: now, ServiceIds: []string{"a"},
		}),
		execCase((*dbsqlc.Queries).ClaimSettingsForTx, "100ms"),
		execCase((*dbsqlc.Queries).LockTimeoutForTx, "100ms"),
		{
			query: "GenericPlansForTx",
			queue: func(b *pgx.Batch) func() any {
				store.QueueGenericPlans(b)
				return func() any { return nil }
			},
			direct: func(ctx context.Context, q *dbsqlc.Queries) (any, error) { return nil, q.GenericPlansForTx(ctx) },
		},
		oneCase((*dbsqlc.Queries).PoolSenderLock, dbsqlc.PoolSenderLockParams{
			ChainID: chain, Sender: testfactory.PoolSender(1), ChainNonce: 1, Now: now,
		}, true),
		oneCase((*dbsqlc.Queries).PoolTxGet, dbsqlc.PoolTxGetParams{ChainID: chain, TxHash: txs[1].Hash}, true),
		oneCase((*dbsqlc.Queries).PoolTxGet, dbsqlc.PoolTxGetParams{ChainID: chain, TxHash: fresh.Hash}, false),
		manyCase((*dbsqlc.Queries).PoolSenderLive, dbsqlc.PoolSenderLiveParams{
			ChainID: chain, Sender: testfactory.PoolSender(1), ChainNonce: 0,
		}),
		execRowsCase((*dbsqlc.Queries).PoolTxInsert, dbsqlc.PoolTxInsertParams{
			ChainID: chain, TxHash: fresh.Hash, Sender: fresh.Sender, Nonce: 0, TxType: 2, ToAddress: &to,
			GasFeeCap: numeric(300), GasTipCap: numeric(30), Gas: 21000, ValueWei: numeric(1), Raw: fresh.Raw,
			State: dbsqlc.LedgerqPoolTxStatePending, Now: now, ExpiresAt: now.Add(time.Hour),
		}),
		execRowsCase((*dbsqlc.Queries).PoolSenderSetNext, dbsqlc.PoolSenderSetNextParams{
			NextNonce: 3, Now: now, ChainID: chain, Sender: testfactory.PoolSender(1),
		}),
		oneCase((*dbsqlc.Queries).PoolSlotTake, dbsqlc.PoolSlotTakeParams{Pending: 1, Queued: 0, ChainID: chain, Start: 5}, true),
		manyCase((*dbsqlc.Queries).PoolSlotTakeMany, dbsqlc.PoolSlotTakeManyParams{
			Pending: 2, Queued: 1, ChainID: chain, Start: 14, N: 3,
		}),
		oneCase((*dbsqlc.Queries).PoolAdmissionBound, chain, true),
		oneCase((*dbsqlc.Queries).PoolAdmissionBound, chain+1, false),
		execCase((*dbsqlc.Queries).Notify, dbsqlc.NotifyParams{Channel: "pipeline_test", Payload: "x"}),
	}

	// Each in a savepoint rolled back, so that both see the same rows.
	inSavepoint := func(run func(tx pgx.Tx) (any, error)) (any, error) {
		sp, err := st.DB().Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, sp.Rollback(ctx)) }()
		return run(sp)
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.query] = true
		want, wantErr := inSavepoint(func(tx pgx.Tx) (any, error) { return c.direct(ctx, dbsqlc.New(tx)) })
		require.NoError(t, wantErr, "%s run alone", c.query)
		got, err := inSavepoint(func(tx pgx.Tx) (any, error) {
			b := &pgx.Batch{}
			read := c.queue(b)
			err := tx.SendBatch(ctx, b).Close()
			return read(), err
		})
		require.NoError(t, err, "%s queued", c.query)
		require.Equal(t, want, got, "%s: what the queued query read differs from what its generated method read", c.query)
		if c.reads {
			require.False(t, reflect.ValueOf(want).IsZero(), "%s read nothing: the case compares nothing", c.query)
			if v := reflect.ValueOf(want); v.Kind() == reflect.Slice {
				require.Positive(t, v.Len(), "%s read no rows: the case compares nothing", c.query)
			}
		}
	}
	queued := pipelinedQueries(t)
	require.Contains(t, queued, "GenericPlansForTx") // queued through noArg
	for _, name := range queued {
		require.True(t, covered[name], "the store queues %s on a batch, and no case here compares it", name)
	}
}
