package workers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Scheduler is the shard scheduler and its workers on PostgreSQL:
// Config.Workers workers per process, each a loop (package loop, the one
// every service is built on) whose round claims the oldest pending shard of
// a kind it has a Job for and runs it until its work is empty or the
// quantum is spent. It is a loop.Service.
type Scheduler struct {
	cfg   Config
	store *store.Store
	deps  loop.Deps
	jobs  map[string]Job
	kinds []string
	// owner names this scheduler's workers in the shards they hold: host,
	// pid and a random part, so that two schedulers of one process differ.
	owner   string
	workers []*loop.Loop

	hooks hooks

	mu sync.Mutex
	// stopping is closed by Stop: a run in progress ends after its cycle.
	stopping chan struct{}
}

// hooks let tests stop a run at a chosen point; nil in production.
type hooks struct {
	// afterCollect runs after a Collect that found work, before Execute.
	afterCollect func(key string)
	// beforeRelease runs after the run's last cycle, before the release.
	beforeRelease func(key string)
}

// NewScheduler returns a scheduler that runs jobs, by kind (the shard key's
// prefix before the first ':', "wallet" for "wallet:…"). deps.Wake should be
// the notify.Shards subscription: a wake-up starts one idle worker's round.
func NewScheduler(st *store.Store, deps loop.Deps, cfg Config, jobs map[string]Job) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, errors.New("shard scheduler: no jobs")
	}
	kinds := make([]string, 0, len(jobs))
	for kind, j := range jobs {
		if kind == "" || strings.Contains(kind, ":") || j == nil {
			return nil, fmt.Errorf("shard scheduler: bad job kind %q (a non-empty key prefix without ':', with a job)", kind)
		}
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Scheduler{cfg: cfg, store: st, deps: deps, jobs: jobs, kinds: kinds, owner: ownerName(), stopping: make(chan struct{})}
	for n := range cfg.Workers {
		owner := fmt.Sprintf("%s/%d", s.owner, n)
		s.workers = append(s.workers, loop.New(loop.Config{
			Name: "shard_worker", Interval: cfg.PollInterval, Wake: deps.Wake, MaxBackoff: cfg.PollInterval,
			Logger: deps.Logger, Observe: deps.Metrics.ObserveRound,
		}, func(ctx context.Context) (bool, error) {
			// A run that claimed a shard is followed by another at once:
			// one wake-up may stand for several shards.
			return s.runOnce(ctx, owner)
		}))
	}
	return s, nil
}

func ownerName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Owner returns the name this scheduler's workers write into the shards
// they hold (followed by "/<worker>").
func (s *Scheduler) Owner() string { return s.owner }

// Schedule is schedule(key): the shard becomes pending if it was idle or
// new (and every process's workers are notified), stays as it is if
// pending, and is queued again after its run if running. A worker of this
// process is woken at once.
func (s *Scheduler) Schedule(ctx context.Context, key string) (store.ShardScheduled, error) {
	if _, ok := s.jobs[kindOf(key)]; !ok {
		return 0, fmt.Errorf("scheduling shard %q: no job for kind %q", key, kindOf(key))
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
	defer cancel()
	res, err := s.store.ShardSchedule(ctx, store.ShardScheduleParams{Now: s.deps.Clock.Now(), Key: key})
	if err != nil {
		return 0, err
	}
	if res == store.ShardQueued {
		s.Poke()
	}
	return res, nil
}

// Poke wakes this process's idle workers without a database round trip:
// a shard was queued here (Schedule, the follower, the rescuer).
func (s *Scheduler) Poke() {
	for _, w := range s.workers {
		w.Poke()
	}
}

// Start starts the workers and returns at once. Cancelling ctx cancels the
// work in flight; Stop lets it finish.
func (s *Scheduler) Start(ctx context.Context) error {
	return loop.StartAll(ctx, s.loops()...)
}

// Stop is the scheduler's shutdown: workers stop claiming, each finishes the
// cycle it is in, releases its shard (back to pending, for any process to
// run), and Stop returns when every worker has ended. Safe to call twice.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	select {
	case <-s.stopping:
	default:
		close(s.stopping)
	}
	s.mu.Unlock()
	loop.StopAll(s.loops()...)
}

func (s *Scheduler) loops() []loop.Service {
	out := make([]loop.Service, len(s.workers))
	for i, w := range s.workers {
		out[i] = w
	}
	return out
}

func (s *Scheduler) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// RunOnce claims the oldest pending shard and runs it until it releases it.
// It reports whether it claimed one. Tests call it directly.
func (s *Scheduler) RunOnce(ctx context.Context) (bool, error) {
	return s.runOnce(ctx, s.owner+"/once")
}

func (p *Scheduler) runOnce(ctx context.Context, owner string) (bool, error) {
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
	return true, p.run(ctx, c, now)
}

// run is the execution loop for one claimed shard (collect, execute, commit,
// until no work is left or the quantum is spent), then its post-processing
// (the release).
func (p *Scheduler) run(ctx context.Context, c Claim, started time.Time) error {
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
			// No pending work ends the loop at once: no spinning.
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
			// The failed work is still removed. The run ends and
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
			// The time quantum is spent: yield, back of the queue.
			workLeft = true
			break
		}
	}
	if p.hooks.beforeRelease != nil {
		p.hooks.beforeRelease(c.Key)
	}
	return p.release(ctx, c, workLeft, failure)
}

// release ends the run (its post-processing). It runs even when ctx
// was cancelled, so that a stopping process hands its shards back instead of
// leaving them to the Rescuer.
func (p *Scheduler) release(ctx context.Context, c Claim, workLeft bool, failure error) error {
	now := p.deps.Clock.Now()
	notBefore := now
	var unavailable *UnavailableError
	switch {
	case failure == nil:
	case errors.As(failure, &unavailable):
		// The ledger did not answer: no failure of the work, so the
		// wait stays short and does not grow, and the failure count is
		// kept as it was.
		notBefore = now.Add(p.cfg.unavailableWait(unavailable.After))
		p.deps.Logger.Info("shard worker: ledger unavailable, run again soon", "shard", c.Key, "run", c.Run,
			"error", failure, "retry_at", notBefore)
	default:
		notBefore = now.Add(p.cfg.backoff(c.Failures + 1))
		p.deps.Logger.Warn("shard worker: run failed", "shard", c.Key, "run", c.Run,
			"error", failure, "failures", c.Failures+1, "retry_at", notBefore)
	}
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.DBTimeout)
	defer cancel()
	_, err := p.store.ShardRelease(relCtx, store.ShardReleaseParams{
		Now: now, Claim: c, WorkLeft: workLeft, NotBefore: notBefore, Failure: failure, Unavailable: unavailable != nil,
	})
	if errors.Is(err, ErrLeaseLost) {
		p.deps.Logger.Warn("shard worker: lease lost before the release", "shard", c.Key, "run", c.Run)
		return nil
	}
	return err
}
