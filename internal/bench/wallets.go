package bench

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
)

// ErrWalletCheck is wrapped by RunWallets' error when a task did not finish
// done or a check of the nonces failed.
var ErrWalletCheck = errors.New("wallet bench check failed")

// The wallet bench's chains.
const (
	WalletLedgerSim = node.WalletLedgerSim
	WalletLedgerEVM = node.WalletLedgerEVM
)

// benchRecipient receives every bench transaction's wei.
var benchRecipient = common.HexToAddress("0x00000000000000000000000000000000000b3c11")

// WalletConfig configures a wallet-lane run.
type WalletConfig struct {
	// Node is the ledgerq process under test: the database, the loops'
	// timings and the wallet lane's settings. Its API is off, its batch lane
	// idle; Wallet.Registry and Wallet.Ledger.Instance are set by the run.
	Node node.Config

	Wallets        int
	TasksPerWallet int
	// IngestWorkers store the tasks (store.TaskInsert, one task per call, as
	// one POST send-tx) concurrently, each with its own connection.
	IngestWorkers int

	// Ledger is WalletLedgerSim (the in-process simulated chain, configured
	// by Sim) or WalletLedgerEVM (a node's JSON-RPC at LedgerURL).
	Ledger    string
	LedgerURL string
	// Chains, instead of LedgerURL, are several evm chains, each behind
	// its nodes (--chain): the wallets are spread over them in turn, each
	// funded from its chain's developer account (FundFromDevAccount).
	Chains []ChainNodes
	// Sim configures the simulated chain; its Alloc is set by the run.
	Sim evmsim.Config
	// FundFromDevAccount funds the wallets on an evm chain with
	// eth_sendTransaction from the node's first account (geth --dev's
	// unlocked developer account).
	FundFromDevAccount bool
	// FundWei is what each wallet is given.
	FundWei *big.Int
	// SignerLatency, when set, puts each wallet's key behind a signer that
	// waits this long before each signature and says it is outside the
	// process: an HSM's, a KMS's or a remote signer's round trip, with the
	// write-ahead across signers that such a signer takes.
	SignerLatency time.Duration
	// Value is what each task's transaction sends, in wei.
	Value *big.Int

	// Mode is how the tasks reach the lane: WalletModeStore (store.TaskInsert
	// from the bench's own pool), WalletModeHTTP (POST send-tx through the
	// real API handler on a loopback listener) or WalletModeSQL
	// (ledgerq.send_tx in a transaction of its own, from the bench's pool).
	Mode WalletMode
	// Rate, when positive, offers the tasks at this many per second; 0
	// enqueues them as fast as the workers can.
	Rate float64
	// Baseline is BaselineNone or BaselineDirect: a direct sender with no
	// database runs first on the same chain (DirectReport).
	Baseline string
	// BacklogFinished seeds this many done tasks, each with its confirmed
	// attempt, on other senders of the same chain before the run, as a
	// long-running lane leaves behind.
	BacklogFinished int

	// Grace is how long the run waits, once every task is stored, for every
	// task to end.
	Grace time.Duration
	// Progress receives a line every ProgressInterval; nil discards them.
	Progress         io.Writer
	ProgressInterval time.Duration
}

// DefaultWalletConfig returns the defaults of `ledgerq bench wallets`: the
// node's defaults and a simulated chain mining every 200 ms.
func DefaultWalletConfig() WalletConfig {
	n := node.Defaults()
	n.API.Enabled = false
	return WalletConfig{
		Node:           n,
		Wallets:        10,
		TasksPerWallet: 20,
		IngestWorkers:  4,
		Mode:           WalletModeStore,
		Ledger:         WalletLedgerSim,
		Sim:            evmsim.Config{Seed: 1, BlockPeriod: 200 * time.Millisecond},
		FundWei:        new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil), // 1 ether
		Value:          big.NewInt(1),
		Grace:          2 * time.Minute,

		ProgressInterval: time.Second,
	}
}

