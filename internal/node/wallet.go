package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/policy"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/signers"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
	"github.com/ledgerq/ledgerq/internal/wallet"
	"github.com/ledgerq/ledgerq/internal/workers"
)

// WalletConfig configures the wallet lane (docs/design.md, "The wallet
// lane"): send-tx tasks worked by one shard per wallet. The lane runs when at
// least one wallet is configured (Keystores or Registry). Its tags, and
// Lane's and Webhooks', declare the lane's settings (internal/config): the
// section wallet, flags --wallet-*; Shards has a section of its own.
type WalletConfig struct {
	Ledger WalletLedgerConfig `group:""`
	// Keystores are the wallets, each a go-ethereum keystore file unlocked
	// at start (--wallet-keystore NAME=FILE).
	Keystores keystore.KeystoreSpecs `flag:"keystore" only:"ledger" help:"a wallet ledgerq signs for, NAME=KEYSTORE_FILE (a go-ethereum keystore file); repeat or comma-separate for several (a list in the file); the lane runs when one is given. Its passphrase: --wallet-passphrase-file, else LEDGERQ_WALLET_PASSPHRASE_<NAME>, else LEDGERQ_WALLET_PASSPHRASE"`
	// Chains declares the chains the lane sends on, each with its nodes
	// (--wallet-chain, a list in the file); a wallet names its chain
	// (NAME@CHAIN=FILE). The --wallet-ledger flags are the shorthand for
	// one chain behind one node.
	Chains wallet.Chains `flag:"chain" only:"ledger" help:"a chain the wallets send on: name=NAME,chain-id=ID,node=URL[,node=URL...][,send-only=URL][,confirmations=N][,price-cap=WEI][,min-tip=WEI][,stall-timeout=D][,call-timeout=D]; repeatable (a list of mappings in the file); a wallet names its chain with --wallet-keystore NAME@CHAIN=FILE"`
	// PassphraseFiles unlock them (--wallet-passphrase-file); without one a
	// wallet's passphrase comes from the environment.
	PassphraseFiles keystore.PassphraseFiles `flag:"passphrase-file" only:"ledger" help:"a file whose first line unlocks the wallets (FILE), or one wallet (NAME=FILE); repeatable"`
	// Signers are the signer backends (an HSM, a KMS, a remote signer) and
	// the wallets whose keys are in them (--wallet-signer); wallets can
	// also be added at run time (POST /v1/wallets, signers.Manager).
	Signers signers.Config `group:""`
	// Policies are what wallets may send (--wallet-policy), written to
	// ledgerq.wallet_policies at start, where the API cannot change them;
	// policies can also be set through the API (PUT …/policy).
	Policies policy.Decls `flag:"policy" only:"ledger" help:"what a wallet may send: wallet=NAME[,recipient=0x…][,contract=0x…][,function=0xCONTRACT:SIGNATURE_OR_SELECTOR][,max-value=WEI][,value-cap=WEI/WINDOW][,fee-cap=WEI/WINDOW], every key but wallet repeatable (a list of mappings in the file); recipients and contracts are an allow-list when one is listed; a cap bounds the wallet's value, or fees, within a rolling window (a duration such as 24h); written to the database at start, where the API cannot change it"`
	// Registry, when set, is used instead of Keystores (dev, bench, tests).
	Registry *keystore.Registry
	// Lane is the per-wallet work's own settings: the in-flight budget,
	// queue type, confirmations, stall timeout, price cap, ... (see
	// wallet.Config); node fills its clock, logger, metrics and
	// database timeout.
	Lane wallet.Config `group:""`
	// Shards configures the shard scheduler.
	Shards workers.Config
	// RetentionAge is how long finished tasks are kept (0: forever);
	// deleted RetentionBatchSize at a time by the monitor role.
	RetentionAge       time.Duration `flag:"retention-age" help:"delete finished tasks (done, error) older than this, with their transactions (0: keep them forever); run by the monitor role"`
	RetentionBatchSize int           `flag:"retention-batch-size" help:"most finished tasks, and most ended webhook deliveries, deleted in one statement"`
	RetentionInterval  time.Duration `flag:"retention-interval" help:"wait after a retention round (of tasks, or of webhook deliveries) that found less than a full batch to delete"`
	// Webhooks configures the delivery of the wallets' task events to
	// their webhook endpoints (monitor role).
	Webhooks monitor.WebhookConfig `group:"webhook-"`
}

