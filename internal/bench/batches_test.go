package bench_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/client"
	"github.com/ledgerq/ledgerq/internal/bench"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// lockedBuffer collects progress lines written while the run goes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type bundle struct {
	cfg      bench.BatchConfig
	progress *lockedBuffer
}

// setup returns a configuration for a tiny run on a fresh database, with the
// loops and the ledger fast enough for a test to finish in about a second.
func setup(t testing.TB) *bundle {
	t.Helper()
	db := testdb.New(t)
	progress := &lockedBuffer{}
	cfg := bench.DefaultBatchConfig()
	cfg.Node.DatabaseURL = db.URL
	cfg.Services, cfg.BatchesPerService = 3, 5
	cfg.IngestWorkers, cfg.InsertSize = 2, 2
	cfg.Grace = time.Minute
	cfg.Node.Loops.PollInterval = 50 * time.Millisecond
	cfg.Node.Batch.FirstCheck = 5 * time.Millisecond
	cfg.Node.Batch.CheckInterval = 10 * time.Millisecond
	cfg.Node.Batch.Ledger.Sim.CommitDelay = 0
	cfg.Progress = progress
	cfg.ProgressInterval = 50 * time.Millisecond
	return &bundle{cfg: cfg, progress: progress}
}

func workload(t testing.TB, services, perService int) *bench.Workload {
	t.Helper()
	w, err := bench.NewWorkload(context.Background(), services, perService)
	require.NoError(t, err)
	return w
}

func TestRunBatches_TinyRunCommitsEveryBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)

	rep, err := bench.RunBatches(context.Background(), b.cfg, workload(t, 3, 5))
	require.NoError(t, err)

	require.Equal(t, 15, rep.Planned)
	require.Equal(t, 15, rep.Inserted)
	require.Equal(t, 15, rep.Committed)
	require.Zero(t, rep.Invalid)
	require.Zero(t, rep.Unfinished)
	require.EqualValues(t, 15, rep.Submissions, "no batch needed a second attempt")
	require.False(t, rep.TimedOut)
	require.False(t, rep.Interrupted)

	require.Positive(t, rep.P50)
	require.LessOrEqual(t, rep.P50, rep.P99)
	require.LessOrEqual(t, rep.P99, rep.Max)
	require.LessOrEqual(t, rep.Max, rep.EndToEnd, "no batch can take longer than the whole run")
	require.Positive(t, rep.IngestRate)
	require.Positive(t, rep.CommitRate)
	// The lane is serial per service: 5 batches of one service take at least
	// 5 trips through it, so the run cannot be as fast as one batch.
	require.Greater(t, rep.EndToEnd, rep.P50)

	require.EqualValues(t, 15, rep.Ledger.Accepted)
	require.EqualValues(t, 15, rep.Ledger.Committed)
	require.Positive(t, rep.ProgressQueries)
	require.Positive(t, rep.ProgressQueryTime)

	require.Contains(t, b.progress.String(), "inserted 15/15  committed 15  invalid 0  in flight 0")
	var summary strings.Builder
	require.NoError(t, rep.WriteSummary(&summary))
	require.Contains(t, summary.String(), "ledgerq bench batches: complete")
	require.Contains(t, summary.String(), "mode              e2e:")
	require.Contains(t, summary.String(), "3 services x 5 batches = 15 signed batches")
	require.Contains(t, summary.String(), "15 inserted of 15; 15 committed, 0 invalid, 0 valid, 0 unfinished")
	require.Contains(t, summary.String(), "seed 1; signatures verified")
	require.Zero(t, rep.Processing, "processing figures are preload's")
}

