package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/node"
)

// simLedgerKinds are the ledgers `ledgerq simledger --kind` can serve.
const (
	simKindSawtooth = "sawtooth"
	simKindEVM      = "evm"
)

// evmSimFlags are the simulated EVM ledger's flags.
type evmSimFlags struct {
	chainID       int64
	blockPeriod   time.Duration
	baseFee       int64
	tip           int64
	alloc         string
	transientRate float64
	lostRate      float64
	latency       time.Duration
}

func (f evmSimFlags) config(seed int64, c clock.Clock) (evmsim.Config, error) {
	alloc, err := parseAlloc(f.alloc)
	if err != nil {
		return evmsim.Config{}, err
	}
	return evmsim.Config{
		Seed: seed, Clock: c, ChainID: f.chainID, Alloc: alloc, BlockPeriod: f.blockPeriod,
		BaseFee: f.baseFee, Tip: f.tip, TransientRate: f.transientRate, LostResponseRate: f.lostRate,
		Latency: f.latency,
	}, nil
}

// parseAlloc reads "0xaddr=wei,0xaddr=wei".
func parseAlloc(s string) (map[common.Address]*big.Int, error) {
	out := map[common.Address]*big.Int{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		addr, amount, ok := strings.Cut(item, "=")
		if !ok || !common.IsHexAddress(addr) {
			return nil, fmt.Errorf("--evm-alloc: %q is not 0xaddress=wei", item)
		}
		wei, ok := new(big.Int).SetString(amount, 10)
		if !ok || wei.Sign() < 0 {
			return nil, fmt.Errorf("--evm-alloc: %q: %q is not an amount in wei", item, amount)
		}
		out[common.HexToAddress(addr)] = wei
	}
	return out, nil
}

// simLedgerSetup is a parsed `ledgerq simledger` command line.
type simLedgerSetup struct {
	kind     string
	addr     string
	logLevel string
	sim      node.SimConfig
	evm      evmSimFlags
}

func parseSimLedger(args []string) (simLedgerSetup, error) {
	s := simLedgerSetup{sim: node.Defaults().Batch.Ledger.Sim}
	s.sim.MaxEvents = 0
	fs := newFlagSet("simledger", "Serve a simulated ledger: with --kind sawtooth (the default) over Sawtooth's REST API\n(POST /batches, GET and POST /batch_statuses, GET /debug/log and /debug/stats);\nwith --kind evm over Ethereum JSON-RPC (POST /, default address 127.0.0.1:8545).")
	fs.StringVar(&s.kind, "kind", simKindSawtooth, "which ledger to serve: sawtooth or evm")
	fs.StringVar(&s.addr, "addr", "127.0.0.1:8008", "address to listen on (127.0.0.1:8545 for --kind evm when not given)")
	fs.StringVar(&s.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	registerSim(fs, &s.sim)
	registerEVMSim(fs, &s.evm)
	if err := parseFlags(fs, args); err != nil {
		return s, err
	}
	addrSet := false
	fs.Visit(func(f *flag.Flag) { addrSet = addrSet || f.Name == "addr" })
	switch s.kind {
	case simKindSawtooth:
	case simKindEVM:
		if !addrSet {
			s.addr = "127.0.0.1:8545"
		}
	default:
		return s, fmt.Errorf("--kind: %q is not sawtooth or evm", s.kind)
	}
	return s, nil
}

// registerEVMSim registers the simulated EVM ledger's flags; --sim-seed is
// shared with the Sawtooth simulation.
func registerEVMSim(fs *flag.FlagSet, f *evmSimFlags) {
	fs.Int64Var(&f.chainID, "evm-chain-id", 1337, "simulated EVM ledger: chain id")
	fs.DurationVar(&f.blockPeriod, "evm-block-period", time.Second, "simulated EVM ledger: time between blocks")
	fs.Int64Var(&f.baseFee, "evm-base-fee", 1_000_000_000, "simulated EVM ledger: base fee per gas, in wei")
	fs.Int64Var(&f.tip, "evm-tip", 1_000_000_000, "simulated EVM ledger: suggested priority fee per gas, in wei")
	fs.StringVar(&f.alloc, "evm-alloc", "", "simulated EVM ledger: funded accounts at genesis, 0xaddress=wei,…")
	fs.Float64Var(&f.transientRate, "evm-transient-rate", 0, "simulated EVM ledger: fraction of sends refused with a 503")
	fs.Float64Var(&f.lostRate, "evm-lost-rate", 0, "simulated EVM ledger: fraction of sends taken whose answer is lost (connection cut)")
	fs.DurationVar(&f.latency, "evm-latency", 0, "simulated EVM ledger: latency of each send")
}

// handler builds the served ledger.
func (s simLedgerSetup) handler(c clock.Clock, logger *slog.Logger) (http.Handler, error) {
	if s.kind == simKindEVM {
		cfg, err := s.evm.config(s.sim.Seed, c)
		if err != nil {
			return nil, err
		}
		return evmsim.NewServer(evmsim.New(cfg), logger), nil
	}
	return sim.NewServer(s.sim.New(c, logger), logger), nil
}

// runSimLedger serves a simulated ledger over its real wire protocol, so that
// separate ledgerq processes (serve, once) share one ledger.
func runSimLedger(ctx context.Context, args []string) error {
	s, err := parseSimLedger(args)
	if err != nil {
		return err
	}
	logger, err := setupLogger(s.logLevel)
	if err != nil {
		return err
	}
	h, err := s.handler(clock.Real{}, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(os.Stdout, "ledgerq simledger: listening on http://%s (%s)\n", ln.Addr(), s.kind)
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