// WalletLedgerConfig chooses the wallet lane's chain.
type WalletLedgerConfig struct {
	// Kind is "evm" (a node's JSON-RPC at URL) or "sim" (the in-process
	// simulated EVM chain).
	Kind string `flag:"ledger" only:"ledger" help:"the chain: evm (a node's JSON-RPC at --wallet-ledger-url) or sim (an in-process simulated EVM chain)"`
	URL  string `flag:"ledger-url" only:"ledger" secret:"url" help:"the EVM node's JSON-RPC URL, for --wallet-ledger evm (for example http://127.0.0.1:8545): the one-node shorthand of --wallet-chain"`
	// ChainID is URL's chain id: with it the process starts while the
	// node does not answer; 0: read from the node at start.
	ChainID int64 `flag:"chain-id" only:"ledger" help:"the chain id of --wallet-ledger-url's chain; given, the process starts while the node does not answer (0: read from the node at start)"`
	// Sim configures the simulated chain, for Kind "sim".
	Sim evmsim.Config
	// SimJournal, for Kind "sim", is a file the simulated chain keeps its
	// mined transactions in and replays at start, so that it survives a
	// restart (ledgerq dev); empty keeps it in memory only.
	SimJournal string
	// Instance, when set, is used instead of building a chain from Kind.
	Instance ledger.WalletLedger
}

// Wallet ledger kinds.
const (
	WalletLedgerEVM = "evm"
	WalletLedgerSim = "sim"
)

// walletDefaults are the wallet lane's defaults.
func walletDefaults() WalletConfig {
	return WalletConfig{
		Ledger:       WalletLedgerConfig{Kind: WalletLedgerEVM},
		Lane:         wallet.Defaults(),
		Shards:       workers.Defaults(),
		RetentionAge: 7 * 24 * time.Hour, RetentionBatchSize: 1000, RetentionInterval: time.Minute,
		Webhooks: monitor.WebhookDefaults(),
		Signers:  signers.Defaults(),
	}
}

// Enabled reports whether the lane runs: a wallet is configured, or a
// chain is, for wallets added at run time.
func (w *WalletConfig) Enabled() bool {
	return w.Registry != nil || len(w.Keystores) > 0 || len(w.Signers.Wallets) > 0 || len(w.Chains) > 0 || w.Ledger.URL != ""
}

