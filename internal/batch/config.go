// Package batch holds the batch lane's configuration: the one Config its
// roles (queuer.BatchQueuer, submitter.BatchSubmitter, monitor.BatchMonitor
// and the lane's retention) are built from, its defaults and its Validate.
// Batches are sent one at a time per service, in order (Hyperledger Grid's
// serial queuer); docs/design.md tells the lane.
//
// A field with a flag tag is a setting: cmd/ledgerq registers it as the flag
// --batch-<name>, the environment variable LEDGERQ_BATCH_<NAME> and the
// configuration file's key batch.<name> (internal/config reads the tags).
package batch

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
)

// Config configures the batch lane.
type Config struct {
	Ledger LedgerConfig `group:""`
	// DelayWindow is the wait before a transiently failed batch is retried
	// (Grid's 15 s); it doubles with each attempt, up to DelayCap.
	DelayWindow time.Duration `flag:"delay-window" help:"batch lane: delay before a transiently failed batch is retried; doubles with each attempt"`
	DelayCap    time.Duration `flag:"delay-cap" help:"batch lane: the longest delay window"`
	// SubmitBatchSize is the most batches sent in one ledger call.
	SubmitBatchSize int `flag:"submit-batch-size" help:"batch lane: most batches sent in one ledger call (one Sawtooth BatchList)"`
	// ClaimLease is how long a claim holds a batch before the monitor may
	// take it over; it must be longer than the ledger timeout, or the
	// monitor may check a batch that is still being sent.
	ClaimLease time.Duration `flag:"claim-lease" help:"batch lane: how long a claim holds a batch before the monitor checks on it"`
	// FirstCheck is how long after acceptance the monitor first asks.
	FirstCheck time.Duration `flag:"first-check" help:"batch lane: how long after acceptance the monitor first asks about a batch"`
	// CheckInterval is the time between two checks of a pending batch.
	CheckInterval time.Duration `flag:"check-interval" help:"batch lane: time between two status checks of a pending batch"`
	// CheckBatchSize is the most batches asked about in one ledger call.
	CheckBatchSize int `flag:"check-batch-size" help:"batch lane: most batches asked about in one ledger call"`
	// RetentionAge is how long terminal batches are kept; older ones are
	// deleted, RetentionBatchSize rows at a time, by the monitor role. 0
	// keeps them forever.
	RetentionAge       time.Duration `flag:"retention-age" help:"batch lane: delete terminal batches (committed, valid, invalid) older than this (0: keep them forever); run by the monitor role"`
	RetentionBatchSize int           `flag:"retention-batch-size" help:"batch lane: most terminal batches deleted in one statement"`
	// RetentionInterval is the wait after a retention round that found less
	// than a full batch to delete.
	RetentionInterval time.Duration `flag:"retention-interval" help:"batch lane: wait after a retention round that found less than a full batch to delete"`
	// TrackGrace is how long past its next check a batch this process
	// follows in memory is left to it before other monitors take it over:
	// its stored check time is kept that far ahead, and a batch still
	// pending is written back only when that time comes near.
	TrackGrace time.Duration `flag:"track-grace" help:"batch lane: how long past its next check a still pending batch this process follows in memory (written back before its claim ran out) is left to it before other processes' monitors take it over"`
	// ReconcileInterval is how often the queuer admits batches that no
	// transaction admitted (rows written by hand); a scan over the services.
	ReconcileInterval time.Duration `flag:"reconcile-interval" help:"batch lane: how often the queuer admits batches no transaction admitted (rows written by hand); a scan over the services"`

	// Submitters is how many submitter loops this process runs (bench runs
	// several, as several processes would).
	Submitters int
	// VerifyWorkers bounds the signature checks one submitter round runs
	// at once, for the batches stored through ledgerq.submit_batch, which
	// SQL could not check (default GOMAXPROCS: the checks are CPU work).
	VerifyWorkers int
	// ReconcileMax bounds the services one reconciliation admits.
	ReconcileMax int
	// TrackMax bounds the batches the monitor follows in memory; beyond it
	// batches are left to the database path.
	TrackMax int
	// RecordsInFlight is how many monitor rounds' record transactions may
	// run at once (1: each round records before the next begins). The next
	// round asks the ledger while the last one's answers are being written;
	// their batches are of different services, since a service has one
	// active batch at a time.
	RecordsInFlight int
}

