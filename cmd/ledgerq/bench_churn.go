package main

import (
	"context"
	"os"
	"strings"

	"github.com/ledgerq/ledgerq/internal/bench"
)

const benchChurnSummary = `Watch serve's memory under a steady churn of every lane. The run starts three
'ledgerq simledger' processes (a Sawtooth ledger, an EVM chain, a JAM chain) and
one 'ledgerq serve' with every lane on against them and --database-url (which it
migrates; give it a database of its own), then, from this process, offers a fixed
load through serve's HTTP API for --duration: POST /v1/batches (signed Sawtooth
batches), POST /v1/wallets/{wallet}/send-tx?task=true with an Idempotency-Key
(--wallets keystores made for the run and funded at the EVM chain's genesis), and
eth_sendRawTransaction to POST /rpc (the 20 development accounts the JAM chain
funds). Every --interval it prints serve's resident memory (VmRSS of
/proc/PID/status: serve's alone, the ledgers and the load are other processes)
and each lane's finished work (batches committed, tasks done, transactions in a
finalized bundle, counted in the database: with retention turned on by
--serve-args, the rows still kept). The summary ends with the verdict: the mean RSS of the last
third of the run against that of its sixth to third (minutes 20–30 against 5–10
of a 30-minute run), as growth in %. It exits non-zero when serve exits during
the run or a sample cannot be read.

Example:
  ledgerq bench churn --database-url postgres://…/lq_churn --duration 30m --interval 1m`

func runBenchChurn(ctx context.Context, args []string) error {
	cfg := bench.DefaultChurnConfig()
	var serveArgs string
	fs := newFlagSet("bench churn", benchChurnSummary)
	fs.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "PostgreSQL connection URL of a database of the run's own")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the load runs")
	fs.DurationVar(&cfg.Interval, "interval", cfg.Interval, "time between two samples of serve's memory and the lanes' counts")
	fs.Float64Var(&cfg.BatchRate, "batch-rate", cfg.BatchRate, "batch lane: batches posted a second")
	fs.IntVar(&cfg.BatchesPerRequest, "batches-per-request", cfg.BatchesPerRequest, "batch lane: batches in one POST /v1/batches")
	fs.IntVar(&cfg.Services, "services", cfg.Services, "batch lane: services the batches rotate over")
	fs.Float64Var(&cfg.WalletRate, "wallet-rate", cfg.WalletRate, "wallet lane: send-tx tasks posted a second")
	fs.IntVar(&cfg.Wallets, "wallets", cfg.Wallets, "wallet lane: wallets the tasks rotate over")
	fs.DurationVar(&cfg.BlockPeriod, "block-period", cfg.BlockPeriod, "wallet lane: the simulated EVM chain's time between blocks")
	fs.Float64Var(&cfg.BuilderRate, "builder-rate", cfg.BuilderRate, "builder lane: transactions sent a second")
	fs.DurationVar(&cfg.SlotLength, "slot-length", cfg.SlotLength, "builder lane: the simulated JAM chain's timeslot")
	fs.StringVar(&serveArgs, "serve-args", "", "more flags for serve, space-separated (for example \"--batch-retention-age 5m --wallet-retention-age 5m\")")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "keep the keystores and the processes' logs (serve.log, simledger-*.log) in this directory (default: a temporary one, removed at the end)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg.ServeArgs = strings.Fields(serveArgs)
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg.Progress = os.Stderr
	return summarized(bench.RunChurn(ctx, cfg))
}
