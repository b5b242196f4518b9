package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/pgcluster"
)

// runDev runs ledgerq on its embedded default: a private PostgreSQL cluster
// under --data-dir (unless DATABASE_URL is set), the simulated ledger in this
// process, the API and every loop.
func runDev(ctx context.Context, args []string) error {
	var o options
	fs := newFlagSet("dev", "Run ledgerq on its embedded default: a private PostgreSQL cluster started from the local\nPostgreSQL binaries under --data-dir (or the database at DATABASE_URL when set), the simulated\nledger in-process, the HTTP API and every loop. Ctrl-C stops ledgerq and the cluster; a second\nrun reuses the data.")
	o.register(fs, true)
	dataDir := fs.String("data-dir", ".ledgerq", "directory of the private PostgreSQL cluster")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o.ledgerKind = "sim"
	if err := o.validate(); err != nil {
		return err
	}
	logger, err := setupLogger(o.logLevel)
	if err != nil {
		return err
	}

	if o.databaseURL == "" {
		dir, err := filepath.Abs(*dataDir)
		if err != nil {
			return err
		}
		startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		cluster, err := pgcluster.Start(startCtx, pgcluster.Options{DataDir: dir, Logger: logger})
		cancel()
		if err != nil {
			return fmt.Errorf("starting the private PostgreSQL cluster in %s: %w", dir, err)
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cluster.Stop(stopCtx); err != nil {
				logger.Error("dev: stopping PostgreSQL", "error", err)
			} else {
				logger.Info("dev: PostgreSQL stopped")
			}
		}()
		if err := cluster.CreateDatabase(ctx, "ledgerq"); err != nil {
			return err
		}
		o.databaseURL = cluster.ConnString("ledgerq")
		logger.Info("dev: private PostgreSQL running", "data_dir", dir, "database_url", redactURL(o.databaseURL))
	}

	a, err := openApp(ctx, &o, logger)
	if err != nil {
		return err
	}
	defer a.close()
	clk := clock.Real{}
	simCfg := o.sim.config(clk)
	simCfg.Logger = logger
	simCfg.MaxEvents = 10000
	return a.serve(ctx, clk, sim.New(simCfg), func(addr string) {
		fmt.Fprintf(os.Stdout, "ledgerq dev: API at http://%s (simulated ledger; Ctrl-C to stop)\n", addr)
	})
}
