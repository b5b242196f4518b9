//go:build unix

package pgcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Superuser is the role initdb creates and ConnString logs in as.
const Superuser = "ledgerq"

const (
	pgdataDirName    = "pgdata"
	initDirName      = "pgdata.init" // initdb writes here, then it is renamed to pgdata
	passwordFileName = "superuser.password"
	logFileName      = "postgres.log"

	// ownerEnv carries the pid of the ledgerq that started a server into the
	// server's environment, so a later Start can tell a server whose owner died
	// (stop it) from one that another live process owns (leave it alone).
	ownerEnv = "LEDGERQ_PGCLUSTER_OWNER"

	maxLogSize   = 16 << 20 // at Start a larger log is moved to postgres.log.1
	logTailBytes = 4 << 10

	fastShutdownGrace = 30 * time.Second // SIGINT, then SIGQUIT
	quitGrace         = 5 * time.Second  // SIGQUIT, then SIGKILL
	portAttempts      = 3                // automatic port taken between probe and bind
	readyPollInterval = 20 * time.Millisecond

	sqlstateInvalidPassword   = "28P01"
	sqlstateDuplicateDatabase = "42P04"
)

// Options configures Start.
type Options struct {
	// DataDir is the cluster directory. It is created if missing (with its
	// missing parents); a cluster already initialised in it is reused, data,
	// password and all. Required.
	DataDir string
	// BinDir holds initdb and postgres. Empty means FindBinDir.
	BinDir string
	// Port is the TCP port on 127.0.0.1. Zero picks a free port at each start.
	Port int
	// Logger receives the cluster's own messages (not the server log, which
	// goes to postgres.log in DataDir). Nil discards them.
	Logger *slog.Logger
	// RunAsUser is the unprivileged user initdb and postgres run as when the
	// process is root, since PostgreSQL refuses to run as root. Empty means:
	// the owner of an existing data directory, else "postgres" if that user
	// exists, else a system user "ledgerq" created with useradd. Ignored when
	// not root.
	RunAsUser string
	// Settings are extra server settings passed as `-c name=value`, for
	// example fsync=off for a throwaway test cluster. listen_addresses, port
	// and unix_socket_directories are always set by Start and win.
	Settings map[string]string
}

// Cluster is a running PostgreSQL server owned by this process.
type Cluster struct {
	logger   *slog.Logger
	dir      string // cluster directory
	pgdata   string
	binDir   string
	acct     *account // nil unless running as root
	password string
	logPath  string
	logFile  *os.File
	logStart int64 // size of the log when Start began; failures show what came after

	port    int
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the postmaster has exited and been reaped
	exitErr error         // written before exited is closed

	stopMu  sync.Mutex
	stopped bool
	stopErr error
}

var errServerExited = errors.New("PostgreSQL exited before accepting connections")

// Start brings up the cluster in opts.DataDir, running initdb first when the
// directory holds no cluster yet, and returns once the server accepts
// connections. ctx bounds the whole start, initdb included; on failure the
// error carries the end of the server log. The caller must call Stop.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	begun := time.Now()
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.DataDir == "" {
		return nil, errors.New("starting PostgreSQL: no data directory given")
	}
	dir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolving data directory %s: %w", opts.DataDir, err)
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	} else if !hasServerPrograms(binDir) {
		return nil, fmt.Errorf("bin directory %s does not hold initdb and postgres", binDir)
	}

	c := &Cluster{
		logger:  logger,
		dir:     dir,
		pgdata:  filepath.Join(dir, pgdataDirName),
		binDir:  binDir,
		logPath: filepath.Join(dir, logFileName),
	}
	if c.acct, err = resolveAccount(ctx, opts.RunAsUser, c.pgdata, logger); err != nil {
		return nil, err
	}
	if err := c.prepareDir(); err != nil {
		return nil, err
	}
	if err := c.openLog(); err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			_ = c.logFile.Close()
		}
	}()

	initialised, err := c.isInitialised()
	if err != nil {
		return nil, err
	}
	if c.password, err = c.loadOrCreatePassword(initialised); err != nil {
		return nil, err
	}
	if !initialised {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	}
	if err := c.clearStaleLock(ctx); err != nil {
		return nil, err
	}
	if err := c.startServer(ctx, opts.Port, opts.Settings); err != nil {
		return nil, err
	}
	started = true

	attrs := []any{"data_dir", dir, "port", c.port, "pid", c.cmd.Process.Pid,
		"initdb", !initialised, "elapsed", time.Since(begun)}
	if c.acct != nil {
		attrs = append(attrs, "run_as", c.acct.name)
	}
	logger.Info("pgcluster: started", attrs...)
	return c, nil
}

