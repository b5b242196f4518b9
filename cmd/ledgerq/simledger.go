package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/node"
)

// runSimLedger serves the simulated ledger over Sawtooth's REST API, so that
// separate ledgerq processes (serve, once) share one ledger.
func runSimLedger(ctx context.Context, args []string) error {
	so := node.Defaults().Batch.Ledger.Sim
	so.MaxEvents = 0
	fs := newFlagSet("simledger", "Serve the simulated ledger over Sawtooth's REST API: POST /batches, GET and POST\n/batch_statuses, and GET /debug/log and /debug/stats for tests.")
	addr := fs.String("addr", "127.0.0.1:8008", "address to listen on")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	registerSim(fs, &so)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := setupLogger(*logLevel)
	if err != nil {
		return err
	}
	l := so.New(clock.Real{}, logger)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *addr, err)
	}
	srv := &http.Server{Handler: sim.NewServer(l, logger), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(os.Stdout, "ledgerq simledger: listening on http://%s\n", ln.Addr())
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
