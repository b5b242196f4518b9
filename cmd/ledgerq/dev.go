package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/pgcluster"
)

// runDev runs ledgerq on its embedded default: a private PostgreSQL cluster
// under --data-dir (unless DATABASE_URL is set), the simulated ledger in this
// process, the API and every loop.
func runDev(ctx context.Context, args []string) error {
	var dataDir string
	cfg := node.Defaults()
	err := parseNodeFlags("dev", "Run ledgerq on its embedded default: a private PostgreSQL cluster started from the local\nPostgreSQL binaries under --data-dir (or the database at DATABASE_URL when set), the simulated\nledger in-process, the HTTP API and every loop. Ctrl-C stops ledgerq and the cluster; a second\nrun reuses the data.",
		&cfg, flagParts{api: true, roles: true}, args, "info", func(fs *flag.FlagSet) {
			fs.StringVar(&dataDir, "data-dir", ".ledgerq", "directory of the private PostgreSQL cluster")
		})
	if err != nil {
		return err
	}
	logger := cfg.Logger
	cfg.Batch.Ledger.Kind = node.BatchLedgerSim
	if cfg.DatabaseURL == "" {
		if err := cfg.ValidateSettings(); err != nil {
			return err
		}
		dir, err := filepath.Abs(dataDir)
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
		cfg.DatabaseURL = cluster.ConnString("ledgerq")
		logger.Info("dev: private PostgreSQL running", "data_dir", dir, "database_url", node.RedactURL(cfg.DatabaseURL))
	}
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	return n.Serve(ctx, func(addr string) {
		fmt.Fprintf(os.Stdout, "ledgerq dev: API at http://%s (simulated ledger; Ctrl-C to stop)\n", addr)
	})
}
