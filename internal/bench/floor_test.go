package bench_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// bench/floor.sh measures the wallet lane's rows alone; its functions must
// keep writing the rows the lane writes, on the schema the migrations make,
// or its ceiling measures something else. Read back through the store, as
// the API reads a task, every task the floor moved is done with its one
// confirmed attempt, and each wallet's nonces run 0…n-1 with the next nonce
// at n.
func TestFloor_TheFloorWritesTheLaneRowsAndEndsEveryTaskDone(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sql, err := os.ReadFile("../../bench/floor.sql")
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, string(sql))
	require.NoError(t, err, "loading bench/floor.sql on the migrated schema")

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
