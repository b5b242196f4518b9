package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/ledgerq/ledgerq/internal/bench"
)

const benchUsage = `Usage: ledgerq bench <workload> [flags]

Generate load against ledgerq and report throughput and latency.

Workloads:
  batches   the batch lane: ingest workers store signed Sawtooth batches while the
            real queuer, submitter and monitor send them to the in-process
            simulated ledger; reports ingest/s, committed/s and latency
            (--mode e2e, preload or http)
  wallets   the wallet lane: fresh funded wallets x send-tx tasks enqueued while
            the shard workers sign, send and confirm them on the in-process
            simulated EVM chain (--ledger sim) or a real node (--ledger evm);
            reports enqueued/s, confirmed/s and latency, and checks the nonces
  builder   the builder lane: senders x transactions sent with go-ethereum's ethclient
            to POST /rpc while the bundler, submitter and monitor cut, submit and
            follow bundles on an in-process simulated JAM chain; reports tx/s
            accepted, bundles/s finalized, latency, and checks the chain's log
  churn     every lane at once: a serve process and simulated ledgers as processes
            of their own, a steady load through serve's HTTP API; reports serve's
            resident memory and the lanes' finished work every --interval

Run 'ledgerq bench <workload> --help' for its flags. Point --database-url at a
database of its own: the run adds its batches to ledgerq.batches and leaves them.
`

// runBench dispatches 'ledgerq bench <workload>'.
func runBench(ctx context.Context, args []string) error {
	return subcommand("ledgerq bench", "workload", benchUsage, args, os.Stdout, os.Stderr, map[string]func([]string) error{
		"batches": func(args []string) error { return runBenchBatches(ctx, args) },
		"wallets": func(args []string) error { return runBenchWallets(ctx, args) },
		"builder": func(args []string) error { return runBenchBuilder(ctx, args) },
		"churn":   func(args []string) error { return runBenchChurn(ctx, args) },
	})
}

