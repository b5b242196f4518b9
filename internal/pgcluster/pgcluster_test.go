//go:build linux

package pgcluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testproc"
)

// The kill tests need a ledgerq that can be SIGKILLed: the test binary runs
// itself with these variables set, starts a cluster and waits to die.
const (
	helperDirEnv        = "PGCLUSTER_TEST_HELPER_DATA_DIR"
	helperNoDeathSigEnv = "PGCLUSTER_TEST_HELPER_NO_PDEATHSIG"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperDirEnv); dir != "" {
		runHelper(dir)
		return
	}
	os.Exit(m.Run())
}

// runHelper starts a cluster, writes a row, reports the postmaster's pid on
// stdout and blocks until killed.
func runHelper(dir string) {
	if os.Getenv(helperNoDeathSigEnv) != "" {
		parentDeathSignal = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{DataDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err == nil {
		_, err = conn.Exec(ctx, "CREATE TABLE left_by_helper (n int); INSERT INTO left_by_helper VALUES (7)")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	fmt.Printf("postmaster %d\n", c.cmd.Process.Pid)
	select {}
}

type testBundle struct {
	ctx  context.Context
	opts Options
}

func setup(t *testing.T) testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return testBundle{
		ctx: ctx,
		opts: Options{
			DataDir: newDataDir(t),
			Logger:  slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		},
	}
}

// newDataDir names a directory that does not exist yet, so that Start creates
// it. t.TempDir would not do when running as root: it is 0700, and PostgreSQL
// runs as another user that could not reach into it.
func newDataDir(t *testing.T) string {
	t.Helper()
	suffix := make([]byte, 6)
	_, err := rand.Read(suffix)
	require.NoError(t, err)
	dir := filepath.Join(os.TempDir(), "pgcluster-test-"+hex.EncodeToString(suffix))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func startCluster(t *testing.T, b testBundle) *Cluster {
	t.Helper()
	c, err := Start(b.ctx, b.opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestStart_DataSurvivesStopAndRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)

	begun := time.Now()
	first := startCluster(t, b)
	cold := time.Since(begun)
	conn, err := pgx.Connect(b.ctx, first.ConnString("postgres"))
	require.NoError(t, err)
	_, err = conn.Exec(b.ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('first run')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(b.ctx))
	firstPID := first.cmd.Process.Pid
	require.NoError(t, first.Stop(b.ctx))
	requireNoServerLeft(t, first.pgdata, firstPID)

	begun = time.Now()
	second := startCluster(t, b)
	warm := time.Since(begun)
	t.Logf("cold start (initdb + start): %v, warm start: %v", cold, warm)

	conn, err = pgx.Connect(b.ctx, second.ConnString("postgres"))
	require.NoError(t, err)
	defer conn.Close(b.ctx)
	var v string
	require.NoError(t, conn.QueryRow(b.ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "first run", v)

	secondPID := second.cmd.Process.Pid
	require.NoError(t, second.Stop(b.ctx))
	requireNoServerLeft(t, second.pgdata, secondPID)
}

func TestStart_ListensOnLoopbackWithPasswordOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := startCluster(t, b)

	conn, err := pgx.Connect(b.ctx, c.ConnString("postgres"))
	require.NoError(t, err)
	defer conn.Close(b.ctx)
	var listen, sockets, hba string
	require.NoError(t, conn.QueryRow(b.ctx, "SELECT current_setting('listen_addresses'), current_setting('unix_socket_directories')").
		Scan(&listen, &sockets))
	require.Equal(t, "127.0.0.1", listen)
	require.Empty(t, sockets)
	require.NoError(t, conn.QueryRow(b.ctx,
		"SELECT string_agg(DISTINCT auth_method, ',') FROM pg_hba_file_rules").Scan(&hba))
	require.Equal(t, "scram-sha-256", hba)

	wrong := strings.Replace(c.ConnString("postgres"), c.password, "not-the-password", 1)
	_, err = pgx.Connect(b.ctx, wrong)
	require.Error(t, err, "a wrong password must be refused")

	info, err := os.Stat(filepath.Join(c.dir, passwordFileName))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), info.Mode().Perm())
}

func TestStop_IsSafeToCallTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := startCluster(t, b)

	require.NoError(t, c.Stop(b.ctx))
	require.NoError(t, c.Stop(b.ctx))
	select {
	case <-c.Done():
	default:
		t.Fatal("Done is not closed after Stop")
	}
}

