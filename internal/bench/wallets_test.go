package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/bench"
	"github.com/ledgerq/ledgerq/internal/ledger/faultproxy"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// walletSetup returns a configuration for a tiny wallet run on a fresh
// database, with the lane's timings fast enough for a test.
func walletSetup(t testing.TB, wallets, perWallet int) (bench.WalletConfig, *lockedBuffer) {
	t.Helper()
	db := testdb.New(t)
	progress := &lockedBuffer{}
	cfg := bench.DefaultWalletConfig()
	cfg.Node.DatabaseURL = db.URL
	cfg.Wallets, cfg.TasksPerWallet = wallets, perWallet
	cfg.IngestWorkers = 2
	cfg.Grace = time.Minute
	cfg.Node.Loops.PollInterval = 50 * time.Millisecond
	cfg.Node.Wallet.Lane.FollowInterval = 50 * time.Millisecond
	cfg.Sim.BlockPeriod = 20 * time.Millisecond
	cfg.Progress = progress
	cfg.ProgressInterval = 50 * time.Millisecond
	return cfg, progress
}

func requireAllDone(t *testing.T, rep *bench.WalletReport, want int) {
	t.Helper()
	require.Empty(t, rep.Problems)
	require.Equal(t, want, rep.Planned)
	require.Equal(t, want, rep.Enqueued)
	require.Equal(t, want, rep.Done)
	require.Zero(t, rep.Error+rep.Waiting+rep.Executing)
	require.Equal(t, want, rep.Attempts, "one transaction signed per task")
	require.Positive(t, rep.EnqueueRate)
	require.Positive(t, rep.ConfirmRate)
	require.Positive(t, rep.P50)
	require.LessOrEqual(t, rep.P50, rep.P99)
	require.LessOrEqual(t, rep.P99, rep.Max)
	var sum bytes.Buffer
	require.NoError(t, rep.WriteSummary(&sum))
	require.Contains(t, sum.String(), "every check passed")
}

func TestRunWallets_TinySimRunConfirmsEveryTaskOncePerNonce(t *testing.T) {
	t.Parallel()
	cfg, progress := walletSetup(t, 2, 5)

	rep, err := bench.RunWallets(context.Background(), cfg)
	require.NoError(t, err)
	requireAllDone(t, rep, 10)
	// The progress line counts in the database; its last says what the
	// summary does.
	require.Contains(t, progress.String(), "enqueued 10/10  waiting 0  executing 0  done 10  error 0")
	require.Positive(t, rep.ProgressQueries)
	require.Positive(t, rep.ProgressQueryTime)
	var sum bytes.Buffer
	require.NoError(t, rep.WriteSummary(&sum))
	require.Contains(t, sum.String(), "progress queries (TaskCountByStatus)")
}

func TestRunWallets_RealGethConfirmsEveryTaskOncePerNonce(t *testing.T) {
	t.Parallel()
	geth := testgeth.Start(t)
	cfg, progress := walletSetup(t, 2, 3)
	cfg.Ledger, cfg.LedgerURL, cfg.FundFromDevAccount = bench.WalletLedgerEVM, geth.URL, true

	rep, err := bench.RunWallets(context.Background(), cfg)
	require.NoError(t, err)
	requireAllDone(t, rep, 6)
	require.Contains(t, progress.String(), "funded 2 wallets")

	// What the chain itself holds: every wallet's transactions, one per
	// nonce, contiguous from 0.
	require.Len(t, rep.Wallets, 2)
	for _, addr := range rep.Wallets {
		txs, err := testgeth.MinedFrom(t.Context(), geth.URL, addr)
		require.NoError(t, err)
		require.Len(t, txs, 3)
		require.NoError(t, testgeth.CheckNonces(txs))
		require.Zero(t, txs[0].Nonce)
	}
}

func TestWalletConfig_EVMNeedsAURLAndAFunder(t *testing.T) {
	cfg := bench.DefaultWalletConfig()
	cfg.Node.DatabaseURL = "postgres://x@/db"
	cfg.Ledger = bench.WalletLedgerEVM
	err := cfg.Validate()
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "--ledger-url"), err.Error())
	cfg.LedgerURL = "http://127.0.0.1:8545"
	err = cfg.Validate()
	require.Error(t, err)
	require.Contains(t, err.Error(), "--fund-from-dev-account")
	cfg.FundFromDevAccount = true
	require.NoError(t, cfg.Validate())
}