// summarized prints a run's report to stdout, when the run got as far as
// one (a failed run's figures are worth reading too), and returns the run's
// error.
func summarized[T any, R interface {
	*T
	WriteSummary(w io.Writer) error
}](rep R, err error) error {
	if rep != nil {
		if werr := rep.WriteSummary(os.Stdout); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}

const benchBatchesSummary = `Load the batch lane and measure it. The run migrates the database, signs
services x batches-per-service Sawtooth batches (before the clock starts), then runs
the queuer, submitter(s) and monitor as 'serve' does — woken by LISTEN/NOTIFY — against
the in-process simulated ledger, while --ingest-workers store the batches with the
API's store path (BatchInsert, --insert-size per transaction). It prints a progress
line a second to stderr, stops ingesting after --duration (or when every batch is in),
waits up to --grace for every inserted batch to reach a final status, and prints a
summary to stdout: ingest/s, committed/s from first insert to last commit, and the
p50/p99/max latency from received_at to finished_at of the committed batches, read
from the database. It exits non-zero when a batch was left unfinished.

--mode chooses what is measured:
  e2e      (default) the above: batches stored while the loops run.
  preload  every batch is stored first with the loops stopped, then the loops start
           and the run is timed from their start to the last commit: processing from
           a backlog, as River's benchmark (river bench --num-total-jobs) measures it.
  http     the batches go through the real HTTP API, served on a loopback listener:
           --ingest-workers clients POST JSON arrays of --insert-size batches to
           /v1/batches (encoded before the clock starts), so JSON decoding and the
           API's signature checks are paid; reports intake/s and end to end.
  sql      the batches go through ledgerq.submit_batch, as an application submits
           them in its own transaction (docs/enqueue.md): --ingest-workers
           connections of the bench's own pool each run transactions of
           --insert-size calls (BEGIN; SELECT ledgerq.submit_batch(…) each; COMMIT);
           SQL cannot check signatures, so the submitter verifies each batch
           before sending it; reports intake/s and end to end.
--batch-sim-verify=false makes the simulated ledger skip its own signature checks (the
ledger's cost, paid on its own machines in production); the summary says which.
Unless --batch-first-check is given, the monitor first asks about a batch when the
simulated ledger commits it (--batch-sim-commit-delay), as a deployment sets it to its
ledger's commit time.

The lane is serial per service: at most one batch of a service is at the ledger, so
end-to-end throughput is about services / (time one batch takes through the lane).

Examples:
  ledgerq bench batches --services 1000 --batches-per-service 10 --batch-sim-commit-delay 0
  ledgerq bench batches --mode preload --services 1000 --batches-per-service 10 \
      --batch-sim-commit-delay 0 --batch-sim-verify=false
  ledgerq bench batches --mode http --ingest-workers 4 --insert-size 10
  ledgerq bench batches --mode sql --ingest-workers 4 --insert-size 10`

func runBenchBatches(ctx context.Context, args []string) error {
	cfg, cpuProfile, err := parseBenchBatches(args)
	if err != nil {
		return err
	}
	cfg.Progress = os.Stderr

	fmt.Fprintf(os.Stderr, "bench: signing %d batches on %d CPUs…\n", cfg.Services*cfg.BatchesPerService, runtime.GOMAXPROCS(0))
	w, err := bench.NewWorkload(ctx, cfg.Services, cfg.BatchesPerService)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: signed in %s; running\n", w.GenerateTime.Round(1e6))
	return profiled(cpuProfile, func() error { return summarized(bench.RunBatches(ctx, cfg, w)) })
}

// parseBenchBatches reads bench batches' flags (and environment) into a
// validated config, and the --cpuprofile file.
func parseBenchBatches(args []string) (bench.BatchConfig, string, error) {
	cfg := bench.DefaultBatchConfig()
	var cpuProfile string
	reg, err := parseNodeFlags("bench batches", benchBatchesSummary, &cfg.Node, flagParts{lane: "batch"}, args, "warn", func(fs *flag.FlagSet) {
		fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run (signing excluded) to this file, for go tool pprof")
		fs.StringVar((*string)(&cfg.Mode), "mode", string(cfg.Mode), "what to measure: e2e (store while the loops run), preload (store everything, then time the loops from start to last commit), http (post through the HTTP API while the loops run) or sql (a transaction per insert around ledgerq.submit_batch, from the bench's own pool, while the loops run; docs/enqueue.md)")
		fs.IntVar(&cfg.Services, "services", cfg.Services, "number of services (ordering keys); each has its own signing key")
		fs.IntVar(&cfg.BatchesPerService, "batches-per-service", cfg.BatchesPerService, "batches signed and inserted per service")
		fs.DurationVar(&cfg.Duration, "duration", 0, "stop ingesting after this long (0: when every batch is in)")
		fs.IntVar(&cfg.IngestWorkers, "ingest-workers", cfg.IngestWorkers, "concurrent ingest workers, each with its own connection (as concurrent API requests); in --mode http, concurrent HTTP clients")
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "offered load: ingest at this many batches/s (0: as fast as the workers can)")
		fs.IntVar(&cfg.BacklogFinished, "backlog-finished", cfg.BacklogFinished, "seed this many committed batches (600-byte payloads) before the run, as a long-running lane leaves behind")
		fs.IntVar(&cfg.InsertSize, "insert-size", cfg.InsertSize, "batches per BatchInsert call (one transaction, as one POST /v1/batches); in --mode http, batches per request; in --mode sql, ledgerq.submit_batch calls per transaction")
		fs.DurationVar(&cfg.Grace, "grace", cfg.Grace, "after ingest stops, how long to wait for every inserted batch to reach a final status")
		fs.DurationVar(&cfg.ProgressInterval, "progress-interval", cfg.ProgressInterval, "time between two progress lines (and completion checks)")
		fs.IntVar(&cfg.Node.Batch.Submitters, "submitters", cfg.Node.Batch.Submitters, "submitter loops run side by side (as several serve processes would)")
	})
	if err != nil {
		return cfg, "", err
	}
	if !reg.Given("batch-first-check") {
		cfg.Node.Batch.FirstCheck = cfg.Node.Batch.Ledger.Sim.CommitDelay
	}
	if err := cfg.Validate(); err != nil {
		return cfg, "", err
	}

	return cfg, cpuProfile, nil
}