// validate reports the first wallet setting that cannot work.
func (w *WalletConfig) validate() error {
	if !w.Enabled() {
		return nil
	}
	l := &w.Ledger
	switch {
	case l.Instance == nil && l.Kind != WalletLedgerEVM && l.Kind != WalletLedgerSim:
		return fmt.Errorf("--wallet-ledger %q: want evm or sim", l.Kind)
	case l.Instance == nil && l.Kind == WalletLedgerEVM && l.URL == "" && len(w.Chains) == 0:
		return errors.New("--wallet-ledger evm needs --wallet-ledger-url (the node's JSON-RPC, for example http://127.0.0.1:8545), or declare chains with --wallet-chain")
	case l.ChainID < 0:
		return errors.New("--wallet-chain-id must be positive (0: read from the node)")
	case w.Lane.LedgerTimeout <= 0:
		return errors.New("--wallet-ledger-timeout must be positive")
	case w.RetentionAge < 0:
		return errors.New("--wallet-retention-age must not be negative (0 keeps finished tasks forever)")
	case (w.RetentionAge > 0 || w.Webhooks.RetentionAge > 0) && (w.RetentionBatchSize < 1 || w.RetentionInterval <= 0):
		return errors.New("--wallet-retention-batch-size must be at least 1 and --wallet-retention-interval positive")
	}
	if l.Kind == WalletLedgerEVM && l.URL != "" {
		if _, err := url.Parse(l.URL); err != nil {
			return fmt.Errorf("--wallet-ledger-url: %w", err)
		}
	}
	if err := w.Chains.Validate(); err != nil {
		return fmt.Errorf("wallet lane: %w (--wallet-chain)", err)
	}
	if err := w.Signers.Validate(); err != nil {
		return fmt.Errorf("wallet lane: %w", err)
	}
	if err := w.Policies.Validate(); err != nil {
		return fmt.Errorf("wallet lane: %w", err)
	}
	if err := w.policiesWithinRetention(); err != nil {
		return fmt.Errorf("wallet lane: %w", err)
	}
	ec := w.Lane
	if err := ec.Validate(); err != nil {
		return fmt.Errorf("wallet lane: %w (--wallet-*)", err)
	}
	if err := w.Shards.Validate(); err != nil {
		return fmt.Errorf("wallet lane: %w (--shard-*)", err)
	}
	if err := w.Webhooks.Validate(); err != nil {
		return fmt.Errorf("wallet lane: %w (--wallet-webhook-*)", err)
	}
	// A cycle makes no new ledger call past the cycle budget, so it lasts
	// at most the budget plus one call; the lease must outlast it, or the
	// rescuer would hand a shard to a second worker mid-cycle.
	if w.Shards.Lease < 2*(ec.CycleBudget+ec.LedgerTimeout) {
		return fmt.Errorf("--shard-lease (%s) must be at least twice a wallet cycle's longest run (--wallet-cycle-budget %s + --wallet-ledger-timeout %s)", w.Shards.Lease, ec.CycleBudget, ec.LedgerTimeout)
	}
	return nil
}

// policiesWithinRetention refuses a cap whose window is longer than
// retention keeps finished tasks: the cap would count only those kept, and
// let more through than it says.
func (w *WalletConfig) policiesWithinRetention() error {
	if w.RetentionAge <= 0 {
		return nil
	}
	ps, err := w.Policies.Policies()
	if err != nil {
		return err
	}
	for _, d := range w.Policies {
		p := ps[d.Wallet]
		for _, c := range append(slices.Clone(p.ValueCaps), p.FeeCaps...) {
			if c.Window > w.RetentionAge {
				return fmt.Errorf("policy of wallet %s: a cap's window of %s is longer than --wallet-retention-age (%s), which deletes the finished tasks it would count", d.Wallet, c.Window, w.RetentionAge)
			}
		}
	}
	return nil
}

// laneConfig is w.Lane with what the node gives every service: its clock,
// logger, metrics and the loops' database timeout.
func (w *WalletConfig) laneConfig(n *Node) wallet.Config {
	c := w.Lane
	c.DBTimeout, c.Clock, c.Logger = n.cfg.Loops.DBTimeout, n.clock, n.logger
	m := n.metrics
	c.Metrics = m
	c.OnPriceCapped = func(wallet.PriceCapped) { m.Transition("wallet", "price_capped", 1) }
	return c
}

// walletLane is the wallet lane's part of a node.
type walletLane struct {
	chains  []*laneChain
	wallets *keystore.Registry
	// manager keeps the wallets added at run time in wallets.
	manager   *signers.Manager
	scheduler *workers.Scheduler
	rescuer   *workers.Rescuer
	follower  *monitor.WalletFollower
	heads     []*monitor.WalletHeadWatcher
	retention *monitor.Retention
	// webhookRetention deletes the webhook deliveries that ended.
	webhookRetention *monitor.Retention
	webhooks         *monitor.WebhookDeliverer
	// liveness is the process's liveness lock, recorded by the shard and
	// webhook claims of the pool and the deliverer; nil when neither runs.
	liveness *store.Liveness
}

