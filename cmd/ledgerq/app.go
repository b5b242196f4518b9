package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
)

// options are the flags shared by serve, once and dev.
type options struct {
	databaseURL string
	logLevel    string
	migrate     bool

	httpAddr        string
	api             bool
	runQueuer       bool
	runSubmitter    bool
	runMonitor      bool
	shutdownTimeout time.Duration

	ledgerKind    string
	ledgerURL     string
	ledgerTimeout time.Duration
	sim           simOptions

	pollInterval  time.Duration
	dbTimeout     time.Duration
	delayWindow   time.Duration
	delayCap      time.Duration
	submitBatch   int
	claimLease    time.Duration
	checkInterval time.Duration
	checkBatch    int

	maxBodyBytes    int64
	maxBatches      int
	maxPayloadBytes int
}

type simOptions struct {
	seed          int64
	latency       time.Duration
	commitDelay   time.Duration
	rejectRate    float64
	transientRate float64
	lostRate      float64
	dropRate      float64
}

func (o *simOptions) register(fs *flag.FlagSet) {
	fs.Int64Var(&o.seed, "sim-seed", 1, "simulated ledger: random seed")
	fs.DurationVar(&o.latency, "sim-latency", 0, "simulated ledger: latency of each call")
	fs.DurationVar(&o.commitDelay, "sim-commit-delay", 500*time.Millisecond, "simulated ledger: time from acceptance to commit")
	fs.Float64Var(&o.rejectRate, "sim-reject-rate", 0, "simulated ledger: fraction of accepted batches that end INVALID")
	fs.Float64Var(&o.transientRate, "sim-transient-rate", 0, "simulated ledger: fraction of submit calls that fail transiently")
	fs.Float64Var(&o.lostRate, "sim-lost-rate", 0, "simulated ledger: fraction of accepted batches it loses (they answer UNKNOWN)")
	fs.Float64Var(&o.dropRate, "sim-drop-response-rate", 0, "simulated ledger: fraction of submit calls that succeed but whose answer is lost")
}

func (o *simOptions) config(clk clock.Clock) sim.Config {
	return sim.Config{
		Seed: o.seed, Clock: clk, Latency: o.latency, CommitDelay: o.commitDelay,
		RejectRate: o.rejectRate, TransientRate: o.transientRate, LostRate: o.lostRate, DropResponseRate: o.dropRate,
	}
}

func (o *options) register(fs *flag.FlagSet, withHTTP bool) {
	qd, sd, md, hd := queuer.DefaultConfig(), submitter.DefaultConfig(), monitor.DefaultConfig(), httpapi.DefaultConfig()
	fs.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL connection URL")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&o.migrate, "migrate", true, "apply pending schema migrations at start")
	if withHTTP {
		fs.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:8080", "address the HTTP API listens on")
		fs.BoolVar(&o.api, "api", true, "run the HTTP API")
		fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long to let in-flight work finish before cancelling it")
	}
	fs.BoolVar(&o.runQueuer, "queuer", true, "run the queuer loop")
	fs.BoolVar(&o.runSubmitter, "submitter", true, "run the submitter loop")
	fs.BoolVar(&o.runMonitor, "monitor", true, "run the monitor loop")
	fs.StringVar(&o.ledgerKind, "ledger", "sim", "ledger: sim (in-process simulated ledger) or sawtooth (Sawtooth REST API at --ledger-url)")
	fs.StringVar(&o.ledgerURL, "ledger-url", "", "ledger URL, for --ledger sawtooth (for example http://127.0.0.1:8008)")
	fs.DurationVar(&o.ledgerTimeout, "ledger-timeout", sd.LedgerTimeout, "timeout of one ledger call")
	o.sim.register(fs)
	fs.DurationVar(&o.pollInterval, "poll-interval", qd.Interval, "how often each loop runs when no notification wakes it")
	fs.DurationVar(&o.dbTimeout, "db-timeout", qd.DBTimeout, "timeout of one database call from a loop")
	fs.DurationVar(&o.delayWindow, "delay-window", qd.DelayBase, "batch lane: delay before a transiently failed batch is retried; doubles with each attempt")
	fs.DurationVar(&o.delayCap, "delay-cap", qd.DelayCap, "batch lane: the longest delay window")
	fs.IntVar(&o.submitBatch, "submit-batch-size", sd.BatchSize, "batch lane: most batches sent in one ledger call")
	fs.DurationVar(&o.claimLease, "claim-lease", sd.Lease, "how long a submitter's claim holds an item before the monitor checks on it")
	fs.DurationVar(&o.checkInterval, "check-interval", md.CheckInterval, "batch lane: time between two status checks of a pending batch")
	fs.IntVar(&o.checkBatch, "check-batch-size", md.BatchSize, "batch lane: most batches asked about in one ledger call")
	if withHTTP {
		fs.Int64Var(&o.maxBodyBytes, "max-body-bytes", hd.MaxBodyBytes, "largest request body the API accepts")
		fs.IntVar(&o.maxBatches, "max-batches-per-request", hd.MaxBatchesPerRequest, "most batches in one POST /v1/batches")
		fs.IntVar(&o.maxPayloadBytes, "max-payload-bytes", hd.MaxPayloadBytes, "largest batch payload the API accepts")
	}
}