const benchWalletsSummary = `Load the wallet lane and measure it. The run migrates the database, makes
--wallets fresh random keys, funds them (at genesis of the simulated chain, or with
--fund-from-dev-account from a geth --dev node's developer account), and runs the
wallet lane as 'serve' does — shard workers, rescuer and follower, woken by
LISTEN/NOTIFY; API off, batch lane idle — while --ingest-workers store
--tasks-per-wallet send-tx tasks per wallet (store.TaskInsert, one per task, as
one POST send-tx). It prints a progress line a second to stderr, waits up to
--grace for every task to end, and prints a summary to stdout: tasks/s enqueued,
tasks/s confirmed from the first enqueue to the last done, and the p50/p99/max
latency from created_at to finished_at, read from the database.

At the end it checks that every task is done, that every wallet has exactly one
confirmed transaction per nonce, contiguous from 0 (ledgerq.tx_attempts), and that
the chain's nonce of every wallet equals --tasks-per-wallet; and, reading the chain,
that every done task has exactly one mined transaction (its recorded hash) and every
nonce below the chain's is taken by one mined transaction of ours. It exits non-zero
when a task did not finish or a check failed.

"mined" is the chain's measure: a poller reads the chain's head every 20 ms, a
transaction is mined when its block was first seen, and mined/s runs from the
first enqueue to the last done task's block. --baseline direct first runs a
direct sender with no database on the same chain (fresh keys funded with the
wallets, --wallets x --tasks-per-wallet transfers like the tasks', each key
sending its nonces 0.. counted in memory, go-ethereum's ethclient on --ledger
evm, the simulated chain's own methods in process on --ledger sim, as the lane
reaches it), waits until all are mined, and prints its mined/s (first send to
the last block) beside the lane's, and the ratio. It runs first so that the
lane's loops are not running beside it and the lane starts on an empty pool.
--mode http posts the tasks through the real API instead of storing them;
--rate offers them at a fixed pace (for the enqueue-to-mined latency);
--backlog-finished N seeds N done tasks first.

--chain NAME=URL[,URL...] (repeatable, instead of --ledger-url) runs over several
chains, each behind its nodes: the wallets are spread over the chains in turn
(wallet i on chain i mod the number of chains), each chain's funded from its first
node's developer account; the lane reaches each chain through the node layer over
all of its nodes, as serve does for a chain declared with --wallet-chain, and each
wallet is checked on its own chain's blocks. The summary prints mined/s over all
the chains and on each. The chains need distinct chain ids (docs/benchmarking.md
says how to make several geth --dev chains); a chain id other than 1337 or 31337
waits 12 confirmations unless --wallet-confirmations says otherwise.

A fault run (--chain-lost-tx-rate or --chain-reorg-rate above 0) lets a task end in
error with a reason and no-ops take nonces; it reports the gas bumps, replacements,
no-ops and nonce resets (wallet_tasks, tx_attempts, wallet_health) and the chain's
faults. A lost transaction is healed by a gas bump once its nonce has stalled for the
wallet lane's stall timeout (5 minutes; no flag yet): give such a run a long --grace.

Examples:
  ledgerq bench wallets --wallets 20 --tasks-per-wallet 50
  ledgerq bench wallets --wallets 10 --tasks-per-wallet 200 --baseline direct
  ledgerq bench wallets --mode http --ingest-workers 16 --wallets 10 --tasks-per-wallet 1000
  ledgerq bench wallets --block-period 50ms --chain-transient-rate 0.05 --chain-lost-response-rate 0.05
  ledgerq bench wallets --wallets 3 --tasks-per-wallet 10 --chain-reorg-rate 0.1 --chain-reorg-depth 2 \
      --chain-lost-tx-rate 0.02 --chain-transient-rate 0.05 --chain-lost-response-rate 0.05 --grace 15m
  geth --dev --dev.period 1 --http --http.port 8545 &
  ledgerq bench wallets --wallets 5 --tasks-per-wallet 20 --ledger evm \
      --ledger-url http://127.0.0.1:8545 --fund-from-dev-account
  ledgerq bench wallets --wallets 12 --tasks-per-wallet 200 --ledger evm --fund-from-dev-account \
      --chain a=http://127.0.0.1:8545,http://127.0.0.1:8645 --chain b=http://127.0.0.1:8546,http://127.0.0.1:8646 \
      --wallet-confirmations 1`

