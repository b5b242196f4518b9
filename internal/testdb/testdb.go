// Package testdb gives tests a real, migrated PostgreSQL database.
//
// It finds a server in this order, once per test binary (one per package):
//  1. LEDGERQ_TEST_DATABASE_URL, a server the caller runs;
//  2. testcontainers-go's postgres module, when a Docker engine answers, with
//     the image LEDGERQ_TEST_PG_IMAGE (default postgres:16-alpine);
//  3. a throwaway cluster from the local PostgreSQL binaries (package pgcluster).
//
// LEDGERQ_TEST_PG_SOURCE=url|container|local restricts it to one of them (CI
// sets container, so a broken Docker set-up fails instead of falling back).
//
// If none works it fails the test with what it tried; it never skips. The first
// caller migrates a template database; every test then gets its own database,
// cloned from the template, so tests can run in parallel and commit for real
// (New), or a transaction that is rolled back when it ends (NewTx).
package testdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/ledgerq/ledgerq/internal/pgcluster"
	"github.com/ledgerq/ledgerq/internal/store"
)

// DefaultImage is the container image used when LEDGERQ_TEST_PG_IMAGE is unset.
const DefaultImage = "postgres:16-alpine"

type server struct {
	adminURL string // a URL with rights to create databases
	source   string // what it is, for logs and failures
	template string
	stop     func()
}

var (
	once    sync.Once
	srv     *server
	srvErr  error
	createM sync.Mutex
	counter atomic.Int64
	prefix  = fmt.Sprintf("lqt_%d_%d", os.Getpid(), time.Now().UnixNano()%100000)
)

// Main runs the package's tests and then stops the server testdb started.
// Call it from TestMain: func TestMain(m *testing.M) { testdb.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if srv != nil {
		dropTxDatabases(srv)
		if srv.stop != nil {
			srv.stop()
		}
	}
	os.Exit(code)
}

// DB is one test's database.
type DB struct {
	// URL connects to the test's own database.
	URL string
	// Name is the database name.
	Name string
	// AdminURL connects to the server's maintenance database.
	AdminURL string
	Store    *store.Store
}

// New returns a fresh migrated database for t, dropped when t ends.
func New(t testing.TB) *DB {
	t.Helper()
	s := get(t)
	name := fmt.Sprintf("%s_%d", prefix, counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := createDatabase(ctx, s.adminURL, name, s.template); err != nil {
		t.Fatalf("testdb: creating database %s from template on %s: %v", name, s.source, err)
	}
	u := withDatabase(s.adminURL, name)
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatalf("testdb: opening %s: %v", name, err)
	}
	t.Cleanup(func() {
		st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dropDatabase(ctx, s.adminURL, name); err != nil {
			t.Logf("testdb: dropping %s: %v", name, err)
		}
	})
	return &DB{URL: u, Name: name, AdminURL: s.adminURL, Store: st}
}

