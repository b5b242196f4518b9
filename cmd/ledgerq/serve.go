package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
)

func runServe(ctx context.Context, args []string) error {
	var o options
	fs := newFlagSet("serve", "Run the HTTP API and the loops against the database at DATABASE_URL.\nFlags choose which loops run and whether the API runs, so roles can be split across processes.")
	o.register(fs, true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	logger, err := setupLogger(o.logLevel)
	if err != nil {
		return err
	}
	a, err := openApp(ctx, &o, logger)
	if err != nil {
		return err
	}
	defer a.close()
	clk := clock.Real{}
	l, err := o.newLedger(clk, logger)
	if err != nil {
		return err
	}
	return a.serve(ctx, clk, l, nil)
}

// runOnce runs one round of each enabled loop, in pipeline order, and exits.
// It is safe beside other 'once' runs and 'serve' processes: every round
// claims with SKIP LOCKED and records with conditional updates.
func runOnce(ctx context.Context, args []string) error {
	var o options
	fs := newFlagSet("once", "Run one round of every enabled loop (queuer, submitter, monitor), then exit: the cron deployment.\nExits 0 when every round ran, non-zero with a message otherwise.")
	o.register(fs, false)
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	if o.ledgerKind == "sim" {
		fmt.Fprintln(os.Stderr, "ledgerq once: note: --ledger sim keeps the simulated ledger in this process only; use --ledger sawtooth with 'ledgerq simledger' to keep ledger state between runs")
	}
	logger, err := setupLogger(o.logLevel)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	a, err := openApp(ctx, &o, logger)
	if err != nil {
		return err
	}
	defer a.close()
	clk := clock.Real{}
	l, err := o.newLedger(clk, logger)
	if err != nil {
		return err
	}
	a.buildLoops(clk, l, nil)

	var errs []error
	if a.queuer != nil {
		n, err := a.queuer.RunOnce(ctx)
		logger.Info("once: queuer round", "queued", n, "error", err)
		errs = append(errs, wrapRound("queuer", err))
	}
	if a.submitter != nil {
		n, err := a.submitter.RunOnce(ctx)
		logger.Info("once: submitter round", "claimed", n, "error", err)
		errs = append(errs, wrapRound("submitter", err))
	}
	if a.monitor != nil {
		n, err := a.monitor.RunOnce(ctx)
		logger.Info("once: monitor round", "checked", n, "error", err)
		errs = append(errs, wrapRound("monitor", err))
	}
	return errors.Join(errs...)
}

func wrapRound(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s round: %w", name, err)
}