func TestRunBatches_PreloadStoresEveryBatchBeforeTheLoopsStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Mode = bench.ModePreload
	b.cfg.Node.Batch.Ledger.Sim.SkipVerify = true

	rep, err := bench.RunBatches(context.Background(), b.cfg, workload(t, 3, 5))
	require.NoError(t, err)

	require.Equal(t, 15, rep.Planned)
	require.Equal(t, 15, rep.Inserted)
	require.Equal(t, 15, rep.Committed)
	require.Zero(t, rep.Unfinished)
	require.EqualValues(t, 15, rep.Ledger.Committed)

	// Before the loops start, every batch is in and none has moved.
	before, after, found := strings.Cut(b.progress.String(), "bench: preloaded 15 batches in ")
	require.True(t, found, "the preload announces the loops' start:\n%s", b.progress.String())
	lines := strings.Split(strings.TrimSpace(before), "\n")
	require.Contains(t, lines[len(lines)-1], "inserted 15/15  committed 0  invalid 0  in flight 15  |")
	for _, l := range lines {
		require.Contains(t, l, "  committed 0  ", "nothing commits while the loops are stopped")
	}
	require.Contains(t, after, "inserted 15/15  committed 15  invalid 0  in flight 0")

	pr := rep.Processing
	require.Positive(t, rep.IngestRate)
	require.Positive(t, pr.Rate)
	require.InDelta(t, float64(rep.Committed)/pr.Time.Seconds(), pr.Rate, 1e-6)
	require.Positive(t, pr.P50)
	require.LessOrEqual(t, pr.P50, pr.P99)
	require.LessOrEqual(t, pr.P99, pr.Max)
	require.Equal(t, pr.Max, pr.Time, "the run is timed to its last commit")
	require.Less(t, pr.Time, rep.EndToEnd, "end to end also counts the preload")
	require.Less(t, pr.Time, rep.Wall)
	require.Less(t, pr.Max, rep.Max, "a batch waited in the backlog before the loops started")

	var summary strings.Builder
	require.NoError(t, rep.WriteSummary(&summary))
	require.Contains(t, summary.String(), "ledgerq bench batches: complete")
	require.Contains(t, summary.String(), "mode              preload:")
	require.Contains(t, summary.String(), "committed/s (15 from loop start to last commit in ")
	require.Contains(t, summary.String(), "seed 1; signatures not verified (--batch-sim-verify=false)")
}

func TestRunBatches_HTTPModePostsEveryBatchThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Mode = bench.ModeHTTP

	rep, err := bench.RunBatches(context.Background(), b.cfg, workload(t, 3, 5))
	require.NoError(t, err)

	require.Equal(t, 15, rep.Inserted)
	require.Equal(t, 15, rep.Committed)
	require.Zero(t, rep.Unfinished)
	require.Equal(t, 8, rep.Requests, "15 batches, 2 a request")
	require.Positive(t, rep.IngestRate)
	require.Positive(t, rep.CommitRate)
	require.LessOrEqual(t, rep.Max, rep.EndToEnd)
	require.Zero(t, rep.Processing)

	var summary strings.Builder
	require.NoError(t, rep.WriteSummary(&summary))
	require.Contains(t, summary.String(), "mode              http:")
	require.Contains(t, summary.String(), "batches/s through the HTTP API, signature checks included (15 in ")
	require.Contains(t, summary.String(), ", 8 requests)")
	require.Contains(t, summary.String(), "seed 1; signatures verified")
}

func TestRunBatches_HTTPModeIsRefusedWhatTheAPIRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Mode = bench.ModeHTTP
	w := workload(t, 3, 5)
	// Another service's batch under this id: signed and well formed, but its
	// header_signature is not the id the API is given.
	w.Batches[7].Payload = w.Batches[8].Payload

	rep, err := bench.RunBatches(context.Background(), b.cfg, w)
	require.ErrorContains(t, err, "400 Bad Request")
	require.ErrorContains(t, err, "field payload")
	require.NotNil(t, rep)
	require.Less(t, rep.Inserted, 15)
}

func TestRunBatches_SQLModeSubmitsEveryBatchThroughSubmitBatchInTransactions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Mode = bench.ModeSQL

	rep, err := bench.RunBatches(context.Background(), b.cfg, workload(t, 3, 5))
	require.NoError(t, err)

	require.Equal(t, 15, rep.Inserted)
	require.Equal(t, 15, rep.Committed)
	require.Zero(t, rep.Invalid, "the submitter verified every batch's signatures")
	require.Zero(t, rep.Unfinished)
	require.Equal(t, 8, rep.Transactions, "15 batches, 2 a transaction")
	require.Zero(t, rep.Requests)
	require.Positive(t, rep.IngestRate)
	require.Positive(t, rep.CommitRate)
	require.LessOrEqual(t, rep.Max, rep.EndToEnd)

	var summary strings.Builder
	require.NoError(t, rep.WriteSummary(&summary))
	require.Contains(t, summary.String(), "mode              sql:")
	require.Contains(t, summary.String(), "2 batches per transaction (BEGIN; SELECT ledgerq.submit_batch(…) each; COMMIT)")
	require.Contains(t, summary.String(), "batches/s through ledgerq.submit_batch, signatures left to the submitter (15 in ")
	require.Contains(t, summary.String(), ", 8 transactions)")

	conn, err := pgx.Connect(t.Context(), b.cfg.Node.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var unverified, grants int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.batch_payloads WHERE unverified AND service_id LIKE $1`, rep.Prefix+"%").Scan(&unverified))
	require.Equal(t, 15, unverified, "every batch stored through submit_batch")
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM ledgerq.enqueue_service_grants`).Scan(&grants))
	require.Zero(t, grants, "the run's grants are gone with it")
}