func TestStart_ServerRunsInItsOwnProcessGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := startCluster(t, b)

	pid := c.cmd.Process.Pid
	pgid, err := syscall.Getpgid(pid)
	require.NoError(t, err)
	require.Equal(t, pid, pgid, "a Ctrl-C to ledgerq's process group must not reach the server")
}

func TestStart_AsRootRunsServerAsUnprivilegedUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	t.Parallel()
	b := setup(t)
	c := startCluster(t, b)

	require.NotNil(t, c.acct)
	require.NotZero(t, c.acct.uid)
	require.Equal(t, c.acct.uid, processUID(t, c.cmd.Process.Pid))

	info, err := os.Stat(c.pgdata)
	require.NoError(t, err)
	require.Equal(t, c.acct.uid, info.Sys().(*syscall.Stat_t).Uid)
	info, err = os.Stat(c.dir)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o711), info.Mode().Perm(), "a directory Start created must let the server's user through")
}

func TestStart_AsRootNamesUnreachableParentDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	t.Parallel()
	b := setup(t)
	locked := newDataDir(t)
	require.NoError(t, os.Mkdir(locked, 0o700))
	require.NoError(t, os.Chmod(locked, 0o700)) // whatever the umask
	b.opts.DataDir = filepath.Join(locked, "cluster")

	_, err := Start(b.ctx, b.opts)
	require.ErrorContains(t, err, "directory "+locked+" (mode 0700")
	require.ErrorContains(t, err, "cannot be entered by user")
}

func TestStart_ServerStopsWhenOwnerIsKilled(t *testing.T) {
	t.Parallel()
	b := setup(t)

	pid := startHelper(t, b, false)
	pgdata := filepath.Join(b.opts.DataDir, pgdataDirName)
	requireEventually(t, 15*time.Second, func() bool { return processGone(pid) },
		"postmaster %d outlived its SIGKILLed owner", pid)
	requireEventually(t, 5*time.Second, func() bool { return len(mustProcessesInDir(t, pgdata)) == 0 },
		"server processes still use %s", pgdata)

	serverLog, err := os.ReadFile(filepath.Join(b.opts.DataDir, logFileName))
	require.NoError(t, err)
	require.Contains(t, string(serverLog), "received fast shutdown request",
		"the parent death signal should be SIGINT, a clean fast shutdown")

	requireHelperTableAfterRestart(t, b)
}

func TestStart_StopsServerOrphanedWithoutDeathSignal(t *testing.T) {
	t.Parallel()
	b := setup(t)

	pid := startHelper(t, b, true)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	require.False(t, processGone(pid), "without a parent death signal the server should have outlived its owner")

	requireHelperTableAfterRestart(t, b)
	require.True(t, processGone(pid), "Start should have stopped the orphaned server %d", pid)
}

func TestStart_RejectsDataDirInUseByLiveServer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := startCluster(t, b)

	_, err := Start(b.ctx, b.opts)
	require.ErrorContains(t, err, fmt.Sprintf("in use by a running PostgreSQL server (pid %d)", c.cmd.Process.Pid))

	conn, err := pgx.Connect(b.ctx, c.ConnString("postgres"))
	require.NoError(t, err, "the running server must be left alone")
	require.NoError(t, conn.Close(b.ctx))
}

