package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/audit"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

const walletAuditSummary = `Hold a wallet's record in the database against its chain's blocks, read from
--from-block (default: the first block that holds a transaction the database
recorded as mined for the wallet) to the head:

  - every done task's transaction is on the chain, once, with the hash the
    database recorded;
  - every transaction of the wallet on the chain is a task's, a gas bump of
    one, or a no-op, each stored before it was sent;
  - no task has two transactions on the chain, none the chain carried out is
    still waiting or in error;
  - the nonces are contiguous: none held as mined twice, no hole below the
    database's next nonce that the chain would wait on.

It changes nothing. Each exception is printed with what to do. Exit status:
0 and a one-line summary when there is none, 3 when there are exceptions,
1 when the audit could not be made (the database or the node did not answer),
2 on a usage error. docs/operations.md, "Auditing a wallet against its chain".`

// auditFlags are what ledgerq wallet audit reads besides serve's settings.
type auditFlags struct {
	wallet string
	from   optionalUint
	json   bool
	reads  int
}

// auditParts are serve's settings (so that serve's configuration file is
// read as it is), with the command's own --wallet.
var auditParts = flagParts{api: true, roles: true, ledger: true, own: []string{"wallet"}}

// auditSettings are the settings of serve that the audit uses, listed in
// its help.
var auditSettings = []string{"config", "database-url", "wallet-keystore", "wallet-ledger", "wallet-ledger-url", "wallet-ledger-timeout"}

func runWalletAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := nodeDefaultsForServe()
	var af auditFlags
	logLevel, file := "warn", ""
	reg := nodeRegistry("wallet audit", walletAuditSummary, &cfg, auditParts, &logLevel, &file, nil)
	fs := reg.FlagSet()
	fs.SetOutput(stderr)
	// Registered after serve's settings: read from the command line only,
	// never from the environment or the file (LEDGERQ_WALLET is the old
	// name of serve's keystore list).
	own := flag.NewFlagSet("", flag.ContinueOnError)
	for _, f := range []*flag.FlagSet{fs, own} {
		f.StringVar(&af.wallet, "wallet", "", "the wallet: its address (0x…), or its name in --wallet-keystore (the address is read from the keystore file, no passphrase needed), in a --wallet-signer with address=, or among the wallets added at run time; required")
		f.Var(&af.from, "from-block", "the first block to read (default: the first block holding a transaction the database recorded as mined for the wallet, or 0)")
		f.BoolVar(&af.json, "json", false, "print the report as one JSON object (exceptions, notices, counts) instead of text")
		f.IntVar(&af.reads, "reads", audit.DefaultReads, "blocks read at once")
	}
	fs.Usage = func() { walletAuditUsage(fs, own) }
	if err := reg.Parse(args, func() string { return cmp.Or(file, os.Getenv(configEnv)) }); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see ledgerq wallet audit --help)", fs.Arg(0))
	}
	if af.wallet == "" {
		return errors.New("--wallet is required: a wallet's name, or its address (0x…)")
	}
	st, err := openStore(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	addr, chain, err := auditWallet(ctx, &cfg, st, af.wallet)
	if err != nil {
		return err
	}
	led, closeLed, err := auditLedger(ctx, &cfg, af.wallet, chain)
	if err != nil {
		return err
	}
	defer closeLed()
	id, err := led.ChainID(ctx)
	if err != nil {
		return fmt.Errorf("reading the chain id: %w", err)
	}
	p := audit.Params{ChainID: id.Int64(), Address: addr, Reads: af.reads}
	if af.from.set {
		p.FromBlock = &af.from.v
	}
	rep, err := audit.Wallet(ctx, st, led, p)
	if err != nil {
		return notMigrated(err)
	}
	if af.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprint(stdout, rep.Text())
	}
	if !rep.OK() {
		what := "an exception"
		if n := len(rep.Exceptions); n > 1 {
			what = fmt.Sprintf("%d exceptions", n)
		}
		return &exitError{code: 3, msg: fmt.Sprintf("%s in wallet %s on chain %d", what, rep.Address, rep.ChainID)}
	}
	return nil
}

// walletAuditUsage lists the command's own flags, then the settings of
// serve it uses (serve's others are taken, so that its configuration file
// reads, and ignored).
func walletAuditUsage(fs, own *flag.FlagSet) {
	out := fs.Output()
	fmt.Fprintf(out, "Usage: ledgerq wallet audit --wallet W [--from-block N] [--json] [flags]\n\n%s\n\nFlags (the command line only):\n", walletAuditSummary)
	own.VisitAll(func(f *flag.Flag) { printFlag(out, f, "") })
	fmt.Fprintln(out, "\nSettings read as serve reads them (--config FILE, the environment shown, flags); serve's other settings are accepted and ignored:")
	for _, n := range auditSettings {
		if f := fs.Lookup(n); f != nil {
			env := ""
			if n != "config" {
				env = envName(n)
			} else {
				env = configEnv
			}
			printFlag(out, f, env)
		}
	}
}

