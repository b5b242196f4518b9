package workers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Pool is seed 002's scheduler and worker pool on PostgreSQL: Config.Workers
// workers per process, each claiming the oldest pending shard of a kind it
// has a Job for and running it until its work is empty or the quantum is
// spent. It is a loop.Service.
type Pool struct {
	cfg   Config
	store *store.Store
	deps  loop.Deps
	jobs  map[string]Job
	kinds []string
	// owner names this pool's workers in the shards they hold: host, pid
	// and a random part, so that two pools of one process differ.
	owner string

	// poke wakes an idle worker of this process without a database round
	// trip: Schedule queued a shard, or a worker claimed one (there may be
	// more).
	poke chan struct{}

	hooks hooks

	mu       sync.Mutex
	started  bool
	stopping chan struct{}
	done     chan struct{}
}

// hooks let tests stop a run at a chosen point; nil in production.
type hooks struct {
	// afterCollect runs after a Collect that found work, before Execute.
	afterCollect func(key string)
	// beforeRelease runs after the run's last cycle, before the release.
	beforeRelease func(key string)
}

// NewPool returns a pool that runs jobs, by kind (the shard key's prefix
// before the first ':', "wallet" for "wallet:…"). deps.Wake should be the
// notify.Shards subscription.
func NewPool(st *store.Store, deps loop.Deps, cfg Config, jobs map[string]Job) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, errors.New("shard pool: no jobs")
	}
	kinds := make([]string, 0, len(jobs))
	for kind, j := range jobs {
		if kind == "" || strings.Contains(kind, ":") || j == nil {
			return nil, fmt.Errorf("shard pool: bad job kind %q (a non-empty key prefix without ':', with a job)", kind)
		}
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pool{
		cfg: cfg, store: st, deps: deps, jobs: jobs, kinds: kinds,
		owner: ownerName(), poke: make(chan struct{}, 1),
	}, nil
}

func ownerName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Owner returns the name this pool's workers write into the shards they hold
// (followed by "/<worker>").
func (p *Pool) Owner() string { return p.owner }

// Schedule is seed 002's schedule(key): the shard becomes pending if it was
// idle or new (and every process's workers are notified), stays as it is if
// pending, and is queued again after its run if running. A worker of this
// process is woken at once.
func (p *Pool) Schedule(ctx context.Context, key string) (store.ShardScheduled, error) {
	if _, ok := p.jobs[kindOf(key)]; !ok {
		return 0, fmt.Errorf("scheduling shard %q: no job for kind %q", key, kindOf(key))
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DBTimeout)
	defer cancel()
	res, err := p.store.ShardSchedule(ctx, store.ShardScheduleParams{Now: p.deps.Clock.Now(), Key: key})
	if err != nil {
		return 0, err
	}
	if res == store.ShardQueued {
		p.Poke()
	}
	return res, nil
}

// Poke wakes one idle worker of this process.
func (p *Pool) Poke() {
	select {
	case p.poke <- struct{}{}:
	default:
	}
}

// Start starts the workers and returns at once. Cancelling ctx cancels the
// work in flight; Stop lets it finish.
func (p *Pool) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("shard pool: already started")
	}
	p.started = true
	p.stopping = make(chan struct{})
	p.done = make(chan struct{})
	var wg sync.WaitGroup
	for n := range p.cfg.Workers {
		wg.Go(func() { p.work(ctx, fmt.Sprintf("%s/%d", p.owner, n)) })
	}
	go func() {
		wg.Wait()
		close(p.done)
	}()
	return nil
}

// Stop is seed 002's shutdown: workers stop claiming, each finishes the
// cycle it is in, releases its shard (back to pending, for any process to
// run), and Stop returns when every worker has ended. Safe to call twice.
func (p *Pool) Stop() {
	p.mu.Lock()
	if !p.started {
		p.mu.Unlock()
		return
	}
	select {
	case <-p.stopping:
	default:
		close(p.stopping)
	}
	done := p.done
	p.mu.Unlock()
	<-done
}

func (p *Pool) isStopping() bool {
	p.mu.Lock()
	stopping := p.stopping
	p.mu.Unlock()
	if stopping == nil {
		return false
	}
	select {
	case <-stopping:
		return true
	default:
		return false
	}
}