// Validate reports the first problem with the configuration.
func (c *WalletConfig) Validate() error {
	if err := c.Node.Validate(); err != nil {
		return err
	}
	switch {
	case c.Wallets < 1 || c.TasksPerWallet < 1:
		return errors.New("--wallets and --tasks-per-wallet must be at least 1")
	case c.IngestWorkers < 1:
		return errors.New("--ingest-workers must be at least 1")
	case c.Mode != WalletModeStore && c.Mode != WalletModeHTTP && c.Mode != WalletModeSQL:
		return fmt.Errorf("--mode %q: want store, http or sql", c.Mode)
	case c.Baseline != BaselineNone && c.Baseline != BaselineDirect:
		return fmt.Errorf("--baseline %q: want direct or nothing", c.Baseline)
	case c.Baseline == BaselineDirect && c.FaultRun():
		return errors.New("--baseline direct compares fault-free runs: the direct sender does not heal lost transactions or reorgs")
	case c.Rate < 0 || c.BacklogFinished < 0 || c.SignerLatency < 0:
		return errors.New("--rate, --backlog-finished and --signer-latency must not be negative")
	case c.Ledger != WalletLedgerSim && c.Ledger != WalletLedgerEVM:
		return fmt.Errorf("--ledger %q: want sim or evm", c.Ledger)
	case c.Ledger == WalletLedgerEVM && c.LedgerURL == "" && len(c.Chains) == 0:
		return errors.New("--ledger evm needs --ledger-url (the node's JSON-RPC, for example http://127.0.0.1:8545) or --chain")
	case c.Ledger == WalletLedgerEVM && !c.FundFromDevAccount:
		return errors.New("--ledger evm needs a funder for the fresh wallets: --fund-from-dev-account (geth --dev)")
	case c.Ledger == WalletLedgerSim && c.FundFromDevAccount:
		return errors.New("--fund-from-dev-account is for --ledger evm; the simulated chain funds the wallets at genesis")
	case c.Sim.BlockPeriod <= 0:
		return errors.New("--block-period must be positive")
	case c.Sim.TransientRate < 0 || c.Sim.TransientRate >= 1 || c.Sim.LostResponseRate < 0 || c.Sim.LostResponseRate >= 1:
		return errors.New("--chain-transient-rate and --chain-lost-response-rate must be in [0, 1)")
	case c.Sim.LostTxRate < 0 || c.Sim.LostTxRate >= 1 || c.Sim.ReorgRate < 0 || c.Sim.ReorgRate >= 1 || c.Sim.ReorgDropRate < 0 || c.Sim.ReorgDropRate > 1:
		return errors.New("--chain-lost-tx-rate and --chain-reorg-rate must be in [0, 1), --chain-reorg-drop-rate in [0, 1]")
	case c.Sim.ReorgDepth < 0:
		return errors.New("--chain-reorg-depth must not be negative")
	case c.FundWei == nil || c.FundWei.Sign() <= 0 || c.Value == nil || c.Value.Sign() < 0:
		return errors.New("the funding must be positive and the value not negative")
	case c.Grace < 0:
		return errors.New("--grace must not be negative")
	case c.ProgressInterval <= 0:
		return errors.New("--progress-interval must be positive")
	case !c.Node.Loops.Submitter || !c.Node.Loops.Monitor:
		return errors.New("the bench runs the wallet lane's roles: submitter and monitor")
	}
	return c.validateChains()
}

// WalletReport is the outcome of a run. Counts and times come from the run's
// rows in ledgerq.wallet_tasks and ledgerq.tx_attempts, read at the end.
type WalletReport struct {
	Config WalletConfig
	Prefix string
	// ChainID is the first chain's; Chains are every chain's part, in
	// --chain's order (one for a run on one chain).
	ChainID int64
	Chains  []ChainResult
	// Wallets are the run's addresses, in wallet order.
	Wallets []common.Address
	Planned int
	// Enqueued counts the tasks stored.
	Enqueued int
	// By final status; Waiting and Executing are unfinished.
	Done, Error, Waiting, Executing, Reverted int
	// Attempts counts every transaction signed.
	Attempts int

	// FundTime is how long funding the wallets took (evm), before the clock.
	FundTime time.Duration
	// EnqueueTime runs from the first TaskInsert call to the end of the
	// last; EnqueueRate is Enqueued / EnqueueTime.
	EnqueueTime time.Duration
	EnqueueRate float64
	// EnqueueP50, EnqueueP99 and EnqueueMax are one enqueue's time, the
	// call (TaskInsert, a POST, or a transaction around send_tx) from its
	// start to its answer.
	EnqueueP50, EnqueueP99, EnqueueMax time.Duration
	// ProcessCPU is this process's CPU time (user and system) from the
	// first enqueue to the lane's stop: ledgerq's loops, the enqueue (the
	// API's handlers in WalletModeHTTP), signing, the simulated chain and
	// the progress queries; not the database server's. 0: not measured.
	ProcessCPU time.Duration
	// EndToEnd runs from the first created_at to the last finished_at;
	// ConfirmRate is Done / EndToEnd.
	EndToEnd    time.Duration
	ConfirmRate float64
	// Latency of done tasks, created_at to finished_at.
	P50, P99, Max time.Duration
	Wall          time.Duration
	// Requests counts the POST send-tx requests of WalletModeHTTP.
	Requests int
	// ProgressLoad is the bench's own load on the database while the lane
	// ran: its progress line's counts.
	ProgressLoad

	// MinedTime runs from the first enqueue to when the block of the last
	// done task's transaction was first seen (blockClock); MinedRate is
	// Done / MinedTime: the chain's measure, the same as the direct
	// sender's. MinedP50, MinedP99 and MinedMax run from each done task's
	// created_at to when its transaction's block was first seen.
	MinedTime                    time.Duration
	MinedRate                    float64
	MinedP50, MinedP99, MinedMax time.Duration
	// Direct is the direct sender's part (--baseline direct), nil without.
	Direct *DirectReport
	// ChainCalls lists the lane's calls to the chain by method, with their
	// mean time; ChainCallCount is their sum.
	ChainCalls     string
	ChainCallCount int

	// Fault figures, summed over the wallets (CheckWalletOnChain): gas
	// bumps and replacements of the tasks, no-ops signed and mined, nonce
	// resets; and, on the in-process simulated chain, the faults it made.
	Bumps, Replacements, Noops, NoopsMined, Resets int
	ChainFaults                                    *evmsim.Stats

	// Problems are the failed checks, empty when every task is done, each
	// wallet has exactly one confirmed attempt per nonce 0…M-1 (and the
	// chain's nonce is M), and the chain agrees (CheckWalletOnChain). In a
	// fault run (FaultRun) a task may end in error with a reason, and no-ops
	// may take nonces.
	Problems []string

	Interrupted, TimedOut bool
}