func runBenchWallets(ctx context.Context, args []string) error {
	cfg := bench.DefaultWalletConfig()
	var fundEther float64 = 1
	var cpuProfile string
	_, err := parseNodeFlags("bench wallets", benchWalletsSummary, &cfg.Node, flagParts{lane: "wallet"}, args, "warn", func(fs *flag.FlagSet) {
		fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run (the direct sender's part included) to this file, for go tool pprof")
		fs.StringVar((*string)(&cfg.Mode), "mode", string(cfg.Mode), "how tasks reach the lane: store (store.TaskInsert from the bench's own pool), http (POST send-tx with task=true and an Idempotency-Key through the real API on a loopback listener) or sql (a transaction per task around ledgerq.send_tx with an idempotency key, from the bench's own pool through the Go client, client.EnqueueTx; docs/enqueue.md)")
		fs.StringVar(&cfg.Baseline, "baseline", cfg.Baseline, "direct: first run a direct sender with no database (fresh funded keys, the same transfers, nonces in memory, go-ethereum's ethclient on --ledger evm) on the same chain, and print its mined/s beside the lane's and the ratio")
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "offered load: enqueue at this many tasks/s (0: as fast as the workers can)")
		fs.IntVar(&cfg.BacklogFinished, "backlog-finished", cfg.BacklogFinished, "seed this many done tasks with their confirmed attempts (on 1000 other senders of the same chain) before the run, as a long-running lane leaves behind")
		fs.IntVar(&cfg.Wallets, "wallets", cfg.Wallets, "number of wallets, each a fresh random key, funded before the run")
		fs.IntVar(&cfg.TasksPerWallet, "tasks-per-wallet", cfg.TasksPerWallet, "send-tx tasks enqueued per wallet")
		fs.DurationVar(&cfg.SignerLatency, "signer-latency", cfg.SignerLatency, "put each wallet's key behind a signer outside the process that waits this long before each signature (an HSM's, a KMS's or a remote signer's round trip; the lane then records each request before asking, the write-ahead across signers); 0: the key in process")
		fs.IntVar(&cfg.IngestWorkers, "ingest-workers", cfg.IngestWorkers, "concurrent enqueue workers, each with its own connection (as concurrent API requests)")
		fs.StringVar(&cfg.Ledger, "ledger", cfg.Ledger, "chain: sim (in-process simulated EVM chain) or evm (a node's JSON-RPC at --ledger-url)")
		fs.StringVar(&cfg.LedgerURL, "ledger-url", cfg.LedgerURL, "for --ledger evm: the node's JSON-RPC URL (for example http://127.0.0.1:8545)")
		fs.Func("chain", "for --ledger evm, instead of --ledger-url: a chain as NAME=URL[,URL...], its nodes' JSON-RPC URLs; repeatable. The wallets are spread over the chains in turn, each funded from its chain's first node's developer account (--fund-from-dev-account); the lane reaches each chain through all of its nodes (the node layer, as serve does), and the summary prints mined/s on each", func(v string) error {
			ch, err := bench.ParseChainNodes(v)
			if err != nil {
				return err
			}
			cfg.Chains = append(cfg.Chains, ch)
			return nil
		})
		fs.BoolVar(&cfg.FundFromDevAccount, "fund-from-dev-account", cfg.FundFromDevAccount, "for --ledger evm: fund the wallets with eth_sendTransaction from the node's first account (geth --dev's unlocked developer account)")
		fs.Float64Var(&fundEther, "fund-ether", fundEther, "ether given to each wallet")
		fs.DurationVar(&cfg.Sim.BlockPeriod, "block-period", cfg.Sim.BlockPeriod, "for --ledger sim: time between two blocks")
		fs.Float64Var(&cfg.Sim.TransientRate, "chain-transient-rate", cfg.Sim.TransientRate, "for --ledger sim: fraction of sends refused with a transient error")
		fs.Float64Var(&cfg.Sim.LostResponseRate, "chain-lost-response-rate", cfg.Sim.LostResponseRate, "for --ledger sim: fraction of sends taken whose answer is lost (a timeout)")
		fs.DurationVar(&cfg.Sim.Latency, "chain-send-latency", cfg.Sim.Latency, "for --ledger sim: wait before every send")
		fs.Float64Var(&cfg.Sim.LostTxRate, "chain-lost-tx-rate", cfg.Sim.LostTxRate, "for --ledger sim: fraction of sends answered success whose transaction is dropped from the pool, never mined (a fault run: tasks may end in error with a reason)")
		fs.Float64Var(&cfg.Sim.ReorgRate, "chain-reorg-rate", cfg.Sim.ReorgRate, "for --ledger sim: fraction of blocks after which the chain reorganizes its last --chain-reorg-depth blocks (a fault run)")
		fs.IntVar(&cfg.Sim.ReorgDepth, "chain-reorg-depth", 1, "for --ledger sim: blocks a reorg replaces")
		fs.Float64Var(&cfg.Sim.ReorgDropRate, "chain-reorg-drop-rate", cfg.Sim.ReorgDropRate, "for --ledger sim: fraction of a reorg's transactions dropped instead of returned to the pool")
		fs.Int64Var(&cfg.Sim.Seed, "chain-seed", cfg.Sim.Seed, "for --ledger sim: seed of the chain's random faults")
		fs.DurationVar(&cfg.Grace, "grace", cfg.Grace, "after every task is stored, how long to wait for every task to end")
		fs.DurationVar(&cfg.ProgressInterval, "progress-interval", cfg.ProgressInterval, "time between two progress lines (and completion checks)")
	})
	if err != nil {
		return err
	}
	wei, _ := new(big.Float).Mul(big.NewFloat(fundEther), big.NewFloat(1e18)).Int(nil)
	cfg.FundWei = wei
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg.Progress = os.Stderr
	return profiled(cpuProfile, func() error { return summarized(bench.RunWallets(ctx, cfg)) })
}