func (o *options) validate() error {
	switch {
	case o.ledgerKind != "sim" && o.ledgerKind != "sawtooth":
		return fmt.Errorf("--ledger %q: want sim or sawtooth", o.ledgerKind)
	case o.ledgerKind == "sawtooth" && o.ledgerURL == "":
		return errors.New("--ledger sawtooth needs --ledger-url")
	case o.pollInterval <= 0:
		return errors.New("--poll-interval must be positive")
	case o.submitBatch < 1 || o.checkBatch < 1:
		return errors.New("--submit-batch-size and --check-batch-size must be at least 1")
	case o.claimLease <= o.ledgerTimeout:
		return fmt.Errorf("--claim-lease (%s) must be longer than --ledger-timeout (%s), or the monitor may check a batch that is still being sent", o.claimLease, o.ledgerTimeout)
	case o.delayWindow <= 0 || o.delayCap < o.delayWindow:
		return errors.New("--delay-window must be positive and --delay-cap at least as long")
	}
	if o.ledgerURL != "" {
		if _, err := url.ParseRequestURI(o.ledgerURL); err != nil {
			return fmt.Errorf("--ledger-url: %w", err)
		}
	}
	return nil
}

func (o *options) newLedger(clk clock.Clock, logger *slog.Logger) (ledger.BatchLedger, error) {
	if o.ledgerKind == "sawtooth" {
		c, err := sawtooth.NewClient(o.ledgerURL, &http.Client{Timeout: o.ledgerTimeout}, logger)
		if err != nil {
			return nil, fmt.Errorf("--ledger-url: %w", err)
		}
		return c, nil
	}
	return sim.New(o.sim.config(clk)), nil
}

// validateSawtoothBatch is the API's check of a posted batch: the payload is a
// Sawtooth Batch message with valid signatures, and its header_signature is
// the batch id.
func validateSawtoothBatch(id string, payload []byte) error {
	b, err := sawtooth.ParseAndVerifyBatch(payload)
	if err != nil {
		return err
	}
	if b.HeaderSignature != id {
		return fmt.Errorf("header_signature %.16s… is not the batch id", b.HeaderSignature)
	}
	return nil
}

// app is one ledgerq process: the store, the loops it runs and the API.
type app struct {
	opts     *options
	logger   *slog.Logger
	store    *store.Store
	migrator *store.Migrator
	listener *notify.Listener
	ledger   ledger.BatchLedger

	queuer    *queuer.Queuer
	submitter *submitter.Submitter
	monitor   *monitor.Monitor
}

// openApp connects to the database, checks it answers within a bounded time,
// and migrates it when asked.
func openApp(ctx context.Context, o *options, logger *slog.Logger) (*app, error) {
	if o.databaseURL == "" {
		return nil, errors.New("no database: set DATABASE_URL or --database-url (or use 'ledgerq dev' for a private one)")
	}
	st, err := store.Open(ctx, o.databaseURL)
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = st.Ping(pingCtx)
	cancel()
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("cannot reach the database at %s: %w", redactURL(o.databaseURL), err)
	}
	m, err := st.NewMigrator(logger)
	if err != nil {
		st.Close()
		return nil, err
	}
	a := &app{opts: o, logger: logger, store: st, migrator: m}
	if o.migrate {
		res, err := m.Up(ctx)
		if err != nil {
			a.close()
			return nil, err
		}
		if len(res) > 0 {
			logger.Info("ledgerq: migrated database", "applied", len(res), "version", m.LatestVersion())
		}
	}
	return a, nil
}

func (a *app) close() {
	_ = a.migrator.Close()
	a.store.Close()
}

// Ready implements httpapi.Readiness: the database answers and is migrated to
// the version this binary expects.
func (a *app) Ready(ctx context.Context) error {
	if err := a.store.Ping(ctx); err != nil {
		return errors.New("database unreachable")
	}
	current, latest, err := a.migrator.Versions(ctx)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if current != latest {
		return fmt.Errorf("database schema is at version %d, this ledgerq needs %d (run ledgerq migrate up)", current, latest)
	}
	return nil
}