// A fault run: reorgs (transactions returned to the pool), transient
// errors and lost responses. Lost transactions are left out: they heal only
// by a gas bump after the lane's stall timeout, 5 minutes, which the node
// does not let a run shorten.
func TestRunWallets_AFaultRunWithReorgsEndsEveryTaskDoneOrErrorAndTheChainAgrees(t *testing.T) {
	t.Parallel()
	cfg, _ := walletSetup(t, 2, 8)
	cfg.Sim.Seed = 5
	cfg.Sim.ReorgRate, cfg.Sim.ReorgDepth = 0.1, 2
	cfg.Sim.TransientRate, cfg.Sim.LostResponseRate = 0.1, 0.1
	require.True(t, cfg.FaultRun())

	rep, err := bench.RunWallets(context.Background(), cfg)
	require.NoError(t, err, "%v", rep)
	require.Empty(t, rep.Problems)
	require.Equal(t, 16, rep.Done+rep.Error)
	require.NotNil(t, rep.ChainFaults)
	require.Positive(t, rep.ChainFaults.Reorgs)
	var sum bytes.Buffer
	require.NoError(t, rep.WriteSummary(&sum))
	require.Contains(t, sum.String(), "gas bumps")
	require.Contains(t, sum.String(), "reorgs")
	require.Contains(t, sum.String(), "every task done or error with a reason")
	t.Log(sum.String())
}

func TestRunWallets_DirectBaselineSendsAsManyOnTheSameChainAndGivesTheRatio(t *testing.T) {
	t.Parallel()
	cfg, progress := walletSetup(t, 2, 5)
	cfg.Baseline = bench.BaselineDirect

	rep, err := bench.RunWallets(context.Background(), cfg)
	require.NoError(t, err)
	requireAllDone(t, rep, 10)
	require.NotNil(t, rep.Direct)
	require.Equal(t, 2, rep.Direct.Keys)
	require.Equal(t, 10, rep.Direct.Sent)
	require.Positive(t, rep.Direct.MinedRate)
	require.Positive(t, rep.MinedRate)
	require.LessOrEqual(t, rep.Direct.MinedP50, rep.Direct.MinedP99)
	require.LessOrEqual(t, rep.MinedP50, rep.MinedP99)
	require.LessOrEqual(t, rep.MinedP99, rep.MinedMax)
	require.Contains(t, progress.String(), "direct sender: 10 mined")
	var sum bytes.Buffer
	require.NoError(t, rep.WriteSummary(&sum))
	require.Contains(t, sum.String(), "ledgerq / direct")
	require.Contains(t, sum.String(), "chain calls")
}

func TestRunWallets_DirectBaselineOnRealGeth(t *testing.T) {
	t.Parallel()
	geth := testgeth.Start(t)
	cfg, _ := walletSetup(t, 2, 3)
	cfg.Ledger, cfg.LedgerURL, cfg.FundFromDevAccount = bench.WalletLedgerEVM, geth.URL, true
	cfg.Baseline = bench.BaselineDirect

	rep, err := bench.RunWallets(context.Background(), cfg)
	require.NoError(t, err)
	requireAllDone(t, rep, 6)
	require.Equal(t, 6, rep.Direct.Sent)
	require.Positive(t, rep.Direct.MinedRate)
	require.Positive(t, rep.MinedRate)
}

func TestRunWallets_HTTPModePostsEveryTaskThroughTheAPIWithAnIdempotencyKey(t *testing.T) {
	t.Parallel()
	cfg, _ := walletSetup(t, 2, 5)
	cfg.Mode = bench.WalletModeHTTP
	cfg.Rate = 200

	rep, err := bench.RunWallets(context.Background(), cfg)
	require.NoError(t, err)
	requireAllDone(t, rep, 10)
	require.Equal(t, 10, rep.Requests)
	// Offered at 200/s: the tenth goes 45 ms after the first.
	require.GreaterOrEqual(t, rep.EnqueueTime, 45*time.Millisecond)
	var sum bytes.Buffer
	require.NoError(t, rep.WriteSummary(&sum))
	require.Contains(t, sum.String(), "one POST send-tx per task")
	require.Contains(t, sum.String(), "10 requests")
}