func TestStart_RemovesStaleLockLeftByCrashedServer(t *testing.T) {
	t.Parallel()
	// Each case yields the pid a stale postmaster.pid names. Processes run as
	// the server's own user, so that PostgreSQL alone would take a live or
	// zombie one for another postmaster and refuse to start.
	cases := map[string]func(t *testing.T, cred *syscall.Credential) int{
		"pid reused by an unrelated process": func(t *testing.T, cred *syscall.Credential) int {
			cmd := exec.Command("sleep", "300")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			require.NoError(t, cmd.Start())
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
			return cmd.Process.Pid
		},
		"pid of a zombie": func(t *testing.T, cred *syscall.Credential) int {
			cmd := exec.Command("true")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Wait() })
			pid := cmd.Process.Pid
			requireEventually(t, 5*time.Second, func() bool {
				state, _, err := procStat(pid)
				return err == nil && state == 'Z'
			}, "pid %d did not become a zombie", pid)
			return pid
		},
		"pid of an exited process": func(t *testing.T, cred *syscall.Credential) int {
			cmd := exec.Command("true")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			require.NoError(t, cmd.Run())
			return cmd.Process.Pid
		},
	}
	for name, stalePID := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := startCluster(t, b)
			require.NoError(t, c.Stop(b.ctx))

			pid := stalePID(t, c.acct.credential())
			lock := fmt.Sprintf("%d\n%s\n0\n0\n\n127.0.0.1\n0 0\nready\n", pid, c.pgdata)
			lockPath := filepath.Join(c.pgdata, "postmaster.pid")
			require.NoError(t, os.WriteFile(lockPath, []byte(lock), 0o600))
			require.NoError(t, c.acct.chown(lockPath))

			again := startCluster(t, b)
			require.NoError(t, again.Stop(b.ctx))
		})
	}
}

func TestStart_ErrorCarriesServerLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.opts.Settings = map[string]string{"shared_buffers": "not-a-size"}

	_, err := Start(b.ctx, b.opts)
	require.ErrorContains(t, err, "--- end of "+filepath.Join(b.opts.DataDir, logFileName))
	require.ErrorContains(t, err, `invalid value for parameter "shared_buffers"`)
}

func TestStart_GivingUpOnReadinessLeavesNoServer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, startCluster(t, b).Stop(b.ctx))
	ctx, cancel := context.WithCancel(b.ctx)
	cancel() // initdb is done, so only the wait for readiness sees the context

	_, err := Start(ctx, b.opts)
	require.ErrorIs(t, err, context.Canceled)
	pgdata := filepath.Join(b.opts.DataDir, pgdataDirName)
	require.Empty(t, processesWithArg(t, pgdata), "the server started for the failed Start is still running")
	require.Empty(t, mustProcessesInDir(t, pgdata))
}

func TestCreateDatabase_IsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := startCluster(t, b)

	require.NoError(t, c.CreateDatabase(b.ctx, "ledgerq-test"))
	require.NoError(t, c.CreateDatabase(b.ctx, "ledgerq-test"))

	conn, err := pgx.Connect(b.ctx, c.ConnString("ledgerq-test"))
	require.NoError(t, err)
	defer conn.Close(b.ctx)
	var name string
	require.NoError(t, conn.QueryRow(b.ctx, "SELECT current_database()").Scan(&name))
	require.Equal(t, "ledgerq-test", name)
}

// requireFinds requires the search with pathEnv as PATH, and pg_config
// asked when it finds nothing there, to find dir.
func requireFinds(t *testing.T, pathEnv, dir string) {
	t.Helper()
	found, err := binSearch{pathEnv: pathEnv, pgConfigBinDir: runPGConfigBinDir}.find()
	require.NoError(t, err)
	require.Equal(t, dir, found)
}

func TestFindBinDir_FindsThisMachinesServer(t *testing.T) {
	t.Parallel()
	dir, err := FindBinDir()
	require.NoError(t, err)
	require.True(t, hasServerPrograms(dir), "%s lacks initdb or postgres", dir)
}

func TestFindBinDir_SaysWhatToInstallWhenNothingIsFound(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	s := binSearch{
		pathEnv: empty,
		globs:   []string{filepath.Join(empty, "postgresql", "*", "bin")},
		pgConfigBinDir: func(string) (string, error) {
			return "", errors.New("no pg_config")
		},
	}

	_, err := s.find()
	require.ErrorIs(t, err, ErrNoBinaries)
	require.ErrorContains(t, err, "apt-get install postgresql")
	require.ErrorContains(t, err, "brew install postgresql@16")
}

func TestFindBinDir_FollowsPathSymlinkToTheRealInstallation(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	real := fakeBinDir(t, filepath.Join(root, "pg", "15", "bin"))
	onPath := filepath.Join(root, "local-bin")
	require.NoError(t, os.Mkdir(onPath, 0o755))
	require.NoError(t, os.Symlink(filepath.Join(real, "initdb"), filepath.Join(onPath, "initdb")))

	requireFinds(t, onPath, real)
}

