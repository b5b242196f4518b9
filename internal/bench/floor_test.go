package bench_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// floorConn is a connection to a fresh migrated database with
// bench/floor.sql loaded, and the database.
func floorConn(t *testing.T) (*testdb.DB, *pgx.Conn, context.Context) {
	t.Helper()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	sql, err := os.ReadFile("../../bench/floor.sql")
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
	_, err = conn.Exec(ctx, string(sql))
	require.NoError(t, err, "loading bench/floor.sql on the migrated schema")
	return db, conn, ctx
}

// bench/floor.sh measures the wallet lane's rows alone; its functions must
// keep writing the rows the lane writes, on the schema the migrations make,
// or its ceiling measures something else. Read back through the store, as
// the API reads a task, every task the floor moved is done with its one
// confirmed attempt, and each wallet's nonces run 0…n-1 with the next nonce
// at n.
func TestFloor_TheFloorWritesTheLaneRowsAndEndsEveryTaskDone(t *testing.T) {
	t.Parallel()
	db, conn, ctx := floorConn(t)

	const wallets, perWallet, budget = 2, 7, 3
	for s := 1; s <= wallets; s++ {
		for range perWallet {
			_, err := conn.Exec(ctx, "SELECT ledgerq_floor_intake($1)", s)
			require.NoError(t, err)
		}
	}
	for s := 1; s <= wallets; s++ {
		moved := 0
		for {
			var n int
			require.NoError(t, conn.QueryRow(ctx, "SELECT ledgerq_floor_cycle($1, $2)", s, budget).Scan(&n))
			require.LessOrEqual(t, n, budget)
			if n == 0 {
				break
			}
			moved += n
		}
		require.Equal(t, perWallet, moved, "wallet %d", s)
	}

	for s := 1; s <= wallets; s++ {
		tasks, err := db.Store.TaskList(ctx, store.TaskListParams{Wallet: "floor-" + strconv.Itoa(s), Limit: 100})
		require.NoError(t, err)
		require.Len(t, tasks, perWallet)
		nonces := map[int64]bool{}
		var sender string
		for _, task := range tasks {
			require.Equal(t, store.TaskDone, task.Status, "task %s", task.ID)
			attempts, err := db.Store.AttemptListByTask(ctx, task.ID)
			require.NoError(t, err)
			require.Len(t, attempts, 1, "task %s", task.ID)
			a := attempts[0]
			require.Equal(t, store.AttemptConfirmed, a.State)
			require.Equal(t, task.TxHash, a.TxHash)
			require.NotNil(t, a.SentAt)
			require.False(t, nonces[a.Nonce], "nonce %d used twice", a.Nonce)
			nonces[a.Nonce] = true
			sender = task.Sender
		}
		for n := range int64(perWallet) {
			require.True(t, nonces[n], "wallet %d: nonce %d missing", s, n)
		}
		var next int64
		require.NoError(t, conn.QueryRow(ctx,
			"SELECT next_nonce FROM ledgerq.wallet_nonces WHERE chain_id = 1337 AND sender = $1", sender).Scan(&next))
		require.Equal(t, int64(perWallet), next)
	}
}

// The builder floor must store what the pool's intake stores: read back
// through the store as the pool reads them, every transaction of every
// sender is pending with the fields an intake gives it, each sender's
// pending nonces run 0…n-1 without a gap (eth_getTransactionCount pending)
// with its next nonce recorded at n, and the admission slots count every
// transaction the groups added.
func TestFloor_ThePoolFloorStoresEverySendersTransactionsPendingInNonceOrder(t *testing.T) {
	t.Parallel()
	db, conn, ctx := floorConn(t)
	const senders, perSender, group = 4, 5, 4
	_, err := conn.Exec(ctx, "SELECT ledgerq_floor_pool_setup()")
	require.NoError(t, err)
	// Two blocks of senders (the second block's are new), in whole groups.
	const total = 2 * senders * perSender
	for range total / group {
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT ledgerq_floor_pool_group($1, $2, $3)", senders, perSender, group).Scan(&n))
		require.Equal(t, group, n)
	}
	var k int64
	for ; k < total; k++ {
		sum := sha256.Sum256([]byte(fmt.Sprintf("floor-pool-%d", k)))
		tx, err := db.Store.PoolGet(ctx, 1337, "0x"+hex.EncodeToString(sum[:]))
		require.NoError(t, err, "intake %d", k)
		require.Equal(t, store.PoolPending, tx.State, "intake %d", k)
		require.Equal(t, fmt.Sprintf("0x%040x", k/(senders*perSender)*senders+k%senders), tx.Sender, "intake %d", k)
		require.Equal(t, uint64(k%(senders*perSender)/senders), tx.Nonce, "intake %d", k)
		require.Equal(t, uint8(2), tx.Type)
		require.NotEmpty(t, tx.Raw)
		require.True(t, tx.ExpiresAt.After(tx.ReceivedAt))
	}
	for s := range 2 * senders {
		sender := fmt.Sprintf("0x%040x", s)
		next, err := db.Store.PoolPendingNonce(ctx, 1337, sender, 0)
		require.NoError(t, err)
		require.Equal(t, uint64(perSender), next, "sender %s", sender)
		var recorded int64
		require.NoError(t, conn.QueryRow(ctx,
			"SELECT next_nonce FROM ledgerq.pool_senders WHERE chain_id = 1337 AND sender = $1", sender).Scan(&recorded))
		require.Equal(t, int64(perSender), recorded, "sender %s", sender)
	}
	var growth int64
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT sum(pending_growth) FROM ledgerq.pool_admission_slots WHERE chain_id = 1337").Scan(&growth))
	require.Equal(t, int64(total), growth)
}

