package bench

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerq/ledgerq/client"
	"github.com/ledgerq/ledgerq/internal/keystore"
)

// WalletModeSQL calls ledgerq.send_tx in an application's transaction
// (BEGIN; SELECT ledgerq.send_tx(…); COMMIT), one per task, from the
// bench's own pool, through the Go client (client.EnqueueTx) as a Go
// application would: the SQL intake of docs/enqueue.md.
const WalletModeSQL WalletMode = "sql"

// sqlIntake is WalletModeSQL's side: a pool of IngestWorkers connections
// whose role is granted the run's wallets in ledgerq.enqueue_grants.
type sqlIntake struct {
	pool   *pgxpool.Pool
	prefix string
	value  *big.Int
	// grants are the rows this run wrote, deleted by close.
	role    string
	wallets []string
}

// newSQLIntake opens the pool and grants its role (the database URL's) the
// run's wallets.
func newSQLIntake(ctx context.Context, url string, workers int, wallets []keystore.Wallet, c *WalletConfig) (*sqlIntake, error) {
	pool, err := openSQLPool(ctx, url, workers)
	if err != nil {
		return nil, err
	}
	in := &sqlIntake{pool: pool, prefix: runPrefix("s"), value: c.Value}
	for _, w := range wallets {
		in.wallets = append(in.wallets, w.ID)
	}
	if err := pool.QueryRow(ctx, `SELECT session_user::text`).Scan(&in.role); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sql intake: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO ledgerq.enqueue_grants (role_name, wallet_id) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, in.role, in.wallets); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sql intake: granting role %s the run's wallets: %w", in.role, err)
	}
	return in, warm(ctx, pool, workers)
}

// send enqueues the i-th task of wallet in a transaction of its own, as an
// application's transaction would, and returns how long it took from BEGIN
// to COMMIT.
func (s *sqlIntake) send(ctx context.Context, wallet string, i int) (time.Duration, error) {
	began := time.Now()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := client.EnqueueTx(ctx, tx, client.EnqueueTxParams{
			Wallet: wallet, To: benchRecipient.Hex(), Value: s.value, IdempotencyKey: s.prefix + "-" + strconv.Itoa(i),
		})
		return err
	})
	return time.Since(began), err
}

func (s *sqlIntake) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = s.pool.Exec(ctx, `DELETE FROM ledgerq.enqueue_grants WHERE role_name = $1 AND wallet_id = ANY($2::text[])`, s.role, s.wallets)
	s.pool.Close()
}

// latencies collects the enqueue calls' durations.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// quantiles returns the p50, p99 and max.
func (l *latencies) quantiles() (p50, p99, maxD time.Duration) {
	l.mu.Lock()
	d := slices.Clone(l.d)
	l.mu.Unlock()
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	return d[len(d)*50/100], d[min(len(d)-1, len(d)*99/100)], d[len(d)-1]
}

// openSQLPool opens the pool of an application's connections that --mode
// sql enqueues from: one connection per worker, opened at once.
func openSQLPool(ctx context.Context, url string, workers int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns, cfg.MinConns = int32(workers), int32(workers)
	return pgxpool.NewWithConfig(ctx, cfg)
}