func TestRunWallets_SQLModeEnqueuesEveryTaskThroughSendTxInATransaction(t *testing.T) {
	t.Parallel()
	cfg, _ := walletSetup(t, 2, 5)
	cfg.Mode = bench.WalletModeSQL

	rep, err := bench.RunWallets(context.Background(), cfg)
	require.NoError(t, err)
	requireAllDone(t, rep, 10)
	require.Positive(t, rep.EnqueueP50)
	require.LessOrEqual(t, rep.EnqueueP50, rep.EnqueueP99)
	require.LessOrEqual(t, rep.EnqueueP99, rep.EnqueueMax)
	var sum bytes.Buffer
	require.NoError(t, rep.WriteSummary(&sum))
	require.Contains(t, sum.String(), "ledgerq.send_tx(…, idempotency_key) by client.EnqueueTx")

	conn, err := pgx.Connect(t.Context(), cfg.Node.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var keyed, grants int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.wallet_tasks WHERE idempotency_key IS NOT NULL`).Scan(&keyed))
	require.Equal(t, 10, keyed, "every task stored through send_tx with its key")
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.enqueue_grants`).Scan(&grants))
	require.Zero(t, grants, "the run's grants are gone with it")
}

func TestRunWallets_BacklogFinishedSeedsDoneTasksBesideTheRun(t *testing.T) {
	t.Parallel()
	cfg, progress := walletSetup(t, 2, 5)
	cfg.BacklogFinished = 2500

	rep, err := bench.RunWallets(context.Background(), cfg)
	require.NoError(t, err)
	requireAllDone(t, rep, 10)
	require.Contains(t, progress.String(), "seeded 2500 finished tasks")

	conn, err := pgx.Connect(t.Context(), cfg.Node.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var tasks, attempts, senders int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT sender) FROM ledgerq.wallet_tasks WHERE status = 3 AND wallet_id LIKE 'backlog-%'`).Scan(&tasks, &senders))
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.tx_attempts a JOIN ledgerq.wallet_tasks t ON t.id = a.task_id
		WHERE t.wallet_id LIKE 'backlog-%' AND a.state = 'confirmed'`).Scan(&attempts))
	require.Equal(t, 2500, tasks)
	require.Equal(t, 2500, attempts, "each seeded task has its confirmed attempt")
	require.Equal(t, 1000, senders)
}

func TestWalletConfig_ValidateRefusesAnUnknownModeOrBaseline(t *testing.T) {
	t.Parallel()
	base := func() bench.WalletConfig {
		cfg := bench.DefaultWalletConfig()
		cfg.Node.DatabaseURL = "postgres://localhost/x"
		require.NoError(t, cfg.Validate())
		return cfg
	}
	cfg := base()
	cfg.Mode = "grpc"
	require.ErrorContains(t, cfg.Validate(), "--mode")
	cfg = base()
	cfg.Baseline = "river"
	require.ErrorContains(t, cfg.Validate(), "--baseline")
	cfg = base()
	cfg.Baseline, cfg.Sim.LostTxRate = bench.BaselineDirect, 0.1
	require.ErrorContains(t, cfg.Validate(), "fault-free")
	cfg = base()
	cfg.BacklogFinished = -1
	require.ErrorContains(t, cfg.Validate(), "--backlog-finished")
}

// --signer-latency puts the keys behind a signer outside the process that
// waits before each signature: the run still ends every task once per
// nonce, and says where its keys signed.
func TestRunWallets_ASlowSignerOutsideTheProcessEndsEveryTaskOnce(t *testing.T) {
	t.Parallel()
	cfg, _ := walletSetup(t, 1, 12)
	cfg.SignerLatency = 5 * time.Millisecond
	rep, err := bench.RunWallets(context.Background(), cfg)
	require.NoError(t, err)
	requireAllDone(t, rep, 12)
	var sum bytes.Buffer
	require.NoError(t, rep.WriteSummary(&sum))
	require.Contains(t, sum.String(), "outside the process, 5ms a signature")
}

