package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/store"
)

// ErrUnfinished is wrapped by RunBatches' error when some inserted batches had
// no terminal status when the run ended.
var ErrUnfinished = errors.New("batches unfinished")

// Mode is how a run feeds the lane and what it times.
type Mode string

const (
	// ModeE2E stores batches with the API's store path (BatchInsert) while
	// the loops run, and times from the first insert to the last commit.
	ModeE2E Mode = "e2e"
	// ModePreload stores every batch with the loops stopped, then starts them
	// and times from their start to the last commit: processing from a
	// backlog, as River's benchmark (river bench --num-total-jobs) measures.
	ModePreload Mode = "preload"
	// ModeHTTP is ModeE2E with intake through the real HTTP API, served on a
	// loopback listener: JSON decoding and the API's signature checks are
	// paid, as a client's request pays them.
	ModeHTTP Mode = "http"
	// ModeSQL is ModeE2E with intake through ledgerq.submit_batch, as an
	// application enqueues in its own transaction (docs/enqueue.md): one
	// transaction per insert from the bench's own pool, a call per batch.
	// SQL does not check signatures; the submitter does, before sending.
	ModeSQL Mode = "sql"
)

// Modes lists the modes, the default first.
var Modes = []Mode{ModeE2E, ModePreload, ModeHTTP, ModeSQL}

// BatchConfig configures a batch-lane run.
type BatchConfig struct {
	// Node is the ledgerq process under test, configured as serve's is: the
	// database, the loops' timings and the batch lane. Its API is not run;
	// its Batch.Submitters submitter loops run side by side (as several serve
	// processes would) and its ledger is the simulated one, in this process.
	Node node.Config

	// Mode chooses how batches reach the lane and what is timed.
	Mode Mode

	Services          int
	BatchesPerService int
	// Duration stops ingesting after this long; 0 ingests every batch.
	Duration time.Duration
	// IngestWorkers is how many goroutines insert concurrently, each with its
	// own connection, as concurrent API requests would; in ModeHTTP, how many
	// HTTP clients post concurrently.
	IngestWorkers int
	// InsertSize is how many batches one BatchInsert call (one transaction,
	// like one POST /v1/batches) stores; in ModeHTTP, how many one request
	// carries; in ModeSQL, how many ledgerq.submit_batch calls one
	// transaction makes.
	InsertSize int
	// Grace is how long the run waits, once ingest stops, for every inserted
	// batch to reach a terminal status.
	Grace time.Duration

	// Progress receives a line every ProgressInterval while the run goes;
	// nil discards them. Completion is checked at the same pace.
	Progress         io.Writer
	ProgressInterval time.Duration

	// Rate, when positive, paces ingest at this many batches per second (an
	// offered load, for latency at a given rate and for churn runs); 0 stores
	// them as fast as the workers can.
	Rate float64
	// BacklogFinished seeds this many committed batches (with payloads)
	// before the run, as a long-running lane leaves behind, to show the lane
	// does not slow down with the terminal rows it keeps.
	BacklogFinished int
}

// DefaultBatchConfig returns the defaults of `ledgerq bench batches`: the
// node's own defaults and the simulated ledger of `ledgerq dev`.
func DefaultBatchConfig() BatchConfig {
	n := node.Defaults()
	n.API.Enabled = false
	return BatchConfig{
		Node:              n,
		Mode:              ModeE2E,
		Services:          100,
		BatchesPerService: 100,
		IngestWorkers:     4,
		InsertSize:        10,
		Grace:             2 * time.Minute,
		ProgressInterval:  time.Second,
	}
}