// LedgerConfig chooses the batch lane's ledger adapter.
type LedgerConfig struct {
	// Kind is "sim" (the in-process simulated ledger) or "sawtooth".
	Kind string `flag:"ledger" only:"ledger" help:"batch lane ledger: sim (in-process simulated ledger) or sawtooth (Sawtooth REST API at --batch-ledger-url)"`
	// URL is the Sawtooth REST API, for Kind "sawtooth".
	URL string `flag:"ledger-url" only:"ledger" secret:"url" help:"batch lane: Sawtooth REST API, for --batch-ledger sawtooth (for example http://127.0.0.1:8008)"`
	// Timeout bounds one ledger call.
	Timeout time.Duration `flag:"ledger-timeout" help:"batch lane: timeout of one ledger call; must be shorter than --batch-claim-lease"`
	// Sim configures the simulated ledger, for Kind "sim".
	Sim sim.Config `group:"sim-"`
	// Instance, when set, is used instead of building an adapter from Kind:
	// bench and the tests hand in a ledger they also inspect.
	Instance ledger.BatchLedger
}

// Ledger kinds of the batch lane.
const (
	LedgerSim      = "sim"
	LedgerSawtooth = "sawtooth"
)

// defaults holds the default of every setting whose zero is not a setting
// of its own: WithDefaults fills those.
var defaults = Config{
	Ledger: LedgerConfig{
		Kind: LedgerSim, Timeout: 30 * time.Second,
	},
	DelayWindow: 15 * time.Second, DelayCap: 5 * time.Minute,
	SubmitBatchSize: 100, ClaimLease: time.Minute,
	// CheckBatchSize 500: a monitor round records its answers, frees the
	// services and claims their next batches in one transaction, whose
	// commit and statements cost the same for 100 batches as for 500
	// (preloaded 1000 x 100, interleaved on a durable server: 1.07-1.28x
	// the committed/s of 100 per round; 1000 did no better). The Sawtooth
	// client asks about them in requests of its own size.
	CheckInterval: time.Second, CheckBatchSize: 500, Submitters: 1,
	TrackGrace: 10 * time.Second, ReconcileInterval: 30 * time.Second,
	RetentionBatchSize: 1000, RetentionInterval: time.Minute,
	// Two: the next round asks the ledger while the last one's record
	// commits (preloaded 1000 x 100: 10-11k committed/s with one at a time,
	// 13-14k with two; three or four did no better).
	ReconcileMax: 1000, TrackMax: 100000, RecordsInFlight: 2,
}

// Defaults returns the lane's defaults: WithDefaults of the zero Config,
// and the defaults of the settings whose zero means something (FirstCheck
// 0 asks at once, RetentionAge 0 keeps batches forever, and the simulated
// ledger's), which a zero Config leaves at zero.
func Defaults() Config {
	c := Config{}.WithDefaults()
	c.FirstCheck = 500 * time.Millisecond
	c.RetentionAge = 7 * 24 * time.Hour
	c.Ledger.Sim = sim.Config{Seed: 1, CommitDelay: 500 * time.Millisecond, MaxEvents: 10000}
	return c
}

