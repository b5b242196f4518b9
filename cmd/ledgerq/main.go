// Command ledgerq is a durable submission queue in front of a ledger. See
// README.md and docs/design.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

const usage = `ledgerq: a durable submission queue in front of a ledger.

Usage: ledgerq <command> [flags]

Commands:
  dev        run ledgerq on its embedded default: a private PostgreSQL cluster
             (or DATABASE_URL), the simulated ledger in-process, the API and all loops
  serve      run the HTTP API and the loops against DATABASE_URL
  once       run one round of every enabled loop, then exit (for cron)
  migrate    apply or inspect schema migrations: up, down, status, version
  simledger  serve a simulated ledger (--kind sawtooth: Sawtooth's REST API; --kind evm: Ethereum JSON-RPC; --kind jam: a JAM chain for the builder lane)
  bench      generate load and report throughput and latency
  sawtooth   Sawtooth helpers: 'sawtooth sample' prints signed sample batches
  keys       API keys of the wallet routes: create, list, revoke
  wallet     wallets: 'wallet new' writes a new keystore file; 'wallet audit' holds a wallet's
             record in the database against its chain's blocks
  config     'config check --config FILE' validates a configuration file and prints the effective configuration
  version    print the version

Run 'ledgerq <command> --help' for the flags of a command.

Environment: GOGC, when set, is the Go garbage collector's target as usual;
unset, ledgerq runs with GOGC=400 (fewer collections; GOMEMLIMIT still caps
the heap where it is set).
`

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() {
	setDefaultGCPercent(os.LookupEnv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// defaultGCPercent is the garbage collector's target ledgerq runs with when
// GOGC is not set. Go's default, 100, collects each time the heap doubles;
// ledgerq's live heap is small (tens of MiB), and at 100 its collections
// took about a tenth of the process's CPU under load. 400 gave 7 to 14 %
// more throughput in paired runs of bench builder and bench wallets, for a
// larger heap between collections. GOMEMLIMIT, where a container sets it,
// still makes the collector work harder near the limit.
const defaultGCPercent = 400

// setDefaultGCPercent sets defaultGCPercent unless the environment (lookup)
// sets GOGC, which the runtime has applied already. It returns the target
// it set, or -1 when it left the runtime's.
func setDefaultGCPercent(lookup func(string) (string, bool)) int {
	if v, ok := lookup("GOGC"); ok && v != "" {
		return -1
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}

func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	command, ok := commands[cmd]
	switch {
	case ok:
	case cmd == "version" || cmd == "--version" || cmd == "-version":
		fmt.Println("ledgerq", versionString())
		return 0
	case isHelp(cmd):
		fmt.Print(usage)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "ledgerq: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	err := command(ctx, rest)
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, &ee):
		fmt.Fprintf(os.Stderr, "ledgerq %s: %s\n", cmd, ee.msg)
		return ee.code
	default:
		fmt.Fprintf(os.Stderr, "ledgerq %s: %v\n", cmd, err)
		return 1
	}
}

// commands are ledgerq's commands by name (usage lists them).
var commands = map[string]func(ctx context.Context, args []string) error{
	"dev": runDev, "serve": runServe, "once": runOnce, "migrate": runMigrate, "simledger": runSimLedger,
	"bench": runBench, "sawtooth": runSawtooth, "keys": runKeys, "wallet": runWallet, "config": runConfig,
}

// errUsage marks a usage error that was already reported.
var errUsage = errors.New("usage error")

// exitError ends a command with an exit status of its own (not 1), saying
// msg on stderr: ledgerq wallet audit's exceptions.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// isHelp reports whether arg asks for a command's usage.
func isHelp(arg string) bool {
	return arg == "help" || arg == "--help" || arg == "-help" || arg == "-h"
}

// subcommand runs the subcommand args[0] names among subs, for the command
// name ("ledgerq keys"): none prints usage to stderr (a usage error), help
// prints it to stdout, and an unknown one is a usage error that says what
// it is (what: "command", "workload").
func subcommand(name, what, usage string, args []string, stdout, stderr io.Writer, subs map[string]func(args []string) error) error {
	switch {
	case len(args) == 0:
		fmt.Fprint(stderr, usage)
		return errUsage
	case subs[args[0]] != nil:
		return subs[args[0]](args[1:])
	case isHelp(args[0]):
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "%s: unknown %s %q\n\n%s", name, what, args[0], usage)
	return errUsage
}

func versionString() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}
