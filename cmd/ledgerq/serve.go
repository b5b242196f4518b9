package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/config"
	"github.com/ledgerq/ledgerq/internal/node"
)

// parseNodeFlags registers the node settings of a command, --log-level
// (default logLevel) and --config with cfg's values as defaults, lets extra
// register the command's own flags, parses args, then the environment and
// the configuration file into cfg, and sets cfg.Logger, which it tells of
// the deprecated names used. It returns the settings' registry.
func parseNodeFlags(name, summary string, cfg *node.Config, parts flagParts, args []string, logLevel string, extra func(fs *flag.FlagSet)) (*config.Registry, error) {
	var file string
	reg := nodeRegistry(name, summary, cfg, parts, &logLevel, &file, extra)
	fs := reg.FlagSet()
	err := reg.Parse(args, func() string { return cmp.Or(file, os.Getenv(configEnv)) })
	if err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (see ledgerq %s --help)", fs.Arg(0), fs.Name())
	}
	logger, err := setupLogger(logLevel)
	if err != nil {
		return nil, err
	}
	for _, d := range reg.Deprecations() {
		logger.Warn("ledgerq: " + d)
	}
	cfg.Logger, cfg.Version = logger, versionString()
	return reg, nil
}

// nodeRegistry registers what parseNodeFlags parses: the node settings of
// a command, --log-level into logLevel (its value the default), the
// command's own flags (extra) and --config into file.
func nodeRegistry(name, summary string, cfg *node.Config, parts flagParts, logLevel, file *string, extra func(fs *flag.FlagSet)) *config.Registry {
	fs := newFlagSet(name, summary)
	reg := registerConfig(fs, cfg, parts)
	fs.StringVar(logLevel, "log-level", *logLevel, "log level: debug, info, warn or error (logs are colored on a terminal and JSON otherwise)")
	if extra != nil {
		extra(fs)
	}
	reg.AdoptRest()
	fs.StringVar(file, "config", "", "a YAML configuration file of these settings (docs/configuration.md); the environment and the command line override it")
	return reg
}

// configEnv is the environment variable of --config.
const configEnv = "LEDGERQ_CONFIG"

// nodeDefaultsForServe are serve's defaults.
func nodeDefaultsForServe() node.Config { return node.Defaults() }

func runServe(ctx context.Context, args []string) error {
	cfg := nodeDefaultsForServe()
	_, err := parseNodeFlags("serve", "Run the HTTP API and the loops against the database at DATABASE_URL.\nFlags choose which loops run and whether the API runs, so roles can be split across processes.",
		&cfg, serveParts, args, "info", nil)
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
	_, err := parseNodeFlags("once", "Run one round of every enabled loop (queuer, submitter, monitor), then exit: the cron deployment.\nExits 0 when every round ran, non-zero with a message otherwise.",
		&cfg, onceParts, args, "info", func(fs *flag.FlagSet) {
			fs.DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
		})
	if err != nil {
		return err
	}
	if cfg.Batch.Ledger.Kind == batch.LedgerSim {
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
