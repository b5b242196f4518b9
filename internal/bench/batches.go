package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/submitter"
)

// ErrUnfinished is wrapped by RunBatches' error when some inserted batches had
// no terminal status when the run ended.
var ErrUnfinished = errors.New("batches unfinished")

// BatchConfig configures a batch-lane run.
type BatchConfig struct {
	DatabaseURL string
	// Migrate applies pending migrations before the run.
	Migrate bool

	Services          int
	BatchesPerService int
	// Duration stops ingesting after this long; 0 ingests every batch.
	Duration time.Duration
	// IngestWorkers is how many goroutines insert concurrently, each with its
	// own connection, as concurrent API requests would.
	IngestWorkers int
	// InsertSize is how many batches one InsertBatches call (one transaction,
	// like one POST /v1/batches) stores.
	InsertSize int
	// Grace is how long the run waits, once ingest stops, for every inserted
	// batch to reach a terminal status.
	Grace time.Duration

	// The loops, configured as serve configures them. Submitters is how many
	// submitter loops run side by side (as several serve processes would).
	Queuer     queuer.Config
	Submitter  submitter.Config
	Submitters int
	Monitor    monitor.Config

	// Sim configures the in-process simulated ledger; its Clock and Logger
	// are set by the run.
	Sim sim.Config

	// Progress receives a line every ProgressInterval while the run goes;
	// nil discards them. Completion is checked at the same pace.
	Progress         io.Writer
	ProgressInterval time.Duration
	// Logger receives the loops' logs; nil discards them.
	Logger *slog.Logger
}

// DefaultBatchConfig returns the defaults of `ledgerq bench batches`: the
// loops' own defaults and the simulated ledger of `ledgerq dev`.
func DefaultBatchConfig() BatchConfig {
	return BatchConfig{
		Migrate:           true,
		Services:          100,
		BatchesPerService: 100,
		IngestWorkers:     4,
		InsertSize:        10,
		Grace:             2 * time.Minute,
		Queuer:            queuer.DefaultConfig(),
		Submitter:         submitter.DefaultConfig(),
		Submitters:        1,
		Monitor:           monitor.DefaultConfig(),
		Sim:               sim.Config{Seed: 1, CommitDelay: 500 * time.Millisecond, MaxEvents: 10000},
		ProgressInterval:  time.Second,
	}
}

// Validate reports the first problem with the configuration.
func (c *BatchConfig) Validate() error {
	switch {
	case c.DatabaseURL == "":
		return errors.New("no database: set DATABASE_URL or --database-url")
	case c.Services < 1 || c.BatchesPerService < 1:
		return errors.New("--services and --batches-per-service must be at least 1")
	case c.IngestWorkers < 1 || c.InsertSize < 1:
		return errors.New("--ingest-workers and --insert-size must be at least 1")
	case c.Submitters < 1:
		return errors.New("--submitters must be at least 1")
	case c.Duration < 0 || c.Grace < 0:
		return errors.New("--duration and --grace must not be negative")
	case c.ProgressInterval <= 0:
		return errors.New("--progress-interval must be positive")
	case c.Queuer.Interval <= 0 || c.Submitter.Interval <= 0 || c.Monitor.Interval <= 0:
		return errors.New("--poll-interval must be positive")
	case c.Submitter.BatchSize < 1 || c.Monitor.BatchSize < 1:
		return errors.New("--submit-batch-size and --check-batch-size must be at least 1")
	case c.Submitter.Lease <= c.Submitter.LedgerTimeout:
		return fmt.Errorf("--claim-lease (%s) must be longer than --ledger-timeout (%s)", c.Submitter.Lease, c.Submitter.LedgerTimeout)
	case c.Queuer.DelayBase <= 0 || c.Queuer.DelayCap < c.Queuer.DelayBase:
		return errors.New("--delay-window must be positive and --delay-cap at least as long")
	}
	return nil
}

