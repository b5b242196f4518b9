// Package node builds a ledgerq process from one Config: the store, the
// ledgers of each lane, the loops of each lane and role (the wallet lane's
// role steps as the job of its shard scheduler), the metrics and the HTTP
// API. serve, once, dev, bench and the tests all build through it, so
// there is one wiring and one validation (River's Client is the model).
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
)

// onceShardRuns bounds the shard runs of one RunOnce.
const onceShardRuns = 10000

// Node is one ledgerq process.
type Node struct {
	cfg    Config
	logger *slog.Logger
	clock  clock.Clock

	// syncs are the writes of this process's configuration to the
	// database still being tried (syncConfig); stopSyncs ends them.
	syncs     sync.WaitGroup
	syncCtx   context.Context
	stopSyncs context.CancelFunc

	store    *store.Store
	migrator *store.Migrator
	metrics  *metrics.Metrics
	listener *notify.Listener
	api      *httpapi.Server

	batchLedger     ledger.BatchLedger
	batchQueuer     *queuer.BatchQueuer
	batchSubmitters []*submitter.BatchSubmitter
	batchMonitor    *monitor.BatchMonitor
	batchRetention  *monitor.Retention
	// accessRetention deletes ended console sessions and old audit rows
	// (monitor role, whatever the lanes).
	accessRetention *monitor.Retention

	wallet  *walletLane  // nil when no wallet is configured
	builder *builderLane // nil when the builder lane is off

	started bool
	cancel  context.CancelFunc // cancels in-flight work of the started loops
}