// FaultRun reports whether the simulated chain loses transactions or
// reorgs: faults the wallet lane heals with no-ops, bumps, replacements
// and resets, so that a task may end in error and the chain's nonce may pass
// the task count.
func (c *WalletConfig) FaultRun() bool {
	return c.Ledger == WalletLedgerSim && (c.Sim.LostTxRate > 0 || c.Sim.ReorgRate > 0)
}

// RunWallets runs the workload and reports. The error wraps ErrWalletCheck
// when a task did not end done or a check failed; the report comes with it.
func RunWallets(ctx context.Context, cfg WalletConfig) (*WalletReport, error) {
	prepare(&cfg.Progress, &cfg.Node)
	conns := 4 + cfg.Node.Wallet.Shards.Workers
	if cfg.Mode == WalletModeHTTP {
		// The API's requests use the node's pool, as in serve.
		conns += cfg.IngestWorkers
	}
	cfg.Node.DBMinConns = max(cfg.Node.DBMinConns, conns)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return execute(ctx, &walletRun{cfg: cfg})
}

type walletRun struct {
	cfg    WalletConfig
	prefix string
	// chains are the run's chains; walletChain is each wallet's.
	chains      []*runChain
	walletChain []*runChain
	wallets     []keystore.Wallet
	loadTarget
	fund time.Duration

	enqueued atomic.Int64

	// directKeys are the direct sender's (--baseline direct), funded with
	// the wallets.
	directKeys  []*ecdsa.PrivateKey
	directAddrs []ledger.Address
	// api is WalletModeHTTP's server and clients.
	api *walletIntake
	// sql is WalletModeSQL's pool.
	sql *sqlIntake
	// enqueueTimes are the enqueue calls' durations.
	enqueueTimes latencies
	// start is when the first task was offered.
	start time.Time
	// counts are the lane's calls to its chains.
	counts *callCounts
	// load is the progress line's statements (from the await loop only).
	load ProgressLoad
}

func (r *walletRun) close() {
	for _, ch := range r.chains {
		ch.close()
	}
	if r.api != nil {
		r.api.close()
	}
	if r.sql != nil {
		r.sql.close()
	}
	r.loadTarget.close()
}

