package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/ledgerq/ledgerq/migrations"
)

// MigrationTable is goose's version table. It lives in the ledgerq schema so
// that everything ledgerq owns is in one schema.
const MigrationTable = "ledgerq.goose_db_version"

// Migrator applies and reports the embedded migrations.
type Migrator struct {
	db       *sql.DB
	provider *goose.Provider
	store    *Store
}

// NewMigrator returns a Migrator for the store's database. Concurrent
// migrators (several ledgerq processes starting at once) serialise on a
// PostgreSQL advisory lock.
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
	return &Migrator{db: db, provider: p, store: s}, nil
}

// Close releases the migrator's database handle (not the pool).
func (m *Migrator) Close() error { return m.db.Close() }

func (m *Migrator) ensureSchema(ctx context.Context) error {
	if err := m.store.q.SchemaEnsure(ctx); err != nil {
		return fmt.Errorf("creating schema ledgerq: %w", err)
	}
	return nil
}

// Up applies every pending migration.
func (m *Migrator) Up(ctx context.Context) ([]*goose.MigrationResult, error) {
	if err := m.ensureSchema(ctx); err != nil {
		return nil, err
	}
	res, err := m.provider.Up(ctx)
	if err != nil {
		return res, fmt.Errorf("migrating up: %w", err)
	}
	return res, nil
}

// Down rolls back the latest migration.
func (m *Migrator) Down(ctx context.Context) (*goose.MigrationResult, error) {
	if err := m.ensureSchema(ctx); err != nil {
		return nil, err
	}
	res, err := m.provider.Down(ctx)
	if err != nil {
		return res, fmt.Errorf("migrating down: %w", err)
	}
	return res, nil
}

// DownTo rolls back to version (0: everything).
func (m *Migrator) DownTo(ctx context.Context, version int64) ([]*goose.MigrationResult, error) {
	if err := m.ensureSchema(ctx); err != nil {
		return nil, err
	}
	res, err := m.provider.DownTo(ctx, version)
	if err != nil {
		return res, fmt.Errorf("migrating down to %d: %w", version, err)
	}
	return res, nil
}

// Status lists every migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]*goose.MigrationStatus, error) {
	if err := m.ensureSchema(ctx); err != nil {
		return nil, err
	}
	st, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading migration status: %w", err)
	}
	return st, nil
}

// Versions returns the database's current version and the latest version this
// binary knows.
func (m *Migrator) Versions(ctx context.Context) (current, latest int64, err error) {
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