// ConnString returns a URL that logs into database dbname as the superuser,
// for example postgres://ledgerq:…@127.0.0.1:54321/ledgerq?sslmode=disable.
func (c *Cluster) ConnString(dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(Superuser, c.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port returns the TCP port the server listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Done is closed when the server process has exited, whether through Stop or
// not. A server that exits on its own left its reason in postgres.log.
func (c *Cluster) Done() <-chan struct{} { return c.exited }

// CreateDatabase creates database name unless it already exists.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		return fmt.Errorf("connecting to create database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateDuplicateDatabase {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}

// Stop shuts the server down and returns once it has exited. It asks for a
// fast shutdown (SIGINT: sessions are ended, a checkpoint is written); if the
// server is still up after a grace period, or ctx ends first, it escalates to
// SIGQUIT and then SIGKILL of the server's process group. Calling Stop again
// returns the first call's result.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true
	c.stopErr = c.shutdown(ctx)
	if err := c.logFile.Close(); err != nil && c.stopErr == nil {
		c.stopErr = fmt.Errorf("closing %s: %w", c.logPath, err)
	}
	return c.stopErr
}

func (c *Cluster) shutdown(ctx context.Context) error {
	select {
	case <-c.exited:
		if c.exitErr != nil {
			return fmt.Errorf("PostgreSQL had already exited before Stop: %w%s", c.exitErr, c.logTail())
		}
		return nil
	default:
	}

	begun := time.Now()
	steps := []struct {
		sig   syscall.Signal
		grace time.Duration
	}{
		{syscall.SIGINT, fastShutdownGrace},
		{syscall.SIGQUIT, quitGrace},
	}
	for _, step := range steps {
		_ = c.cmd.Process.Signal(step.sig)
		timer := time.NewTimer(step.grace)
		select {
		case <-c.exited:
			timer.Stop()
			c.logger.Info("pgcluster: stopped", "data_dir", c.dir, "signal", step.sig.String(), "elapsed", time.Since(begun))
			if step.sig != syscall.SIGINT {
				c.killGroup() // backends of an immediate shutdown may still be on their way out
			}
			return nil
		case <-timer.C:
			c.logger.Warn("pgcluster: server did not stop in time, escalating", "signal", step.sig.String(), "grace", step.grace)
		case <-ctx.Done():
			timer.Stop()
			c.killGroup()
			<-c.exited
			return fmt.Errorf("stopping PostgreSQL: %w; killed it", ctx.Err())
		}
	}
	c.killGroup()
	<-c.exited
	return fmt.Errorf("stopping PostgreSQL: still running after SIGINT and SIGQUIT; killed it%s", c.logTail())
}

// killGroup SIGKILLs the postmaster's process group: the postmaster and every
// backend it forked.
func (c *Cluster) killGroup() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
}

// prepareDir creates the cluster directory if needed. Directories created here
// are 0711 when PostgreSQL runs as another user (it must pass through to
// pgdata but need not list anything), else 0700. Directories that existed are
// left as they are, and must already be reachable.
func (c *Cluster) prepareDir() error {
	created, err := mkdirAllTracked(c.dir)
	if err != nil {
		return err
	}
	perm := fs.FileMode(0o700)
	if c.acct != nil {
		perm = 0o711
	}
	for _, d := range created {
		if err := os.Chmod(d, perm); err != nil { // Mkdir's mode is cut by the umask
			return fmt.Errorf("setting mode of %s: %w", d, err)
		}
	}
	return c.acct.checkReachable(c.dir)
}

