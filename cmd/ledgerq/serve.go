package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/ledgerq/ledgerq/internal/node"
)

// parseNodeFlags registers the node flags of a command and --log-level
// (default logLevel) with cfg's values as defaults, lets extra register the
// command's own flags, parses args and then the environment into cfg, and
// sets cfg.Logger.
func parseNodeFlags(name, summary string, cfg *node.Config, parts flagParts, args []string, logLevel string, extra func(fs *flag.FlagSet)) error {
	fs := newFlagSet(name, summary)
	fs.StringVar(&logLevel, "log-level", logLevel, "log level: debug, info, warn or error")
	registerConfig(fs, cfg, parts)
	if extra != nil {
		extra(fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := setupLogger(logLevel)
	if err != nil {
		return err
	}
	cfg.Logger, cfg.Version = logger, versionString()
	return nil
}

func runServe(ctx context.Context, args []string) error {
	cfg := node.Defaults()
	err := parseNodeFlags("serve", "Run the HTTP API and the loops against the database at DATABASE_URL.\nFlags choose which loops run and whether the API runs, so roles can be split across processes.",
		&cfg, flagParts{api: true, roles: true, ledger: true}, args, "info", nil)
	if err != nil {
		return err
	}
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	return n.Serve(ctx, nil)
}

// runOnce runs one round of each enabled loop, in pipeline order, and exits.
// It is safe beside other 'once' runs and 'serve' processes: every round
// claims with SKIP LOCKED and records with conditional updates.
func runOnce(ctx context.Context, args []string) error {
	var timeout time.Duration
	cfg := node.Defaults()
	err := parseNodeFlags("once", "Run one round of every enabled loop (queuer, submitter, monitor), then exit: the cron deployment.\nExits 0 when every round ran, non-zero with a message otherwise.",
		&cfg, flagParts{roles: true, ledger: true}, args, "info", func(fs *flag.FlagSet) {
			fs.DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
		})
	if err != nil {
		return err
	}
	if cfg.Batch.Ledger.Kind == node.BatchLedgerSim {
		fmt.Fprintln(os.Stderr, "ledgerq once: note: --batch-ledger sim keeps the simulated ledger in this process only; use --batch-ledger sawtooth with 'ledgerq simledger' to keep ledger state between runs")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	return n.RunOnce(ctx)
}
