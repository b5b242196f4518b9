package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerq/ledgerq/client"
	"github.com/ledgerq/ledgerq/internal/store"
)

// batchSQLIntake is ModeSQL's side: a pool of IngestWorkers connections
// whose role is granted the run's services in
// ledgerq.enqueue_service_grants, each insert one application transaction
// around ledgerq.submit_batch (client.SubmitBatchTx), as docs/enqueue.md
// shows it.
type batchSQLIntake struct {
	pool *pgxpool.Pool
	// role and services are the grants this run wrote, deleted by close.
	role     string
	services []string
	// lockKey is each service's admission lock key, hashtext(service_id).
	lockKey      map[string]int32
	transactions atomic.Int64
}

// newBatchSQLIntake opens the pool and grants its role (the database URL's)
// the run's services.
func newBatchSQLIntake(ctx context.Context, url string, workers int, batches []store.NewBatch) (*batchSQLIntake, error) {
	pool, err := openSQLPool(ctx, url, workers)
	if err != nil {
		return nil, err
	}
	in := &batchSQLIntake{pool: pool}
	for _, b := range batches {
		in.services = append(in.services, b.ServiceID)
	}
	slices.Sort(in.services)
	in.services = slices.Compact(in.services)
	if err := pool.QueryRow(ctx, `SELECT session_user::text`).Scan(&in.role); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sql intake: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO ledgerq.enqueue_service_grants (role_name, service_id) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, in.role, in.services); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sql intake: granting role %s the run's services: %w", in.role, err)
	}
	rows, _ := pool.Query(ctx, `SELECT s, hashtext(s) FROM unnest($1::text[]) AS s`, in.services)
	in.lockKey = map[string]int32{}
	var (
		service string
		key     int32
	)
	if _, err := pgx.ForEachRow(rows, []any{&service, &key}, func() error {
		in.lockKey[service] = key
		return nil
	}); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sql intake: reading the services' lock keys: %w", err)
	}
	return in, warm(ctx, pool, workers)
}

// submit stores chunk in one transaction of its own, a ledgerq.submit_batch
// call per batch, as an application's transaction would. Each call takes
// its service's admission lock to the commit; the calls go in the order of
// the lock keys (a service's own batches in their order), the order in which
// the lane's transactions take several services' locks (BatchServiceLock),
// so that two transactions never wait for each other in a cycle, which
// PostgreSQL would end by aborting one (40P01).
func (s *batchSQLIntake) submit(ctx context.Context, chunk []store.NewBatch) error {
	ordered := slices.Clone(chunk)
	slices.SortStableFunc(ordered, func(a, b store.NewBatch) int {
		return cmp.Compare(s.lockKey[a.ServiceID], s.lockKey[b.ServiceID])
	})
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, b := range ordered {
			id, err := client.SubmitBatchTx(ctx, tx, b.ServiceID, b.Payload)
			if err != nil {
				return err
			}
			if id != b.ID {
				return fmt.Errorf("ledgerq.submit_batch answered id %s for batch %s", id, b.ID)
			}
		}
		return nil
	})
	if err == nil {
		s.transactions.Add(1)
	}
	return err
}

func (s *batchSQLIntake) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = s.pool.Exec(ctx, `DELETE FROM ledgerq.enqueue_service_grants WHERE role_name = $1 AND service_id = ANY($2::text[])`, s.role, s.services)
	s.pool.Close()
}