func TestRunBatches_SQLModeIsRefusedWhatSubmitBatchRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Mode = bench.ModeSQL
	w := workload(t, 3, 5)
	w.Batches[7].Payload = []byte("not a batch")

	rep, err := bench.RunBatches(context.Background(), b.cfg, w)
	require.ErrorIs(t, err, client.ErrBadRequest)
	require.ErrorContains(t, err, "ledgerq.submit_batch: field batch: malformed batch")
	require.NotNil(t, rep)
	require.Less(t, rep.Inserted, 15)
}

func TestRunBatches_RejectedBatchesFinishAsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Node.Batch.Ledger.Sim.RejectRate = 1

	rep, err := bench.RunBatches(context.Background(), b.cfg, workload(t, 3, 5))
	require.NoError(t, err, "an invalid batch is finished")

	require.Equal(t, 15, rep.Inserted)
	require.Zero(t, rep.Committed)
	require.Equal(t, 15, rep.Invalid)
	require.Zero(t, rep.Unfinished)
	require.Zero(t, rep.P50, "latencies are of committed batches only")
	require.Zero(t, rep.CommitRate)
}

func TestRunBatches_UnfinishedBatchesFailTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Node.Batch.Ledger.Sim.CommitDelay = time.Hour
	b.cfg.Grace = 300 * time.Millisecond

	rep, err := bench.RunBatches(context.Background(), b.cfg, workload(t, 3, 5))
	require.ErrorIs(t, err, bench.ErrUnfinished)
	require.NotNil(t, rep, "the report comes with the error")

	require.Equal(t, 15, rep.Inserted)
	require.Zero(t, rep.Committed)
	require.Equal(t, 15, rep.Unfinished)
	require.True(t, rep.TimedOut)
	var summary strings.Builder
	require.NoError(t, rep.WriteSummary(&summary))
	require.Contains(t, summary.String(), "grace period ran out")
}

func TestRunBatches_InterruptedRunReportsWhatItDid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Node.Batch.Ledger.Sim.CommitDelay = time.Hour
	b.cfg.Grace = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	b.cfg.Progress = cancelOnceInserting{cancel}

	rep, err := bench.RunBatches(ctx, b.cfg, workload(t, 3, 5))
	require.ErrorIs(t, err, bench.ErrUnfinished)
	require.True(t, rep.Interrupted)
	require.False(t, rep.TimedOut)
	require.Positive(t, rep.Unfinished)
}

// cancelOnceInserting stands in for a Ctrl-C once a progress line shows
// inserted batches.
type cancelOnceInserting struct{ cancel context.CancelFunc }

func (c cancelOnceInserting) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "inserted ") && !strings.Contains(string(p), "inserted 0/") {
		c.cancel()
	}
	return len(p), nil
}

func TestRunBatches_SecondRunOnTheSameDatabaseCountsOnlyItsOwnBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)

	first, err := bench.RunBatches(context.Background(), b.cfg, workload(t, 3, 5))
	require.NoError(t, err)
	require.Equal(t, 15, first.Committed)

	b.cfg.Services, b.cfg.BatchesPerService = 2, 2
	second, err := bench.RunBatches(context.Background(), b.cfg, workload(t, 2, 2))
	require.NoError(t, err)
	require.Equal(t, 4, second.Inserted)
	require.Equal(t, 4, second.Committed)
	require.Contains(t, b.progress.String(), "inserted 4/4  committed 4  invalid 0  in flight 0",
		"terminal counts of earlier runs are subtracted")
}

func TestRunBatches_DurationStopsIngesting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Duration = time.Nanosecond

	rep, err := bench.RunBatches(context.Background(), b.cfg, workload(t, 3, 5))
	require.NoError(t, err)
	require.Equal(t, 15, rep.Planned)
	require.Less(t, rep.Inserted, rep.Planned)
	require.Equal(t, rep.Inserted, rep.Committed)
}