// Validate reports the first problem with the configuration: the node's own
// validation, then the workload's.
func (c *BatchConfig) Validate() error {
	if err := c.Node.Validate(); err != nil {
		return err
	}
	switch {
	case !slices.Contains(Modes, c.Mode):
		return fmt.Errorf("--mode %q: must be one of %v", c.Mode, Modes)
	case c.Mode == ModeHTTP && c.InsertSize > c.Node.API.MaxBatchesPerRequest:
		return fmt.Errorf("--insert-size %d: the API takes at most %d batches per request", c.InsertSize, c.Node.API.MaxBatchesPerRequest)
	case c.Services < 1 || c.BatchesPerService < 1:
		return errors.New("--services and --batches-per-service must be at least 1")
	case c.IngestWorkers < 1 || c.InsertSize < 1:
		return errors.New("--ingest-workers and --insert-size must be at least 1")
	case c.Rate < 0 || c.BacklogFinished < 0:
		return errors.New("--rate and --backlog-finished must not be negative")
	case c.Duration < 0 || c.Grace < 0:
		return errors.New("--duration and --grace must not be negative")
	case c.ProgressInterval <= 0:
		return errors.New("--progress-interval must be positive")
	case !c.Node.Loops.Queuer || !c.Node.Loops.Submitter || !c.Node.Loops.Monitor:
		return errors.New("the bench runs every loop: queuer, submitter and monitor")
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
	// IngestTime runs from the first insert call (or request) to the end of
	// the last; in ModePreload the loops were stopped meanwhile.
	IngestTime time.Duration
	// Requests counts the POST /v1/batches requests of ModeHTTP.
	Requests int
	// Transactions counts the committed transactions of ModeSQL.
	Transactions int
	// EndToEnd runs from the first received_at to the last finished_at.
	EndToEnd time.Duration
	// Wall is the whole run, first insert or loops started (whichever came
	// first) to loops stopped.
	Wall time.Duration
	// IngestRate is Inserted / IngestTime; CommitRate is Committed / EndToEnd.
	IngestRate, CommitRate float64
	// Latency of committed batches, received_at to finished_at.
	P50, P99, Max time.Duration

	// Processing is the ModePreload figures, counted from the loops' start
	// (so the backlog's wait before it is left out); zero in other modes.
	Processing Processing

	// Interrupted is set when ctx ended the run early; TimedOut when the
	// grace period ran out first.
	Interrupted, TimedOut bool
	Ledger                sim.Stats
	// ProgressLoad is the bench's own load on the database: BatchCountsByState
	// scans the whole table, and on a large table that is not free.
	ProgressLoad
}

// Processing is how fast the loops worked down a preloaded backlog.
type Processing struct {
	// Time runs from the loops' start to the last committed batch's
	// finished_at; Rate is the committed batches over it.
	Time time.Duration
	Rate float64
	// Latency of committed batches from the loops' start to finished_at.
	P50, P99, Max time.Duration
}

// RunBatches runs the workload against the database in cfg and reports.
// The error wraps ErrUnfinished when batches were left unfinished; the report
// is returned with it so the caller can print what happened.
func RunBatches(ctx context.Context, cfg BatchConfig, w *Workload) (*BatchReport, error) {
	prepare(&cfg.Progress, &cfg.Node)
	// The loops need a connection each plus one for the progress query; a
	// serve process on few CPUs gets pgxpool's default of 4. In ModeHTTP the
	// API's requests use the node's pool too, as in serve.
	conns := 2 + cfg.Node.Batch.Submitters + 1
	if cfg.Mode == ModeHTTP {
		conns += cfg.IngestWorkers
	}
	cfg.Node.DBMinConns = max(cfg.Node.DBMinConns, conns)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return execute(ctx, &batchRun{cfg: cfg, w: w})
}

// prepare sets what every run sets for itself: progress lines and the
// node's logs discarded unless asked for, the real clock, and the node's API
// off (a run that goes through the API serves it itself).
func prepare(progress *io.Writer, n *node.Config) {
	if *progress == nil {
		*progress = io.Discard
	}
	if n.Logger == nil {
		n.Logger = slog.New(slog.DiscardHandler)
	}
	n.Clock = clock.Real{}
	n.API.Enabled = false
	// The bench's clients share one key and one address: a rate limit
	// would measure the limit, not the lane.
	n.API.Access.RateLimits = httpapi.RateLimits{}
}

// runner is one run of a workload: opened, run, and closed whatever
// happened.
type runner[R any] interface {
	open(ctx context.Context) error
	run(ctx context.Context) (R, error)
	close()
}

func execute[R any](ctx context.Context, r runner[R]) (R, error) {
	defer r.close()
	if err := r.open(ctx); err != nil {
		var none R
		return none, err
	}
	return r.run(ctx)
}

// loadTarget is what a run of the batch or the wallet lane opens: the node under
// test, with the pool serve would open, and the ingest workers' own pool,
// which stands in for the API's connections.
type loadTarget struct {
	node   *node.Node
	ingest *store.Store
}

// openIngest opens the ingest pool with a connection per worker, opened
// before the clock starts.
func (l *loadTarget) openIngest(ctx context.Context, url string, workers int) error {
	var err error
	if l.ingest, err = store.OpenPool(ctx, url, workers); err != nil {
		return err
	}
	return warm(ctx, l.ingest.Conns(), workers)
}

func (l *loadTarget) close() {
	if l.ingest != nil {
		l.ingest.Close()
	}
	if l.node != nil {
		l.node.Close()
	}
}

type batchRun struct {
	cfg BatchConfig
	w   *Workload

	// The ingest pool is nil in ModeHTTP, where the API is real and uses
	// the node's pool, and in ModeSQL, which has its own.
	loadTarget
	ledger *sim.Ledger
	// api is ModeHTTP's server and clients.
	api *httpIntake
	// sql is ModeSQL's pool.
	sql *batchSQLIntake

	inserted atomic.Int64

	// Only the run's goroutine touches these.
	load          ProgressLoad
	progressLines int
	depths        map[string]int64 // the last read, shown until the next
}

// progressReadEvery is how many progress lines share one read of the
// database: the batch lane's per-state depths cost it about a millisecond
// per thousand waiting batches (100 ms at 100 000), the builder's finalized
// count tens of milliseconds, which a line every second would take from the
// lane it measures.
const progressReadEvery = 5

func (r *batchRun) close() {
	if r.api != nil {
		r.api.close()
	}
	if r.sql != nil {
		r.sql.close()
	}
	r.loadTarget.close()
}

func (r *batchRun) open(ctx context.Context) error {
	c := &r.cfg
	r.ledger = node.NewSimLedger(c.Node.Batch.Ledger.Sim, c.Node.Clock, c.Node.Logger)
	nc := c.Node
	nc.Batch.Ledger.Instance = r.ledger
	var err error
	if r.node, err = node.Open(ctx, nc); err != nil {
		return err
	}
	if c.BacklogFinished > 0 {
		began := time.Now()
		seedCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
		_, err := r.node.Store().BatchSeedFinished(seedCtx, store.BatchSeedFinishedParams{
			Prefix: "backlog-" + r.w.Prefix, N: c.BacklogFinished, PayloadBytes: 600, At: c.Node.Clock.Now().Add(-time.Hour),
		})
		cancel()
		if err != nil {
			return err
		}
		fmt.Fprintf(c.Progress, "bench: seeded %d finished batches in %s\n", c.BacklogFinished, round(time.Since(began)))
	}
	if c.Mode == ModeHTTP {
		// Encoding the requests is the client's work, done before the clock
		// starts as signing is.
		began := time.Now()
		if r.api, err = newHTTPIntake(r.node.Handler(), r.w.Batches, c.InsertSize, c.IngestWorkers, c.Node.API.MaxBodyBytes); err != nil {
			return err
		}
		// The clients post as a service client does, with a key that opens
		// every service: its check is part of what is measured.
		keyCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, r.api.key, err = r.node.Store().APIKeyCreate(keyCtx, store.APIKeyCreateParams{Now: time.Now(), Name: "ledgerq bench", Scopes: []store.Scope{store.ScopeAnyService}})
		cancel()
		if err != nil {
			return err
		}
		fmt.Fprintf(c.Progress, "bench: encoded %d requests in %s; serving the API at %s\n", len(r.api.bodies), round(time.Since(began)), r.api.url)
		err = warm(ctx, r.node.Store().Conns(), c.IngestWorkers)
	} else if c.Mode == ModeSQL {
		r.sql, err = newBatchSQLIntake(ctx, c.Node.DatabaseURL, c.IngestWorkers, r.w.Batches)
	} else {
		err = r.openIngest(ctx, c.Node.DatabaseURL, c.IngestWorkers)
	}
	if err != nil {
		return err
	}
	countCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	before, err := r.depth(countCtx)
	cancel()
	if err != nil {
		return err
	}
	var open int64
	for _, n := range before {
		open += n
	}
	if open > 0 {
		fmt.Fprintf(c.Progress, "bench: warning: the database holds %d unfinished batches from before this run; the loops will work them too\n", open)
	}
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

// startLoops starts the node's listener and loops as serve does and returns
// when they started and a function that stops them: first stop claiming,
// then cancel what is left.
func (r *batchRun) startLoops(ctx context.Context) (started time.Time, stop func(), err error) {
	started = time.Now()
	if err := startNode(ctx, r.node); err != nil {
		return started, nil, err
	}
	return started, r.node.Stop, nil
}

// startNode starts n's listener and loops as serve does and waits for
// LISTEN, so that the first writes' notifications are heard (a late
// listener would only cost one poll interval). n is stopped when it does
// not connect.
func startNode(ctx context.Context, n *node.Node) error {
	connected := n.Listener().Connected()
	if err := n.Start(ctx); err != nil {
		return err
	}
	select {
	case <-connected:
		return nil
	case <-time.After(10 * time.Second):
		n.Stop()
		return errors.New("the notification listener did not connect within 10s")
	case <-ctx.Done():
		n.Stop()
		return ctx.Err()
	}
}

// ingestion is one run of ingestAll in the background.
type ingestion struct {
	done chan struct{}
	// err and end are set before done closes.
	err error
	end time.Time
}

// await waits for a run to end and reports how it ended: every item final
// (done says so; it is asked on every tick and, after ingest ended, once
// more when the grace period is over), ingest failed, the grace period after
// ingest passed (timedOut), or ctx ended (interrupted, once the ingest
// workers have stopped).
func (in *ingestion) await(ctx context.Context, tick <-chan time.Time, grace time.Duration, done func(ingestOver bool) bool) (interrupted, timedOut bool) {
	var graceC <-chan time.Time
	ingesting := in.done
	for {
		select {
		case <-ctx.Done():
			<-in.done // the workers stop at once on ctx
			return true, false
		case <-ingesting:
			ingesting = nil
			if in.err != nil {
				return false, false
			}
			t := time.NewTimer(grace)
			defer t.Stop()
			graceC = t.C
		case <-graceC:
			// One last look: the items may have finished since the last tick.
			return false, !done(true)
		case <-tick:
			if done(ingesting == nil) {
				return false, false
			}
		}
	}
}

// startIngestion runs ingest in the background.
func startIngestion(ingest func() error) *ingestion {
	in := &ingestion{done: make(chan struct{})}
	go func() {
		defer close(in.done)
		in.err = ingest()
		in.end = time.Now()
	}()
	return in
}

func (r *batchRun) startIngest(ctx context.Context, start time.Time) *ingestion {
	return startIngestion(func() error { return r.ingestAll(ctx, start) })
}

// summarizeAfter fills a report from the run's rows once the run is over,
// under a context of its own: an interrupted run's figures are still worth
// reading.
func summarizeAfter[R any](ctx context.Context, timeout time.Duration, rep *R, summarize func(context.Context, *R) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return summarize(ctx, rep)
}

// verdict is the error of a summarized run: the ingest's failure, else the
// failed checks (problems), wrapping check.
func (in *ingestion) verdict(problems []string, check error) error {
	switch {
	case in.err != nil:
		return in.err
	case len(problems) > 0:
		return fmt.Errorf("%d problem(s), the first: %s: %w", len(problems), problems[0], check)
	}
	return nil
}

func (r *batchRun) run(ctx context.Context) (*BatchReport, error) {
	c := &r.cfg
	rep := &BatchReport{Config: *c, Prefix: r.w.Prefix, Planned: len(r.w.Batches), GenerateTime: r.w.GenerateTime}
	rep.Config.Progress, rep.Config.Node.Logger, rep.Config.Node.Batch.Ledger.Instance = nil, nil, nil

	ticker := time.NewTicker(c.ProgressInterval)
	defer ticker.Stop()
	var (
		start     time.Time
		in        *ingestion
		stopLoops = func() {}
	)
	if c.Mode == ModePreload {
		start = time.Now()
		in = r.startIngest(ctx, start)
		rep.Interrupted = r.awaitPreload(ctx, in, start, ticker.C)
		if rep.Interrupted || in.err != nil {
			return r.finish(ctx, rep, start, in, stopLoops)
		}
		// The line a reader (and the tests) can check: everything is in and
		// nothing has moved, because nothing runs yet.
		_, _ = r.progress(ctx, start, false)
		fmt.Fprintf(c.Progress, "bench: preloaded %d batches in %s; starting the loops\n", r.inserted.Load(), round(in.end.Sub(start)))
	}
	loopStart, stop, err := r.startLoops(ctx)
	if err != nil {
		return nil, err
	}
	stopLoops = sync.OnceFunc(stop)
	defer stopLoops()
	if in == nil {
		start = time.Now()
		in = r.startIngest(ctx, start)
	}

	rep.Interrupted, rep.TimedOut = in.await(ctx, ticker.C, c.Grace, func(ingestOver bool) bool {
		done, _ := r.progress(ctx, start, ingestOver)
		return done
	})
	rep, err = r.finish(ctx, rep, start, in, stopLoops)
	if rep != nil && c.Mode == ModePreload && err == nil {
		err = r.measureProcessing(context.WithoutCancel(ctx), rep, loopStart)
	}
	return rep, err
}

// awaitPreload waits, writing progress lines, for the preload to end, and
// reports whether ctx interrupted it.
func (r *batchRun) awaitPreload(ctx context.Context, in *ingestion, start time.Time, tick <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			<-in.done
			return true
		case <-in.done:
			return false
		case <-tick:
			_, _ = r.progress(ctx, start, false)
		}
	}
}