// WithDefaults returns c with every setting whose zero is not a setting of
// its own set to its default.
func (c Config) WithDefaults() Config {
	d := &defaults
	c.Ledger.Kind = cmp.Or(c.Ledger.Kind, d.Ledger.Kind)
	c.Ledger.Timeout = cmp.Or(c.Ledger.Timeout, d.Ledger.Timeout)
	c.DelayWindow = cmp.Or(c.DelayWindow, d.DelayWindow)
	c.DelayCap = cmp.Or(c.DelayCap, d.DelayCap)
	c.SubmitBatchSize = cmp.Or(c.SubmitBatchSize, d.SubmitBatchSize)
	c.ClaimLease = cmp.Or(c.ClaimLease, d.ClaimLease)
	c.CheckInterval = cmp.Or(c.CheckInterval, d.CheckInterval)
	c.CheckBatchSize = cmp.Or(c.CheckBatchSize, d.CheckBatchSize)
	c.RetentionBatchSize = cmp.Or(c.RetentionBatchSize, d.RetentionBatchSize)
	c.RetentionInterval = cmp.Or(c.RetentionInterval, d.RetentionInterval)
	c.TrackGrace = cmp.Or(c.TrackGrace, d.TrackGrace)
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, d.ReconcileInterval)
	c.Submitters = cmp.Or(c.Submitters, d.Submitters)
	c.VerifyWorkers = cmp.Or(c.VerifyWorkers, runtime.GOMAXPROCS(0))
	c.ReconcileMax = cmp.Or(c.ReconcileMax, d.ReconcileMax)
	c.TrackMax = cmp.Or(c.TrackMax, d.TrackMax)
	c.RecordsInFlight = cmp.Or(c.RecordsInFlight, d.RecordsInFlight)
	return c
}

// Validate reports the first setting that cannot work, naming its flag.
func (c *Config) Validate() error {
	switch {
	case c.Ledger.Instance == nil && c.Ledger.Kind != LedgerSim && c.Ledger.Kind != LedgerSawtooth:
		return fmt.Errorf("--batch-ledger %q: want sim or sawtooth", c.Ledger.Kind)
	case c.Ledger.Instance == nil && c.Ledger.Kind == LedgerSawtooth && c.Ledger.URL == "":
		return errors.New("--batch-ledger sawtooth needs --batch-ledger-url")
	case c.Ledger.Timeout <= 0:
		return errors.New("--batch-ledger-timeout must be positive")
	case c.SubmitBatchSize < 1 || c.CheckBatchSize < 1:
		return errors.New("--batch-submit-batch-size and --batch-check-batch-size must be at least 1")
	case c.Submitters < 1:
		return errors.New("the batch lane needs at least one submitter loop")
	case c.VerifyWorkers < 1:
		return errors.New("batch lane: VerifyWorkers must be at least 1")
	case c.ClaimLease <= c.Ledger.Timeout:
		return fmt.Errorf("--batch-claim-lease (%s) must be longer than --batch-ledger-timeout (%s), or the monitor may check a batch that is still being sent", c.ClaimLease, c.Ledger.Timeout)
	case c.DelayWindow <= 0 || c.DelayCap < c.DelayWindow:
		return errors.New("--batch-delay-window must be positive and --batch-delay-cap at least as long")
	case c.FirstCheck < 0 || c.CheckInterval <= 0:
		return errors.New("--batch-first-check must not be negative and --batch-check-interval must be positive")
	case c.RetentionAge < 0:
		return errors.New("--batch-retention-age must not be negative (0 keeps terminal batches forever)")
	case c.RetentionAge > 0 && (c.RetentionBatchSize < 1 || c.RetentionInterval <= 0):
		return errors.New("--batch-retention-batch-size must be at least 1 and --batch-retention-interval positive")
	case c.TrackGrace <= 0 || c.ReconcileInterval <= 0:
		return errors.New("--batch-track-grace and --batch-reconcile-interval must be positive")
	case c.ReconcileMax < 1 || c.TrackMax < 1 || c.RecordsInFlight < 1:
		return errors.New("batch lane: ReconcileMax, TrackMax and RecordsInFlight must be at least 1")
	}
	if c.Ledger.URL != "" {
		u, err := url.ParseRequestURI(c.Ledger.URL)
		if err != nil {
			return fmt.Errorf("--batch-ledger-url: %w", err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("--batch-ledger-url %q: want an http or https URL", c.Ledger.URL)
		}
	}
	return nil
}
