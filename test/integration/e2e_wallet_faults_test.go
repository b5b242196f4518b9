package integration

import (
	"math/big"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/bench"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// TestE2E_WalletFaultRunWithSIGKILLsEndsEveryTaskDoneOrErrorWithContiguousNonces
// is the wallet lane's fault run (issue 11 item 8): a simulated EVM chain
// (`ledgerq simledger --kind evm`) with transient errors, lost responses and
// reorgs (2 blocks, transactions returned to the pool), one
// keystore wallet served by `ledgerq serve`, tasks posted over HTTP while
// serve is SIGKILLed at random moments and restarted. Every task must end
// done or error with a reason, and the chain, read with ethclient (the evm
// adapter), must show the wallet's nonces contiguous from 0, each taken by
// one mined transaction of ours, exactly one per done task (its recorded
// hash) and none for an error task.
//
// Lost transactions (--evm-lost-tx-rate, 5 % unless LEDGERQ_E2E_LOST_TX_RATE
// says otherwise) heal only by a gas bump or re-send after the stall
// timeout, set to 2s here (--wallet-stall-timeout).
func TestE2E_WalletFaultRunWithSIGKILLsEndsEveryTaskDoneOrErrorWithContiguousNonces(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	if s := os.Getenv("LEDGERQ_E2E_FAULT_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
	}
	lostTx := os.Getenv("LEDGERQ_E2E_LOST_TX_RATE")
	if lostTx == "" {
		lostTx = "0.05"
	}
	t.Logf("seed %d (LEDGERQ_E2E_FAULT_SEED), lost-tx rate %s", seed, lostTx)
	rnd := rand.New(rand.NewPCG(uint64(seed), 11))

	dir := t.TempDir()
	addr, file, passFile := newKeystoreWallet(t, dir, "fault run passphrase")
	sender := common.Address(addr)
	chainAddr := testproc.FreeAddr(t)
	chainURL := "http://" + chainAddr
	fund := new(big.Int).Mul(big.NewInt(100), big.NewInt(1e18))
	chain := testproc.Start(t, t.TempDir(), nil, "simledger", "--kind", "evm", "--addr", chainAddr, "--log-level", "warn",
		"--sim-seed", strconv.FormatInt(seed, 10), "--evm-block-period", "250ms", "--evm-alloc", sender.Hex()+"="+fund.String(),
		"--evm-transient-rate", "0.08", "--evm-lost-rate", "0.08", "--evm-lost-tx-rate", lostTx,
		"--evm-reorg-rate", "0.08", "--evm-reorg-depth", "2")
	testproc.WaitHTTP(t, chain, chainURL, http.StatusMethodNotAllowed, time.Minute) // JSON-RPC: POST only

	e := &walletE2E{t: t, db: testdb.New(t).URL, dir: dir, sender: sender,
		recipient: common.HexToAddress("0x000000000000000000000000000000000000dEaD")}
	e.args = []string{"serve", "--batch-ledger", "sim",
		"--wallet-keystore", "w=" + file, "--wallet-passphrase-file", passFile,
		"--wallet-ledger", "evm", "--wallet-ledger-url", chainURL, "--wallet-ledger-timeout", "1s", "--wallet-cycle-budget", "500ms",
		"--wallet-follow-interval", "200ms", "--poll-interval", "200ms",
		"--shard-lease", "4s", "--wallet-replaced-after", "5s", "--shutdown-timeout", "5s", "--wallet-stall-timeout", "2s"}

	const rounds, perRound = 3, 12
	for round := range rounds {
		victim, api := e.start("")
		e.post(api, perRound, nil)
		wait := time.Duration(200+rnd.IntN(1500)) * time.Millisecond
		time.Sleep(wait) // the kill lands at a random moment of the stream: the chaos is the point
		victim.Signal(t, syscall.SIGKILL)
		require.Equal(t, -1, victim.Wait(t, 30*time.Second))
		t.Logf("round %d: %d tasks posted, serve SIGKILLed %s later", round, perRound, wait)
	}
	p, api := e.start("")
	ended := map[string]e2eTask{}
	eventually(t, 90*time.Second, "every task done or error", func() bool {
		for _, id := range e.taskIDs {
			if s := ended[id].Status; s == "done" || s == "error" {
				continue
			}
			task := e.task(api, id)
			if task.Status != "done" && task.Status != "error" {
				return false
			}
			ended[id] = task
		}
		return true
	})
	e.stop(p)

	st, err := store.OpenPool(ctxT(t, 10*time.Second), e.db, 0)
	require.NoError(t, err)
	defer st.Close()
	tasks, err := st.TaskList(ctxT(t, 10*time.Second), store.TaskListParams{Wallet: "w", Limit: 1000})
	require.NoError(t, err)
	require.Len(t, tasks, rounds*perRound)
	l, err := evm.Dial(ctxT(t, 10*time.Second), chainURL, evm.Config{})
	require.NoError(t, err)
	defer l.Close()
	chk, err := bench.CheckWalletOnChain(ctxT(t, time.Minute), l, st, 1337, sender, tasks, 5*time.Second)
	require.NoError(t, err)
	require.Empty(t, chk.Problems, "the chain disagrees")
	require.Equal(t, rounds*perRound, chk.Done+chk.Error)
	require.Positive(t, chk.ChainNonce)
	t.Logf("%d tasks: %d done, %d error; chain nonce %d, contiguous; %d gas bumps, %d replacements, %d no-ops signed (%d mined), %d nonce resets",
		len(tasks), chk.Done, chk.Error, chk.ChainNonce, chk.Bumps, chk.Replacements, chk.Noops, chk.NoopsMined, chk.Resets)
	for _, task := range tasks {
		if task.Status == store.TaskError {
			t.Logf("task %s ended in error: %s", task.ID, task.Error)
		}
	}
}