// NewEmpty returns a fresh database with no migrations applied, dropped when t
// ends, for tests of the migrations themselves.
func NewEmpty(t testing.TB) (dbURL string) {
	t.Helper()
	s := get(t)
	name := fmt.Sprintf("%s_%d", prefix, counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := createDatabase(ctx, s.adminURL, name, "template0"); err != nil {
		t.Fatalf("testdb: creating database %s on %s: %v", name, s.source, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dropDatabase(ctx, s.adminURL, name); err != nil {
			t.Logf("testdb: dropping %s: %v", name, err)
		}
	})
	return withDatabase(s.adminURL, name)
}

// Source says where the server came from (for test logs).
func Source(t testing.TB) string {
	t.Helper()
	return get(t).source
}

func get(t testing.TB) *server {
	t.Helper()
	once.Do(func() { srv, srvErr = start() })
	if srvErr != nil {
		t.Fatalf("testdb: no PostgreSQL for tests: %v", srvErr)
	}
	return srv
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testdb: "+format+"\n", args...)
}

func start() (*server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var tried []string
	switch only := os.Getenv("LEDGERQ_TEST_PG_SOURCE"); only {
	case "":
	case "url", "container", "local":
		s, err := map[string]func(context.Context) (*server, error){
			"url": fromEnv, "container": fromContainer, "local": fromLocalBinaries,
		}[only](ctx)
		if err == nil && s == nil {
			err = errors.New("LEDGERQ_TEST_DATABASE_URL is not set")
		}
		if err != nil {
			return nil, fmt.Errorf("LEDGERQ_TEST_PG_SOURCE=%s: %w", only, err)
		}
		if err := s.prepare(ctx); err != nil {
			return nil, err
		}
		return s, nil
	default:
		return nil, fmt.Errorf("LEDGERQ_TEST_PG_SOURCE=%q: want url, container or local", only)
	}

	s, err := fromEnv(ctx)
	if s == nil && err == nil {
		tried = append(tried, "LEDGERQ_TEST_DATABASE_URL: not set")
		s, err = fromContainer(ctx)
		if err != nil {
			tried = append(tried, "testcontainers: "+err.Error())
			s, err = fromLocalBinaries(ctx)
			if err != nil {
				tried = append(tried, "local PostgreSQL binaries: "+err.Error())
			}
		}
	} else if err != nil {
		tried = append(tried, "LEDGERQ_TEST_DATABASE_URL: "+err.Error())
	}
	if err != nil {
		return nil, fmt.Errorf("tried:\n  - %s", strings.Join(tried, "\n  - "))
	}
	if err := s.prepare(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// prepare makes the migrated template database every test clones.
func (s *server) prepare(ctx context.Context) error {
	if err := s.makeTemplate(ctx); err != nil {
		if s.stop != nil {
			s.stop()
		}
		return fmt.Errorf("preparing template database on %s: %w", s.source, err)
	}
	logf("using %s", s.source)
	return nil
}

func fromEnv(ctx context.Context) (*server, error) {
	u := os.Getenv("LEDGERQ_TEST_DATABASE_URL")
	if u == "" {
		return nil, nil
	}
	if err := ping(ctx, u); err != nil {
		return nil, err
	}
	return &server{adminURL: u, source: "LEDGERQ_TEST_DATABASE_URL"}, nil
}

func fromContainer(ctx context.Context) (*server, error) {
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil, fmt.Errorf("no Docker client: %w", err)
	}
	defer provider.Close()
	healthCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = provider.Health(healthCtx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("no Docker engine answers: %w", err)
	}
	image := os.Getenv("LEDGERQ_TEST_PG_IMAGE")
	if image == "" {
		image = DefaultImage
	}
	ctr, err := tcpostgres.Run(ctx, image,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("ledgerq"),
		tcpostgres.WithPassword("ledgerq"),
		tcpostgres.BasicWaitStrategies(),
		// As the local cluster's (fromLocalBinaries): a package's parallel
		// tests each run a node with its pools, and some hold 100
		// application connections at once; PostgreSQL's default of 100
		// would refuse them ("too many clients").
		testcontainers.WithCmdArgs("-c", "max_connections=300"),
	)
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return nil, fmt.Errorf("starting container from image %s: %w", image, err)
	}
	u, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, fmt.Errorf("reading container address: %w", err)
	}
	id := ctr.GetContainerID()
	if len(id) > 12 {
		id = id[:12]
	}
	return &server{
		adminURL: u,
		source:   fmt.Sprintf("testcontainers postgres module, image %s, container %s", image, id),
		stop: func() {
			if err := testcontainers.TerminateContainer(ctr); err != nil {
				logf("terminating container %s: %v", id, err)
			}
		},
	}, nil
}

func fromLocalBinaries(ctx context.Context) (*server, error) {
	dir, err := os.MkdirTemp("", "ledgerq-testdb-")
	if err != nil {
		return nil, err
	}
	// Run as root, the cluster runs as an unprivileged user, who must be able
	// to enter the directory MkdirTemp made 0700.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := pgcluster.Start(ctx, pgcluster.Options{
		DataDir: dir, Logger: logger,
		// A throwaway cluster: durability buys nothing here.
		Settings: map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "max_connections": "300"},
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &server{
		adminURL: c.ConnString("postgres"),
		source:   "a throwaway cluster from the local PostgreSQL binaries in " + dir,
		stop: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := c.Stop(ctx); err != nil {
				logf("stopping local cluster: %v", err)
			}
			_ = os.RemoveAll(dir)
		},
	}, nil
}

func (s *server) makeTemplate(ctx context.Context) error {
	s.template = prefix + "_template"
	if err := createDatabase(ctx, s.adminURL, s.template, "template0"); err != nil {
		return err
	}
	st, err := store.Open(ctx, withDatabase(s.adminURL, s.template))
	if err != nil {
		return err
	}
	// Every connection to the template must be gone before it can be cloned.
	defer st.Close()
	m, err := st.NewMigrator(nil)
	if err != nil {
		return err
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		return err
	}
	prev := s.stop
	s.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = dropDatabase(ctx, s.adminURL, s.template)
		if prev != nil {
			prev()
		}
	}
	return nil
}

func ping(ctx context.Context, u string) error {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}

// Test databases are made and dropped with DDL that takes identifiers, which
// cannot be bind parameters; the names are generated here and quoted.
func createDatabase(ctx context.Context, adminURL, name, template string) error {
	createM.Lock()
	defer createM.Unlock()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var lastErr error
	for range 20 {
		_, lastErr = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize())
		if lastErr == nil {
			return nil
		}
		// "source database is being accessed by other users": a template
		// connection is still closing.
		var pgErr *pgconn.PgError
		if !errors.As(lastErr, &pgErr) || pgErr.Code != "55006" {
			return lastErr
		}
		time.Sleep(100 * time.Millisecond)
	}
	return lastErr
}

func dropDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

func withDatabase(u, name string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		panic(fmt.Sprintf("testdb: bad URL %q: %v", u, err))
	}
	parsed.Path = "/" + name
	return parsed.String()
}
