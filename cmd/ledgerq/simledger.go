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

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/config"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/node"
)

// simLedgerKinds are the ledgers `ledgerq simledger --kind` can serve.
const (
	simKindSawtooth = "sawtooth"
	simKindEVM      = "evm"
	simKindJAM      = "jam"
)

// jamSimFlags are the simulated JAM chain's flags: its configuration, but
// for the clock and the seed (--sim-seed, shared with the other
// simulations).
type jamSimFlags struct{ jam.Config }

func (f jamSimFlags) config(seed int64, c clock.Clock) jam.Config {
	cfg := f.Config
	cfg.Clock, cfg.Seed = c, seed
	return cfg
}

// registerJAMSim registers the simulated JAM chain's flags; --sim-seed is
// shared with the other simulations.
func registerJAMSim(fs *flag.FlagSet, f *jamSimFlags) {
	c := &f.Config
	c.Cores, c.LateSlots = jam.DefaultCores, jam.DefaultLateSlots
	fs.DurationVar(&c.SlotLength, "jam-slot-length", jam.DefaultSlotLength, "simulated JAM chain: timeslot length")
	registerJAMFaults(fs, c)
	fs.Uint64Var(&c.GuaranteeDelaySlots, "jam-guarantee-delay-slots", 1, "simulated JAM chain: slots after submission a work package is guaranteed")
	fs.Uint64Var(&c.AccumulateDelaySlots, "jam-accumulate-delay-slots", 1, "simulated JAM chain: slots after its guarantee a work package is accumulated")
	fs.Int64Var(&c.ChainID, "jam-chain-id", jam.DefaultChainID, "simulated JAM chain: its EVM's chain id (ledgerq's --builder-chain-id)")
	fs.BoolVar(&c.FundDevAccounts, "jam-fund-dev-accounts", true, "simulated JAM chain: fund the 20 accounts of the development mnemonic \"test test test test test test test test test test test junk\" (hardhat's and anvil's, 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 first) with 10000 ether each; =false funds none")
	fs.StringVar(&c.Journal, "jam-journal", "", "simulated JAM chain: file every executed bundle is appended to; a restart replays it and continues (same genesis, slots, blocks, balances, receipts). Empty: start afresh")
}

// registerJAMFaults registers the simulated JAM chain's cores and faults,
// with c's values as defaults: simledger's chain and bench builder's take
// the same flags.
func registerJAMFaults(fs *flag.FlagSet, c *jam.Config) {
	fs.IntVar(&c.Cores, "jam-cores", c.Cores, "simulated JAM chain: number of cores")
	fs.Float64Var(&c.NoGuarantee, "jam-no-guarantee-rate", c.NoGuarantee, "simulated JAM chain: fraction of taken work packages never guaranteed")
	fs.Float64Var(&c.LateGuarantee, "jam-late-guarantee-rate", c.LateGuarantee, "simulated JAM chain: fraction of taken work packages guaranteed late (--jam-late-slots), if their anchor is still recent")
	fs.Uint64Var(&c.LateSlots, "jam-late-slots", c.LateSlots, "simulated JAM chain: slots after submission a late guarantee comes")
	fs.Float64Var(&c.LostResponse, "jam-lost-rate", c.LostResponse, "simulated JAM chain: fraction of submissions taken whose answer is lost (the connection cut)")
	fs.Float64Var(&c.TransientError, "jam-transient-rate", c.TransientError, "simulated JAM chain: fraction of submissions refused as transient (over HTTP, with a 503)")
}

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
	lostTxRate    float64
	reorgRate     float64
	reorgDepth    int
	reorgDrop     float64
}

func (f evmSimFlags) config(seed int64, c clock.Clock) (evmsim.Config, error) {
	alloc, err := parseAlloc(f.alloc)
	if err != nil {
		return evmsim.Config{}, err
	}
	return evmsim.Config{
		Seed: seed, Clock: c, ChainID: f.chainID, Alloc: alloc, BlockPeriod: f.blockPeriod,
		BaseFee: f.baseFee, Tip: f.tip, TransientRate: f.transientRate, LostResponseRate: f.lostRate,
		Latency: f.latency, LostTxRate: f.lostTxRate, ReorgRate: f.reorgRate, ReorgDepth: f.reorgDepth,
		ReorgDropRate: f.reorgDrop,
	}, nil
}

