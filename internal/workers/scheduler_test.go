package workers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// testJob is a Job over an in-memory backlog per shard key. Its commits and
// drops go through store.ShardFenced, so a stale claim changes nothing.
type testJob struct {
	st    *store.Store
	batch int // items per collect

	mu        sync.Mutex
	backlog   map[string][]string
	collects  []string // shard keys, one per Collect call
	executed  []string // "key/item"
	committed map[string][]string
	dropped   []string
	failOn    map[string]bool  // item → Execute fails
	errOn     map[string]error // item → Execute fails with this error
	running   map[string]int
	overlaps  int
	// onExecute, when set, runs inside Execute (advance a clock, block).
	onExecute func(key string, items []string)
}

func newTestJob(st *store.Store) *testJob {
	return &testJob{
		st: st, batch: 1, backlog: map[string][]string{}, committed: map[string][]string{},
		failOn: map[string]bool{}, errOn: map[string]error{}, running: map[string]int{},
	}
}

func (j *testJob) add(key string, items ...string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.backlog[key] = append(j.backlog[key], items...)
}

func (j *testJob) Collect(_ context.Context, c Claim) (Cycle, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.collects = append(j.collects, c.Key)
	items := j.backlog[c.Key][:min(j.batch, len(j.backlog[c.Key]))]
	if len(items) == 0 {
		return nil, nil
	}
	return &testCycle{job: j, claim: c, items: append([]string(nil), items...)}, nil
}

type testCycle struct {
	job   *testJob
	claim Claim
	items []string
}