// Open validates cfg, connects to the database (checking it answers within a
// bounded time), migrates it when cfg.Migrate is set, and builds every
// service cfg enables. Nothing runs until Start, Serve or RunOnce.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	n := &Node{cfg: cfg, logger: cfg.Logger, clock: cfg.Clock, metrics: metrics.New()}
	st, err := store.OpenPool(ctx, cfg.DatabaseURL, cfg.DBMinConns)
	if err != nil {
		return nil, err
	}
	n.store = st
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = st.Ping(pingCtx)
	cancel()
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("cannot reach the database at %s: %w", RedactURL(cfg.DatabaseURL), err)
	}
	if n.migrator, err = st.NewMigrator(cfg.Logger); err != nil {
		st.Close()
		return nil, err
	}
	if cfg.Migrate {
		res, err := n.migrator.Up(ctx)
		if err != nil {
			n.Close()
			return nil, err
		}
		if len(res) > 0 {
			n.logger.Info("ledgerq: migrated database", "applied", len(res), "version", n.migrator.LatestVersion())
		}
	}
	if err := n.build(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// build creates the ledgers, loops, metrics collectors and API.
func (n *Node) build(ctx context.Context) error {
	c := &n.cfg
	l, err := n.newBatchLedger()
	if err != nil {
		return err
	}
	n.batchLedger = metrics.BatchLedger(l, n.metrics)
	n.listener = notify.NewListener(c.DatabaseURL, n.logger)
	if c.Loops.Queuer {
		if n.batchQueuer, err = queuer.NewBatchQueuer(n.store, n.deps(notify.BatchQueuer), c.Batch); err != nil {
			return err
		}
	}
	if c.Loops.Submitter {
		for range c.Batch.Submitters {
			s, err := submitter.NewBatchSubmitter(n.store, n.batchLedger, n.deps(notify.BatchSubmitter), c.Batch)
			if err != nil {
				return err
			}
			n.batchSubmitters = append(n.batchSubmitters, s)
		}
	}
	if c.Loops.Monitor {
		if n.batchMonitor, err = monitor.NewBatchMonitor(n.store, n.batchLedger, n.deps(notify.BatchMonitor), c.Batch); err != nil {
			return err
		}
		if c.Batch.RetentionAge > 0 {
			if n.batchRetention, err = monitor.NewBatchRetention(n.store, n.deps(""), c.Batch); err != nil {
				return err
			}
		}
	}
	if c.Loops.Monitor {
		if n.accessRetention, err = monitor.NewAccessRetention(n.store, n.deps(""), c.Access); err != nil {
			return err
		}
	}
	if err := n.buildWalletLane(ctx); err != nil {
		return err
	}
	if err := n.buildBuilderLane(ctx); err != nil {
		return err
	}
	var wallets *keystore.Registry
	if n.wallet != nil {
		wallets = n.wallet.wallets
	}
	apiCfg := c.API.Config
	// One flag lets webhooks reach private addresses: the API registers
	// them, the monitor delivers to them.
	apiCfg.Webhooks.AllowPrivate = c.Wallet.Webhooks.AllowPrivate
	if n.wallet != nil {
		apiCfg.Chains = func() []evmnodes.ChainStatus { return n.ChainStatuses(context.Background()) }
	}
	deps := n.apiDeps(wallets)
	if n.wallet != nil {
		deps.WalletAdmin = n.wallet.manager
	}
	n.api = httpapi.New(apiCfg, deps)
	n.wireBatchLane()
	// ledgerq.submit_batch applies the API's payload bound; the last serve
	// to start sets it.
	n.syncConfig(ctx, "the API's payload bound", func(ctx context.Context) error {
		return n.store.SettingsPutMaxPayloadBytes(ctx, n.clock.Now(), c.API.MaxPayloadBytes)
	})
	if n.builder != nil && n.builder.bundler != nil {
		n.api.OnPoolPending(n.builder.bundler.Poke)
	}
	n.metrics.RegisterDepth("batch", store.BatchWaitingStates,
		func(ctx context.Context) ([]metrics.StateDepth, error) {
			rows, err := n.store.BatchDepthByState(ctx)
			out := make([]metrics.StateDepth, len(rows))
			for i, r := range rows {
				out[i] = metrics.StateDepth{State: r.State, Items: r.Items, Oldest: r.Oldest}
			}
			return out, err
		}, n.clock, 2*time.Second, n.logger)
	return nil
}

// deps are a service's dependencies; a channel (one of package notify's)
// wakes it when another process creates work for it.
func (n *Node) deps(channel string) loop.Deps {
	d := loop.Deps{Clock: n.clock, Logger: n.logger, Metrics: n.metrics, PollInterval: n.cfg.Loops.PollInterval, DBTimeout: n.cfg.Loops.DBTimeout}
	if channel != "" {
		d.Wake = n.listener.Subscribe(channel)
	}
	return d
}

// wireBatchLane lets the batch lane's services of this process hand each
// other work without a database round trip: whatever queues batches pokes
// the submitters, and accepted batches go to the monitor, which follows them
// in memory. NOTIFY still carries the same news to other processes.
func (n *Node) wireBatchLane() {
	pokeSubmitters := func() {
		for _, s := range n.batchSubmitters {
			s.Poke()
		}
	}
	if n.batchQueuer != nil {
		n.batchQueuer.OnQueued = pokeSubmitters
	}
	for _, s := range n.batchSubmitters {
		s.OnQueued = pokeSubmitters
	}
	if n.batchMonitor != nil {
		n.batchMonitor.OnQueued = pokeSubmitters
	}
	n.api.OnBatchesQueued(pokeSubmitters)
}

func (n *Node) newBatchLedger() (ledger.BatchLedger, error) {
	lc := &n.cfg.Batch.Ledger
	switch {
	case lc.Instance != nil:
		return lc.Instance, nil
	case lc.Kind == batch.LedgerSawtooth:
		c, err := sawtooth.NewClient(lc.URL, &http.Client{Timeout: lc.Timeout}, n.logger)
		if err != nil {
			return nil, fmt.Errorf("--batch-ledger-url: %w", err)
		}
		return c, nil
	default:
		return NewSimLedger(lc.Sim, n.clock, n.logger), nil
	}
}

// NewSimLedger returns the simulated batch ledger cfg describes, on clk and
// logger (which it takes from the node, not from cfg).
func NewSimLedger(cfg sim.Config, clk clock.Clock, logger *slog.Logger) *sim.Ledger {
	cfg.Clock, cfg.Logger = clk, logger
	return sim.New(cfg)
}

// Store returns the node's store.
func (n *Node) Store() *store.Store { return n.store }

// Metrics returns the node's metrics.
func (n *Node) Metrics() *metrics.Metrics { return n.metrics }

// Handler returns the HTTP API's handler.
func (n *Node) Handler() http.Handler { return n.api.Handler() }

// Listener returns the node's notification listener (tests wait on it).
func (n *Node) Listener() *notify.Listener { return n.listener }

// BatchQueuer, BatchSubmitters and BatchMonitor return the batch lane's
// services (nil or empty when their role is off), for RunOnce in tests.
func (n *Node) BatchQueuer() *queuer.BatchQueuer { return n.batchQueuer }

// BatchSubmitters returns the batch lane's submitter loops.
func (n *Node) BatchSubmitters() []*submitter.BatchSubmitter { return n.batchSubmitters }

// BatchMonitor returns the batch lane's monitor.
func (n *Node) BatchMonitor() *monitor.BatchMonitor { return n.batchMonitor }

// laneService is one enabled service of a lane, declared once for serve
// (Start, Stop) and once (RunOnce): its name, the service, and its round as
// a cron run makes it, with what the round's count counts.
type laneService struct {
	name, counts string
	service      loop.Service
	runOnce      func(context.Context) (int, error)
}

// laneServices lists the enabled services of every lane, each lane in its
// pipeline order (queuer, submitters, monitor).
func (n *Node) laneServices() []laneService {
	var s []laneService
	add := func(ok bool, name, counts string, svc loop.Service, run func(context.Context) (int, error)) {
		if ok {
			s = append(s, laneService{name: name, counts: counts, service: svc, runOnce: run})
		}
	}
	add(n.batchQueuer != nil, "batch queuer", "queued", n.batchQueuer, func(ctx context.Context) (int, error) { return n.batchQueuer.RunOnce(ctx) })
	for _, b := range n.batchSubmitters {
		add(true, "batch submitter", "claimed", b, b.RunOnce)
	}
	add(n.batchMonitor != nil, "batch monitor", "checked", n.batchMonitor, func(ctx context.Context) (int, error) {
		// A cron round ends with its record.
		checked, err := n.batchMonitor.RunOnce(ctx)
		return checked, errors.Join(err, n.batchMonitor.Wait())
	})
	add(n.batchRetention != nil, "batch retention", "deleted", n.batchRetention, func(ctx context.Context) (int, error) { return n.batchRetention.RunOnce(ctx) })
	if b := n.builder; b != nil {
		add(b.bundler != nil, "bundler", "cut", b.bundler, func(ctx context.Context) (int, error) { return b.bundler.RunOnce(ctx) })
		add(b.submitter != nil, "bundle submitter", "submitted", b.submitter, func(ctx context.Context) (int, error) { return b.submitter.RunOnce(ctx) })
		add(b.monitor != nil, "bundle monitor", "blocks", b.monitor, func(ctx context.Context) (int, error) { return b.monitor.RunOnce(ctx) })
		add(b.retention != nil, "builder retention", "deleted", b.retention, b.retention.RunOnce)
	}
	if w := n.wallet; w != nil {
		add(w.rescuer != nil, "shard rescuer", "rescued", w.rescuer, func(ctx context.Context) (int, error) { return w.rescuer.RunOnce(ctx) })
		add(w.follower != nil, "wallet follower", "scheduled", w.follower, func(ctx context.Context) (int, error) { return w.follower.RunOnce(ctx) })
		for _, h := range w.heads {
			add(true, "wallet head watcher", "new heads", h, func(ctx context.Context) (int, error) { return h.RunOnce(ctx) })
		}
		add(w.scheduler != nil, "wallet shards", "runs", w.scheduler, func(ctx context.Context) (int, error) {
			// Every pending shard once (a run yields after its quantum): a
			// bounded number of runs, so a cron process ends.
			runs := 0
			for runs < onceShardRuns {
				ran, err := w.scheduler.RunOnce(ctx)
				if err != nil || !ran {
					return runs, err
				}
				runs++
			}
			return runs, nil
		})
		add(w.retention != nil, "wallet retention", "deleted", w.retention, func(ctx context.Context) (int, error) { return w.retention.RunOnce(ctx) })
		add(w.webhooks != nil, "webhook delivery", "delivered", w.webhooks, func(ctx context.Context) (int, error) { return w.webhooks.RunOnce(ctx) })
		add(w.webhookRetention != nil, "webhook retention", "deleted", w.webhookRetention, w.webhookRetention.RunOnce)
	}
	add(n.accessRetention != nil, "access retention", "deleted", n.accessRetention, n.accessRetention.RunOnce)
	return s
}

// services lists the enabled loops in pipeline order.
func (n *Node) services() []loop.Service {
	lanes := n.laneServices()
	out := make([]loop.Service, len(lanes))
	for i, l := range lanes {
		out[i] = l.service
	}
	return out
}

// Close releases the database. Stop the node first.
// syncConfigRetry is how often a write of the configuration that failed
// (syncConfig) is tried again.
const syncConfigRetry = 2 * time.Second

// syncConfig writes what of this process's configuration SQL callers read
// (ledgerq.send_tx and submit_batch: the wallet directory, the fee ceiling,
// the payload bound; the configuration's policies). A database that is down
// or not migrated yet does not stop the process, as it stops nothing else
// at start (/readyz says so): the write is tried again every
// syncConfigRetry in the background until it succeeds or the node is
// closed.
func (n *Node) syncConfig(ctx context.Context, what string, write func(context.Context) error) {
	first, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := write(first)
	cancel()
	if err == nil {
		return
	}
	n.logger.Warn("ledgerq: writing the configuration to the database failed; trying again in the background", "what", what, "error", err)
	if n.syncCtx == nil {
		n.syncCtx, n.stopSyncs = context.WithCancel(context.Background())
	}
	n.syncs.Go(func() {
		for {
			select {
			case <-n.syncCtx.Done():
				return
			case <-time.After(syncConfigRetry):
			}
			if err := write(n.syncCtx); err == nil {
				n.logger.Info("ledgerq: the configuration is written to the database", "what", what)
				return
			}
		}
	})
}

func (n *Node) Close() {
	if n.stopSyncs != nil {
		n.stopSyncs()
	}
	n.syncs.Wait()
	if l := n.liveness(); l != nil {
		l.Stop() // the lock RunOnce took (Stop released Start's)
	}
	if n.wallet != nil {
		for _, c := range n.wallet.chains {
			c.close()
		}
	}
	if n.builder != nil && n.builder.closeLed != nil {
		n.builder.closeLed()
	}
	if n.migrator != nil {
		_ = n.migrator.Close()
	}
	n.store.Close()
}

// Ready implements httpapi.Readiness: the database answers and is migrated to
// the version this binary expects.
func (n *Node) Ready(ctx context.Context) error {
	if err := n.store.Ping(ctx); err != nil {
		return errors.New("database unreachable")
	}
	current, latest, err := n.migrator.Versions(ctx)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if current != latest {
		return fmt.Errorf("database schema is at version %d, this ledgerq needs %d (run ledgerq migrate up)", current, latest)
	}
	return nil
}

// Start starts the notification listener and every enabled loop. The loops'
// in-flight work runs under a context that only Stop's cancel (or the end
// of ctx's values, never its cancellation) ends: Stop lets rounds finish.
func (n *Node) Start(ctx context.Context) error {
	if n.started {
		return errors.New("node already started")
	}
	// Accepted batches are followed in memory only by a running process: a
	// RunOnce (cron) process exits, and its batches must stay claimable by
	// the next run's monitor at their first check.
	if n.batchMonitor != nil {
		firstCheck := n.cfg.Batch.FirstCheck
		for _, s := range n.batchSubmitters {
			s.OnAccepted = func(acc []store.CheckBatch, leaseUntil time.Time) int {
				return n.batchMonitor.Track(acc, leaseUntil, firstCheck)
			}
		}
		// The next batch of a service the monitor frees is claimed in the
		// same transaction and handed to a submitter (round robin), not
		// queued for a claim of its own.
		if subs := n.batchSubmitters; len(subs) > 0 {
			var next atomic.Uint64
			n.batchMonitor.OnAdmitted = func(batches []store.ClaimedBatch, leaseUntil time.Time) {
				subs[next.Add(1)%uint64(len(subs))].Hand(batches, leaseUntil)
			}
		}
	}
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := n.listener.Start(work); err != nil {
		cancel()
		return err
	}
	services := n.services()
	if n.wallet != nil && n.wallet.manager != nil {
		services = append([]loop.Service{n.wallet.manager}, services...)
	}
	if l := n.liveness(); l != nil {
		// First, and taken before: the loops' first claims record it.
		n.holdLiveness(ctx)
		services = append([]loop.Service{l}, services...)
	}
	if err := loop.StartAll(work, services...); err != nil {
		n.listener.Stop()
		cancel()
		return err
	}
	n.started, n.cancel = true, cancel
	return nil
}

// liveness returns the process's liveness lock, or nil when it holds none
// (no wallet lane, or one that claims nothing).
func (n *Node) liveness() *store.Liveness {
	if n.wallet == nil {
		return nil
	}
	return n.wallet.liveness
}

// Stop stops claiming work, waits for every loop's round in flight to finish
// (in parallel), then stops the listener. It is safe to call twice.
func (n *Node) Stop() {
	if !n.started {
		return
	}
	loop.StopAll(n.services()...)
	// What this process holds in memory goes back to every process: the
	// batches its monitor follows are due for a check at once, and those
	// handed to its submitters and not sent are queued again. The monitor
	// first: its Release waits for the records still running, which hand
	// batches to the submitters.
	releaseCtx := context.Background()
	if n.batchMonitor != nil {
		n.batchMonitor.Release(releaseCtx)
	}
	for _, s := range n.batchSubmitters {
		s.Release(releaseCtx)
	}
	if l := n.liveness(); l != nil {
		// Last: while the loops finished their rounds, their claims were
		// still this process's; from here any process may take over what
		// is left.
		l.Stop()
	}
	n.cancel()
	n.listener.Stop()
	n.started = false
}

// CancelWork cancels the in-flight work of the started loops: the end of a
// drain that took too long.
func (n *Node) CancelWork() {
	if n.cancel != nil {
		n.cancel()
	}
}

// RunOnce runs one round of each enabled loop in pipeline order (queuer,
// submitters, monitor) and returns every round's error joined: the cron
// deployment. It is safe beside other RunOnce callers and started nodes.
func (n *Node) RunOnce(ctx context.Context) error {
	if n.liveness() != nil {
		n.holdLiveness(ctx)
	}
	var errs []error
	for _, l := range n.laneServices() {
		k, err := l.runOnce(ctx)
		n.logger.Info("once: "+l.name+" round", l.counts, k, "error", err)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s round: %w", l.name, err))
		}
	}
	return errors.Join(errs...)
}