// buildWalletLane opens the chains, unlocks the wallets and builds, per
// chain, the wallet job with that chain's ledger and settings, and the
// shard scheduler that routes each wallet's shard to its chain's job (where
// the submitter role runs); the rescuer, follower, a head watcher per
// chain, webhooks and retention (monitor role).
func (n *Node) buildWalletLane(ctx context.Context) error {
	w := &n.cfg.Wallet
	if !w.Enabled() {
		return nil
	}
	lane := &walletLane{}
	n.wallet = lane
	var err error
	if lane.chains, err = n.openChains(ctx); err != nil {
		return err
	}
	lane.wallets = w.Registry
	if lane.wallets == nil {
		kc := keystore.KeystoreConfig{Wallets: w.Keystores, PassphraseFiles: w.PassphraseFiles, Logger: n.logger, Chains: map[string]int64{}}
		for _, c := range lane.chains {
			kc.Chains[c.decl.Name] = c.decl.ChainID
		}
		if len(lane.chains) == 1 {
			kc.ChainID = lane.chains[0].decl.ChainID
		}
		if lane.wallets, err = keystore.LoadKeystores(kc); err != nil {
			return err
		}
	}
	if err := n.buildWalletSigners(ctx, lane); err != nil {
		return err
	}
	policies, err := w.Policies.Policies()
	if err != nil {
		return fmt.Errorf("wallet lane: %w", err)
	}
	n.syncConfig(ctx, "the wallets' policies", func(ctx context.Context) error {
		return n.store.WalletPolicySyncConfig(ctx, n.clock.Now(), policies)
	})
	n.syncConfig(ctx, "the wallet directory", func(ctx context.Context) error {
		return n.syncWalletDirectory(ctx, lane.wallets)
	})
	deps := n.deps("")
	ec := w.laneConfig(n)
	jobs := map[int64]*wallet.Job{}
	if n.cfg.Loops.Submitter {
		for _, c := range lane.chains {
			cc := ec.On(c.decl)
			steps, err := walletSteps(n.store, c.led, cc)
			if err != nil {
				return err
			}
			if jobs[c.decl.ChainID], err = wallet.NewJob(n.store, c.led, lane.wallets, cc, steps); err != nil {
				return fmt.Errorf("wallet lane, chain %s: %w", c.decl.Name, err)
			}
		}
		router := wallet.NewRouter(jobs, n.logger)
		if lane.scheduler, err = workers.NewScheduler(n.store, n.deps(notify.Shards), w.Shards, map[string]workers.Job{wallet.Kind: router}); err != nil {
			return err
		}
	}
	if n.cfg.Loops.Monitor {
		lane.rescuer = workers.NewRescuer(n.store, deps, w.Shards)
		if lane.follower, err = monitor.NewWalletFollower(n.store, lane.wallets, ec); err != nil {
			return err
		}
		if lane.scheduler != nil {
			lane.rescuer.OnRescued, lane.follower.OnScheduled = lane.scheduler.Poke, lane.scheduler.Poke
		}
		if ec.HeadInterval > 0 {
			for _, c := range lane.chains {
				h, err := monitor.NewWalletHeadWatcher(c.led, ec.On(c.decl), lane.follower.Poke)
				if err != nil {
					return err
				}
				if job := jobs[c.decl.ChainID]; job != nil {
					h.OnHead = job.NoteHead
				}
				lane.heads = append(lane.heads, h)
			}
		}
		wc := w.Webhooks
		wc.DBTimeout = min(wc.DBTimeout, n.cfg.Loops.DBTimeout)
		if lane.webhooks, err = monitor.NewWebhookDeliverer(n.store, n.deps(notify.WalletWebhooks), wc); err != nil {
			return fmt.Errorf("wallet lane: %w", err)
		}
		if w.RetentionAge > 0 {
			lane.retention = monitor.NewTaskRetention(n.store, deps, monitor.RetentionConfig{
				Interval: w.RetentionInterval, DBTimeout: n.cfg.Loops.DBTimeout, Age: w.RetentionAge, BatchSize: w.RetentionBatchSize,
			})
		}
		if w.Webhooks.RetentionAge > 0 {
			lane.webhookRetention = monitor.NewWebhookRetention(n.store, deps, monitor.RetentionConfig{
				Interval: w.RetentionInterval, DBTimeout: n.cfg.Loops.DBTimeout, Age: w.Webhooks.RetentionAge, BatchSize: w.RetentionBatchSize,
			})
		}
	}
	for _, c := range lane.chains {
		if c.nodes != nil {
			c.nodes.Start()
		}
	}
	if lane.scheduler != nil || lane.webhooks != nil {
		// A dead holder lets go at once: the claims record this lock, and
		// another process's rescuer or deliverer takes them over as soon as
		// PostgreSQL releases it.
		if lane.liveness, err = n.store.NewLiveness(store.LivenessConfig{}, n.logger); err != nil {
			return fmt.Errorf("wallet lane: %w", err)
		}
	}
	return nil
}