func (c *testCycle) Execute(context.Context) error {
	j := c.job
	j.mu.Lock()
	j.running[c.claim.Key]++
	if j.running[c.claim.Key] > 1 {
		j.overlaps++
	}
	hook := j.onExecute
	j.mu.Unlock()
	if hook != nil {
		hook(c.claim.Key, c.items)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.running[c.claim.Key]--
	for _, it := range c.items {
		j.executed = append(j.executed, c.claim.Key+"/"+it)
		if j.failOn[it] {
			return fmt.Errorf("item %s fails", it)
		}
		if err := j.errOn[it]; err != nil {
			return err
		}
	}
	return nil
}

// remove takes the cycle's items off the head of the backlog.
func (c *testCycle) remove() {
	b := c.job.backlog[c.claim.Key]
	c.job.backlog[c.claim.Key] = b[min(len(c.items), len(b)):]
}

func (c *testCycle) Commit(ctx context.Context) error {
	return c.job.st.ShardFenced(ctx, c.claim, func(*store.Store) error {
		c.job.mu.Lock()
		defer c.job.mu.Unlock()
		c.remove()
		c.job.committed[c.claim.Key] = append(c.job.committed[c.claim.Key], c.items...)
		return nil
	})
}

func (c *testCycle) Drop(ctx context.Context, _ error) error {
	return c.job.st.ShardFenced(ctx, c.claim, func(*store.Store) error {
		c.job.mu.Lock()
		defer c.job.mu.Unlock()
		c.remove()
		c.job.dropped = append(c.job.dropped, c.items...)
		return nil
	})
}

func (j *testJob) snapshot() (collects, executed []string, committed map[string][]string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	committed = map[string][]string{}
	for k, v := range j.committed {
		committed[k] = append([]string(nil), v...)
	}
	return append([]string(nil), j.collects...), append([]string(nil), j.executed...), committed
}

type env struct {
	db   *testdb.DB
	clk  *clock.Fake
	job  *testJob
	pool *Scheduler
	cfg  Config
}

func testConfig() Config {
	cfg := Defaults()
	cfg.Workers = 1
	cfg.PollInterval = 50 * time.Millisecond
	return cfg
}

func setup(t *testing.T) *env {
	t.Helper()
	db := testdb.New(t)
	clk := testfactory.NewClock()
	job := newTestJob(db.Store)
	cfg := testConfig()
	pool, err := NewScheduler(db.Store, loop.Deps{Clock: clk}, cfg, map[string]Job{"test": job})
	require.NoError(t, err)
	return &env{db: db, clk: clk, job: job, pool: pool, cfg: cfg}
}

// process is another process on an env's database and clock: its own
// store handle, and its job, pool and rescuer on it.
type process struct {
	st      *store.Store
	job     *testJob
	pool    *Scheduler
	rescuer *Rescuer
}

func (e *env) secondProcess(t *testing.T) process {
	t.Helper()
	st, err := store.Open(t.Context(), e.db.URL)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	p := process{st: st, job: newTestJob(st), rescuer: NewRescuer(st, loop.Deps{Clock: e.clk}, e.cfg)}
	p.pool, err = NewScheduler(st, loop.Deps{Clock: e.clk}, e.cfg, map[string]Job{"test": p.job})
	require.NoError(t, err)
	return p
}

func (e *env) schedule(t *testing.T, key string) store.ShardScheduled {
	t.Helper()
	res, err := e.pool.Schedule(t.Context(), key)
	require.NoError(t, err)
	return res
}

func (e *env) shard(t *testing.T, key string) store.Shard {
	t.Helper()
	s, err := e.db.Store.ShardGet(t.Context(), key)
	require.NoError(t, err)
	return s
}

func (e *env) runOnce(t *testing.T) bool {
	t.Helper()
	ran, err := e.pool.RunOnce(t.Context())
	require.NoError(t, err)
	return ran
}

func TestScheduler_SchedulingMovesIdleToPendingOnceAndIsANoOpOnPendingOrRunning(t *testing.T) {
	t.Parallel()
	e := setup(t)
	require.Equal(t, store.ShardQueued, e.schedule(t, "test:a"), "a new shard enters the queue")
	first := e.shard(t, "test:a")
	require.Equal(t, store.ShardPending, first.State)
	e.clk.Advance(time.Second)
	require.Equal(t, store.ShardAlreadyPending, e.schedule(t, "test:a"), "pending: no-op")
	again := e.shard(t, "test:a")
	require.Equal(t, first.ScheduledAt, again.ScheduledAt, "a second schedule does not move the shard in the queue")
	require.Equal(t, first.UpdatedAt, again.UpdatedAt, "nor writes the row")

	require.True(t, e.runOnce(t))
	require.Equal(t, store.ShardIdle, e.shard(t, "test:a").State)
	require.False(t, e.runOnce(t), "an idle shard is not in the queue")
	require.Equal(t, store.ShardQueued, e.schedule(t, "test:a"), "idle → pending again")

	_, err := e.pool.Schedule(t.Context(), "other:a")
	require.Error(t, err, "a kind without a job cannot be scheduled")
}

func TestScheduler_WorkerClaimsTheOldestPendingShardFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, k := range []string{"test:c", "test:a", "test:b"} {
		e.job.add(k, "x")
		e.schedule(t, k)
		e.clk.Advance(time.Millisecond)
	}
	for e.runOnce(t) {
	}
	collects, _, _ := e.job.snapshot()
	require.Equal(t, []string{"test:c", "test:c", "test:a", "test:a", "test:b", "test:b"}, collects,
		"shards run in the order they were scheduled (FIFO), each to its empty collect")
}

func TestScheduler_WorkerRunsCyclesUntilThePoolIsEmptyThenMarksTheShardIdle(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.job.add("test:a", "1", "2", "3")
	e.schedule(t, "test:a")
	require.True(t, e.runOnce(t))
	collects, executed, committed := e.job.snapshot()
	require.Equal(t, []string{"test:a/1", "test:a/2", "test:a/3"}, executed)
	require.Equal(t, []string{"1", "2", "3"}, committed["test:a"])
	require.Len(t, collects, 4, "three cycles and the empty collect that ends the run")
	s := e.shard(t, "test:a")
	require.Equal(t, store.ShardIdle, s.State, "an empty pool leaves the shard idle")
	require.Empty(t, s.Owner)
	require.False(t, e.runOnce(t))
}

func TestScheduler_ExecutionLoopEmptyCollectEndsTheRunAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.schedule(t, "test:empty")
	require.True(t, e.runOnce(t))
	collects, _, _ := e.job.snapshot()
	require.Equal(t, []string{"test:empty"}, collects, "one collect, no spinning through the quantum")
	require.Equal(t, store.ShardIdle, e.shard(t, "test:empty").State)
}