// Serve runs the loops and, when enabled, the API until ctx is done, then
// drains: it stops accepting requests and claiming work, lets in-flight work
// finish for up to ShutdownTimeout, then cancels what is left. ready, when
// not nil, is called with the API's address once it listens.
func (n *Node) Serve(ctx context.Context, ready func(addr string)) error {
	c := &n.cfg
	if err := n.Start(ctx); err != nil {
		return err
	}
	var srv *http.Server
	errc := make(chan error, 1)
	if c.API.Enabled {
		var ln net.Listener
		var err error
		srv, ln, err = c.API.Listen(n.api.Handler(), n.logger)
		if err != nil {
			n.CancelWork()
			n.Stop()
			return err
		}
		// Shutdown does not wait for requests that wait for a task: they
		// answer 202 with the task at once, so the client polls it.
		srv.RegisterOnShutdown(n.api.StopWaiting)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		n.logger.Info("ledgerq: API listening", "url", "http://"+ln.Addr().String())
		n.logAccess()
		if ready != nil {
			ready(ln.Addr().String())
		}
	}
	running := []any{"queuer", c.Loops.Queuer, "submitter", c.Loops.Submitter,
		"monitor", c.Loops.Monitor, "batch_ledger", n.batchLedgerName()}
	if n.wallet != nil {
		var names []string
		for _, w := range n.wallet.wallets.All() {
			names = append(names, w.ID)
		}
		var chains []string
		for _, c := range n.wallet.chains {
			chains = append(chains, fmt.Sprintf("%s(%d)", c.decl.Name, c.decl.ChainID))
		}
		running = append(running, "wallets", names, "wallet_chains", chains)
	}
	if n.builder != nil {
		running = append(running, "builder_chain_id", n.cfg.Builder.Pool.ChainID, "builder_ledger", n.builderLedgerName())
	}
	n.logger.Info("ledgerq: running", running...)

	var serveErr error
	select {
	case <-ctx.Done():
		n.logger.Info("ledgerq: shutting down")
	case serveErr = <-errc:
		n.logger.Error("ledgerq: API server failed", "error", serveErr)
	}

	drainTimer := time.AfterFunc(c.ShutdownTimeout, func() {
		n.logger.Warn("ledgerq: drain timeout passed, cancelling in-flight work")
		n.CancelWork()
	})
	defer drainTimer.Stop()
	if srv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
		if err := srv.Shutdown(shutdownCtx); err != nil {
			n.logger.Warn("ledgerq: API shutdown", "error", err)
		}
		cancel()
	}
	n.Stop()
	n.logger.Info("ledgerq: stopped")
	return serveErr
}

func (n *Node) batchLedgerName() string {
	if n.cfg.Batch.Ledger.Instance != nil {
		return "given"
	}
	return n.cfg.Batch.Ledger.Kind
}

// logAccess says at start which surfaces need an API key.
func (n *Node) logAccess() {
	a := n.cfg.API.Access
	if a.Open {
		n.logger.Warn("ledgerq: access: --api-insecure-open: every /v1 route, /metrics and the console answer without an API key; " +
			"anyone who reaches this address acts as an admin")
		return
	}
	open := []string{"/healthz", "/readyz", "/openapi.json"}
	if a.MetricsOpen {
		open = append(open, "/metrics")
	}
	if !a.SawtoothRequireKey {
		open = append(open, "/batches", "/batch_statuses")
	}
	if !a.RPCRequireKey {
		open = append(open, "/rpc")
	}
	n.logger.Info("ledgerq: access: every /v1 route, the console and /metrics need an API key with the route's scope (ledgerq keys create)",
		"open_without_key", open)
}
