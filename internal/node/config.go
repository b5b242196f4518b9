package node

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/egress"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/monitor"
)

// Config is everything a ledgerq process needs: the one configuration that
// serve, once, dev, bench and the tests build their services from.
type Config struct {
	// DatabaseURL is the PostgreSQL connection URL.
	DatabaseURL string `flag:"database-url" secret:"url" help:"PostgreSQL connection URL (ledgerq dev: its private cluster's when unset)"`
	// DBMinConns raises the connection pool's size to at least this many
	// connections (0: pgx's default, the larger of 4 and the CPUs).
	DBMinConns int `flag:"database-min-conns" help:"size the database connection pool to at least this many connections (0: the larger of 4 and the CPUs)"`
	// Migrate applies pending migrations when the node opens.
	Migrate bool `flag:"database-migrate" help:"apply pending schema migrations at start (processes that start together serialise on an advisory lock)"`
	// Logger receives every service's logs; nil discards them.
	Logger *slog.Logger
	// Clock tells every rule the time; nil means the real clock.
	Clock clock.Clock
	// Version is ledgerq's version, as clients are told it
	// (web3_clientVersion).
	Version string

	// API and Loops are the shared parts' settings; the lanes' follow.
	// ledgerq registers each one's settings in its own section of the
	// configuration (cmd/ledgerq/config.go).
	API   APIConfig
	Loops LoopsConfig
	// Batch configures the batch lane.
	Batch batch.Config
	// Wallet configures the wallet lane; it runs when wallets are
	// configured.
	Wallet WalletConfig
	// Builder configures the builder lane; it runs when enabled.
	Builder builder.Config
	// Access configures the retention of the operators' records (the
	// audit, the console's sessions), run by the monitor role.
	Access monitor.AccessRetentionConfig

	// ShutdownTimeout is how long, on shutdown, in-flight work may take to
	// finish before it is cancelled.
	ShutdownTimeout time.Duration `flag:"shutdown-timeout" only:"api" help:"on SIGTERM, how long to let in-flight work finish before cancelling it"`
}

// APIConfig configures the HTTP API: whether serve runs it, and the API's
// own settings (httpapi.Config, its listener's included).
type APIConfig struct {
	// Enabled runs the API in Serve.
	Enabled        bool `flag:"enabled" help:"run the HTTP API"`
	httpapi.Config `group:""`
}

// LoopsConfig chooses the roles this process runs and their shared timings.
// Its flags have no prefix: the roles and the loops' timings are every
// lane's.
type LoopsConfig struct {
	// Queuer, Submitter and Monitor choose the roles this process runs,
	// for every lane.
	Queuer    bool `flag:"queuer" only:"roles" help:"run the queuer loops (name all three loop roles when splitting them across processes)"`
	Submitter bool `flag:"submitter" only:"roles" help:"run the submitter loops"`
	Monitor   bool `flag:"monitor" only:"roles" help:"run the monitor loops"`
	// PollInterval is the longest a loop waits between rounds; NOTIFY wakes
	// it sooner.
	PollInterval time.Duration `flag:"poll-interval" help:"how often each loop runs when no notification wakes it (LISTEN/NOTIFY wakes loops sooner)"`
	// DBTimeout bounds each database call of a loop.
	DBTimeout time.Duration `flag:"db-timeout" help:"timeout of one database call from a loop"`
}

// Defaults returns the defaults of every setting.
func Defaults() Config {
	return Config{
		Migrate: true,
		API:     APIConfig{Enabled: true, Config: httpapi.DefaultConfig()},
		Loops: LoopsConfig{
			Queuer: true, Submitter: true, Monitor: true,
			PollInterval: loop.DefaultPollInterval, DBTimeout: loop.DefaultDBTimeout,
		},
		Batch:           batch.Defaults(),
		Wallet:          walletDefaults(),
		Builder:         builder.Defaults(),
		Access:          monitor.AccessRetentionDefaults(),
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
	switch {
	case c.DBMinConns < 0:
		return errors.New("--database-min-conns must not be negative")
	case c.Loops.PollInterval <= 0:
		return errors.New("--poll-interval must be positive")
	case c.Loops.DBTimeout <= 0:
		return errors.New("--db-timeout must be positive")
	case c.ShutdownTimeout < 0:
		return errors.New("--shutdown-timeout must not be negative")
	case c.API.MaxBodyBytes < 1 || c.API.MaxBatchesPerRequest < 1 || c.API.MaxPayloadBytes < 1:
		return errors.New("--api-max-body-bytes, --api-max-batches-per-request and --api-max-payload-bytes must be at least 1")
	case c.API.RequestTimeout <= 0:
		return errors.New("--api-request-timeout must be positive")
	case c.API.TaskMaxWait < 0:
		return errors.New("--wallet-send-tx-max-wait must not be negative (0 answers at once, as task=true does)")
	case c.API.ReadHeaderTimeout <= 0 || c.API.ReadTimeout <= 0 || c.API.WriteTimeout <= 0 || c.API.IdleTimeout <= 0:
		return errors.New("--api-read-header-timeout, --api-read-timeout, --api-write-timeout and --api-idle-timeout must be positive")
	case c.API.ReadHeaderTimeout > c.API.ReadTimeout:
		return fmt.Errorf("--api-read-header-timeout (%s) must not be longer than --api-read-timeout (%s), which bounds the headers too", c.API.ReadHeaderTimeout, c.API.ReadTimeout)
	case c.API.MaxConnections < 1:
		return errors.New("--api-max-connections must be at least 1")
	case (c.API.TLSCertFile == "") != (c.API.TLSKeyFile == ""):
		return errors.New("--api-tls-cert-file and --api-tls-key-file go together: set both to serve HTTPS, or neither to serve HTTP (behind a proxy that terminates TLS)")
	}
	if err := c.Batch.Validate(); err != nil {
		return err
	}
	if err := c.Access.WithDefaults().Validate(); err != nil {
		return err
	}
	if err := c.Wallet.validate(); err != nil {
		return err
	}
	if c.Wallet.Enabled() && c.API.Webhooks.MaxEndpoints < 1 {
		return errors.New("--wallet-webhook-max-endpoints must be at least 1")
	}
	if c.Builder.Enabled {
		if err := c.Builder.Ledger.Validate(); err != nil {
			return err
		}
		if err := c.Builder.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// RedactURL returns s with its password hidden, for logs and errors: the
// rule the API applies to webhook endpoints' URLs (egress.RedactURL).
func RedactURL(s string) string { return egress.RedactURL(s) }