func TestFindBinDir_AsksPgConfigWhenPathHasNoServer(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	real := fakeBinDir(t, filepath.Join(root, "server", "bin"))
	onPath := filepath.Join(root, "bin")
	require.NoError(t, os.Mkdir(onPath, 0o755))
	writeExecutable(t, filepath.Join(onPath, "pg_config"), "#!/bin/sh\necho "+real+"\n")

	requireFinds(t, onPath, real)
}

func TestFindBinDir_TakesHighestInstalledVersion(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"9.6", "10", "16"} {
		fakeBinDir(t, filepath.Join(root, "postgresql", v, "bin"))
	}
	// A newer version without the server programs (only the client) is no use.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "postgresql", "17", "bin"), 0o755))

	dir, err := binSearch{
		pathEnv:        t.TempDir(),
		globs:          []string{filepath.Join(root, "postgresql", "*", "bin")},
		pgConfigBinDir: runPGConfigBinDir,
	}.find()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "postgresql", "16", "bin"), dir)
}

// startHelper runs a helper ledgerq on b's data directory, SIGKILLs it once
// its cluster is up, and returns the postmaster's pid.
func startHelper(t *testing.T, b testBundle, withoutDeathSignal bool) int {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperDirEnv+"="+b.opts.DataDir)
	if withoutDeathSignal {
		cmd.Env = append(cmd.Env, helperNoDeathSigEnv+"=1")
	}
	cmd.Stderr = testWriter{t}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})

	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var got string
	select {
	case got = <-line:
	case <-b.ctx.Done():
		t.Fatal("helper did not report its cluster")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(got, "postmaster ")))
	require.NoError(t, err, "helper said %q", got)

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	return pid
}

func requireHelperTableAfterRestart(t *testing.T, b testBundle) {
	t.Helper()
	c := startCluster(t, b)
	conn, err := pgx.Connect(b.ctx, c.ConnString("postgres"))
	require.NoError(t, err)
	defer conn.Close(b.ctx)
	var n int
	require.NoError(t, conn.QueryRow(b.ctx, "SELECT n FROM left_by_helper").Scan(&n))
	require.Equal(t, 7, n)
}

// requireNoServerLeft checks that no process started on the data directory
// (pgrep -f <pgdata>), working in it, or in the server's process group
// survived Stop.
func requireNoServerLeft(t *testing.T, pgdata string, postmasterPID int) {
	t.Helper()
	require.Empty(t, processesWithArg(t, pgdata))
	require.Empty(t, mustProcessesInDir(t, pgdata))
	require.Empty(t, processGroupMembers(t, postmasterPID))
	require.NoFileExists(t, filepath.Join(pgdata, "postmaster.pid"))
}

func mustProcessesInDir(t *testing.T, dir string) []int {
	t.Helper()
	pids, err := processesInDir(dir)
	require.NoError(t, err)
	return pids
}

// processesWithArg lists live processes with arg among their command-line
// arguments, like pgrep -f. A postmaster's arguments are in place from exec on,
// before it has done anything else.
func processesWithArg(t *testing.T, arg string) []int {
	t.Helper()
	return testproc.Processes(t, func(pid int) bool {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		return err == nil && !processGone(pid) && slices.Contains(strings.Split(string(cmdline), "\x00"), arg)
	})
}

func processGroupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	return testproc.Processes(t, func(pid int) bool {
		st, err := testproc.ReadStat(pid)
		return err == nil && st.PGID == pgid
	})
}

func processGone(pid int) bool {
	state, _, err := procStat(pid)
	return errors.Is(err, fs.ErrNotExist) || state == 'Z' || state == 'X'
}

func processUID(t *testing.T, pid int) uint32 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid, err := strconv.ParseUint(strings.Fields(rest)[0], 10, 32)
			require.NoError(t, err)
			return uint32(uid)
		}
	}
	t.Fatalf("no Uid line for pid %d", pid)
	return 0
}

// requireEventually polls cond until it holds or the deadline passes.
func requireEventually(t *testing.T, within time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(within)
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf(msg, args...)
		}
		<-ticker.C
	}
}

func fakeBinDir(t *testing.T, dir string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, name := range []string{"initdb", "postgres", "pg_ctl"} {
		writeExecutable(t, filepath.Join(dir, name), "#!/bin/sh\nexit 0\n")
	}
	return dir
}

func writeExecutable(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o755))
}