// mkdirAllTracked is os.MkdirAll that reports which directories it created,
// outermost first, so that only those get their mode changed.
func mkdirAllTracked(dir string) ([]string, error) {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		if err == nil {
			if !info.IsDir() {
				return nil, fmt.Errorf("creating data directory %s: %s is not a directory", dir, p)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("inspecting %s: %w", p, err)
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	slices.Reverse(missing)
	var created []string
	for _, p := range missing {
		err := os.Mkdir(p, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue // someone else made it meanwhile: not ours to chmod
		}
		if err != nil {
			return nil, fmt.Errorf("creating data directory %s: %w", p, err)
		}
		created = append(created, p)
	}
	return created, nil
}

func (c *Cluster) openLog() error {
	if info, err := os.Stat(c.logPath); err == nil && info.Size() > maxLogSize {
		if err := os.Rename(c.logPath, c.logPath+".1"); err != nil {
			return fmt.Errorf("rotating %s: %w", c.logPath, err)
		}
	}
	// The server writes through this descriptor, inherited as its stderr, so
	// the file can stay ours even when the server runs as another user.
	f, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening server log: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("opening server log: %w", err)
	}
	c.logFile, c.logStart = f, info.Size()
	return nil
}

// logTail returns the end of what the server log gained since Start began,
// formatted to be appended to an error.
func (c *Cluster) logTail() string {
	f, err := os.Open(c.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	from := max(c.logStart, info.Size()-logTailBytes)
	buf, err := io.ReadAll(io.NewSectionReader(f, from, info.Size()-from))
	if err != nil || len(bytes.TrimSpace(buf)) == 0 {
		return ""
	}
	if from > c.logStart {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:] // drop the partial first line
		}
	}
	return fmt.Sprintf("\n--- end of %s ---\n%s", c.logPath, bytes.TrimRight(buf, "\n"))
}

func (c *Cluster) isInitialised() (bool, error) {
	_, err := os.Stat(filepath.Join(c.pgdata, "PG_VERSION"))
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("inspecting %s: %w", c.pgdata, err)
	}
	if _, err := os.Stat(c.pgdata); err == nil {
		return false, fmt.Errorf("%s exists but is not a PostgreSQL data directory (no PG_VERSION); move it away", c.pgdata)
	}
	return false, nil
}

// loadOrCreatePassword returns the superuser password kept in the cluster
// directory, creating it for a cluster that initdb has yet to make.
func (c *Cluster) loadOrCreatePassword(initialised bool) (string, error) {
	path := filepath.Join(c.dir, passwordFileName)
	raw, err := os.ReadFile(path)
	if err == nil {
		password := strings.TrimSpace(string(raw))
		if password == "" {
			return "", fmt.Errorf("password file %s is empty", path)
		}
		return password, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading password file: %w", err)
	}
	if initialised {
		return "", fmt.Errorf("cluster in %s exists but its password file %s is missing, so ledgerq cannot log in; "+
			"remove %s to start from an empty cluster", c.pgdata, path, c.pgdata)
	}

	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return "", fmt.Errorf("generating superuser password: %w", err)
	}
	password := hex.EncodeToString(secret)
	if err := writeFileAtomic(path, []byte(password+"\n")); err != nil {
		return "", fmt.Errorf("writing password file: %w", err)
	}
	return password, nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path) // CreateTemp made it 0600
}