// finish stops the loops and fills the report from the run's rows.
func (r *batchRun) finish(ctx context.Context, rep *BatchReport, start time.Time, in *ingestion, stopLoops func()) (*BatchReport, error) {
	stopLoops()
	rep.Wall = time.Since(start)
	rep.IngestTime = in.end.Sub(start)
	rep.Ledger = r.ledger.Stats()
	rep.ProgressLoad = r.load
	if r.api != nil {
		rep.Requests = int(r.api.requests.Load())
	}
	if r.sql != nil {
		rep.Transactions = int(r.sql.transactions.Load())
	}

	if err := summarizeAfter(ctx, time.Minute, rep, r.summarize); err != nil {
		return nil, errors.Join(in.err, err)
	}
	if in.err != nil {
		return rep, in.err
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

// ingestAll stores the workload with IngestWorkers goroutines, InsertSize
// batches per call (BatchInsert, one POST in ModeHTTP, one transaction of
// ledgerq.submit_batch calls in ModeSQL), until every batch is in, Duration
// passes, ctx ends or a call fails.
func (r *batchRun) ingestAll(ctx context.Context, start time.Time) error {
	c := &r.cfg
	batches := r.w.Batches
	var deadline time.Time
	if c.Duration > 0 {
		deadline = start.Add(c.Duration)
	}
	more := func() bool { return deadline.IsZero() || time.Now().Before(deadline) }
	return inParallel(ctx, c.IngestWorkers, len(batches), c.InsertSize, "ingest", more, func(i int) error {
		chunk := batches[i:min(i+c.InsertSize, len(batches))]
		if c.Rate > 0 {
			// Offered load: batch i is due i/Rate seconds after the start.
			due := start.Add(time.Duration(float64(i) / c.Rate * float64(time.Second)))
			select {
			case <-time.After(time.Until(due)):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		callCtx, cancel := context.WithTimeout(ctx, c.Node.Loops.DBTimeout)
		defer cancel()
		var err error
		switch {
		case r.api != nil:
			err = r.api.post(callCtx, i/c.InsertSize)
		case r.sql != nil:
			err = r.sql.submit(callCtx, chunk)
		default:
			_, err = r.ingest.BatchInsert(callCtx, store.BatchInsertParams{Now: c.Node.Clock.Now(), Batches: chunk})
		}
		if err == nil {
			r.inserted.Add(int64(len(chunk)))
		}
		return err
	})
}

// inParallel stores items 0 to n-1 with workers goroutines, each taking the
// next step items at a time and storing them with store (given the first),
// until every item is taken, more says to stop, ctx ends or a store fails.
// It returns the first failure, wrapped with what; one after ctx ended is
// the interruption (its transaction rolled back), not a failure.
func inParallel(ctx context.Context, workers, n, step int, what string, more func() bool, store func(i int) error) error {
	var (
		next    atomic.Int64
		failed  atomic.Bool
		errOnce sync.Once
		err     error
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil && !failed.Load() && more() {
				i := int(next.Add(int64(step))) - step
				if i >= n {
					return
				}
				if e := store(i); e != nil {
					if ctx.Err() != nil {
						return
					}
					failed.Store(true)
					errOnce.Do(func() { err = fmt.Errorf("%s: %w", what, e) })
					return
				}
			}
		})
	}
	wg.Wait()
	return err
}

// depth reads the lane's non-terminal depth per state from the index of the
// unfinished batches: its cost is the work waiting, not the rows kept.
func (r *batchRun) depth(ctx context.Context) (map[string]int64, error) {
	rows, err := r.node.Store().BatchDepthByState(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, d := range rows {
		out[d.State] = d.Items
	}
	return out, nil
}

// progress writes one progress line and reports whether ingest is over and
// every inserted batch has finished. Terminal counts are this process's
// transitions (its metrics); the per-state depths are the whole table's,
// read from the index of unfinished batches so that the bench's own load
// does not grow with the rows kept, once every progressReadEvery lines.
func (r *batchRun) progress(ctx context.Context, start time.Time, ingestOver bool) (bool, error) {
	if r.progressLines%progressReadEvery == 0 {
		countCtx, cancel := context.WithTimeout(ctx, r.cfg.Node.Loops.DBTimeout)
		began := time.Now()
		counts, err := r.depth(countCtx)
		r.load.count(began)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintf(r.cfg.Progress, "bench: counting batches: %v\n", err)
			}
			return false, err
		}
		r.depths = counts
	}
	r.progressLines++
	counts := r.depths
	m := r.node.Metrics()
	committed := m.TransitionCount("batch", string(store.BatchStatusCommitted))
	invalid := m.TransitionCount("batch", string(store.BatchStatusInvalid)) + m.TransitionCount("batch", "submit_"+store.SubmitRejected.String())
	valid := m.TransitionCount("batch", string(store.BatchStatusValid))
	inserted := r.inserted.Load()
	finished := committed + invalid + valid
	line := fmt.Sprintf("bench: %6.1fs  inserted %d/%d  committed %d  invalid %d  in flight %d  |",
		time.Since(start).Seconds(), inserted, len(r.w.Batches), committed, invalid, inserted-finished)
	if valid > 0 {
		line += fmt.Sprintf(" valid %d", valid)
	}
	for _, s := range store.BatchWaitingStates {
		line += fmt.Sprintf(" %s %d", s, counts[s])
	}
	fmt.Fprintln(r.cfg.Progress, line)
	return ingestOver && finished >= inserted, nil
}

func (r *batchRun) summarize(ctx context.Context, rep *BatchReport) error {
	sum, err := r.node.Store().BatchRunSummary(ctx, r.w.Prefix)
	if err != nil {
		return err
	}
	rep.Inserted, rep.Committed, rep.Invalid, rep.Valid, rep.Unfinished = sum.Inserted, sum.Committed, sum.Invalid, sum.Valid, sum.Unfinished
	rep.Submissions = sum.Submissions
	rep.EndToEnd, rep.P50, rep.P99, rep.Max = sum.EndToEnd, sum.P50, sum.P99, sum.Max
	if rep.IngestTime > 0 {
		rep.IngestRate = float64(rep.Inserted) / rep.IngestTime.Seconds()
	}
	if rep.EndToEnd > 0 {
		rep.CommitRate = float64(rep.Committed) / rep.EndToEnd.Seconds()
	}
	return nil
}

// measureProcessing fills rep.Processing from the finished_at of the run's
// committed batches, read after the loops stopped (so not timed) with the
// API's listing, by id; it reads every committed row of the table and keeps
// the run's, which is why the bench wants a database of its own.
func (r *batchRun) measureProcessing(ctx context.Context, rep *BatchReport, loopStart time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var lat []time.Duration
	after := ""
	for {
		page, err := r.node.Store().BatchList(ctx, store.BatchListParams{Status: store.BatchStatusCommitted, After: after, Limit: 1000})
		if err != nil {
			return fmt.Errorf("reading the run's commit times: %w", err)
		}
		for _, b := range page {
			if strings.HasPrefix(b.ServiceID, r.w.Prefix) && b.FinishedAt != nil {
				lat = append(lat, b.FinishedAt.Sub(loopStart))
			}
		}
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(lat) == 0 {
		return nil
	}
	pr := &rep.Processing
	pr.P50, pr.P99, pr.Max = percentiles(lat)
	pr.Time = pr.Max
	if pr.Time > 0 {
		pr.Rate = float64(len(lat)) / pr.Time.Seconds()
	}
	return nil
}

// WriteSummary prints the configuration and the results.
func (rep *BatchReport) WriteSummary(w io.Writer) error {
	c := &rep.Config
	b, sc := &c.Node.Batch, &c.Node.Batch.Ledger.Sim
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
	verify := "signatures verified"
	if sc.SkipVerify {
		verify = "signatures not verified (--batch-sim-verify=false)"
	}
	mode := map[Mode]string{
		ModeE2E:     "e2e: batches stored while the loops run; timed from the first insert to the last commit",
		ModePreload: "preload: every batch stored with the loops stopped, then the loops started; timed from their start to the last commit",
		ModeHTTP:    "http: batches posted to the HTTP API (loopback) while the loops run; intake and end to end timed",
		ModeSQL:     "sql: batches submitted with ledgerq.submit_batch, a transaction per insert, while the loops run; intake and end to end timed",
	}[c.Mode]
	if c.Rate > 0 {
		duration += fmt.Sprintf(", offered load %.0f batches/s", c.Rate)
	}
	if c.BacklogFinished > 0 {
		duration += fmt.Sprintf(", %d finished batches seeded first", c.BacklogFinished)
	}
	ingest := fmt.Sprintf("  ingest            %d workers, %d batches per BatchInsert call, duration %s, grace %s",
		c.IngestWorkers, c.InsertSize, duration, c.Grace)
	switch c.Mode {
	case ModeHTTP:
		ingest = fmt.Sprintf("  ingest            %d HTTP clients, %d batches per POST /v1/batches (a JSON array), duration %s, grace %s",
			c.IngestWorkers, c.InsertSize, duration, c.Grace)
	case ModeSQL:
		ingest = fmt.Sprintf("  ingest            %d connections, %d batches per transaction (BEGIN; SELECT ledgerq.submit_batch(…) each; COMMIT), duration %s, grace %s",
			c.IngestWorkers, c.InsertSize, duration, c.Grace)
	}
	lines := []string{
		"ledgerq bench batches: " + status,
		"configuration",
		fmt.Sprintf("  mode              %s", mode),
		fmt.Sprintf("  database          %s", node.RedactURL(c.Node.DatabaseURL)),
		fmt.Sprintf("  workload          %d services x %d batches = %d signed batches (service ids %s*), signed in %s",
			c.Services, c.BatchesPerService, rep.Planned, rep.Prefix, round(rep.GenerateTime)),
		ingest,
		fmt.Sprintf("  loops             poll interval %s, db timeout %s; queuer delay window %s (cap %s)",
			c.Node.Loops.PollInterval, c.Node.Loops.DBTimeout, b.DelayWindow, b.DelayCap),
		fmt.Sprintf("                    %d submitter(s): submit batch size %d, claim lease %s, first check %s, ledger timeout %s",
			b.Submitters, b.SubmitBatchSize, b.ClaimLease, b.FirstCheck, b.Ledger.Timeout),
		fmt.Sprintf("                    monitor: check interval %s, check batch size %d",
			b.CheckInterval, b.CheckBatchSize),
		fmt.Sprintf("  simulated ledger  commit delay %s, latency %s, reject %g, transient %g, lost %g, dropped responses %g, seed %d; %s",
			sc.CommitDelay, sc.Latency, sc.RejectRate, sc.TransientRate, sc.LostRate, sc.DropResponseRate, sc.Seed, verify),
		"results",
		fmt.Sprintf("  batches           %d inserted of %d; %d committed, %d invalid, %d valid, %d unfinished; %d submissions",
			rep.Inserted, rep.Planned, rep.Committed, rep.Invalid, rep.Valid, rep.Unfinished, rep.Submissions),
	}
	switch c.Mode {
	case ModeHTTP:
		lines = append(lines, fmt.Sprintf("  intake            %.0f batches/s through the HTTP API, signature checks included (%d in %s, %d requests)",
			rep.IngestRate, rep.Inserted, round(rep.IngestTime), rep.Requests))
	case ModeSQL:
		lines = append(lines, fmt.Sprintf("  intake            %.0f batches/s through ledgerq.submit_batch, signatures left to the submitter (%d in %s, %d transactions)",
			rep.IngestRate, rep.Inserted, round(rep.IngestTime), rep.Transactions))
	case ModePreload:
		lines = append(lines, fmt.Sprintf("  preload           %.0f batches/s with the loops stopped (%d in %s)", rep.IngestRate, rep.Inserted, round(rep.IngestTime)))
	default:
		lines = append(lines, fmt.Sprintf("  ingest            %.0f batches/s (%d in %s)", rep.IngestRate, rep.Inserted, round(rep.IngestTime)))
	}
	if c.Mode == ModePreload {
		pr := &rep.Processing
		lines = append(lines,
			fmt.Sprintf("  processing        %.0f committed/s (%d from loop start to last commit in %s)", pr.Rate, rep.Committed, round(pr.Time)),
			fmt.Sprintf("  latency           loop start to committed: p50 %s, p99 %s, max %s", round(pr.P50), round(pr.P99), round(pr.Max)))
	}
	lines = append(lines,
		fmt.Sprintf("  end to end        %.0f committed/s (%d from first insert to last commit in %s)",
			rep.CommitRate, rep.Committed, round(rep.EndToEnd)),
		fmt.Sprintf("  latency           insert to committed: p50 %s, p99 %s, max %s", round(rep.P50), round(rep.P99), round(rep.Max)),
		fmt.Sprintf("  ledger            %d submit calls (%.1f batches each), %d status calls",
			rep.Ledger.SubmitCalls, avg, rep.Ledger.StatusCalls),
		rep.ProgressLoad.line("BatchDepthByState, the waiting batches' indexes"),
		fmt.Sprintf("  wall              %s", round(rep.Wall)),
	)
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// percentiles sorts lat (not empty) and returns its p50, p99 and max by
// percentile_disc's rule, as BatchRunSummary: the first latency whose
// cumulative share reaches p.
func percentiles(lat []time.Duration) (p50, p99, most time.Duration) {
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		return lat[max(0, int(math.Ceil(p*float64(len(lat))))-1)]
	}
	return pct(0.5), pct(0.99), lat[len(lat)-1]
}

// ProgressLoad is a run's own load on the database while the lanes ran:
// its progress lines' queries, counted and timed.
type ProgressLoad struct {
	ProgressQueries   int
	ProgressQueryTime time.Duration
}

// count records one progress query that began at began.
func (l *ProgressLoad) count(began time.Time) {
	l.ProgressQueries++
	l.ProgressQueryTime += time.Since(began)
}

// line is the summary's line for the load; what names the queries.
func (l ProgressLoad) line(what string) string {
	return fmt.Sprintf("  bench overhead    %d progress queries (%s) took %s", l.ProgressQueries, what, round(l.ProgressQueryTime))
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