// open makes the wallets, the chain (funding them), the node and the ingest
// pool.
func (r *walletRun) open(ctx context.Context) error {
	c := &r.cfg
	r.prefix = runPrefix("bw")

	signers := make([]*keystore.KeySigner, c.Wallets)
	addrs := make([]ledger.Address, c.Wallets)
	for i := range signers {
		key, err := crypto.GenerateKey()
		if err != nil {
			return fmt.Errorf("generating wallet key: %w", err)
		}
		if signers[i], err = keystore.NewKeySigner(key); err != nil {
			return err
		}
		addrs[i] = signers[i].Address()
	}
	if c.Baseline == BaselineDirect {
		var err error
		if r.directKeys, r.directAddrs, err = directKeys(c.Wallets); err != nil {
			return err
		}
		addrs = append(addrs, r.directAddrs...)
	}

	r.counts = newCallCounts()
	if c.Ledger == WalletLedgerSim {
		sc := c.Sim
		sc.Alloc = node.FundAlloc(c.FundWei, addrs...)
		sim := evmsim.New(sc)
		ch := &runChain{name: "sim", ledger: sim, lane: newCountingLedger(sim, r.counts)}
		r.chains = append(r.chains, ch)
		var err error
		if ch.id, err = node.ReadChainID(ctx, sim, c.Node.Wallet.Lane.LedgerTimeout); err != nil {
			return err
		}
	} else {
		for _, spec := range c.specs() {
			ch, err := r.openEVMChain(ctx, spec)
			if err != nil {
				return err
			}
			r.chains = append(r.chains, ch)
		}
	}

	// The wallets are spread over the chains in turn.
	r.wallets = make([]keystore.Wallet, c.Wallets)
	r.walletChain = make([]*runChain, c.Wallets)
	for i, s := range signers {
		ch := r.chains[i%len(r.chains)]
		ch.wallets = append(ch.wallets, i)
		r.walletChain[i] = ch
		var signer keystore.Signer = s
		if c.SignerLatency > 0 {
			signer = &slowSigner{Signer: s, latency: c.SignerLatency}
		}
		r.wallets[i] = keystore.Wallet{ID: fmt.Sprintf("%s%d", r.prefix, i), ChainID: ch.id, Signer: signer}
	}
	reg, err := keystore.NewRegistry(r.wallets...)
	if err != nil {
		return err
	}
	if c.Ledger == WalletLedgerEVM {
		began := time.Now()
		for k, ch := range r.chains {
			var to []ledger.Address
			for _, i := range ch.wallets {
				to = append(to, addrs[i])
			}
			if k == 0 {
				to = append(to, r.directAddrs...)
			}
			if err := fundFromDev(ctx, ch.nodes[0], to, c.FundWei); err != nil {
				return fmt.Errorf("chain %s: %w", ch.name, err)
			}
		}
		r.fund = time.Since(began)
		fmt.Fprintf(c.Progress, "bench: funded %d wallets from the node's developer account in %s\n", len(addrs), round(r.fund))
	}

	nc := c.Node
	nc.Wallet.Registry = reg
	nc.Wallet.Ledger.Kind = c.Ledger
	nc.Wallet.Ledger.URL = c.LedgerURL
	// The lane reaches a chain through the node layer over its nodes, as
	// serve does; the direct sender and the chain-side checks call the
	// chain's first node as it is.
	if c.Ledger != WalletLedgerSim {
		for _, ch := range r.chains {
			if err := ch.openLane(c.Node.Wallet.Lane.LedgerTimeout, r.counts); err != nil {
				return err
			}
		}
	}
	if len(c.Chains) > 0 {
		nc.Wallet.Ledger.URL = ""
		for _, ch := range r.chains {
			nc.Wallet.Chains = append(nc.Wallet.Chains, ch.decl())
		}
	} else {
		nc.Wallet.Ledger.Instance = r.chains[0].lane
	}
	if r.node, err = node.Open(ctx, nc); err != nil {
		return err
	}
	if c.BacklogFinished > 0 {
		began := time.Now()
		seedCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
		_, err := r.node.Store().TaskSeedFinished(seedCtx, store.TaskSeedFinishedParams{
			ChainID: r.chains[0].id, Prefix: "backlog-" + r.prefix, N: c.BacklogFinished, At: time.Now().Add(-time.Hour),
		})
		cancel()
		if err != nil {
			return err
		}
		fmt.Fprintf(c.Progress, "bench: seeded %d finished tasks in %s\n", c.BacklogFinished, round(time.Since(began)))
	}
	if c.Mode == WalletModeHTTP {
		if r.api, err = newWalletIntake(ctx, r.node, r.wallets, c); err != nil {
			return err
		}
		fmt.Fprintf(c.Progress, "bench: serving the API at %s\n", r.api.url)
		return warm(ctx, r.node.Store().Conns(), c.IngestWorkers)
	}
	if c.Mode == WalletModeSQL {
		// node.Open wrote the run's wallets to the wallet directory.
		r.sql, err = newSQLIntake(ctx, c.Node.DatabaseURL, c.IngestWorkers, r.wallets, c)
		return err
	}
	return r.openIngest(ctx, c.Node.DatabaseURL, c.IngestWorkers)
}

// fundFromDev sends wei to every address from the developer account of
// geth --dev at url and waits until every funding transaction is mined
// (fundFromDevAccount, as the builder bench's geth baseline funds).
func fundFromDev(ctx context.Context, url string, addrs []ledger.Address, wei *big.Int) error {
	cl, err := ethclient.DialContext(ctx, url)
	if err != nil {
		return fmt.Errorf("funding: dialing %s: %w", node.RedactURL(url), err)
	}
	defer cl.Close()
	to := make([]common.Address, len(addrs))
	for i, a := range addrs {
		to[i] = common.Address(a)
	}
	return fundFromDevAccount(ctx, cl, to, wei)
}

func (r *walletRun) run(ctx context.Context) (*WalletReport, error) {
	c := &r.cfg
	rep := &WalletReport{Config: *c, Prefix: r.prefix, ChainID: r.chains[0].id, Planned: c.Wallets * c.TasksPerWallet, FundTime: r.fund}
	for _, w := range r.wallets {
		rep.Wallets = append(rep.Wallets, common.Address(w.Address()))
	}
	rep.Config.Progress, rep.Config.Node.Logger, rep.Config.Node.Wallet.Registry, rep.Config.Node.Wallet.Ledger.Instance = nil, nil, nil, nil

	for _, ch := range r.chains {
		ch.blocks = watchBlocks(ctx, ch.ledger, c.Node.Wallet.Lane.LedgerTimeout)
	}
	if c.Baseline == BaselineDirect {
		// The direct sender goes first: it needs no database, so the lane's
		// loops are not yet running beside it, and the lane then starts on
		// a chain whose pool the direct sender left empty.
		fmt.Fprintf(c.Progress, "bench: direct sender: %d keys x %d transfers\n", c.Wallets, c.TasksPerWallet)
		d, err := r.runDirect(ctx)
		if err != nil {
			return nil, err
		}
		rep.Direct = d
		fmt.Fprintf(c.Progress, "bench: direct sender: %d mined in %s, %.0f/s; now the lane\n", d.Sent, round(d.MinedTime), d.MinedRate)
	}

	r.counts.reset()
	if err := startNode(ctx, r.node); err != nil {
		return nil, err
	}
	stopNode := sync.OnceFunc(r.node.Stop)
	defer stopNode()

	cpu0, cpuOK := processCPU()
	start := time.Now()
	in := startIngestion(func() error { return r.ingestAll(ctx, start) })

	ticker := time.NewTicker(c.ProgressInterval)
	defer ticker.Stop()
	rep.Interrupted, rep.TimedOut = in.await(ctx, ticker.C, c.Grace, func(ingestOver bool) bool {
		done, _ := r.progress(ctx, start, ingestOver)
		return done
	})
	stopNode()
	rep.Wall = time.Since(start)
	if cpu1, ok := processCPU(); ok && cpuOK {
		rep.ProcessCPU = cpu1 - cpu0
	}
	rep.ChainCalls, rep.ChainCallCount = r.counts.summary()
	rep.ProgressLoad = r.load
	rep.EnqueueTime = in.end.Sub(start)
	if r.api != nil {
		rep.Requests = int(r.api.requests.Load())
	}
	r.start = start

	if err := summarizeAfter(ctx, 5*time.Minute, rep, r.summarize); err != nil {
		return nil, errors.Join(in.err, err)
	}
	return rep, in.verdict(rep.Problems, ErrWalletCheck)
}