// initdb creates the cluster in a scratch directory and renames it into
// place, so an interrupted initdb never leaves a half-made pgdata behind.
func (c *Cluster) initdb(ctx context.Context) error {
	begun := time.Now()
	initDir := filepath.Join(c.dir, initDirName)
	if err := os.RemoveAll(initDir); err != nil {
		return fmt.Errorf("removing leftover %s: %w", initDir, err)
	}
	if err := os.Mkdir(initDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", initDir, err)
	}
	if err := c.acct.chown(initDir); err != nil {
		return err
	}

	// initdb reads the password from a file it opens itself, as the run-as
	// user; that user gets a copy for the moment, not the kept file.
	pwFile := filepath.Join(c.dir, ".initdb-password")
	if err := os.WriteFile(pwFile, []byte(c.password+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing initdb password file: %w", err)
	}
	defer os.Remove(pwFile)
	if err := c.acct.chown(pwFile); err != nil {
		return err
	}

	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "initdb"),
		"-D", initDir,
		"--username="+Superuser,
		"--pwfile="+pwFile,
		"--auth=scram-sha-256",
		"--encoding=UTF8",
		"--locale=C",
	)
	cmd.Dir = c.dir
	cmd.Env = c.childEnv()
	cmd.Stdout = c.logFile
	cmd.Stderr = c.logFile
	cmd.SysProcAttr = initdbSysProcAttr(c.acct.credential())
	// The parent death signal follows the thread that forked, not the process
	// (golang/go#27505): keep this goroutine on its thread while initdb runs.
	runtime.LockOSThread()
	err := cmd.Run()
	runtime.UnlockOSThread()
	if err != nil {
		return fmt.Errorf("running initdb in %s: %w%s", initDir, err, c.logTail())
	}
	if err := os.Rename(initDir, c.pgdata); err != nil {
		return fmt.Errorf("moving new cluster into place: %w", err)
	}
	c.logger.Info("pgcluster: initialised cluster", "data_dir", c.dir, "elapsed", time.Since(begun))
	return nil
}

// childEnv is the environment for initdb and postgres: ours without libpq's
// PG* variables, plus the owner marker.
func (c *Cluster) childEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, ownerEnv+"=")
	})
	return append(env, ownerEnv+"="+strconv.Itoa(os.Getpid()))
}

// clearStaleLock deals with a postmaster.pid left in the data directory by a
// server that did not shut down cleanly. PostgreSQL refuses to start while
// the pid in it answers kill(pid, 0), which after a reboot or in a container
// is often an unrelated process that got the same pid, or a zombie; and a
// server whose ledgerq was killed without a parent death signal may still be
// running.
func (c *Cluster) clearStaleLock(ctx context.Context) error {
	lockPath := filepath.Join(c.pgdata, "postmaster.pid")
	raw, err := os.ReadFile(lockPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", lockPath, err)
	}
	firstLine, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(firstLine))
	if err == nil && pid > 0 {
		info, err := inspectProcess(pid, c.pgdata)
		if err != nil {
			return fmt.Errorf("inspecting pid %d from %s: %w", pid, lockPath, err)
		}
		switch {
		case !info.alive:
			// Gone or a zombie. PostgreSQL would cope with the first but
			// not the second (a zombie answers kill(pid, 0)); both fall
			// through to the removal below.
		case info.usesDir && info.orphaned:
			return c.stopOrphan(ctx, pid)
		case info.usesDir:
			return fmt.Errorf("data directory %s is in use by a running PostgreSQL server (pid %d) that this process "+
				"did not start and whose owner is alive: stop it first", c.pgdata, pid)
		case !info.inspected:
			return fmt.Errorf("data directory %s is locked by pid %d, which is running but cannot be inspected: "+
				"if it is a PostgreSQL server using this directory, stop it; otherwise remove %s", c.pgdata, pid, lockPath)
		}
	}

	// The lock names a dead process, a zombie, a live process that is not a
	// server of this cluster, or cannot be read. Removing it is safe only if
	// nothing runs in the directory: leftover backends of a crashed server
	// would still be attached to its shared memory.
	users, err := processesInDir(c.pgdata)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return fmt.Errorf("data directory %s is still in use by processes %v: stop them first", c.pgdata, users)
	}
	if err := os.Remove(lockPath); err != nil {
		return fmt.Errorf("removing stale %s: %w", lockPath, err)
	}
	c.logger.Warn("pgcluster: removed stale postmaster.pid", "path", lockPath, "pid_in_file", strings.TrimSpace(firstLine))
	return nil
}

