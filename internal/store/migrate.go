package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
	"github.com/ledgerq/ledgerq/migrations"
)

// MigrationTable is goose's version table. It lives in the ledgerq schema so
// that everything ledgerq owns is in one schema.
const MigrationTable = "ledgerq.goose_db_version"

// migrationLockWait bounds how long a migrator waits for another process's
// migrations (goose's own lock gave up after as long).
const migrationLockWait = 5 * time.Minute

// Migrator applies and reports the embedded migrations.
type Migrator struct {
	db       *sql.DB
	provider *goose.Provider
	store    *Store
	logger   *slog.Logger
}

// NewMigrator returns a Migrator for the store's database. Concurrent
// migrators (several ledgerq processes starting at once) serialise on a
// PostgreSQL advisory lock, which each holds from before it creates the
// schema until its migrations are done.
func (s *Store) NewMigrator(logger *slog.Logger) (*Migrator, error) {
	db := stdlib.OpenDBFromPool(s.pool)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("creating migration lock: %w", err)
	}
	opts := []goose.ProviderOption{
		goose.WithTableName(MigrationTable),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	}
	if logger != nil {
		opts = append(opts, goose.WithSlog(logger))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, opts...)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("loading migrations: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Migrator{db: db, provider: p, store: s, logger: logger}, nil
}

// Close releases the migrator's database handle (not the pool).
func (m *Migrator) Close() error { return m.db.Close() }

// serialised runs fn while this process holds the migration lock, after
// creating the schema (goose keeps its version table in it). The lock is a
// session lock on a connection of its own, outside the pool goose draws
// from (a pool of one would otherwise wait for itself), taken before
// anything touches the schema: CREATE SCHEMA IF NOT EXISTS is not safe
// against a concurrent one (it fails with 23505), nor is goose's creation of
// its version table. goose still takes its own lock inside, which serialises
// this binary with older ones that take only that.
func (m *Migrator) serialised(ctx context.Context, fn func() error) error {
	conn, err := pgx.ConnectConfig(ctx, m.store.pool.Config().ConnConfig)
	if err != nil {
		return fmt.Errorf("connecting for the migration lock: %w", err)
	}
	// The release runs even when ctx was cancelled, within a bound of its
	// own; closing the session releases its lock whatever happened before.
	release := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	}
	defer func() {
		rctx, cancel := release()
		defer cancel()
		_ = conn.Close(rctx)
	}()
	q := dbsqlc.New(conn)
	if err := m.lock(ctx, q); err != nil {
		return err
	}
	defer func() {
		rctx, cancel := release()
		defer cancel()
		_, _ = one(q.SchemaUnlock(rctx))
	}()
	if err := q.SchemaEnsure(ctx); err != nil {
		return fmt.Errorf("creating schema ledgerq: %w", err)
	}
	return fn()
}

// lock takes the migration lock on q's session, polling while another
// process holds it (see SchemaTryLock for why it never waits in
// PostgreSQL), for at most migrationLockWait.
func (m *Migrator) lock(ctx context.Context, q *dbsqlc.Queries) error {
	ctx, cancel := context.WithTimeout(ctx, migrationLockWait)
	defer cancel()
	pause := 20 * time.Millisecond
	for logged := false; ; logged = true {
		locked, err := one(q.SchemaTryLock(ctx))
		if err != nil {
			return fmt.Errorf("taking the migration lock: %w", err)
		}
		if locked {
			return nil
		}
		if !logged {
			m.logger.Info("ledgerq: waiting for another process's migrations")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the migration lock, which another process holds: %w", ctx.Err())
		case <-time.After(pause + rand.N(pause)):
		}
		pause = min(2*pause, time.Second)
	}
}

// Up applies every pending migration.
func (m *Migrator) Up(ctx context.Context) ([]*goose.MigrationResult, error) {
	return serialisedCall(ctx, m, "migrating up", m.provider.Up)
}

// Down rolls back the latest migration.
func (m *Migrator) Down(ctx context.Context) (*goose.MigrationResult, error) {
	return serialisedCall(ctx, m, "migrating down", m.provider.Down)
}

// DownTo rolls back to version (0: everything).
func (m *Migrator) DownTo(ctx context.Context, version int64) ([]*goose.MigrationResult, error) {
	return serialisedCall(ctx, m, fmt.Sprintf("migrating down to %d", version), func(ctx context.Context) ([]*goose.MigrationResult, error) {
		return m.provider.DownTo(ctx, version)
	})
}

// Status lists every migration and whether it is applied. It holds the
// migration lock because goose creates its version table when it is missing.
func (m *Migrator) Status(ctx context.Context) ([]*goose.MigrationStatus, error) {
	st, err := serialisedCall(ctx, m, "reading migration status", m.provider.Status)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// serialisedCall runs one of goose's calls under the migration lock
// (serialised), its error wrapped with what it was doing.
func serialisedCall[T any](ctx context.Context, m *Migrator, what string, call func(context.Context) (T, error)) (T, error) {
	var res T
	err := m.serialised(ctx, func() (err error) {
		res, err = call(ctx)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("%s: %w", what, err)
	}
	return res, nil
}

// Versions returns the database's current version and the latest version this
// binary knows.
//
// It creates nothing (readiness probes call it while another process may be
// migrating): a database without goose's version table is at version 0.
func (m *Migrator) Versions(ctx context.Context) (current, latest int64, err error) {
	present, err := one(m.store.q.SchemaVersionTableExists(ctx, MigrationTable))
	if err != nil {
		return 0, 0, fmt.Errorf("reading migration version: %w", err)
	}
	if !present {
		return 0, m.LatestVersion(), nil
	}
	current, latest, err = m.provider.GetVersions(ctx)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: never migrated
		return 0, m.LatestVersion(), nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("reading migration version: %w", err)
	}
	return current, latest, nil
}

// LatestVersion is the newest migration embedded in this binary.
func (m *Migrator) LatestVersion() int64 {
	src := m.provider.ListSources()
	if len(src) == 0 {
		return 0
	}
	return src[len(src)-1].Version
}