// ingestAll stores the tasks, round-robin over the wallets, with
// IngestWorkers goroutines, one TaskInsert (one transaction) per task, or
// in WalletModeHTTP one POST send-tx per task, in WalletModeSQL one
// transaction around ledgerq.send_tx per task; with Rate, the i-th task is
// offered at start + i/Rate.
func (r *walletRun) ingestAll(ctx context.Context, start time.Time) error {
	c := &r.cfg
	always := func() bool { return true }
	return inParallel(ctx, c.IngestWorkers, c.Wallets*c.TasksPerWallet, 1, "enqueue", always, func(i int) error {
		if c.Rate > 0 {
			at := start.Add(time.Duration(float64(i) / c.Rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(d):
				}
			}
		}
		w := r.wallets[i%c.Wallets]
		began := time.Now()
		var err error
		switch {
		case r.api != nil:
			err = r.api.post(ctx, w.ID, i)
		case r.sql != nil:
			callCtx, cancel := context.WithTimeout(ctx, c.Node.Loops.DBTimeout)
			_, err = r.sql.send(callCtx, w.ID, i)
			cancel()
		default:
			callCtx, cancel := context.WithTimeout(ctx, c.Node.Loops.DBTimeout)
			_, _, err = r.ingest.TaskInsert(callCtx, store.TaskInsertParams{
				Now: c.Node.Clock.Now(), Wallet: w.ID, ChainID: w.ChainID, Sender: w.Address().Hex(),
				Request: store.TaskRequest{To: benchRecipient.Hex(), Value: c.Value},
			})
			cancel()
		}
		if err == nil {
			r.enqueueTimes.add(time.Since(began))
			r.enqueued.Add(1)
		}
		return err
	})
}

// tasks lists every task of a wallet, a page at a time.
func (r *walletRun) tasks(ctx context.Context, walletID string) ([]store.Task, error) {
	var tasks []store.Task
	after := ""
	for {
		page, err := r.node.Store().TaskList(ctx, store.TaskListParams{Wallet: walletID, After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, page...)
		if len(page) < 1000 {
			return tasks, nil
		}
		after = page[len(page)-1].ID
	}
}

// progress writes one line and reports whether ingest is over and no task
// is waiting or executing. The counts are one statement
// (TaskCountByStatus), timed as the bench's own load on the database.
func (r *walletRun) progress(ctx context.Context, start time.Time, ingestOver bool) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Node.Loops.DBTimeout)
	defer cancel()
	enq := int(r.enqueued.Load())
	names := make([]string, len(r.wallets))
	for i, w := range r.wallets {
		names[i] = w.ID
	}
	asked := time.Now()
	counts, err := r.node.Store().TaskCountByStatus(ctx, names)
	r.load.count(asked)
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(r.cfg.Progress, "bench: counting tasks: %v\n", err)
		}
		return false, err
	}
	open := counts[store.TaskWaiting] + counts[store.TaskExecuting]
	fmt.Fprintf(r.cfg.Progress, "bench: %6.1fs  enqueued %d/%d  waiting %d  executing %d  done %d  error %d\n",
		time.Since(start).Seconds(), enq, r.cfg.Wallets*r.cfg.TasksPerWallet,
		counts[store.TaskWaiting], counts[store.TaskExecuting], counts[store.TaskDone], counts[store.TaskError])
	return ingestOver && open == 0, nil
}