// The batch floor must move a batch as the lane does: read back through
// the store, every batch the intake stored is committed after one attempt,
// and each service's batches were committed one at a time in the order
// they were stored (one batch of a service at the ledger at a time).
func TestFloor_TheBatchFloorCommitsEveryBatchOnceInServiceOrder(t *testing.T) {
	t.Parallel()
	db, conn, ctx := floorConn(t)
	const services, size, calls, budget = 3, 4, 6, 2
	for range calls {
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT ledgerq_floor_batch_intake($1, $2, 600)", services, size).Scan(&n))
		require.Equal(t, size, n)
	}
	var claimed int
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT ledgerq_floor_batch_claim(ARRAY['floor-1', 'floor-2', 'floor-3'])").Scan(&claimed))
	require.LessOrEqual(t, claimed, services)
	moved := 0
	for {
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT ledgerq_floor_batch_cycle($1)", budget).Scan(&n))
		require.LessOrEqual(t, n, budget)
		if n == 0 {
			break
		}
		moved += n
	}
	require.Equal(t, size*calls, moved)
	counts, err := db.Store.BatchCountByState(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"committed": size * calls}, counts)

	for s := 1; s <= services; s++ {
		batches, err := db.Store.BatchList(ctx, store.BatchListParams{ServiceID: "floor-" + strconv.Itoa(s), Limit: 100})
		require.NoError(t, err)
		finished := map[int64]time.Time{}
		for _, b := range batches {
			require.Equal(t, store.BatchStatusCommitted, b.Status, "batch %d", b.Seq)
			require.Equal(t, 1, b.Attempts, "batch %d", b.Seq)
			require.Nil(t, b.ClaimExpiresAt)
			require.NotNil(t, b.FinishedAt)
			finished[b.Seq] = *b.FinishedAt
		}
		for _, a := range batches {
			for _, b := range batches {
				if a.Seq < b.Seq {
					require.True(t, finished[a.Seq].Before(finished[b.Seq]),
						"service %d: batch %d was stored before batch %d but not committed before it", s, a.Seq, b.Seq)
				}
			}
		}
	}
}

// On a machine shared with other work, the machine's busy time charges the
// database with that work's CPU and put the batch floor below the lane it
// bounds. When the server runs on this machine (its data directory's
// postmaster.pid names a running postgres), bench/floor.sh --lane batch
// counts the CPU of the server's own processes: its round says so and finds
// the lane's CPU per batch in them.
func TestFloor_TheBatchFloorCountsTheServersOwnCPUWhenTheServerRunsHere(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("bench/floor.sh needs psql (apt-get install postgresql-client)")
	}
	pgbenches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if _, err := exec.LookPath("pgbench"); err != nil && len(pgbenches) == 0 {
		t.Skip("bench/floor.sh needs pgbench")
	}
	db, conn, ctx := floorConn(t)
	var dir string
	require.NoError(t, conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir))
	meter := "the machine less pgbench"
	if pid, err := os.ReadFile(filepath.Join(dir, "postmaster.pid")); err == nil {
		comm, _ := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(strings.SplitN(string(pid), "\n", 2)[0]), "comm"))
		if strings.TrimSpace(string(comm)) == "postgres" {
			meter = "the server's processes"
		}
	}
	t.Logf("the floor should count the CPU of %s", meter)

	cmd := exec.Command("../../bench/floor.sh", db.AdminURL, "--lane", "batch", "--rounds", "1", "--seconds", "2", "--services", "50")
	cmd.Env = append(os.Environ(), "LEDGERQ="+testproc.Binary(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr:\n%s", &stderr)
	round := regexp.MustCompile(`batch round 1: .*; lane [0-9]+ batches/s, ([0-9.]+) ms CPU per batch.*\(CPU of ([^)]*)\)`).FindStringSubmatch(stderr.String())
	require.NotNil(t, round, "no batch round line:\n%s", &stderr)
	require.Equal(t, meter, round[2])
	perBatch, err := strconv.ParseFloat(round[1], 64)
	require.NoError(t, err)
	require.Greater(t, perBatch, 0.0, "the lane's CPU per batch, counted in %s", meter)
	require.Regexp(t, `(?m)^floor: batch intake [0-9.]+ ms, lane [0-9.]+ ms of database CPU per batch; ceiling [0-9]+ batches/s taken in and finished, [0-9]+ batches/s finished from a backlog`, stdout.String())
}