const benchBuilderSummary = `Load the builder lane and measure it. The run migrates the database, makes
--senders fresh keys and signs --txs-per-sender transactions each (before the clock
starts), serves the API on a loopback listener, and runs the bundler, bundle
submitter and bundle monitor against an in-process simulated JAM chain
(--slot-length, faults by the --jam-* flags). --clients senders at a time send
their transactions in nonce order with go-ethereum's ethclient to POST /rpc; a full
pool or sender (the pool's back-pressure) makes the client wait and send again. It
prints a progress line a second to stderr and a summary to stdout: accepted tx/s,
finalized bundles/s, p50/p99 bundle submit->finalized and transaction
received->finalized, and the chain's counts. It exits non-zero when an accepted
transaction was not executed exactly once, in nonce order, within --grace.

The summary also counts the submission windows that opened while at least a
bundle's worth of accepted transactions waited for a core, and the core-windows of
them no bundle used (idle). --baseline geth first sends the same transactions with
the same clients to a geth --dev started for the run and prints both intakes and
their ratio; --backlog-finished N seeds N finished transactions first.

Examples:
  ledgerq bench builder --senders 20 --txs-per-sender 50 --slot-length 500ms
  ledgerq bench builder --senders 200 --txs-per-sender 16 --clients 20 \
      --builder-pool-max-pending 10000 --builder-pool-max-queued 10000 --baseline geth`

func runBenchBuilder(ctx context.Context, args []string) error {
	cfg := bench.DefaultBuilderConfig()
	var cpuProfile string
	_, err := parseNodeFlags("bench builder", benchBuilderSummary, &cfg.Node, flagParts{lane: "builder"}, args, "warn", func(fs *flag.FlagSet) {
		fs.IntVar(&cfg.Senders, "senders", cfg.Senders, "number of senders, each a fresh random key")
		fs.IntVar(&cfg.TxsPerSender, "txs-per-sender", cfg.TxsPerSender, "transactions per sender, nonces 0 and up")
		fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "senders sending at once (each its transactions in nonce order)")
		fs.DurationVar(&cfg.Chain.SlotLength, "slot-length", cfg.Chain.SlotLength, "the simulated JAM chain's timeslot")
		fs.Int64Var(&cfg.Chain.Seed, "jam-seed", cfg.Chain.Seed, "seed of the simulated JAM chain's faults")
		registerJAMFaults(fs, &cfg.Chain)
		fs.DurationVar(&cfg.Grace, "grace", cfg.Grace, "after the last transaction is accepted, how long to wait for every one to be finalized")
		fs.DurationVar(&cfg.ProgressInterval, "progress-interval", cfg.ProgressInterval, "time between two progress lines (and completion checks)")
		fs.StringVar(&cfg.Baseline, "baseline", cfg.Baseline, "geth: before the run, send the same signed transactions the same way (--clients at once, each sender's in nonce order) to the eth_sendRawTransaction of a geth --dev started for it (its pool limits raised so it refuses none), and report its accepted tx/s and ledgerq's ratio to it")
		fs.StringVar(&cfg.Geth, "geth", cfg.Geth, "for --baseline geth: the geth binary (empty: $"+bench.EnvGeth+", else geth on PATH)")
		fs.IntVar(&cfg.BacklogFinished, "backlog-finished", cfg.BacklogFinished, "seed this many finished pool transactions (included in finalized bundles) before the run, as a long-running lane leaves behind")
		fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the ledgerq run (signing, the baseline and seeding excluded) to this file, for go tool pprof")
	})
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg.Progress = os.Stderr
	start, stop, err := cpuProfiler(cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	cfg.OnStart = start
	return summarized(bench.RunBuilder(ctx, cfg))
}

// profiled runs run under the CPU profile --cpuprofile names (none when
// path is empty).
func profiled(path string, run func() error) error {
	start, stop, err := cpuProfiler(path)
	if err != nil {
		return err
	}
	defer stop()
	if err := start(); err != nil {
		return err
	}
	return run()
}

// cpuProfiler creates --cpuprofile's file, if one is named, and returns
// start, which begins the CPU profile into it, and stop, which ends it and
// closes the file. Without a file both do nothing.
func cpuProfiler(path string) (start func() error, stop func(), err error) {
	if path == "" {
		return func() error { return nil }, func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	started := false
	start = func() error {
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		started = true
		return nil
	}
	stop = func() {
		if started {
			pprof.StopCPUProfile()
		}
		_ = f.Close()
	}
	return start, stop, nil
}
