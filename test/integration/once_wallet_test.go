package integration

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// TestOnce_WalletLaneFromCronSendsAndConfirmsEveryTask: with no serve
// process at all, repeated `ledgerq once` runs (some started in pairs, as
// two cron hosts would) against a simulated EVM chain served over JSON-RPC
// send every waiting task and confirm it; the chain, read with go-ethereum's
// ethclient, has the wallet's nonce at the number of tasks.
func TestOnce_WalletLaneFromCronSendsAndConfirmsEveryTask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr, file, passFile := newKeystoreWallet(t, dir, "once wallet passphrase")

	chainAddr := testproc.FreeAddr(t)
	chain := testproc.Start(t, dir, nil, "simledger", "--kind", "evm", "--addr", chainAddr, "--log-level", "warn",
		"--evm-block-period", "200ms", "--evm-alloc", addr.Hex()+"=1000000000000000000000")
	chainURL := "http://" + chainAddr
	ec, err := ethclient.Dial(chainURL)
	require.NoError(t, err)
	t.Cleanup(ec.Close)
	eventually(t, time.Minute, "the simulated chain answers", func() bool {
		_, err := ec.ChainID(ctxT(t, time.Second))
		return err == nil && running(chain)
	})

	dbURL := testdb.NewEmpty(t)
	env := []string{"DATABASE_URL=" + dbURL}
	mig := testproc.Start(t, dir, env, "migrate", "up")
	require.Equal(t, 0, mig.Wait(t, time.Minute), mig.Stderr.String())
	st, err := store.OpenPool(ctxT(t, 10*time.Second), dbURL, 0)
	require.NoError(t, err)
	defer st.Close()
	const tasks = 12
	for i := range tasks {
		_, _, err := st.TaskInsert(ctxT(t, 10*time.Second), store.TaskInsertParams{
			Now: time.Now(), Wallet: "w", ChainID: 1337, Sender: addr.Hex(),
			Request: store.TaskRequest{To: fmt.Sprintf("0x%040x", i+1), Value: big.NewInt(int64(i + 1))},
		})
		require.NoError(t, err)
	}

	onceArgs := []string{"once", "--wallet-keystore", "w=" + file, "--wallet-passphrase-file", passFile,
		"--wallet-ledger", "evm", "--wallet-ledger-url", chainURL, "--log-level", "warn"}
	runs := 0
	for round := 0; ; round++ {
		list, err := st.TaskList(ctxT(t, 10*time.Second), store.TaskListParams{Wallet: "w", Limit: 100})
		require.NoError(t, err)
		done := 0
		for _, task := range list {
			require.NotEqual(t, store.TaskError, task.Status, "task %s: %s", task.ID, task.Error)
			if task.Status == store.TaskDone {
				done++
			}
		}
		if done == tasks {
			break
		}
		require.Less(t, runs, 60, "the tasks were not done after %d once runs (%d done)", runs, done)
		n := 1 + round%2
		ps := make([]*testproc.Proc, n)
		for i := range ps {
			ps[i] = testproc.Start(t, dir, env, onceArgs...)
		}
		for i, p := range ps {
			code := p.Wait(t, 90*time.Second)
			require.Equal(t, 0, code, "once run %d: %s", runs+i+1, p.Stderr)
			require.NotContains(t, strings.ToLower(p.Stderr.String()), `"level":"error"`)
		}
		runs += n
		// The next runs find the receipts of the chain's next block.
		head, err := ec.BlockNumber(ctxT(t, 5*time.Second))
		require.NoError(t, err)
		eventually(t, 10*time.Second, "the chain's next block", func() bool {
			n, err := ec.BlockNumber(ctxT(t, time.Second))
			return err == nil && n > head
		})
	}
	nonce, err := ec.NonceAt(ctxT(t, 5*time.Second), [20]byte(ledger.Address(addr)), nil)
	require.NoError(t, err)
	require.Equal(t, uint64(tasks), nonce, "the chain holds one transaction per task")
	t.Logf("%d tasks done after %d once runs", tasks, runs)
}
