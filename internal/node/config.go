package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/egress"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/queuer"
	"github.com/ledgerq/ledgerq/internal/submitter"
)

// Config is everything a ledgerq process needs: the one configuration that
// serve, once, dev, bench and the tests build their services from.
type Config struct {
	// DatabaseURL is the PostgreSQL connection URL.
	DatabaseURL string
	// DBMinConns raises the connection pool's size to at least this many
	// connections (0: pgx's default, the larger of 4 and the CPUs).
	DBMinConns int
	// Migrate applies pending migrations when the node opens.
	Migrate bool
	// Logger receives every service's logs; nil discards them.
	Logger *slog.Logger
	// Clock tells every rule the time; nil means the real clock.
	Clock clock.Clock
	// Version is ledgerq's version, as clients are told it
	// (web3_clientVersion).
	Version string

	API   APIConfig
	Loops LoopsConfig
	Batch BatchConfig
	// Wallet configures the wallet lane; it runs when wallets are
	// configured.
	Wallet WalletConfig
	// Builder configures the builder lane; it runs when enabled.
	Builder BuilderConfig

	// ShutdownTimeout is how long, on shutdown, in-flight work may take to
	// finish before it is cancelled.
	ShutdownTimeout time.Duration
}

// APIConfig configures the HTTP API: whether serve runs it, and the API's
// own settings (httpapi.Config, its listener's included).
type APIConfig struct {
	// Enabled runs the API in Serve.
	Enabled bool
	httpapi.Config
}

// LoopsConfig chooses the roles this process runs and their shared timings.
type LoopsConfig struct {
	Queuer, Submitter, Monitor bool
	// PollInterval is the longest a loop waits between rounds; NOTIFY wakes
	// it sooner.
	PollInterval time.Duration
	// DBTimeout bounds each database call of a loop.
	DBTimeout time.Duration
}

// BatchConfig configures the batch lane: batches sent one at a time per
// service, in order (Hyperledger Grid's serial queuer).
type BatchConfig struct {
	Ledger BatchLedgerConfig
	// DelayWindow is the wait before a transiently failed batch is retried;
	// it doubles with each attempt, up to DelayCap.
	DelayWindow time.Duration
	DelayCap    time.Duration
	// SubmitBatchSize is the most batches sent in one ledger call.
	SubmitBatchSize int
	// ClaimLease is how long a claim holds a batch before the monitor may
	// take it over; it must be longer than the ledger timeout.
	ClaimLease time.Duration
	// FirstCheck is how long after acceptance the monitor first asks.
	FirstCheck time.Duration
	// CheckInterval is the time between two checks of a pending batch.
	CheckInterval time.Duration
	// CheckBatchSize is the most batches asked about in one ledger call.
	CheckBatchSize int
	// TrackGrace is how long past its next check a batch this process
	// follows in memory is left to it before other monitors take it over.
	TrackGrace time.Duration
	// ReconcileInterval is how often the queuer admits batches that no
	// transaction admitted (rows written by hand); a scan over the services.
	ReconcileInterval time.Duration
	// RetentionAge is how long terminal batches are kept; older ones are
	// deleted, RetentionBatchSize rows at a time, by the monitor role. 0
	// keeps them forever.
	RetentionAge       time.Duration
	RetentionBatchSize int
	// RetentionInterval is the wait after a retention round that found less
	// than a full batch to delete.
	RetentionInterval time.Duration
	// Submitters is how many submitter loops this process runs (bench runs
	// several, as several processes would).
	Submitters int
}

// BatchLedgerConfig chooses the batch lane's ledger adapter.
type BatchLedgerConfig struct {
	// Kind is "sim" (the in-process simulated ledger) or "sawtooth".
	Kind string
	// URL is the Sawtooth REST API, for Kind "sawtooth".
	URL string
	// Timeout bounds one ledger call.
	Timeout time.Duration
	// Sim configures the simulated ledger, for Kind "sim".
	Sim sim.Config
	// Instance, when set, is used instead of building an adapter from Kind:
	// bench and the tests hand in a ledger they also inspect.
	Instance ledger.BatchLedger
}

// Ledger kinds of the batch lane.
const (
	BatchLedgerSim      = "sim"
	BatchLedgerSawtooth = "sawtooth"
)