// summarize reads the run's tasks and attempts, fills the counts and
// latencies, and checks every wallet's nonces.
func (r *walletRun) summarize(ctx context.Context, rep *WalletReport) error {
	st := r.node.Store()
	m := r.cfg.TasksPerWallet
	var (
		lat           []time.Duration
		first, last   time.Time
		problem       = func(f string, a ...any) { rep.Problems = append(rep.Problems, fmt.Sprintf(f, a...)) }
		maxedProblems = 20
		faults        = r.cfg.FaultRun()
		// The done tasks' hashes and creation times, by chain.
		doneHashes  = map[*runChain][]common.Hash{}
		doneCreated = map[*runChain][]time.Time{}
	)
	for wi, w := range r.wallets {
		ch := r.walletChain[wi]
		tasks, err := r.tasks(ctx, w.ID)
		if err != nil {
			return err
		}
		rep.Enqueued += len(tasks)
		confirmed := map[int64][]string{} // nonce -> hashes of confirmed attempts
		for _, t := range tasks {
			switch t.Status {
			case store.TaskDone:
				rep.Done++
				if t.Reverted {
					rep.Reverted++
				}
			case store.TaskError:
				rep.Error++
				if !faults {
					problem("wallet %s: task %s ended in error: %s", w.ID, t.ID, t.Error)
				}
			case store.TaskWaiting:
				rep.Waiting++
				problem("wallet %s: task %s still waiting", w.ID, t.ID)
			case store.TaskExecuting:
				rep.Executing++
				problem("wallet %s: task %s still executing", w.ID, t.ID)
			}
			if first.IsZero() || t.CreatedAt.Before(first) {
				first = t.CreatedAt
			}
			if t.Status == store.TaskDone {
				doneHashes[ch] = append(doneHashes[ch], common.HexToHash(t.TxHash))
				doneCreated[ch] = append(doneCreated[ch], t.CreatedAt)
			}
			if t.Status == store.TaskDone && t.FinishedAt != nil {
				lat = append(lat, t.FinishedAt.Sub(t.CreatedAt))
				if t.FinishedAt.After(last) {
					last = *t.FinishedAt
				}
			}
			atts, err := st.AttemptListByTask(ctx, t.ID)
			if err != nil {
				return err
			}
			rep.Attempts += len(atts)
			var mine []string
			for _, a := range atts {
				if a.State == store.AttemptConfirmed {
					confirmed[a.Nonce] = append(confirmed[a.Nonce], a.TxHash)
					mine = append(mine, a.TxHash)
				}
			}
			switch {
			case t.Status == store.TaskDone && len(mine) != 1:
				problem("wallet %s: done task %s has %d confirmed attempts, want 1", w.ID, t.ID, len(mine))
			case t.Status == store.TaskDone && !strings.EqualFold(mine[0], t.TxHash):
				problem("wallet %s: done task %s has tx hash %s but its confirmed attempt is %s", w.ID, t.ID, t.TxHash, mine[0])
			}
		}
		if len(tasks) != m {
			problem("wallet %s: %d tasks stored, want %d", w.ID, len(tasks), m)
		}
		// Each wallet is checked on its own chain's blocks.
		chk, err := CheckWalletOnChain(ctx, ch.ledger, st, ch.id, common.Address(w.Address()), tasks, r.cfg.Node.Wallet.Lane.LedgerTimeout)
		if err != nil {
			problem("wallet %s: checking the chain: %v", w.ID, err)
		}
		for _, p := range chk.Problems {
			problem("wallet %s: on the chain: %s", w.ID, p)
		}
		rep.Bumps += chk.Bumps
		rep.Replacements += chk.Replacements
		rep.Noops += chk.Noops
		rep.NoopsMined += chk.NoopsMined
		rep.Resets += chk.Resets
		if faults {
			continue // no-ops may take nonces: the chain check is the nonce check
		}
		// One confirmed transaction per nonce, contiguous from 0 (fresh keys).
		for nonce, hs := range confirmed {
			if nonce < 0 || nonce >= int64(m) {
				problem("wallet %s: confirmed attempt at nonce %d, outside 0..%d", w.ID, nonce, m-1)
			} else if len(hs) != 1 {
				problem("wallet %s: nonce %d confirmed %d times (%v)", w.ID, nonce, len(hs), hs)
			}
		}
		for nonce := int64(0); nonce < int64(m); nonce++ {
			if len(confirmed[nonce]) == 0 {
				problem("wallet %s: no confirmed transaction at nonce %d", w.ID, nonce)
			}
		}
		callCtx, cancel := context.WithTimeout(ctx, r.cfg.Node.Wallet.Lane.LedgerTimeout)
		chainNonce, err := ch.ledger.NonceAt(callCtx, w.Address())
		cancel()
		switch {
		case err != nil:
			problem("wallet %s: reading its nonce from the chain: %v", w.ID, err)
		case chainNonce != uint64(m):
			problem("wallet %s: the chain's nonce is %d, want %d", w.ID, chainNonce, m)
		}
	}
	var (
		lastMined   time.Time
		mlat        []time.Duration
		minedFailed bool
	)
	for _, ch := range r.chains {
		res := ChainResult{Name: ch.name, ChainID: ch.id, Nodes: len(ch.nodes), Wallets: len(ch.wallets), Done: len(doneHashes[ch])}
		// A fault run's reorgs move transactions between blocks; the block
		// clock keeps a number's first sighting, so its figures are left out.
		if res.Done > 0 && !faults {
			at, chainLat, err := ch.minedOn(ctx, r.start, doneHashes[ch], doneCreated[ch], r.cfg.Node.Wallet.Lane.LedgerTimeout, &res)
			if err != nil {
				problem("reading when the done tasks were mined: %v", err)
				minedFailed = true
			}
			lastMined = maxTime(lastMined, at)
			mlat = append(mlat, chainLat...)
		}
		rep.Chains = append(rep.Chains, res)
	}
	if len(mlat) > 0 && !minedFailed {
		rep.MinedTime = lastMined.Sub(r.start)
		rep.MinedRate = float64(len(mlat)) / rep.MinedTime.Seconds()
		rep.MinedP50, rep.MinedP99, rep.MinedMax = percentiles(mlat)
	}
	if sim, ok := r.chains[0].ledger.(*evmsim.Ledger); ok {
		stats := sim.Stats()
		rep.ChainFaults = &stats
	}
	if len(rep.Problems) > maxedProblems {
		n := len(rep.Problems)
		rep.Problems = append(rep.Problems[:maxedProblems], fmt.Sprintf("… and %d more", n-maxedProblems))
	}
	if rep.EnqueueTime > 0 {
		rep.EnqueueRate = float64(rep.Enqueued) / rep.EnqueueTime.Seconds()
	}
	rep.EnqueueP50, rep.EnqueueP99, rep.EnqueueMax = r.enqueueTimes.quantiles()
	if len(lat) > 0 {
		rep.P50, rep.P99, rep.Max = percentiles(lat)
		rep.EndToEnd = last.Sub(first)
		if rep.EndToEnd > 0 {
			rep.ConfirmRate = float64(rep.Done) / rep.EndToEnd.Seconds()
		}
	}
	return nil
}