func TestScheduler_ErrorHandlingFailedWorkIsRemovedAndNeverRetriedForever(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.job.failOn["bad"] = true
	e.job.add("test:a", "bad", "good")
	e.schedule(t, "test:a")
	require.True(t, e.runOnce(t))
	s := e.shard(t, "test:a")
	require.Equal(t, store.ShardPending, s.State, "the rest of the work waits for the next run")
	require.Equal(t, 1, s.Failures)
	require.Contains(t, s.LastError, "item bad fails")
	require.Equal(t, e.clk.Now().Add(e.cfg.Backoff), *s.ScheduledAt, "the next run waits the backoff")
	require.False(t, e.runOnce(t), "a failing shard is not run again before its backoff")

	e.clk.Advance(e.cfg.Backoff)
	require.True(t, e.runOnce(t))
	_, executed, committed := e.job.snapshot()
	require.Equal(t, []string{"test:a/bad", "test:a/good"}, executed, "the failed work ran once and was removed")
	require.Equal(t, []string{"bad"}, e.job.dropped)
	require.Equal(t, []string{"good"}, committed["test:a"])
	s = e.shard(t, "test:a")
	require.Equal(t, store.ShardIdle, s.State)
	require.Zero(t, s.Failures, "a successful run resets the failures")
}

func TestScheduler_ErrorHandlingAnUnavailableLedgerWaitsBrieflyAndCountsNoFailure(t *testing.T) {
	t.Parallel()
	e := setup(t)
	require.Equal(t, time.Second, e.cfg.Backoff)
	require.Equal(t, 2*time.Second, e.cfg.UnavailableBackoff)
	e.job.failOn["bad"] = true
	e.job.errOn["busy"] = Unavailable(errors.New("429 Too Many Requests"), 1500*time.Millisecond)
	e.job.errOn["slow"] = Unavailable(errors.New("503 Service Unavailable"), 30*time.Second)
	e.job.errOn["reset"] = fmt.Errorf("reading the nonce: %w", Unavailable(errors.New("connection reset by peer"), 0))
	e.job.add("test:a", "bad", "busy", "slow", "reset", "good")
	e.schedule(t, "test:a")

	require.True(t, e.runOnce(t))
	s := e.shard(t, "test:a")
	require.Equal(t, 1, s.Failures, "a failure of the work counts")
	e.clk.Advance(e.cfg.Backoff)

	for _, step := range []struct {
		item string
		wait time.Duration
	}{
		{"busy", 1500 * time.Millisecond}, // the ledger's hint, above the backoff
		{"slow", 2 * time.Second},         // the hint capped by UnavailableBackoff
		{"reset", time.Second},            // no hint: the backoff
	} {
		require.True(t, e.runOnce(t), step.item)
		s := e.shard(t, "test:a")
		require.Equal(t, store.ShardPending, s.State, step.item)
		require.Equal(t, 1, s.Failures, "%s: the ledger's unavailability is no failure of the work: the count is kept", step.item)
		require.Contains(t, s.LastError, "ledger unavailable", "%s: its error is recorded for operators", step.item)
		require.Equal(t, e.clk.Now().Add(step.wait), *s.ScheduledAt, "%s: the next run waits briefly, not the growing backoff", step.item)
		e.clk.Advance(step.wait - time.Millisecond)
		require.False(t, e.runOnce(t), "%s: not run before its wait", step.item)
		e.clk.Advance(time.Millisecond)
	}

	require.True(t, e.runOnce(t))
	_, _, committed := e.job.snapshot()
	require.Equal(t, []string{"good"}, committed["test:a"])
	s = e.shard(t, "test:a")
	require.Equal(t, store.ShardIdle, s.State)
	require.Zero(t, s.Failures)
}

func TestScheduler_TimeQuantumBacklogYieldsAndOtherShardsRunMeanwhile(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i := range 20 {
		e.job.add("test:big", fmt.Sprint(i))
	}
	e.job.add("test:small", "s")
	// Each cycle takes 30 ms of the fake clock: the quantum (100 ms) is spent
	// after the fourth.
	e.job.onExecute = func(string, []string) { e.clk.Advance(30 * time.Millisecond) }
	e.schedule(t, "test:big")
	e.clk.Advance(time.Millisecond)
	e.schedule(t, "test:small")

	require.True(t, e.runOnce(t))
	_, _, committed := e.job.snapshot()
	require.Len(t, committed["test:big"], 4, "the backlog yields after the quantum")
	require.Equal(t, store.ShardPending, e.shard(t, "test:big").State, "and is re-scheduled")

	require.True(t, e.runOnce(t))
	_, _, committed = e.job.snapshot()
	require.Equal(t, []string{"s"}, committed["test:small"], "the other shard runs before the backlog goes on")
	require.Len(t, committed["test:big"], 4)

	for e.runOnce(t) {
	}
	_, _, committed = e.job.snapshot()
	require.Len(t, committed["test:big"], 20)
	require.Equal(t, store.ShardIdle, e.shard(t, "test:big").State)
}