// Defaults returns the defaults of every setting.
func Defaults() Config {
	return Config{
		Migrate: true,
		API:     APIConfig{Enabled: true, Config: httpapi.DefaultConfig()},
		Loops: LoopsConfig{
			Queuer: true, Submitter: true, Monitor: true,
			PollInterval: time.Second, DBTimeout: 10 * time.Second,
		},
		Batch: BatchConfig{
			Ledger: BatchLedgerConfig{
				Kind: BatchLedgerSim, Timeout: 30 * time.Second,
				Sim: sim.Config{Seed: 1, CommitDelay: 500 * time.Millisecond, MaxEvents: 10000},
			},
			DelayWindow: 15 * time.Second, DelayCap: 5 * time.Minute,
			SubmitBatchSize: 100, ClaimLease: time.Minute, FirstCheck: 500 * time.Millisecond,
			CheckInterval: time.Second, CheckBatchSize: 100, Submitters: 1,
			TrackGrace: 10 * time.Second, ReconcileInterval: 30 * time.Second,
			RetentionAge: 7 * 24 * time.Hour, RetentionBatchSize: 1000, RetentionInterval: time.Minute,
		},
		Wallet:          walletDefaults(),
		Builder:         builderDefaults(),
		ShutdownTimeout: 30 * time.Second,
	}
}

// Validate reports the first setting that cannot work, naming its flag.
func (c *Config) Validate() error {
	if c.DatabaseURL == "" {
		return errors.New("no database: set DATABASE_URL or --database-url (or use 'ledgerq dev' for a private one)")
	}
	return c.ValidateSettings()
}

