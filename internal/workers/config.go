package workers

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Config configures a Scheduler and its Rescuer. Its tags declare the
// settings an operator sets (internal/config): the section shards, flags
// --shard-*.
type Config struct {
	// Workers is the number of workers of one process: 16, or one per CPU
	// core where there are more. A wallet's run spends most of its time
	// waiting for the chain's answers (a JSON-RPC round trip per send and
	// per receipt), not on a core, so one worker per core would leave
	// wallets waiting for a worker while the cores idle; each worker holds
	// a database connection only for the length of one call.
	Workers int `flag:"workers" default:"16, or the CPUs where more" help:"workers of this process (one shard each at a time)"`
	// Quantum is the longest a worker keeps running one shard's cycles
	// before it yields it back to the queue (100 ms by default). It is checked
	// after each cycle, so a run may exceed it by one cycle.
	Quantum time.Duration `flag:"quantum" help:"longest a worker runs one shard before yielding it"`
	// Lease is how long a claim holds a shard without being extended; a
	// worker extends it between cycles once half of it is spent, and the
	// Rescuer frees a shard whose lease passed. A cycle must take less. It
	// is the backstop: the shard of a holder whose process died is freed
	// at the first Rescuer round after its death (store.Liveness).
	Lease time.Duration `flag:"lease" help:"a claim's lease: a shard whose lease passed is rescued, which frees a hung holder's shard (the backstop: a shard whose holder's process died is rescued at once)"`
	// RescueInterval is the time between two Rescuer rounds: how long, at
	// most, the wallet of a dead holder waits before another process may
	// take it (default 1 s). A round is one cheap statement.
	RescueInterval time.Duration `flag:"rescue-interval" help:"time between two rescue rounds (monitor role), which put back in the queue the shards of dead processes (their liveness lock released) and of expired leases: a dead holder's wallet waits at most about this long"`
	// PollInterval is the longest an idle worker waits before it tries to
	// claim without a wake-up (NOTIFY may be lost).
	PollInterval time.Duration
	// DBTimeout bounds each of the scheduler's own database calls.
	DBTimeout time.Duration
	// Backoff is the wait before the next run of a shard whose run failed; it
	// doubles with each consecutive failed run, up to MaxBackoff.
	Backoff    time.Duration `flag:"backoff" help:"wait before the next run of a shard whose run failed; it doubles with each consecutive failed run, up to --shard-max-backoff"`
	MaxBackoff time.Duration `flag:"max-backoff" help:"longest wait before the next run of a shard whose runs keep failing"`
	// UnavailableBackoff caps the wait before the next run of a shard whose
	// run failed because the ledger did not answer (Unavailable): the
	// ledger's hint (Retry-After) or Backoff, whichever is longer, and at
	// most this (2 s by default). Such a run is no failure of the shard's
	// work, so the wait does not grow: a wallet whose provider recovers
	// sends again within about this long.
	UnavailableBackoff time.Duration `flag:"unavailable-backoff" help:"longest wait before the next run of a shard whose run failed because the ledger did not answer (a rate limit, a 5xx, a reset, a timeout); such a run counts as no failure, so the wait does not grow"`
}

// Defaults returns the shard scheduler's default configuration
// (docs/design.md, "Shards").
func Defaults() Config {
	return Config{
		Workers:            max(16, runtime.NumCPU()),
		Quantum:            100 * time.Millisecond,
		Lease:              30 * time.Second,
		RescueInterval:     time.Second,
		PollInterval:       time.Second,
		DBTimeout:          5 * time.Second,
		Backoff:            time.Second,
		MaxBackoff:         time.Minute,
		UnavailableBackoff: 2 * time.Second,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("shard workers must be at least 1, got %d", c.Workers))
	}
	errs = append(errs, notPositive("shard",
		setting{"quantum", c.Quantum}, setting{"lease", c.Lease}, setting{"rescue interval", c.RescueInterval},
		setting{"poll interval", c.PollInterval}, setting{"database timeout", c.DBTimeout},
		setting{"backoff", c.Backoff}, setting{"max backoff", c.MaxBackoff}, setting{"unavailable backoff", c.UnavailableBackoff})...)
	if c.Quantum > 0 && c.Lease > 0 && c.Lease < 2*c.Quantum {
		errs = append(errs, fmt.Errorf("shard lease (%s) must be at least twice the quantum (%s): a run would lose its shard", c.Lease, c.Quantum))
	}
	if c.Backoff > 0 && c.MaxBackoff > 0 && c.MaxBackoff < c.Backoff {
		errs = append(errs, fmt.Errorf("shard max backoff (%s) is below the backoff (%s)", c.MaxBackoff, c.Backoff))
	}
	return errors.Join(errs...)
}

// setting is a duration setting and its name in errors.
type setting struct {
	name string
	v    time.Duration
}

// notPositive returns an error for each setting that is not positive, named
// with what it configures ("shard").
func notPositive(what string, settings ...setting) []error {
	var errs []error
	for _, s := range settings {
		if s.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %s must be positive, got %s", what, s.name, s.v))
		}
	}
	return errs
}

// backoff is the wait before the next run after failures consecutive
// failed runs (failures >= 1).
func (c Config) backoff(failures int) time.Duration {
	d := c.Backoff << min(max(failures-1, 0), 20)
	if d > c.MaxBackoff || d <= 0 {
		d = c.MaxBackoff
	}
	return d
}

// unavailableWait is the wait before the next run after a run the ledger's
// unavailability failed: its hint or Backoff, whichever is longer, capped by
// UnavailableBackoff.
func (c Config) unavailableWait(hint time.Duration) time.Duration {
	return min(max(hint, c.Backoff), c.UnavailableBackoff)
}