func TestScheduler_ScheduleBetweenTheLastCollectAndTheReleaseIsNotLost(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.job.add("test:a", "1")
	e.schedule(t, "test:a")
	// katana's lost wake-up: the last collect found the pool empty, then new
	// work and its schedule() land before the shard is marked idle.
	landed := false
	e.pool.hooks.beforeRelease = func(key string) {
		if landed {
			return
		}
		landed = true
		e.job.add(key, "late")
		require.Equal(t, store.ShardMoreWork, e.schedule(t, key))
	}
	require.True(t, e.runOnce(t))
	require.True(t, landed)
	s := e.shard(t, "test:a")
	require.Equal(t, store.ShardPending, s.State, "the release re-queues the shard")
	require.False(t, s.MoreWork, "and clears more_work")

	require.True(t, e.runOnce(t))
	_, _, committed := e.job.snapshot()
	require.Equal(t, []string{"1", "late"}, committed["test:a"])
	require.Equal(t, store.ShardIdle, e.shard(t, "test:a").State)
}

func TestScheduler_ConcurrencyStaleOwnerAfterRescueChangesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// A second process: its own store handle, pool and rescuer.
	b := e.secondProcess(t)

	e.job.add("test:a", "1")
	b.job.add("test:a", "1")
	e.schedule(t, "test:a")
	var stale Claim
	e.pool.hooks.afterCollect = func(key string) {
		// The first worker hangs after its collect; its lease passes, the
		// b.rescuer frees the shard and the other process runs it.
		e.clk.Advance(e.cfg.Lease + time.Second)
		n, err := b.rescuer.RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		ran, err := b.pool.RunOnce(t.Context())
		require.NoError(t, err)
		require.True(t, ran)
		stale = Claim{Key: key, Owner: e.pool.Owner() + "/once", Run: 1}
	}
	require.True(t, e.runOnce(t))
	_, _, committed := e.job.snapshot()
	require.Empty(t, committed["test:a"], "the stale owner's commit is fenced off")
	_, _, committed2 := b.job.snapshot()
	require.Equal(t, []string{"1"}, committed2["test:a"])
	s := e.shard(t, "test:a")
	require.Equal(t, store.ShardIdle, s.State, "the second run's release stands")
	require.Equal(t, int64(2), s.Run)
	require.Equal(t, int64(1), s.Rescues)

	_, err := e.db.Store.ShardRelease(t.Context(), store.ShardReleaseParams{Now: e.clk.Now(), Claim: stale, WorkLeft: true})
	require.ErrorIs(t, err, store.ErrShardLeaseLost, "a late release says it changed nothing")
	require.Equal(t, s, e.shard(t, "test:a"))
}

