package loop

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/metrics"
)

// Service is a background service: Start returns at once and runs it in the
// background; Stop blocks until it has stopped and is safe to call twice.
// Every loop service is one by embedding *Loop.
type Service interface {
	Start(ctx context.Context) error
	Stop()
}

// StartAll starts services in order. When one fails to start, the ones
// already started are stopped and its error is returned.
func StartAll(ctx context.Context, services ...Service) error {
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			StopAll(services[:i]...)
			return err
		}
	}
	return nil
}

// StopAll stops services in parallel and returns when every one has stopped:
// each finishes its round in flight meanwhile, so stopping takes as long as
// the slowest round, not the sum of them.
func StopAll(services ...Service) {
	var wg sync.WaitGroup
	for _, s := range services {
		wg.Go(s.Stop)
	}
	wg.Wait()
}

// Deps is what every loop service is built with besides its store and its
// own configuration.
type Deps struct {
	Clock  clock.Clock
	Logger *slog.Logger
	// PollInterval is the longest the service waits between rounds
	// (NOTIFY wakes it sooner), and DBTimeout bounds each of its database
	// calls: the settings every loop shares (--poll-interval,
	// --db-timeout). WithDefaults fills them.
	PollInterval time.Duration
	DBTimeout    time.Duration
	// Metrics, when set, counts the service's transitions and rounds.
	Metrics *metrics.Metrics
	// Wake, when set, starts a round early: the service's NOTIFY channel.
	Wake <-chan struct{}
}

// Default loop timings: the defaults of --poll-interval and --db-timeout.
const (
	DefaultPollInterval = time.Second
	DefaultDBTimeout    = 10 * time.Second
)

// WithDefaults returns d with its zero timings set to their defaults.
func (d Deps) WithDefaults() Deps {
	d.PollInterval = cmp.Or(d.PollInterval, DefaultPollInterval)
	d.DBTimeout = cmp.Or(d.DBTimeout, DefaultDBTimeout)
	return d
}

// NewService returns the Loop a service embeds: named name, polling every
// interval, woken by deps.Wake, observed by deps.Metrics, running runOnce
// each round. A round that handled max items (a full claim) is followed by
// another at once; max 0 never asks for one.
//
// A service without deps.Wake retries a failed round after its interval at
// the latest (Config.MaxBackoff, when the interval is shorter than its
// default): nothing else tells it that the database is back after an
// outage (a failover, a restart), so a backoff grown over the outage would
// keep it asleep long after. A service with deps.Wake backs off as usual;
// the notify listener wakes it when it reconnects.
func NewService(name string, interval time.Duration, deps Deps, max int, runOnce func(context.Context) (int, error)) *Loop {
	cfg := Config{Name: name, Interval: interval, Wake: deps.Wake, Logger: deps.Logger, Observe: deps.Metrics.ObserveRound}
	if deps.Wake == nil {
		cfg.MaxBackoff = min(interval, defaultMaxBackoff)
	}
	return New(cfg, func(ctx context.Context) (bool, error) {
		n, err := runOnce(ctx)
		return max > 0 && n >= max, err
	})
}