// walletSteps are the roles' steps of a wallet's run, on st and led: the
// submitter's recover, the monitor's confirm and keep moving, the queuer's
// send.
func walletSteps(st *store.Store, led ledger.WalletLedger, cfg wallet.Config) (wallet.Steps, error) {
	broadcast, err := submitter.NewWalletBroadcaster(st, cfg)
	if err != nil {
		return wallet.Steps{}, err
	}
	confirm, err := monitor.NewWalletConfirmer(st, led, cfg)
	if err != nil {
		return wallet.Steps{}, err
	}
	keep, err := monitor.NewWalletKeeper(st, led, cfg)
	if err != nil {
		return wallet.Steps{}, err
	}
	send, err := queuer.NewWalletSender(st, led, cfg)
	if err != nil {
		return wallet.Steps{}, err
	}
	return wallet.Steps{Recover: broadcast, Confirm: confirm, KeepMoving: keep, Send: send}, nil
}

// holdLiveness takes the process's liveness lock (n.liveness() must not be
// nil) before the loops claim anything, so that their first claims record
// it. A failure is logged, not returned: claims made without the lock wait
// for their lease, as before, and the liveness loop tries again.
func (n *Node) holdLiveness(ctx context.Context) {
	if err := n.wallet.liveness.RunOnce(ctx); err != nil {
		n.logger.Warn("liveness: lock not taken yet; until it is, this process's claims are freed only by their lease", "error", err)
	}
}

// ReadChainID reads led's chain id within timeout; it must be a positive
// 64-bit number, as wallets and tasks store it.
func ReadChainID(ctx context.Context, led ledger.WalletLedger, timeout time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	id, err := led.ChainID(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the chain id: %w", err)
	}
	if !id.IsInt64() || id.Sign() <= 0 {
		return 0, fmt.Errorf("chain id %s is not a positive 64-bit number", id)
	}
	return id.Int64(), nil
}

// openEVMSim builds the simulated EVM chain, replaying its journal first
// when it has one.
func openEVMSim(cfg evmsim.Config, journal string, clk clock.Clock) (ledger.WalletLedger, func(), error) {
	if cfg.Clock == nil {
		cfg.Clock = clk
	}
	if journal == "" {
		return evmsim.New(cfg), func() {}, nil
	}
	past, err := os.ReadFile(journal)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("wallet lane: reading the simulated chain's journal: %w", err)
	}
	f, err := os.OpenFile(journal, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("wallet lane: opening the simulated chain's journal: %w", err)
	}
	cfg.Journal = f
	l := evmsim.New(cfg)
	if _, err := l.Replay(bytes.NewReader(past)); err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("wallet lane: replaying the simulated chain's journal %s: %w", journal, err)
	}
	return l, func() { _ = f.Close() }, nil
}

// FundAlloc is a genesis allocation of amount wei to every address, for a
// simulated chain.
func FundAlloc(amount *big.Int, addrs ...ledger.Address) map[common.Address]*big.Int {
	m := make(map[common.Address]*big.Int, len(addrs))
	for _, a := range addrs {
		m[common.Address(a)] = new(big.Int).Set(amount)
	}
	return m
}