func printFlag(out io.Writer, f *flag.Flag, env string) {
	def := ""
	if f.DefValue != "" && f.DefValue != "false" {
		def = fmt.Sprintf(" (default %s)", f.DefValue)
	}
	if env != "" {
		env = " [" + env + "]"
	}
	fmt.Fprintf(out, "  --%s\t%s%s%s\n", f.Name, f.Usage, def, env)
}

// auditWallet is the address of the wallet w names and the name of its
// chain, when it names one: an address itself (no chain); a wallet of
// --wallet-keystore, whose file names its address; a wallet of
// --wallet-signer that declares its address; or a wallet added at run
// time (ledgerq.wallets, read from st).
func auditWallet(ctx context.Context, cfg *node.Config, st *store.Store, w string) (ledger.Address, string, error) {
	if strings.HasPrefix(w, "0x") || strings.HasPrefix(w, "0X") {
		if !common.IsHexAddress(w) {
			return ledger.Address{}, "", fmt.Errorf("--wallet %q: not an address (0x and 40 hex digits)", w)
		}
		return ledger.Address(common.HexToAddress(w)), "", nil
	}
	var names []string
	for _, k := range cfg.Wallet.Keystores {
		if k.Name == w {
			addr, err := keystore.KeystoreAddress(k.Path)
			return addr, k.Chain, err
		}
		names = append(names, k.Name)
	}
	for _, d := range cfg.Wallet.Signers.Wallets {
		if d.Name != w {
			names = append(names, d.Name)
			continue
		}
		if d.Address == (common.Address{}) {
			return ledger.Address{}, "", fmt.Errorf("--wallet %q: its --wallet-signer declares no address (its %s backend would have to be opened to learn it); give its address (0x…) instead", w, d.Backend)
		}
		return ledger.Address(d.Address), d.Chain, nil
	}
	d, err := st.WalletsGet(ctx, w)
	switch {
	case err == nil:
		return ledger.Address(common.HexToAddress(d.Address)), d.Chain, nil
	case !errors.Is(err, store.ErrNotFound):
		return ledger.Address{}, "", notMigrated(fmt.Errorf("--wallet %q: reading the wallets added at run time: %w", w, err))
	case len(names) == 0:
		return ledger.Address{}, "", fmt.Errorf("--wallet %q: no wallet of that name (none is declared, and none was added at run time); give its address (0x…) instead", w)
	}
	return ledger.Address{}, "", fmt.Errorf("--wallet %q: no wallet of that name among the declared ones (%s) or those added at run time", w, strings.Join(names, ", "))
}

// auditLedger is the chain the wallet w is on, and what closes it: the
// declared chain it names, else the wallet lane's one chain
// (--wallet-ledger-url).
func auditLedger(ctx context.Context, cfg *node.Config, w, chain string) (ledger.WalletLedger, func(), error) {
	l := cfg.Wallet.Ledger
	if d, ok := auditChain(cfg, chain); ok {
		nodes := make([]evmnodes.NodeConfig, len(d.Nodes))
		for i, u := range d.Nodes {
			nodes[i] = evmnodes.NodeConfig{URL: u}
		}
		// Every node of the chain: the audit reads from one at the highest
		// head, never from one behind.
		c, err := evmnodes.New(evmnodes.Config{Name: d.Name, ChainID: d.ChainID, Nodes: nodes, CallTimeout: cfg.Wallet.Lane.LedgerTimeout})
		if err != nil {
			return nil, nil, err
		}
		return c, c.Close, nil
	}
	switch {
	case l.Kind == node.WalletLedgerSim:
		return nil, nil, fmt.Errorf("wallet %s: --wallet-ledger sim is a chain inside the serving process; audit it through a node's JSON-RPC (--wallet-ledger evm --wallet-ledger-url URL)", w)
	case l.URL == "":
		return nil, nil, fmt.Errorf("wallet %s: --wallet-ledger-url is required: the JSON-RPC URL of a node of the wallet's chain", w)
	}
	led, err := evm.Dial(ctx, l.URL, evm.Config{CallTimeout: cfg.Wallet.Lane.LedgerTimeout})
	if err != nil {
		return nil, nil, err
	}
	return led, led.Close, nil
}

// auditChain is the declared chain (--wallet-chain) named chain, or the
// only one declared when the wallet names none and no --wallet-ledger-url
// is given.
func auditChain(cfg *node.Config, chain string) (wallet.ChainDecl, bool) {
	chains := cfg.Wallet.Chains
	for _, d := range chains {
		if chain != "" && d.Name == chain {
			return d, true
		}
	}
	if len(chains) == 1 && cfg.Wallet.Ledger.URL == "" {
		return chains[0], true
	}
	return wallet.ChainDecl{}, false
}

// optionalUint is a flag.Value of an unsigned number that may be left
// unset.
type optionalUint struct {
	v   uint64
	set bool
}

func (o *optionalUint) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatUint(o.v, 10)
}

func (o *optionalUint) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errors.New("want a block number")
	}
	o.v, o.set = v, true
	return nil
}