// A dead holder lets go at once, and a holder that only lost its liveness
// connection (a blip: the process lives on) does not commit as a second
// holder. Process A's worker is mid-cycle when the backend of A's liveness
// connection is terminated; with A's lease still running, the rescuer of
// process B frees the shard and B runs it. A then finishes its cycle: its
// commit and release are fenced off, although A has meanwhile taken its
// liveness lock again, with the same id.
func TestScheduler_ConcurrencyHolderWhoseLivenessConnectionDiedIsTakenOverAndFencedBeforeItsLease(t *testing.T) {
	t.Parallel()
	e := setup(t)
	liveA, err := e.db.Store.NewLiveness(store.LivenessConfig{}, nil)
	require.NoError(t, err)
	t.Cleanup(liveA.Stop)
	require.NoError(t, liveA.RunOnce(t.Context()))
	lockA, ok := liveA.Held()
	require.True(t, ok)
	// Process B: its own store handle, pool and rescuer.
	b := e.secondProcess(t)

	e.job.add("test:a", "1")
	b.job.add("test:a", "1")
	e.schedule(t, "test:a")
	e.pool.hooks.afterCollect = func(key string) {
		require.Equal(t, lockA, e.shard(t, key).LivenessLock, "A's claim records A's liveness lock")
		n, err := b.rescuer.RunOnce(t.Context())
		require.NoError(t, err)
		require.Zero(t, n, "A is alive: its shard stays")

		var pid int32
		require.NoError(t, b.st.DB().QueryRow(t.Context(), `SELECT pid FROM ledgerq.liveness_locks WHERE lock = $1`, lockA).Scan(&pid))
		_, err = b.st.DB().Exec(t.Context(), `SELECT pg_terminate_backend($1, 10000)`, pid)
		require.NoError(t, err)
		n, err = b.rescuer.RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, n, "no clock moved: the lease is running, the holder's lock is gone")
		ran, err := b.pool.RunOnce(t.Context())
		require.NoError(t, err)
		require.True(t, ran)

		require.NoError(t, liveA.RunOnce(t.Context()))
		again, ok := liveA.Held()
		require.True(t, ok)
		require.Equal(t, lockA, again, "A holds its lock again")
	}
	require.True(t, e.runOnce(t))
	_, _, committed := e.job.snapshot()
	require.Empty(t, committed["test:a"], "A's commit is fenced off")
	_, _, committed2 := b.job.snapshot()
	require.Equal(t, []string{"1"}, committed2["test:a"], "B ran the work once")
	s := e.shard(t, "test:a")
	require.Equal(t, store.ShardIdle, s.State, "B's release stands, not A's")
	require.Equal(t, int64(2), s.Run)
	require.Equal(t, int64(1), s.Rescues)
}