// ValidateSettings is Validate without the database URL: dev checks the
// settings before it starts the private cluster whose URL it then sets.
func (c *Config) ValidateSettings() error {
	b := &c.Batch
	switch {
	case c.DBMinConns < 0:
		return errors.New("--db-min-conns must not be negative")
	case c.Loops.PollInterval <= 0:
		return errors.New("--poll-interval must be positive")
	case c.Loops.DBTimeout <= 0:
		return errors.New("--db-timeout must be positive")
	case c.ShutdownTimeout < 0:
		return errors.New("--shutdown-timeout must not be negative")
	case c.API.MaxBodyBytes < 1 || c.API.MaxBatchesPerRequest < 1 || c.API.MaxPayloadBytes < 1:
		return errors.New("--max-body-bytes, --max-batches-per-request and --max-payload-bytes must be at least 1")
	case c.API.RequestTimeout <= 0:
		return errors.New("--api-request-timeout must be positive")
	case c.API.TaskMaxWait < 0:
		return errors.New("--send-tx-max-wait must not be negative (0 answers at once, as task=true does)")
	case c.API.ReadHeaderTimeout <= 0 || c.API.ReadTimeout <= 0 || c.API.WriteTimeout <= 0 || c.API.IdleTimeout <= 0:
		return errors.New("--api-read-header-timeout, --api-read-timeout, --api-write-timeout and --api-idle-timeout must be positive")
	case c.API.ReadHeaderTimeout > c.API.ReadTimeout:
		return fmt.Errorf("--api-read-header-timeout (%s) must not be longer than --api-read-timeout (%s), which bounds the headers too", c.API.ReadHeaderTimeout, c.API.ReadTimeout)
	case c.API.MaxConnections < 1:
		return errors.New("--api-max-connections must be at least 1")
	case (c.API.TLSCertFile == "") != (c.API.TLSKeyFile == ""):
		return errors.New("--tls-cert-file and --tls-key-file go together: set both to serve HTTPS, or neither to serve HTTP (behind a proxy that terminates TLS)")
	case b.Ledger.Instance == nil && b.Ledger.Kind != BatchLedgerSim && b.Ledger.Kind != BatchLedgerSawtooth:
		return fmt.Errorf("--batch-ledger %q: want sim or sawtooth", b.Ledger.Kind)
	case b.Ledger.Instance == nil && b.Ledger.Kind == BatchLedgerSawtooth && b.Ledger.URL == "":
		return errors.New("--batch-ledger sawtooth needs --batch-ledger-url")
	case b.Ledger.Timeout <= 0:
		return errors.New("--batch-ledger-timeout must be positive")
	case b.SubmitBatchSize < 1 || b.CheckBatchSize < 1:
		return errors.New("--submit-batch-size and --check-batch-size must be at least 1")
	case b.Submitters < 1:
		return errors.New("the batch lane needs at least one submitter loop")
	case b.ClaimLease <= b.Ledger.Timeout:
		return fmt.Errorf("--claim-lease (%s) must be longer than --batch-ledger-timeout (%s), or the monitor may check a batch that is still being sent", b.ClaimLease, b.Ledger.Timeout)
	case b.DelayWindow <= 0 || b.DelayCap < b.DelayWindow:
		return errors.New("--delay-window must be positive and --delay-cap at least as long")
	case b.FirstCheck < 0 || b.CheckInterval <= 0:
		return errors.New("--first-check must not be negative and --check-interval must be positive")
	case b.RetentionAge < 0:
		return errors.New("--retention-age must not be negative (0 keeps terminal batches forever)")
	case b.RetentionAge > 0 && (b.RetentionBatchSize < 1 || b.RetentionInterval <= 0):
		return errors.New("--retention-batch-size must be at least 1 and --retention-interval positive")
	case b.TrackGrace <= 0 || b.ReconcileInterval <= 0:
		return errors.New("--track-grace and --reconcile-interval must be positive")
	}
	if err := c.Wallet.validate(); err != nil {
		return err
	}
	if c.Wallet.Enabled() && c.API.Webhooks.MaxEndpoints < 1 {
		return errors.New("--webhook-max-endpoints must be at least 1")
	}
	if err := c.Builder.validate(); err != nil {
		return err
	}
	if b.Ledger.URL != "" {
		u, err := url.ParseRequestURI(b.Ledger.URL)
		if err != nil {
			return fmt.Errorf("--batch-ledger-url: %w", err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("--batch-ledger-url %q: want an http or https URL", b.Ledger.URL)
		}
	}
	return nil
}

// RedactURL returns s with its password hidden, for logs and errors: the
// rule the API applies to webhook endpoints' URLs (egress.RedactURL).
func RedactURL(s string) string { return egress.RedactURL(s) }

// BatchQueuerConfig is the batch queuer's share of c: the one mapping from
// the node's settings to the service's, used by the node and by tests.
func (c *Config) BatchQueuerConfig() queuer.BatchConfig {
	return queuer.BatchConfig{
		PollInterval: c.Loops.PollInterval, DBTimeout: c.Loops.DBTimeout,
		DelayWindow: c.Batch.DelayWindow, DelayCap: c.Batch.DelayCap,
		ReconcileInterval: c.Batch.ReconcileInterval, ReconcileMax: 1000,
	}
}

// BatchSubmitterConfig is the batch submitter's share of c.
func (c *Config) BatchSubmitterConfig() submitter.BatchConfig {
	b := &c.Batch
	return submitter.BatchConfig{
		PollInterval: c.Loops.PollInterval, DBTimeout: c.Loops.DBTimeout, LedgerTimeout: b.Ledger.Timeout,
		SubmitBatchSize: b.SubmitBatchSize, ClaimLease: b.ClaimLease, FirstCheck: b.FirstCheck,
	}
}

// BatchMonitorConfig is the batch monitor's share of c.
func (c *Config) BatchMonitorConfig() monitor.BatchConfig {
	b := &c.Batch
	return monitor.BatchConfig{
		PollInterval: c.Loops.PollInterval, DBTimeout: c.Loops.DBTimeout, LedgerTimeout: b.Ledger.Timeout,
		CheckBatchSize: b.CheckBatchSize, CheckInterval: b.CheckInterval, ClaimLease: b.ClaimLease,
		// Two: the next round asks the ledger while the last one's record
		// commits (preloaded 1000 x 100: 10-11k committed/s with one at a
		// time, 13-14k with two; three or four did no better).
		TrackGrace: b.TrackGrace, TrackMax: 100000, RecordsInFlight: 2,
	}
}

// BatchRetentionConfig is the batch lane retention's share of c.
func (c *Config) BatchRetentionConfig() monitor.RetentionConfig {
	b := &c.Batch
	return monitor.RetentionConfig{
		Interval: b.RetentionInterval, DBTimeout: c.Loops.DBTimeout, Age: b.RetentionAge, BatchSize: b.RetentionBatchSize,
	}
}