// BatchReport is the outcome of a run. Counts and times come from the run's
// rows in ledgerq.batches, read once at the end.
type BatchReport struct {
	Config   BatchConfig
	Prefix   string
	Planned  int
	Inserted int
	// Committed, Invalid and Valid are terminal; Unfinished are not.
	Committed, Invalid, Valid, Unfinished int
	// Submissions counts submission attempts (the sum of attempts): more
	// than Inserted means retries.
	Submissions int64

	GenerateTime time.Duration
	// IngestTime runs from the first insert call to the end of the last.
	IngestTime time.Duration
	// EndToEnd runs from the first received_at to the last finished_at.
	EndToEnd time.Duration
	// Wall is the whole run, loops started to loops stopped.
	Wall time.Duration
	// IngestRate is Inserted / IngestTime; CommitRate is Committed / EndToEnd.
	IngestRate, CommitRate float64
	// Latency of committed batches, received_at to finished_at.
	P50, P99, Max time.Duration

	// Interrupted is set when ctx ended the run early; TimedOut when the
	// grace period ran out first.
	Interrupted, TimedOut bool
	Ledger                sim.Stats
	// ProgressQueries and ProgressQueryTime are the bench's own load on the
	// database: BatchCountsByState scans the whole table, and on a large
	// table that is not free.
	ProgressQueries   int
	ProgressQueryTime time.Duration
}

// RunBatches runs the workload against the database in cfg and reports.
// The error wraps ErrUnfinished when batches were left unfinished; the report
// is returned with it so the caller can print what happened.
func RunBatches(ctx context.Context, cfg BatchConfig, w *Workload) (*BatchReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	r := &batchRun{cfg: cfg, w: w, clk: clock.Real{}}
	defer r.close()
	if err := r.open(ctx); err != nil {
		return nil, err
	}
	return r.run(ctx)
}

type batchRun struct {
	cfg BatchConfig
	w   *Workload
	clk clock.Clock

	// loops is the loops' pool, as serve opens it; ingest is the ingest
	// workers' own, standing in for the API's connections.
	loops  *store.Store
	ingest *store.Store
	ledger *sim.Ledger

	baseline map[string]int64
	inserted atomic.Int64

	// Only the run's goroutine touches these.
	progressQueries   int
	progressQueryTime time.Duration
}

func (r *batchRun) close() {
	if r.ingest != nil {
		r.ingest.Close()
	}
	if r.loops != nil {
		r.loops.Close()
	}
}