// A run over two real chains (two geth --dev with chain ids of their own),
// each behind two nodes (the geth and a proxy in front of it, with no
// faults): every wallet's tasks are mined on its own chain and on no other,
// each chain's part is reported, the chain-side check passed on each, and
// the lane sent through both nodes of each chain.
func TestRunWallets_TwoChainsOfTwoNodesMineEachWalletOnItsOwnChain(t *testing.T) {
	t.Parallel()
	gethA, gethB := testgeth.Start(t, testgeth.ChainID(1401)), testgeth.Start(t, testgeth.ChainID(1402))
	proxy := func(upstream string) *faultproxy.Proxy {
		p, err := faultproxy.New(upstream, faultproxy.Config{})
		require.NoError(t, err)
		_, err = p.Start()
		require.NoError(t, err)
		t.Cleanup(p.Close)
		return p
	}
	proxyA, proxyB := proxy(gethA.URL), proxy(gethB.URL)
	cfg, progress := walletSetup(t, 4, 3)
	cfg.Ledger, cfg.FundFromDevAccount = bench.WalletLedgerEVM, true
	cfg.Node.Wallet.Lane.Confirmations = 1
	cfg.Chains = []bench.ChainNodes{
		{Name: "a", Nodes: []string{gethA.URL, proxyA.URL()}},
		{Name: "b", Nodes: []string{gethB.URL, proxyB.URL()}},
	}

	rep, err := bench.RunWallets(context.Background(), cfg)
	require.NoError(t, err)
	requireAllDone(t, rep, 12)
	require.Contains(t, progress.String(), "funded 4 wallets")
	require.Len(t, rep.Chains, 2)
	for i, want := range []int64{1401, 1402} {
		ch := rep.Chains[i]
		require.Equal(t, want, ch.ChainID)
		require.Equal(t, 2, ch.Nodes)
		require.Equal(t, 2, ch.Wallets)
		require.Equal(t, 6, ch.Done)
		require.Positive(t, ch.MinedRate)
		require.LessOrEqual(t, ch.MinedTime, rep.MinedTime)
	}
	var sum bytes.Buffer
	require.NoError(t, rep.WriteSummary(&sum))
	require.Regexp(t, `(?m)^  mined on a +[0-9.]+ tasks/s \(6 from`, sum.String())
	require.Regexp(t, `(?m)^  mined on b +[0-9.]+ tasks/s \(6 from`, sum.String())

	// Wallet i is on chain i mod 2: its three transactions are mined
	// there, nonces 0, 1, 2, and none on the other chain.
	urls := []string{gethA.URL, gethB.URL}
	for i, addr := range rep.Wallets {
		txs, err := testgeth.MinedFrom(t.Context(), urls[i%2], addr)
		require.NoError(t, err)
		require.Len(t, txs, 3, "wallet %d on its chain", i)
		require.NoError(t, testgeth.CheckNonces(txs))
		require.Zero(t, txs[0].Nonce)
		other, err := testgeth.MinedFrom(t.Context(), urls[1-i%2], addr)
		require.NoError(t, err)
		require.Empty(t, other, "wallet %d on the other chain", i)
	}
	// Every send went to both nodes of its chain.
	for _, p := range []*faultproxy.Proxy{proxyA, proxyB} {
		require.Equal(t, 6, p.MethodCounts()["eth_sendRawTransaction"])
	}
}

func TestWalletConfig_ChainsAreForEVMWithoutALedgerURLOrADirectBaseline(t *testing.T) {
	ch, err := bench.ParseChainNodes("a=http://127.0.0.1:8545,http://127.0.0.1:8645")
	require.NoError(t, err)
	require.Equal(t, bench.ChainNodes{Name: "a", Nodes: []string{"http://127.0.0.1:8545", "http://127.0.0.1:8645"}}, ch)
	for _, bad := range []string{"a", "=http://x", "a=", "a=ftp://x", "a=http://x,"} {
		_, err := bench.ParseChainNodes(bad)
		require.Error(t, err, bad)
	}

	cfg := bench.DefaultWalletConfig()
	cfg.Node.DatabaseURL = "postgres://x@/db"
	cfg.Ledger, cfg.FundFromDevAccount = bench.WalletLedgerEVM, true
	cfg.Wallets = 2
	cfg.Chains = []bench.ChainNodes{{Name: "a", Nodes: []string{"http://127.0.0.1:8545"}}, {Name: "b", Nodes: []string{"http://127.0.0.1:8546"}}}
	require.NoError(t, cfg.Validate())
	for what, change := range map[string]func(c *bench.WalletConfig){
		"--ledger-url":          func(c *bench.WalletConfig) { c.LedgerURL = "http://127.0.0.1:8545" },
		"--baseline direct":     func(c *bench.WalletConfig) { c.Baseline = bench.BaselineDirect },
		"--chain is for":        func(c *bench.WalletConfig) { c.Ledger, c.FundFromDevAccount = bench.WalletLedgerSim, false },
		"needs a wallet":        func(c *bench.WalletConfig) { c.Wallets = 1 },
		"--chain a is given tw": func(c *bench.WalletConfig) { c.Chains[1].Name = "a" },
	} {
		c := cfg
		c.Chains = append([]bench.ChainNodes(nil), cfg.Chains...)
		change(&c)
		err := c.Validate()
		require.Error(t, err, what)
		require.Contains(t, err.Error(), what)
	}
}