// WriteSummary prints the configuration and the results.
func (rep *WalletReport) WriteSummary(w io.Writer) error {
	c := &rep.Config
	wc := &c.Node.Wallet
	status := "complete, every check passed"
	switch {
	case rep.Interrupted:
		status = "interrupted"
	case rep.TimedOut:
		status = "grace period ran out"
	case len(rep.Problems) > 0:
		status = "CHECKS FAILED"
	}
	chain := fmt.Sprintf("simulated EVM (in process), chain %d, block period %s, transient %g, lost responses %g, lost transactions %g, reorgs %g (depth %d, drop %g), latency %s, seed %d",
		rep.ChainID, c.Sim.BlockPeriod, c.Sim.TransientRate, c.Sim.LostResponseRate, c.Sim.LostTxRate, c.Sim.ReorgRate, max(c.Sim.ReorgDepth, 1), c.Sim.ReorgDropRate, c.Sim.Latency, c.Sim.Seed)
	if c.Ledger == WalletLedgerEVM {
		chain = fmt.Sprintf("evm at %s, chain %d; wallets funded from the developer account in %s", node.RedactURL(c.LedgerURL), rep.ChainID, round(rep.FundTime))
		if len(c.Chains) > 0 {
			chain = fmt.Sprintf("evm, %d chains, each behind its nodes (the node layer), the wallets spread over them in turn; each chain's wallets funded from its developer account, in %s together", len(c.Chains), round(rep.FundTime))
		}
	}
	chainsConfig, chainsResults := chainsLines(rep)
	lines := []string{
		"ledgerq bench wallets: " + status,
		"configuration",
		fmt.Sprintf("  database          %s", node.RedactURL(c.Node.DatabaseURL)),
		fmt.Sprintf("  workload          %d wallets x %d tasks = %d send-tx tasks (wallets %s*, fresh keys)", c.Wallets, c.TasksPerWallet, rep.Planned, rep.Prefix),
		fmt.Sprintf("  enqueue           %s; grace %s", enqueueHow(c), c.Grace),
		fmt.Sprintf("  chain             %s", chain),
	}
	lines = append(lines, chainsConfig...)
	lines = append(lines,
		fmt.Sprintf("  wallet lane       %d shard workers, quantum %s, lease %s; in flight %d, follow interval %s, queue %s",
			wc.Shards.Workers, wc.Shards.Quantum, wc.Shards.Lease, wc.Lane.InFlight, wc.Lane.FollowInterval, wc.Lane.QueueType),
		fmt.Sprintf("  signer            %s", signerHow(c)),
		"results",
		fmt.Sprintf("  tasks             %d enqueued of %d; %d done (%d reverted), %d error, %d waiting, %d executing; %d transactions signed",
			rep.Enqueued, rep.Planned, rep.Done, rep.Reverted, rep.Error, rep.Waiting, rep.Executing, rep.Attempts),
		fmt.Sprintf("  enqueue           %.0f tasks/s (%d in %s%s)", rep.EnqueueRate, rep.Enqueued, round(rep.EnqueueTime), requests(rep.Requests)),
		fmt.Sprintf("  latency           one enqueue: p50 %s, p99 %s, max %s", rep.EnqueueP50.Round(10*time.Microsecond), rep.EnqueueP99.Round(10*time.Microsecond), rep.EnqueueMax.Round(10*time.Microsecond)),
		fmt.Sprintf("  confirmed         %.1f tasks/s (%d from first enqueue to last done in %s)", rep.ConfirmRate, rep.Done, round(rep.EndToEnd)),
		fmt.Sprintf("  mined             %.1f tasks/s (%d from first enqueue to the last one's block seen in %s)", rep.MinedRate, rep.Done, round(rep.MinedTime)),
	)
	lines = append(lines, chainsResults...)
	lines = append(lines,
		fmt.Sprintf("  latency           enqueue to done: p50 %s, p99 %s, max %s", round(rep.P50), round(rep.P99), round(rep.Max)),
		cpuLine(rep),
		fmt.Sprintf("  latency           enqueue to mined (block seen): p50 %s, p99 %s, max %s", round(rep.MinedP50), round(rep.MinedP99), round(rep.MinedMax)),
		fmt.Sprintf("  wall              %s", round(rep.Wall)),
		rep.ProgressLoad.line("TaskCountByStatus"),
		fmt.Sprintf("  keeping moving    %d gas bumps, %d replacements, %d no-ops signed (%d mined), %d nonce resets",
			rep.Bumps, rep.Replacements, rep.Noops, rep.NoopsMined, rep.Resets),
	)
	if rep.Enqueued > 0 {
		lines = append(lines, fmt.Sprintf("  chain calls       %.2f per task: %s", float64(rep.ChainCallCount)/float64(rep.Enqueued), rep.ChainCalls))
	}
	if c.BacklogFinished > 0 {
		lines = append(lines, fmt.Sprintf("  backlog           %d finished tasks seeded before the run (other senders, same chain)", c.BacklogFinished))
	}
	if d := rep.Direct; d != nil {
		ratio := 0.0
		if d.MinedRate > 0 {
			ratio = rep.MinedRate / d.MinedRate
		}
		lines = append(lines,
			fmt.Sprintf("  direct sender     %d keys x %d transfers, no database, nonces in memory, run first: sent in %s, %d mined in %s: %.1f tx/s; send to mined p50 %s, p99 %s",
				d.Keys, d.TxsPerKey, round(d.SendTime), d.Sent, round(d.MinedTime), d.MinedRate, round(d.MinedP50), round(d.MinedP99)),
			fmt.Sprintf("  ledgerq / direct  %.2f x (mined/s, first send or enqueue to the last block seen, both sides)", ratio))
	}
	if f := rep.ChainFaults; f != nil {
		lines = append(lines, fmt.Sprintf("  chain faults      %d transient, %d lost responses, %d lost transactions, %d reorgs (%d blocks, %d transactions un-mined, %d dropped)",
			f.Transient, f.LostResponses, f.LostTxs, f.Reorgs, f.ReorgedBlocks, f.Unmined, f.Dropped))
	}
	switch {
	case len(rep.Problems) == 0 && c.FaultRun():
		lines = append(lines, "  checks            every task done or error with a reason; on the chain per wallet nonces contiguous from 0, each one mined transaction of ours, one per done task, none for error tasks")
	case len(rep.Problems) == 0:
		lines = append(lines, "  checks            every task done; per wallet one confirmed transaction per nonce, contiguous from 0; chain nonce = tasks per wallet; the chain agrees")
	default:
		lines = append(lines, "  checks            FAILED:")
		for _, p := range rep.Problems {
			lines = append(lines, "    "+p)
		}
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// enqueueHow says how the tasks reached the lane.
func enqueueHow(c *WalletConfig) string {
	how := fmt.Sprintf("%d workers, one TaskInsert per task", c.IngestWorkers)
	switch c.Mode {
	case WalletModeHTTP:
		how = fmt.Sprintf("%d HTTP clients, one POST send-tx per task (task=true, an Idempotency-Key each)", c.IngestWorkers)
	case WalletModeSQL:
		how = fmt.Sprintf("%d connections, one transaction per task: BEGIN; SELECT ledgerq.send_tx(…, idempotency_key) by client.EnqueueTx; COMMIT", c.IngestWorkers)
	}
	if c.Rate > 0 {
		how += fmt.Sprintf(", offered at %g/s", c.Rate)
	}
	return how
}

func requests(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d requests", n)
}

// slowSigner is a key behind a signer outside the process: each signature
// waits its latency first (while ctx allows), as an HSM's, a KMS's or a
// remote signer's round trip does, and its backend is not the keystore's,
// so the lane takes the write-ahead across signers for it.
type slowSigner struct {
	keystore.Signer
	latency time.Duration
}

func (s *slowSigner) SignTx(ctx context.Context, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Signer.SignTx(ctx, tx, chainID)
}

// Backend names the signer for the lane's metrics (keystore.BackendOf).
func (s *slowSigner) Backend() string { return "bench-latency" }

// signerHow says where the wallets' keys sign.
func signerHow(c *WalletConfig) string {
	if c.SignerLatency > 0 {
		return fmt.Sprintf("outside the process, %s a signature (--signer-latency; the write-ahead across signers on)", c.SignerLatency)
	}
	return "keys in process"
}

// cpuLine says the process's CPU per done task: the upper bound of
// ledgerq's own, since the enqueue, the signing and (on --ledger sim) the
// chain run in the process too.
func cpuLine(rep *WalletReport) string {
	if rep.ProcessCPU <= 0 || rep.Done == 0 {
		return "  cpu               not measured on this system"
	}
	ms := float64(rep.ProcessCPU) / float64(time.Millisecond) / float64(rep.Done)
	return fmt.Sprintf("  cpu               %.3f ms per task: this process, user+system %s over the run (ledgerq's loops, the enqueue, signing, the progress queries and, on --ledger sim, the chain; not the database server)",
		ms, round(rep.ProcessCPU))
}