// stopOrphan shuts down a server of this cluster whose ledgerq died without
// taking it along. It is not our child, so its exit is observed by polling.
func (c *Cluster) stopOrphan(ctx context.Context, pid int) error {
	c.logger.Warn("pgcluster: stopping server left running by an earlier ledgerq", "pid", pid, "data_dir", c.dir)
	steps := []struct {
		sig   syscall.Signal
		grace time.Duration
	}{
		{syscall.SIGINT, fastShutdownGrace},
		{syscall.SIGQUIT, quitGrace},
		{syscall.SIGKILL, quitGrace},
	}
	for _, step := range steps {
		if err := syscall.Kill(pid, step.sig); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		deadline := time.Now().Add(step.grace)
		for time.Now().Before(deadline) {
			info, err := inspectProcess(pid, c.pgdata)
			if err != nil {
				return fmt.Errorf("watching leftover server pid %d: %w", pid, err)
			}
			if !info.alive || !info.usesDir {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for leftover server pid %d to stop: %w", pid, ctx.Err())
			case <-time.After(readyPollInterval):
			}
		}
	}
	return fmt.Errorf("leftover server pid %d using %s did not exit even after SIGKILL", pid, c.pgdata)
}

// startServer runs the postmaster and waits until it accepts connections. An
// automatically chosen port can be taken by someone else between our probe
// and the server's bind; that shows as an early exit and gets a new port.
func (c *Cluster) startServer(ctx context.Context, port int, settings map[string]string) error {
	for attempt := 1; ; attempt++ {
		p := port
		if p == 0 {
			var err error
			if p, err = freeLoopbackPort(); err != nil {
				return err
			}
		}
		if err := c.spawn(p, settings); err != nil {
			return err
		}
		err := c.waitReady(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-c.exited:
		default:
			c.killGroup()
			<-c.exited
		}
		if port == 0 && attempt < portAttempts && errors.Is(err, errServerExited) {
			c.logger.Warn("pgcluster: server exited during start, retrying on another port", "port", p, "error", err)
			continue
		}
		return fmt.Errorf("starting PostgreSQL in %s on port %d: %w%s", c.pgdata, p, err, c.logTail())
	}
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	return port, nil
}

// spawn starts the postmaster on a goroutine that stays locked to its OS
// thread until the server exits: the kernel sends the parent death signal
// when the forking thread ends, not the process (golang/go#27505), and the Go
// runtime may retire an unlocked thread whenever it likes.
func (c *Cluster) spawn(port int, settings map[string]string) error {
	args := []string{"-D", c.pgdata, "-p", strconv.Itoa(port)}
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		args = append(args, "-c", name+"="+settings[name])
	}
	args = append(args,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=", // no socket: nothing to collide with, no path-length limit
	)
	cmd := exec.Command(filepath.Join(c.binDir, "postgres"), args...)
	cmd.Dir = c.dir
	cmd.Env = c.childEnv()
	cmd.Stdout = c.logFile
	cmd.Stderr = c.logFile
	cmd.SysProcAttr = serverSysProcAttr(c.acct.credential())

	exited := make(chan struct{})
	startErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			startErr <- err
			return
		}
		startErr <- nil
		c.exitErr = cmd.Wait()
		close(exited)
	}()
	if err := <-startErr; err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	c.cmd, c.port, c.exited = cmd, port, exited
	return nil
}

// waitReady polls with real logins until one succeeds, the server exits, or
// ctx ends. A wrong password will not fix itself, so it ends the wait at once.
func (c *Cluster) waitReady(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(c.ConnString("postgres"))
	if err != nil {
		return fmt.Errorf("parsing connection string: %w", err)
	}
	cfg.ConnectTimeout = 2 * time.Second
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			return conn.Close(ctx)
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == sqlstateInvalidPassword {
			return fmt.Errorf("logging in with the password from %s: %w",
				filepath.Join(c.dir, passwordFileName), err)
		}
		select {
		case <-c.exited:
			return fmt.Errorf("%w (%v)", errServerExited, c.exitErr)
		case <-ctx.Done():
			return fmt.Errorf("waiting for PostgreSQL to accept connections: %w (last attempt: %v)", ctx.Err(), err)
		case <-time.After(readyPollInterval):
		}
	}
}

func bytesTrim(b []byte) string { return string(bytes.TrimSpace(b)) }