// validate reports the first fault setting out of range.
func (f evmSimFlags) validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{{"transient", f.transientRate}, {"lost", f.lostRate}, {"lost-tx", f.lostTxRate}, {"reorg", f.reorgRate}, {"reorg-drop", f.reorgDrop}} {
		if r.v < 0 || r.v > 1 {
			return fmt.Errorf("--evm-%s-rate %g: want a fraction in [0, 1]", r.name, r.v)
		}
	}
	if f.reorgRate >= 1 {
		return errors.New("--evm-reorg-rate must be below 1 (at 1 the chain never grows)")
	}
	if f.reorgDepth < 1 {
		return errors.New("--evm-reorg-depth must be at least 1")
	}
	return nil
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
	sim      sim.Config
	evm      evmSimFlags
	jam      jamSimFlags
}

func parseSimLedger(args []string) (simLedgerSetup, error) {
	s := simLedgerSetup{sim: batch.Defaults().Ledger.Sim}
	s.sim.MaxEvents = 0
	fs := newFlagSet("simledger", "Serve a simulated ledger: with --kind sawtooth (the default) over Sawtooth's REST API\n(POST /batches, GET and POST /batch_statuses, GET /debug/log and /debug/stats);\nwith --kind evm over Ethereum JSON-RPC (POST /, default address 127.0.0.1:8545);\nwith --kind jam a JAM chain for the builder lane (GET /info, /recent, /blocks, POST /work-packages,\nGET /debug/log and /debug/stats; default address 127.0.0.1:19800) and the Ethereum JSON-RPC of the\nEVM blocks it executed (POST /evm), where the 20 development accounts hardhat and anvil fund\n(mnemonic \"test test … junk\") have 10000 ether each unless --jam-fund-dev-accounts=false.")
	fs.StringVar(&s.kind, "kind", simKindSawtooth, "which ledger to serve: sawtooth, evm or jam")
	fs.StringVar(&s.addr, "addr", "127.0.0.1:8008", "address to listen on (127.0.0.1:8545 for --kind evm, 127.0.0.1:19800 for --kind jam, when not given)")
	fs.StringVar(&s.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	config.New(fs, flagEnvNames).Struct(&s.sim, config.Options{Prefix: "sim-"})
	registerEVMSim(fs, &s.evm)
	registerJAMSim(fs, &s.jam)
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
		if err := s.evm.validate(); err != nil {
			return s, err
		}
	case simKindJAM:
		if !addrSet {
			s.addr = "127.0.0.1:19800"
		}
		if s.jam.SlotLength <= 0 || s.jam.Cores <= 0 || s.jam.ChainID <= 0 {
			return s, fmt.Errorf("--jam-slot-length, --jam-cores and --jam-chain-id must be positive")
		}
	default:
		return s, fmt.Errorf("--kind: %q is not sawtooth, evm or jam", s.kind)
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
	fs.Float64Var(&f.lostTxRate, "evm-lost-tx-rate", 0, "simulated EVM ledger: fraction of sends answered success whose transaction is dropped from the pool, never mined")
	fs.Float64Var(&f.reorgRate, "evm-reorg-rate", 0, "simulated EVM ledger: fraction of blocks after which the chain reorganizes: its last --evm-reorg-depth blocks are replaced by new ones (their transactions un-mined, receipts gone, nonces back, then mined again in blocks with other hashes)")
	fs.IntVar(&f.reorgDepth, "evm-reorg-depth", 1, "simulated EVM ledger: blocks a reorg replaces")
	fs.Float64Var(&f.reorgDrop, "evm-reorg-drop-rate", 0, "simulated EVM ledger: fraction of a reorg's transactions dropped instead of returned to the pool")
}

// handler builds the served ledger.
func (s simLedgerSetup) handler(c clock.Clock, logger *slog.Logger) (http.Handler, error) {
	if s.kind == simKindJAM {
		// The chain lives as long as the process: every journal line is
		// synced when written, so nothing waits for a Close.
		chain, err := jam.Open(s.jam.config(s.sim.Seed, c))
		if err != nil {
			return nil, err
		}
		return jam.NewHandler(chain), nil
	}
	if s.kind == simKindEVM {
		cfg, err := s.evm.config(s.sim.Seed, c)
		if err != nil {
			return nil, err
		}
		return evmsim.NewServer(evmsim.New(cfg), logger), nil
	}
	return sim.NewServer(node.NewSimLedger(s.sim, c, logger), logger), nil
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