// work is one worker (seed 002, worker loop): it waits for a wake-up, a poke
// or its poll interval, then claims and runs shards until none is waiting.
func (p *Pool) work(ctx context.Context, owner string) {
	// A short random start delay keeps workers started together apart.
	timer := time.NewTimer(mrand.N(min(p.cfg.PollInterval/4, 100*time.Millisecond) + 1))
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-p.stopping:
			return
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-p.deps.Wake:
		case <-p.poke:
		}
		next := p.cfg.PollInterval
		for !p.isStopping() && ctx.Err() == nil {
			ran, err := p.runOnce(ctx, owner)
			if err != nil {
				if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
					return
				}
				failures++
				next = min(p.cfg.PollInterval, 50*time.Millisecond<<min(failures, 10))
				next = next/2 + mrand.N(next/2+1)
				p.deps.Logger.Error("shard worker: round failed", "worker", owner, "error", err, "failures", failures, "retry_in", next)
				break
			}
			failures = 0
			if !ran {
				break
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// RunOnce claims the oldest pending shard and runs it until it releases it.
// It reports whether it claimed one. Tests call it directly.
func (p *Pool) RunOnce(ctx context.Context) (bool, error) {
	return p.runOnce(ctx, p.owner+"/once")
}

func (p *Pool) runOnce(ctx context.Context, owner string) (bool, error) {
	now := p.deps.Clock.Now()
	claimCtx, cancel := context.WithTimeout(ctx, p.cfg.DBTimeout)
	c, err := p.store.ShardClaim(claimCtx, store.ShardClaimParams{
		Now: now, Owner: owner, LeaseUntil: now.Add(p.cfg.Lease), Kinds: p.kinds,
	})
	cancel()
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// One wake-up may stand for several shards: pass it on.
	p.Poke()
	return true, p.run(ctx, c, now)
}

// run is seed 002's execution loop for one claimed shard, then its
// post-processing (the release).
func (p *Pool) run(ctx context.Context, c Claim, started time.Time) error {
	job := p.jobs[kindOf(c.Key)]
	log := p.deps.Logger.With("shard", c.Key, "run", c.Run)
	leaseUntil := started.Add(p.cfg.Lease)
	workLeft := false
	var failure error
	for {
		if p.isStopping() {
			// Shutdown: the last cycle is done; whatever is left is for the
			// next run, in any process.
			workLeft = true
			break
		}
		if now := p.deps.Clock.Now(); !now.Before(leaseUntil.Add(-p.cfg.Lease / 2)) {
			dbCtx, cancel := context.WithTimeout(ctx, p.cfg.DBTimeout)
			err := p.store.ShardExtendLease(dbCtx, store.ShardExtendLeaseParams{Now: now, Claim: c, LeaseUntil: now.Add(p.cfg.Lease)})
			cancel()
			if errors.Is(err, ErrLeaseLost) {
				log.Warn("shard worker: lease lost, run abandoned", "error", err)
				return nil
			}
			if err != nil {
				failure, workLeft = err, true
				break
			}
			leaseUntil = now.Add(p.cfg.Lease)
		}
		cyc, err := job.Collect(ctx, c)
		if err != nil {
			failure = fmt.Errorf("collecting the work of shard %q: %w", c.Key, err)
			break
		}
		if cyc == nil {
			// Seed 002: no pending work ends the loop at once.
			break
		}
		if p.hooks.afterCollect != nil {
			p.hooks.afterCollect(c.Key)
		}
		err = cyc.Execute(ctx)
		if err == nil {
			err = cyc.Commit(ctx)
		}
		if errors.Is(err, ErrLeaseLost) {
			log.Warn("shard worker: lease lost, run abandoned", "error", err)
			return nil
		}
		if err != nil && ctx.Err() != nil {
			// The process is being cancelled: not the work's failure. The
			// shard goes back to the queue with its work.
			workLeft = true
			break
		}
		if err != nil {
			// Seed 002: the failed work is still removed. The run ends and
			// the shard waits its backoff: a failing shard neither spins
			// nor keeps a worker.
			failure = fmt.Errorf("running a cycle of shard %q: %w", c.Key, err)
			if dropErr := cyc.Drop(ctx, err); dropErr != nil {
				if errors.Is(dropErr, ErrLeaseLost) {
					log.Warn("shard worker: lease lost, run abandoned", "error", dropErr)
					return nil
				}
				failure = errors.Join(failure, fmt.Errorf("dropping the failed work: %w", dropErr))
			}
			break
		}
		if p.deps.Clock.Now().Sub(started) >= p.cfg.Quantum {
			// Seed 002, time quantum: yield, back of the queue.
			workLeft = true
			break
		}
	}
	if p.hooks.beforeRelease != nil {
		p.hooks.beforeRelease(c.Key)
	}
	return p.release(ctx, c, workLeft, failure)
}

// release ends the run (seed 002, post-processing). It runs even when ctx
// was cancelled, so that a stopping process hands its shards back instead of
// leaving them to the Rescuer.
func (p *Pool) release(ctx context.Context, c Claim, workLeft bool, failure error) error {
	now := p.deps.Clock.Now()
	notBefore := now
	if failure != nil {
		notBefore = now.Add(p.cfg.backoff(c.Failures + 1))
		p.deps.Logger.Warn("shard worker: run failed", "shard", c.Key, "run", c.Run,
			"error", failure, "failures", c.Failures+1, "retry_at", notBefore)
	}
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.DBTimeout)
	defer cancel()
	_, err := p.store.ShardRelease(relCtx, store.ShardReleaseParams{
		Now: now, Claim: c, WorkLeft: workLeft, NotBefore: notBefore, Failure: failure,
	})
	if errors.Is(err, ErrLeaseLost) {
		p.deps.Logger.Warn("shard worker: lease lost before the release", "shard", c.Key, "run", c.Run)
		return nil
	}
	return err
}