func TestScheduler_ConcurrencyTwoProcessesNeverRunOneShardAtOnce(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	cfg := testConfig()
	cfg.Workers = 3
	cfg.PollInterval = 20 * time.Millisecond
	cfg.Quantum = 2 * time.Millisecond
	job := newTestJob(nil) // one backlog, shared by both processes
	const shards, items = 6, 30
	var pools []*Scheduler
	for range 2 {
		st, err := store.Open(t.Context(), db.URL)
		require.NoError(t, err)
		t.Cleanup(st.Close)
		j := &sharedJob{testJob: job, st: st}
		p, err := NewScheduler(st, loop.Deps{Clock: clock.Real{}}, cfg, map[string]Job{"test": j})
		require.NoError(t, err)
		pools = append(pools, p)
	}
	job.onExecute = func(string, []string) { time.Sleep(200 * time.Microsecond) } // the work itself
	ctx := context.Background()
	for _, p := range pools {
		require.NoError(t, p.Start(ctx))
	}
	var wg sync.WaitGroup
	for s := range shards {
		wg.Go(func() {
			key := fmt.Sprintf("test:%d", s)
			for i := range items {
				job.add(key, fmt.Sprint(i))
				_, err := pools[i%2].Schedule(ctx, key)
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		_, _, committed := job.snapshot()
		n := 0
		for _, c := range committed {
			n += len(c)
		}
		return n == shards*items
	}, 60*time.Second, 10*time.Millisecond)
	loop.StopAll(pools[0], pools[1])
	_, _, committed := job.snapshot()
	for s := range shards {
		want := make([]string, items)
		for i := range want {
			want[i] = fmt.Sprint(i)
		}
		require.Equal(t, want, committed[fmt.Sprintf("test:%d", s)], "each item once, in order")
	}
	require.Zero(t, job.overlaps, "no shard ran in two workers at once")
	counts, err := db.Store.ShardCountByState(ctx)
	require.NoError(t, err)
	require.Zero(t, counts[store.ShardRunning])
}

// sharedJob is one process's view of a testJob shared by two processes: its
// fenced writes go through that process's store handle.
type sharedJob struct {
	*testJob
	st *store.Store
}

func (j *sharedJob) Collect(ctx context.Context, c Claim) (Cycle, error) {
	cyc, err := j.testJob.Collect(ctx, c)
	if cyc == nil || err != nil {
		return nil, err
	}
	tc := cyc.(*testCycle)
	return &sharedCycle{testCycle: tc, st: j.st}, nil
}

type sharedCycle struct {
	*testCycle
	st *store.Store
}

func (c *sharedCycle) Commit(ctx context.Context) error {
	return c.st.ShardFenced(ctx, c.claim, func(*store.Store) error {
		c.job.mu.Lock()
		defer c.job.mu.Unlock()
		c.remove()
		c.job.committed[c.claim.Key] = append(c.job.committed[c.claim.Key], c.items...)
		return nil
	})
}

func TestScheduler_ShutdownStopsClaimingFinishesTheCycleAndReleases(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.job.add("test:a", "1", "2", "3")
	e.job.add("test:b", "1")
	inCycle := make(chan struct{})
	finish := make(chan struct{})
	var blocked sync.Once
	e.job.onExecute = func(key string, _ []string) {
		if key == "test:a" {
			blocked.Do(func() {
				inCycle <- struct{}{}
				<-finish
			})
		}
	}
	e.schedule(t, "test:a")
	e.clk.Advance(time.Millisecond)
	e.schedule(t, "test:b")
	require.NoError(t, e.pool.Start(context.Background()))
	<-inCycle
	stopped := make(chan struct{})
	go func() {
		e.pool.Stop()
		close(stopped)
	}()
	require.Eventually(t, e.pool.isStopping, 5*time.Second, time.Millisecond)
	select {
	case <-stopped:
		t.Fatal("Stop returned before the cycle in flight finished")
	default:
	}
	close(finish)
	<-stopped
	e.pool.Stop() // twice is fine

	_, _, committed := e.job.snapshot()
	require.Equal(t, []string{"1"}, committed["test:a"], "the cycle in flight finished and committed, no further cycle")
	a := e.shard(t, "test:a")
	require.Equal(t, store.ShardPending, a.State, "released for another process, its work left")
	require.Empty(t, a.Owner)
	require.Equal(t, store.ShardPending, e.shard(t, "test:b").State, "no shard claimed after shutdown")
	require.Empty(t, committed["test:b"])
}

func TestScheduler_RescuerPutsRunningShardsWithExpiredLeasesBackToPending(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rescuer := NewRescuer(e.db.Store, loop.Deps{Clock: e.clk}, e.cfg)
	e.schedule(t, "test:a")
	c, err := e.db.Store.ShardClaim(t.Context(), store.ShardClaimParams{
		Now: e.clk.Now(), Owner: "dead", LeaseUntil: e.clk.Now().Add(e.cfg.Lease), Kinds: []string{"test"},
	})
	require.NoError(t, err)
	e.clk.Advance(e.cfg.Lease - time.Millisecond)
	n, err := rescuer.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "a live lease is left alone")
	e.clk.Advance(time.Millisecond)
	n, err = rescuer.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	s := e.shard(t, "test:a")
	require.Equal(t, store.ShardPending, s.State)
	require.Empty(t, s.Owner)
	require.ErrorIs(t, e.db.Store.ShardExtendLease(t.Context(), store.ShardExtendLeaseParams{
		Now: e.clk.Now(), Claim: c, LeaseUntil: e.clk.Now().Add(time.Minute),
	}), ErrLeaseLost, "the dead worker cannot extend the lease it lost")
	require.True(t, e.runOnce(t), "another worker runs it")
	require.Equal(t, store.ShardIdle, e.shard(t, "test:a").State)
}

func TestScheduler_WorkerExtendsTheLeaseOfALongRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i := range 5 {
		e.job.add("test:a", fmt.Sprint(i))
	}
	start := e.clk.Now()
	// Each cycle takes 10 s of the lease's 30 s, and the quantum is spent
	// only after the fifth.
	e.pool.cfg.Quantum = 45 * time.Second
	e.pool.cfg.Lease = 30 * time.Second
	var leases []time.Time
	e.job.onExecute = func(key string, _ []string) {
		s := e.shard(t, key)
		leases = append(leases, *s.LeaseExpiresAt)
		e.clk.Advance(10 * time.Second)
	}
	e.schedule(t, "test:a")
	require.True(t, e.runOnce(t))
	_, _, committed := e.job.snapshot()
	require.Len(t, committed["test:a"], 5, "the run outlived its first lease without losing the shard")
	require.Equal(t, start.Add(30*time.Second), leases[0])
	require.True(t, leases[len(leases)-1].After(start.Add(30*time.Second)), "the lease moved forward: %v", leases)
}