// openPool opens a pool of at least minConns connections; a larger
// pool_max_conns in the URL wins.
func openPool(ctx context.Context, databaseURL, appName string, minConns int32) (*store.Store, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > 5*time.Second {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = appName
	cfg.MaxConns = max(cfg.MaxConns, minConns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating connection pool: %w", err)
	}
	return store.New(pool), nil
}

func (r *batchRun) open(ctx context.Context) error {
	c := &r.cfg
	var err error
	// The loops need a connection each plus one for the progress query; a
	// serve process on few CPUs gets pgxpool's default of 4.
	if r.loops, err = openPool(ctx, c.DatabaseURL, "ledgerq bench loops", int32(2+c.Submitters+1)); err != nil {
		return err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = r.loops.Ping(pingCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot reach the database at %s: %w", redact(c.DatabaseURL), err)
	}
	if c.Migrate {
		m, err := r.loops.NewMigrator(c.Logger)
		if err != nil {
			return err
		}
		_, err = m.Up(ctx)
		_ = m.Close()
		if err != nil {
			return err
		}
	}
	if r.ingest, err = openPool(ctx, c.DatabaseURL, "ledgerq bench ingest", int32(c.IngestWorkers)); err != nil {
		return err
	}
	if err := warm(ctx, r.ingest.Pool(), c.IngestWorkers); err != nil {
		return err
	}
	countCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	r.baseline, err = r.loops.BatchCountsByState(countCtx)
	cancel()
	if err != nil {
		return err
	}
	if open := unfinished(r.baseline); open > 0 {
		fmt.Fprintf(c.Progress, "bench: warning: the database holds %d unfinished batches from before this run; the loops will work them too\n", open)
	}
	simCfg := c.Sim
	simCfg.Clock = r.clk
	simCfg.Logger = c.Logger
	r.ledger = sim.New(simCfg)
	return nil
}

// warm opens n connections before the clock starts, so that connecting is
// not counted as ingest time.
func warm(ctx context.Context, pool *pgxpool.Pool, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("opening ingest connections: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

type service interface {
	Start(ctx context.Context) error
	Stop()
}

// startLoops starts a listener and the loops as serve does and returns a
// function that stops them: first stop claiming, then cancel what is left.
func (r *batchRun) startLoops(ctx context.Context) (stop func(), err error) {
	c := &r.cfg
	listener := notify.NewListener(c.DatabaseURL, c.Logger)
	var services []service
	services = append(services, queuer.New(r.loops, r.clk, c.Logger, c.Queuer, listener.Subscribe(store.ChannelQueuer)))
	for range c.Submitters {
		services = append(services, submitter.New(r.loops, r.ledger, r.clk, c.Logger, c.Submitter, listener.Subscribe(store.ChannelSubmitter)))
	}
	services = append(services, monitor.New(r.loops, r.ledger, r.clk, c.Logger, c.Monitor, listener.Subscribe(store.ChannelMonitor)))

	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	connected := listener.Connected()
	if err := listener.Start(work); err != nil {
		cancel()
		return nil, err
	}
	stop = func() {
		var wg sync.WaitGroup
		for _, s := range services {
			wg.Go(s.Stop)
		}
		wg.Wait()
		cancel()
		listener.Stop()
	}
	// Wait for LISTEN so that the first inserts' notifications are heard
	// (a late listener would only cost one poll interval).
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		stop()
		return nil, errors.New("the notification listener did not connect within 10s")
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
	for _, s := range services {
		if err := s.Start(work); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

func (r *batchRun) run(ctx context.Context) (*BatchReport, error) {
	c := &r.cfg
	rep := &BatchReport{Config: *c, Prefix: r.w.Prefix, Planned: len(r.w.Batches), GenerateTime: r.w.GenerateTime}
	rep.Config.Progress, rep.Config.Logger = nil, nil

	stopLoops, err := r.startLoops(ctx)
	if err != nil {
		return nil, err
	}
	loopsStopped := false
	defer func() {
		if !loopsStopped {
			stopLoops()
		}
	}()

	start := time.Now()
	ingestDone := make(chan struct{})
	var ingestErr error
	var ingestEnd time.Time
	go func() {
		defer close(ingestDone)
		ingestErr = r.ingestAll(ctx, start)
		ingestEnd = time.Now()
	}()

	ticker := time.NewTicker(c.ProgressInterval)
	defer ticker.Stop()
	var graceC <-chan time.Time
	ingesting := ingestDone
wait:
	for {
		select {
		case <-ctx.Done():
			rep.Interrupted = true
			<-ingestDone // the workers stop at once on ctx
			break wait
		case <-ingesting:
			ingesting = nil
			if ingestErr != nil {
				break wait
			}
			grace := time.NewTimer(c.Grace)
			defer grace.Stop()
			graceC = grace.C
		case <-graceC:
			// One last look: the batches may have finished since the last tick.
			if done, _ := r.progress(ctx, start, true); !done {
				rep.TimedOut = true
			}
			break wait
		case <-ticker.C:
			if done, _ := r.progress(ctx, start, ingesting == nil); done {
				break wait
			}
		}
	}
	stopLoops()
	loopsStopped = true
	rep.Wall = time.Since(start)
	rep.IngestTime = ingestEnd.Sub(start)
	rep.Ledger = r.ledger.Stats()
	rep.ProgressQueries, rep.ProgressQueryTime = r.progressQueries, r.progressQueryTime

	// The run may have been interrupted; its figures are still worth reading.
	sumCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := r.summarize(sumCtx, rep); err != nil {
		return nil, errors.Join(ingestErr, err)
	}
	if ingestErr != nil {
		return rep, ingestErr
	}
	if rep.Unfinished > 0 {
		return rep, fmt.Errorf("%d of %d inserted batches had no final status %s: %w",
			rep.Unfinished, rep.Inserted, endReason(rep), ErrUnfinished)
	}
	return rep, nil
}

func endReason(rep *BatchReport) string {
	if rep.Interrupted {
		return "when the run was interrupted"
	}
	return fmt.Sprintf("by the end of the %s grace period", rep.Config.Grace)
}

// ingestAll inserts the workload with IngestWorkers goroutines, InsertSize
// batches per call, until every batch is in, Duration passes, ctx ends or an
// insert fails.
func (r *batchRun) ingestAll(ctx context.Context, start time.Time) error {
	c := &r.cfg
	batches := r.w.Batches
	var deadline time.Time
	if c.Duration > 0 {
		deadline = start.Add(c.Duration)
	}
	var (
		next    atomic.Int64
		failed  atomic.Bool
		errOnce sync.Once
		err     error
		wg      sync.WaitGroup
	)
	for range c.IngestWorkers {
		wg.Go(func() {
			for ctx.Err() == nil && !failed.Load() && (deadline.IsZero() || time.Now().Before(deadline)) {
				i := int(next.Add(int64(c.InsertSize))) - c.InsertSize
				if i >= len(batches) {
					return
				}
				chunk := batches[i:min(i+c.InsertSize, len(batches))]
				callCtx, cancel := context.WithTimeout(ctx, c.Queuer.DBTimeout)
				_, e := r.ingest.InsertBatches(callCtx, r.clk.Now(), chunk)
				cancel()
				if e != nil {
					if ctx.Err() != nil {
						return // interrupted: the transaction rolled back
					}
					failed.Store(true)
					errOnce.Do(func() { err = fmt.Errorf("ingest: %w", e) })
					return
				}
				r.inserted.Add(int64(len(chunk)))
			}
		})
	}
	wg.Wait()
	return err
}

// states are the per-state counts a progress line shows, in lane order.
var states = []string{"new", "queued", "held", "pending", "unknown", "delayed"}

func terminal(state string) bool {
	return store.BatchStatus(state).Terminal()
}

func unfinished(counts map[string]int64) int64 {
	var n int64
	for s, c := range counts {
		if !terminal(s) {
			n += c
		}
	}
	return n
}

// progress writes one progress line and reports whether ingest is over and
// every inserted batch has finished. Terminal counts are this run's (the
// baseline taken at start is subtracted); the others are the whole table's.
func (r *batchRun) progress(ctx context.Context, start time.Time, ingestOver bool) (bool, error) {
	countCtx, cancel := context.WithTimeout(ctx, r.cfg.Queuer.DBTimeout)
	began := time.Now()
	counts, err := r.loops.BatchCountsByState(countCtx)
	r.progressQueries++
	r.progressQueryTime += time.Since(began)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(r.cfg.Progress, "bench: counting batches: %v\n", err)
		}
		return false, err
	}
	delta := func(s string) int64 { return counts[s] - r.baseline[s] }
	committed, invalid, valid := delta(string(store.BatchStatusCommitted)), delta(string(store.BatchStatusInvalid)), delta(string(store.BatchStatusValid))
	inserted := r.inserted.Load()
	finished := committed + invalid + valid
	line := fmt.Sprintf("bench: %6.1fs  inserted %d/%d  committed %d  invalid %d  in flight %d  |",
		time.Since(start).Seconds(), inserted, len(r.w.Batches), committed, invalid, inserted-finished)
	if valid > 0 {
		line += fmt.Sprintf(" valid %d", valid)
	}
	for _, s := range states {
		line += fmt.Sprintf(" %s %d", s, counts[s])
	}
	fmt.Fprintln(r.cfg.Progress, line)
	return ingestOver && finished >= inserted, nil
}

// summarySQL reads one run's figures from its rows. It is the bench's only
// hand-written SQL: a read-only report that no loop or API path runs, so it
// stays out of queries/. percentile_disc picks real observed latencies.
const summarySQL = `
SELECT count(*),
       count(*) FILTER (WHERE status = 'committed'),
       count(*) FILTER (WHERE status = 'invalid'),
       count(*) FILTER (WHERE status = 'valid'),
       count(*) FILTER (WHERE finished_at IS NULL),
       coalesce(sum(attempts), 0),
       (extract(epoch FROM max(finished_at) - min(received_at)) * 1e6)::bigint,
       (extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY finished_at - received_at)
            FILTER (WHERE status = 'committed')) * 1e6)::bigint,
       (extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY finished_at - received_at)
            FILTER (WHERE status = 'committed')) * 1e6)::bigint,
       (extract(epoch FROM max(finished_at - received_at) FILTER (WHERE status = 'committed')) * 1e6)::bigint
FROM ledgerq.batches
WHERE starts_with(service_id, $1)`

func (r *batchRun) summarize(ctx context.Context, rep *BatchReport) error {
	var endToEnd, p50, p99, maxLat *int64
	err := r.loops.Pool().QueryRow(ctx, summarySQL, r.w.Prefix).Scan(
		&rep.Inserted, &rep.Committed, &rep.Invalid, &rep.Valid, &rep.Unfinished, &rep.Submissions,
		&endToEnd, &p50, &p99, &maxLat)
	if err != nil {
		return fmt.Errorf("reading the run's figures: %w", err)
	}
	us := func(v *int64) time.Duration {
		if v == nil {
			return 0
		}
		return time.Duration(*v) * time.Microsecond
	}
	rep.EndToEnd, rep.P50, rep.P99, rep.Max = us(endToEnd), us(p50), us(p99), us(maxLat)
	if rep.IngestTime > 0 {
		rep.IngestRate = float64(rep.Inserted) / rep.IngestTime.Seconds()
	}
	if rep.EndToEnd > 0 {
		rep.CommitRate = float64(rep.Committed) / rep.EndToEnd.Seconds()
	}
	return nil
}

// WriteSummary prints the configuration and the results.
func (rep *BatchReport) WriteSummary(w io.Writer) error {
	c := &rep.Config
	duration := "until every batch is in"
	if c.Duration > 0 {
		duration = c.Duration.String()
	}
	status := "complete"
	switch {
	case rep.Interrupted:
		status = "interrupted"
	case rep.TimedOut:
		status = "grace period ran out"
	case rep.Unfinished > 0:
		status = "incomplete"
	}
	avg := 0.0
	if rep.Ledger.SubmitCalls > 0 {
		avg = float64(rep.Ledger.BatchesSubmitted) / float64(rep.Ledger.SubmitCalls)
	}
	lines := []string{
		"ledgerq bench batches: " + status,
		"configuration",
		fmt.Sprintf("  database          %s", redact(c.DatabaseURL)),
		fmt.Sprintf("  workload          %d services x %d batches = %d signed batches (service ids %s*), signed in %s",
			c.Services, c.BatchesPerService, rep.Planned, rep.Prefix, round(rep.GenerateTime)),
		fmt.Sprintf("  ingest            %d workers, %d batches per InsertBatches call, duration %s, grace %s",
			c.IngestWorkers, c.InsertSize, duration, c.Grace),
		fmt.Sprintf("  loops             poll interval %s, db timeout %s; queuer delay window %s (cap %s)",
			c.Queuer.Interval, c.Queuer.DBTimeout, c.Queuer.DelayBase, c.Queuer.DelayCap),
		fmt.Sprintf("                    %d submitter(s): submit batch size %d, claim lease %s, first check %s, ledger timeout %s",
			c.Submitters, c.Submitter.BatchSize, c.Submitter.Lease, c.Submitter.FirstCheck, c.Submitter.LedgerTimeout),
		fmt.Sprintf("                    monitor: check interval %s, check batch size %d",
			c.Monitor.CheckInterval, c.Monitor.BatchSize),
		fmt.Sprintf("  simulated ledger  commit delay %s, latency %s, reject %g, transient %g, lost %g, dropped responses %g, seed %d",
			c.Sim.CommitDelay, c.Sim.Latency, c.Sim.RejectRate, c.Sim.TransientRate, c.Sim.LostRate, c.Sim.DropResponseRate, c.Sim.Seed),
		"results",
		fmt.Sprintf("  batches           %d inserted of %d; %d committed, %d invalid, %d valid, %d unfinished; %d submissions",
			rep.Inserted, rep.Planned, rep.Committed, rep.Invalid, rep.Valid, rep.Unfinished, rep.Submissions),
		fmt.Sprintf("  ingest            %.0f batches/s (%d in %s)", rep.IngestRate, rep.Inserted, round(rep.IngestTime)),
		fmt.Sprintf("  end to end        %.0f committed/s (%d from first insert to last commit in %s)",
			rep.CommitRate, rep.Committed, round(rep.EndToEnd)),
		fmt.Sprintf("  latency           insert to committed: p50 %s, p99 %s, max %s", round(rep.P50), round(rep.P99), round(rep.Max)),
		fmt.Sprintf("  ledger            %d submit calls (%.1f batches each), %d status calls",
			rep.Ledger.SubmitCalls, avg, rep.Ledger.StatusCalls),
		fmt.Sprintf("  bench overhead    %d progress queries (BatchCountsByState, a full scan) took %s", rep.ProgressQueries, round(rep.ProgressQueryTime)),
		fmt.Sprintf("  wall              %s", round(rep.Wall)),
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	default:
		return d.Round(10 * time.Microsecond)
	}
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}