// buildWalletSigners opens the wallets of --wallet-signer (one that cannot
// be opened stops the start: a wallet the operator declared must work) and
// builds the manager of the wallets added at run time, reading them once so
// that they are there before the lanes start.
func (n *Node) buildWalletSigners(ctx context.Context, lane *walletLane) error {
	w := &n.cfg.Wallet
	opener := signers.NewOpener(w.Signers, w.PassphraseFiles, n.logger)
	chains := make([]signers.Chain, len(lane.chains))
	for i, c := range lane.chains {
		chains[i] = signers.Chain{Name: c.decl.Name, ID: c.decl.ChainID}
	}
	configured := map[string]signers.Decl{}
	for _, x := range lane.wallets.All() {
		if x.Chain == "" {
			// Named by its chain's id only (--wallet-keystore NAME=FILE, dev):
			// the listing shows the chain's name.
			for _, c := range chains {
				if c.ID == x.ChainID {
					x.Chain = c.Name
				}
			}
			if err := lane.wallets.Put(x); err != nil {
				return err
			}
		}
		configured[x.ID] = signers.Decl{Name: x.ID, Chain: x.Chain, Backend: keystore.BackendOf(x.Signer)}
	}
	for _, k := range w.Keystores {
		configured[k.Name] = signers.Decl{Name: k.Name, Chain: k.Chain, Backend: signers.Keystore, Key: k.Path}
	}
	for _, d := range w.Signers.Wallets {
		if _, dup := configured[d.Name]; dup {
			return fmt.Errorf("wallet %s is declared twice (--wallet-keystore and --wallet-signer)", d.Name)
		}
		chain := d.Chain
		if chain == "" {
			if len(chains) != 1 {
				return fmt.Errorf("wallet %s: name its chain (chain=…): several chains are declared", d.Name)
			}
			chain = chains[0].Name
		}
		var chainID int64
		for _, c := range chains {
			if c.Name == chain {
				chainID = c.ID
			}
		}
		if chainID == 0 {
			return fmt.Errorf("wallet %s: chain %q is not declared (--wallet-chain)", d.Name, chain)
		}
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		s, waiting, err := opener.OpenOrWait(octx, d)
		cancel()
		if err != nil {
			return fmt.Errorf("--wallet-signer: %w", err)
		}
		if waiting {
			// A backend away at start (a KMS, a remote signer) holds its
			// wallet's tasks, shown as signer_unavailable, not the process.
			n.logger.Warn("wallet: its signer cannot be reached now; its tasks wait until it can", "wallet", d.Name, "backend", d.Backend, "error", s.(*signers.Lazy).Pending())
		}
		if err := lane.wallets.Put(keystore.Wallet{ID: d.Name, ChainID: chainID, Signer: s, Chain: chain}); err != nil {
			return fmt.Errorf("--wallet-signer: %w", err)
		}
		configured[d.Name] = d
	}
	if len(chains) == 0 {
		return nil
	}
	m, err := signers.NewManager(signers.ManagerConfig{
		Store: n.store, Opener: opener, Registry: lane.wallets, Chains: chains, Configured: configured,
		Wake: n.listener.Subscribe(notify.Wallets), Clock: n.clock, Logger: n.logger,
	})
	if err != nil {
		return err
	}
	if err := m.Sync(ctx); err != nil {
		n.logger.Warn("wallets: reading the wallets added at run time failed; retrying", "error", err)
	}
	lane.manager = m
	return nil
}

// syncWalletDirectory writes what ledgerq.send_tx needs from this process's
// configuration: its wallets (those not added at run time, which the
// wallets table's trigger writes) and its fee ceiling
// (--wallet-max-fee-per-gas). The last serve to start sets both.
func (n *Node) syncWalletDirectory(ctx context.Context, wallets *keystore.Registry) error {
	var dir []store.DirectoryWallet
	for _, w := range wallets.All() {
		if !w.Declared {
			dir = append(dir, store.DirectoryWallet{Wallet: w.ID, ChainID: w.ChainID, Sender: w.Address().Hex()})
		}
	}
	if err := n.store.WalletDirectorySyncConfig(ctx, n.clock.Now(), dir); err != nil {
		return err
	}
	ceiling := n.cfg.API.MaxFeePerGas
	if ceiling == nil {
		ceiling = httpapi.DefaultMaxFeePerGas
	}
	return n.store.SettingsPutMaxFeePerGas(ctx, n.clock.Now(), ceiling)
}