// buildLoops creates the enabled loops. listener may be nil (once: no wake-ups).
func (a *app) buildLoops(clk clock.Clock, l ledger.BatchLedger, listener *notify.Listener) {
	o := a.opts
	wake := func(channel string) <-chan struct{} {
		if listener == nil {
			return nil
		}
		return listener.Subscribe(channel)
	}
	a.ledger = l
	if o.runQueuer {
		a.queuer = queuer.New(a.store, clk, a.logger, queuer.Config{
			Interval: o.pollInterval, DelayBase: o.delayWindow, DelayCap: o.delayCap, DBTimeout: o.dbTimeout,
		}, wake(store.ChannelQueuer))
	}
	if o.runSubmitter {
		sd := submitter.DefaultConfig()
		a.submitter = submitter.New(a.store, l, clk, a.logger, submitter.Config{
			Interval: o.pollInterval, BatchSize: o.submitBatch, Lease: o.claimLease, FirstCheck: sd.FirstCheck,
			DBTimeout: o.dbTimeout, LedgerTimeout: o.ledgerTimeout,
		}, wake(store.ChannelSubmitter))
	}
	if o.runMonitor {
		a.monitor = monitor.New(a.store, l, clk, a.logger, monitor.Config{
			Interval: o.pollInterval, BatchSize: o.checkBatch, CheckInterval: o.checkInterval, Lease: o.claimLease,
			DBTimeout: o.dbTimeout, LedgerTimeout: o.ledgerTimeout,
		}, wake(store.ChannelMonitor))
	}
}

type service interface {
	Start(ctx context.Context) error
	Stop()
}

func (a *app) services() []service {
	var s []service
	if a.queuer != nil {
		s = append(s, a.queuer)
	}
	if a.submitter != nil {
		s = append(s, a.submitter)
	}
	if a.monitor != nil {
		s = append(s, a.monitor)
	}
	return s
}

// serve runs the API and the loops until ctx is done, then drains: it stops
// accepting requests and claiming work, lets in-flight work finish for up to
// --shutdown-timeout, then cancels what is left. ready, when not nil, is called
// with the API's address once it listens.
func (a *app) serve(ctx context.Context, clk clock.Clock, l ledger.BatchLedger, ready func(addr string)) error {
	o := a.opts
	a.listener = notify.NewListener(o.databaseURL, a.logger)
	a.buildLoops(clk, l, a.listener)

	// work is cancelled only after the drain timeout: stopping the loops
	// first lets in-flight rounds finish.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	if err := a.listener.Start(work); err != nil {
		return err
	}
	defer a.listener.Stop()
	for _, s := range a.services() {
		if err := s.Start(work); err != nil {
			return err
		}
	}

	var srv *http.Server
	errc := make(chan error, 1)
	if o.api {
		api := httpapi.New(httpapi.Config{
			MaxBodyBytes: o.maxBodyBytes, MaxBatchesPerRequest: o.maxBatches, MaxPayloadBytes: o.maxPayloadBytes,
			ValidateBatch: validateSawtoothBatch,
		}, a.store, a, clk, a.logger)
		ln, err := net.Listen("tcp", o.httpAddr)
		if err != nil {
			a.stopServices(cancelWork)
			return fmt.Errorf("listening on %s: %w", o.httpAddr, err)
		}
		srv = &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		a.logger.Info("ledgerq: API listening", "url", "http://"+ln.Addr().String())
		if ready != nil {
			ready(ln.Addr().String())
		}
	}
	a.logger.Info("ledgerq: running", "queuer", o.runQueuer, "submitter", o.runSubmitter, "monitor", o.runMonitor, "ledger", o.ledgerKind)

	var serveErr error
	select {
	case <-ctx.Done():
		a.logger.Info("ledgerq: shutting down")
	case serveErr = <-errc:
		a.logger.Error("ledgerq: API server failed", "error", serveErr)
	}

	drainTimer := time.AfterFunc(o.shutdownTimeout, func() {
		a.logger.Warn("ledgerq: drain timeout passed, cancelling in-flight work")
		cancelWork()
	})
	defer drainTimer.Stop()
	if srv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
		if err := srv.Shutdown(shutdownCtx); err != nil {
			a.logger.Warn("ledgerq: API shutdown", "error", err)
		}
		cancel()
	}
	a.stopServices(nil)
	a.logger.Info("ledgerq: stopped")
	return serveErr
}

func (a *app) stopServices(cancel context.CancelFunc) {
	if cancel != nil {
		cancel()
	}
	var wg sync.WaitGroup
	for _, s := range a.services() {
		wg.Go(s.Stop)
	}
	wg.Wait()
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

func setupLogger(level string) (*slog.Logger, error) {
	return newLogger(os.Stderr, level)
}