func TestBatchConfig_ValidateRefusesWhatCannotRun(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*bench.BatchConfig){
		"no database":         func(c *bench.BatchConfig) { c.Node.DatabaseURL = "" },
		"no services":         func(c *bench.BatchConfig) { c.Services = 0 },
		"no batches":          func(c *bench.BatchConfig) { c.BatchesPerService = 0 },
		"no ingest workers":   func(c *bench.BatchConfig) { c.IngestWorkers = 0 },
		"no submitters":       func(c *bench.BatchConfig) { c.Node.Batch.Submitters = 0 },
		"lease under timeout": func(c *bench.BatchConfig) { c.Node.Batch.ClaimLease = c.Node.Batch.Ledger.Timeout },
		"a loop turned off":   func(c *bench.BatchConfig) { c.Node.Loops.Monitor = false },
		"negative grace":      func(c *bench.BatchConfig) { c.Grace = -time.Second },
		"unknown mode":        func(c *bench.BatchConfig) { c.Mode = "fast" },
		"request over the API's limit": func(c *bench.BatchConfig) {
			c.Mode, c.InsertSize = bench.ModeHTTP, c.Node.API.MaxBatchesPerRequest+1
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := bench.DefaultBatchConfig()
			cfg.Node.DatabaseURL = "postgres://localhost/x"
			require.NoError(t, cfg.Validate())
			mutate(&cfg)
			require.Error(t, cfg.Validate())
		})
	}
}

func TestNewWorkload_SignsVerifiableBatchesRoundRobinOverServices(t *testing.T) {
	t.Parallel()
	w := workload(t, 3, 2)

	require.Len(t, w.Batches, 6)
	ids := map[string]bool{}
	for i, nb := range w.Batches {
		require.Equal(t, w.Batches[i%3].ServiceID, nb.ServiceID, "batch %d", i)
		require.True(t, strings.HasPrefix(nb.ServiceID, w.Prefix))
		pb, err := sawtooth.ParseAndVerifyBatch(nb.Payload)
		require.NoError(t, err)
		require.Equal(t, nb.ID, pb.HeaderSignature)
		ids[nb.ID] = true
	}
	require.Len(t, ids, 6, "every batch has its own id")
	require.NotEqual(t, w.Batches[0].ServiceID, w.Batches[1].ServiceID)
	require.NotEqual(t, w.Prefix, workload(t, 1, 1).Prefix, "two runs never share service ids")
}

// BenchmarkBatchLane_EndToEnd pushes b.N batches through the whole lane, from
// BatchInsert to committed, over up to 100 services, with the loops woken by
// NOTIFY and a ledger that commits at once. Signing happens before the timer.
func BenchmarkBatchLane_EndToEnd(b *testing.B) {
	services := min(b.N, 100)
	perService := (b.N + services - 1) / services
	bd := setup(b)
	bd.cfg.Services, bd.cfg.BatchesPerService = services, perService
	bd.cfg.IngestWorkers, bd.cfg.InsertSize = 4, 10
	bd.cfg.Grace = 5 * time.Minute
	w := workload(b, services, perService)
	b.ResetTimer()

	rep, err := bench.RunBatches(context.Background(), bd.cfg, w)
	b.StopTimer()
	require.NoError(b, err)
	require.Equal(b, len(w.Batches), rep.Committed)
	b.ReportMetric(rep.CommitRate, "committed/s")
	b.ReportMetric(rep.IngestRate, "inserted/s")
	b.ReportMetric(float64(rep.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(rep.P99.Microseconds())/1000, "p99-ms")
}

func TestRunBatches_RateAndBacklogAreAppliedAndReported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Rate = 30 // 15 batches at 30/s: at least 0.4 s of ingest
	b.cfg.BacklogFinished = 50

	rep, err := bench.RunBatches(context.Background(), b.cfg, workload(t, 3, 5))
	require.NoError(t, err)
	require.Equal(t, 15, rep.Committed, "the seeded batches are not the run's")
	require.GreaterOrEqual(t, rep.IngestTime, 400*time.Millisecond, "ingest paced at the offered load")
	require.Contains(t, b.progress.String(), "seeded 50 finished batches")
	var summary strings.Builder
	require.NoError(t, rep.WriteSummary(&summary))
	require.Contains(t, summary.String(), "offered load 30 batches/s, 50 finished batches seeded first")
}

// The progress line's per-state depths are read once every five lines: the
// read grows with the waiting batches, and a read a second took a twentieth
// of the database's time from a preloaded run it measured.
func TestRunBatches_ProgressReadsTheDepthsOnceEveryFiveLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.ProgressInterval = 5 * time.Millisecond
	b.cfg.Rate = 100 // 15 batches over about 150 ms: 20 lines or more
	rep, err := bench.RunBatches(context.Background(), b.cfg, workload(t, 3, 5))
	require.NoError(t, err)
	lines := strings.Count(b.progress.String(), "bench: ") - strings.Count(b.progress.String(), "bench: preloaded")
	require.GreaterOrEqual(t, lines, 10, "progress:\n%s", b.progress)
	require.Equal(t, (lines+4)/5, rep.ProgressQueries, "%d lines", lines)
}
