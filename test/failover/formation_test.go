package failover

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/pgcluster"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// monitorSettings make the monitor notice a dead primary and promote its
// secondary in seconds instead of the defaults' half minute: a health check
// every second, a node unhealthy after 3 s, and a promoted secondary kept
// read-only for 5 s (not 30 s) in case the old primary were still alive and
// had to be told to stop. With synchronous replication that wait guards no
// write: an old primary cut off from its standby cannot commit.
var monitorSettings = map[string]string{
	"pgautofailover.health_check_period":               "1000",
	"pgautofailover.health_check_timeout":              "1000",
	"pgautofailover.health_check_max_retries":          "1",
	"pgautofailover.health_check_retry_delay":          "500",
	"pgautofailover.node_considered_unhealthy_timeout": "3000",
	"pgautofailover.primary_demote_timeout":            "5000",
}

// nodeSettings make the checkpoint that pg_basebackup asks for, when a node
// joins or comes back without pg_rewind, an immediate one: pg_autoctl asks
// for a spread checkpoint, which kept a joining node waiting for a minute
// and more.
var nodeSettings = map[string]string{
	"checkpoint_completion_target": "0",
}

// socketDir is where Debian's PostgreSQL puts its Unix sockets and where
// pg_autoctl looks for them: the nodes' own connections go through it.
const socketDir = "/var/run/postgresql"

// formation is a pg_auto_failover formation of the test's own: a monitor
// and two data nodes with synchronous replication, all on 127.0.0.1, each a
// `pg_autoctl` process of the postgres user (initdb refuses root).
type formation struct {
	t     *testing.T
	dir   string
	pgctl string
	env   []string
	// cred is who runs pg_autoctl: the postgres user when the test runs as
	// root, nil (ourselves) otherwise; super is the database superuser
	// initdb creates, named after that user.
	cred    *syscall.Credential
	super   string
	monitor *keeper
	nodes   [2]*keeper
}

// keeper is one node: its PGDATA, its port and its `pg_autoctl` process.
type keeper struct {
	name   string
	port   int
	pgdata string
	log    *os.File
	cmd    *exec.Cmd
	done   chan struct{}
}

// nodeState is a data node as the monitor sees it.
type nodeState struct {
	reported, goal string
}

// startFormation creates the monitor and two nodes, starts them, and
// returns once one node is primary and the other its synchronous secondary.
func startFormation(t *testing.T) *formation {
	t.Helper()
	requireFormationTools(t)
	bin, err := pgcluster.FindBinDir()
	require.NoError(t, err)
	f := &formation{t: t, pgctl: filepath.Join(bin, "pg_ctl")}
	owner := os.Getuid()
	f.super = currentUser(t)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "the postgres user runs pg_autoctl: initdb refuses root")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		f.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		f.super, owner = u.Username, uid
	}
	// Under /tmp rather than t.TempDir, whose parents only root may enter.
	f.dir, err = os.MkdirTemp("", "ledgerq-failover-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(f.dir, 0o755))
	require.NoError(t, os.Chown(f.dir, owner, -1))
	f.env = []string{
		"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + f.dir, "LANG=C.UTF-8",
		// pg_autoctl keeps its configuration, state and pid files here.
		"XDG_CONFIG_HOME=" + filepath.Join(f.dir, "config"),
		"XDG_DATA_HOME=" + filepath.Join(f.dir, "share"),
		"XDG_RUNTIME_DIR=" + filepath.Join(f.dir, "run"),
	}
	t.Cleanup(f.stop)

	ports := freePorts(t, 3)
	f.monitor = f.newKeeper("monitor", ports[0])
	f.run("create", "monitor", "--pgdata", f.monitor.pgdata, "--pgport", strconv.Itoa(f.monitor.port),
		"--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", f.pgctl)
	f.run("config", "set", "--pgdata", f.monitor.pgdata, "postgresql.listen_addresses", "127.0.0.1")
	f.start(f.monitor, "run", "--pgdata", f.monitor.pgdata)
	f.tuneMonitor()
	t.Logf("pg_auto_failover monitor on 127.0.0.1:%d", f.monitor.port)

	for i := range f.nodes {
		k := f.newKeeper(fmt.Sprintf("node%d", i+1), ports[i+1])
		f.nodes[i] = k
		f.start(k, "create", "postgres", "--pgdata", k.pgdata, "--pgport", strconv.Itoa(k.port),
			"--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--name", k.name, "--dbname", "ledgerq",
			"--auth", "trust", "--no-ssl", "--pgctl", f.pgctl, "--monitor", f.monitorURL("autoctl_node"), "--run")
		want := "single"
		if i > 0 {
			want = "secondary"
		}
		f.waitStates(2*time.Minute, k.name+" "+want, func(s map[string]nodeState) bool {
			return s[k.name].reported == want && s[k.name].goal == want
		})
		if i == 0 {
			f.tuneNode(k)
		}
	}
	f.waitSteady(time.Minute)
	t.Logf("pg_auto_failover nodes: %s on 127.0.0.1:%d (primary), %s on 127.0.0.1:%d (synchronous secondary)",
		f.nodes[0].name, f.nodes[0].port, f.nodes[1].name, f.nodes[1].port)
	return f
}

// installHint is how a Debian machine gets what the formation runs.
const installHint = "apt-get install postgresql-15 postgresql-15-auto-failover pg-auto-failover-cli"

// requireFormationTools skips t, or fails it under CI=true (.ci/run
// installs them), unless this machine can run a formation: pg_autoctl, the
// PostgreSQL server binaries, Debian's socket directory and, for a test
// run as root, the postgres user.
func requireFormationTools(t *testing.T) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if ci, err := strconv.ParseBool(os.Getenv("CI")); err == nil && ci {
			t.Fatalf("CI=true and %s", msg)
		}
		t.Skipf("skipped: %s", msg)
	}
	if _, err := exec.LookPath("pg_autoctl"); err != nil {
		missing("pg_autoctl is not on PATH (%s): %v", installHint, err)
	}
	if _, err := pgcluster.FindBinDir(); err != nil {
		missing("no PostgreSQL server binaries (%s): %v", installHint, err)
	}
	if _, err := os.Stat(socketDir); err != nil {
		missing("%s, PostgreSQL's socket directory on Debian, is missing (postgresql-common creates it): %v", socketDir, err)
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			missing("running as root, and no postgres user to run pg_autoctl as (initdb refuses root): %v", err)
		}
	}
}

func currentUser(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	require.NoError(t, err)
	return u.Username
}

// freePorts returns n distinct free loopback ports.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		require.NoError(t, ln.Close())
	}
	return ports
}

func (f *formation) newKeeper(name string, port int) *keeper {
	return &keeper{name: name, port: port, pgdata: filepath.Join(f.dir, name)}
}

// URL is ledgerq's database URL: both nodes, the one that takes writes
// chosen at every connect.
func (f *formation) URL() string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d,127.0.0.1:%d/ledgerq?sslmode=disable&target_session_attrs=read-write&connect_timeout=3",
		f.super, f.nodes[0].port, f.nodes[1].port)
}

func (f *formation) monitorURL(user string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/pg_auto_failover?sslmode=disable", user, f.monitor.port)
}

func (f *formation) command(args ...string) *exec.Cmd {
	cmd := exec.Command("pg_autoctl", args...)
	cmd.Dir = f.dir
	cmd.Env = f.env
	// A process group of its own, so that a kill reaches pg_autoctl's
	// services and the postmaster; the kernel kills pg_autoctl if the test
	// binary dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: f.cred}
	return cmd
}

// run runs pg_autoctl to its end.
func (f *formation) run(args ...string) {
	f.t.Helper()
	out, err := f.command(args...).CombinedOutput()
	require.NoError(f.t, err, "pg_autoctl %s:\n%s", strings.Join(args, " "), out)
}

// start starts k's long-running pg_autoctl, its output appended to
// DIR/NAME.log.
func (f *formation) start(k *keeper, args ...string) {
	f.t.Helper()
	if k.log == nil {
		var err error
		k.log, err = os.OpenFile(filepath.Join(f.dir, k.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		require.NoError(f.t, err)
	}
	k.cmd = f.command(args...)
	k.cmd.Stdout, k.cmd.Stderr = k.log, k.log
	require.NoError(f.t, k.cmd.Start(), "pg_autoctl %s", strings.Join(args, " "))
	done := make(chan struct{})
	k.done = done
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait()
		close(done)
	}(k.cmd)
}

// tuneMonitor applies monitorSettings once the monitor answers.
func (f *formation) tuneMonitor() {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := f.monitorExec(func(ctx context.Context, conn *pgx.Conn) error {
			for name, v := range monitorSettings {
				if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = %s", name, v)); err != nil {
					return err
				}
			}
			_, err := conn.Exec(ctx, "SELECT pg_reload_conf()")
			return err
		})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the monitor did not take its settings: %v\n%s", err, f.logTail(f.monitor))
		}
		time.Sleep(100 * time.Millisecond) // the poll interval of this wait on the monitor
	}
}

// tuneNode applies nodeSettings to k, before the other node copies its
// data directory (and so its settings) with pg_basebackup.
func (f *formation) tuneNode(k *keeper) {
	f.t.Helper()
	err := f.exec(fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", f.super, k.port), func(ctx context.Context, conn *pgx.Conn) error {
		for name, v := range nodeSettings {
			if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = %s", name, v)); err != nil {
				return err
			}
		}
		_, err := conn.Exec(ctx, "SELECT pg_reload_conf()")
		return err
	})
	require.NoError(f.t, err, "tuning %s", k.name)
}

func (f *formation) monitorExec(fn func(ctx context.Context, conn *pgx.Conn) error) error {
	return f.exec(f.monitorURL(f.super), fn)
}

func (f *formation) exec(url string, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(ctx, conn)
}

// states returns the data nodes' states by name, as the monitor has them.
func (f *formation) states() (map[string]nodeState, error) {
	out := map[string]nodeState{}
	err := f.monitorExec(func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var name string
			var s nodeState
			if err := rows.Scan(&name, &s.reported, &s.goal); err != nil {
				return err
			}
			out[name] = s
		}
		return rows.Err()
	})
	return out, err
}

// waitStates polls the monitor until cond holds and returns when it did.
func (f *formation) waitStates(timeout time.Duration, what string, cond func(map[string]nodeState) bool) time.Time {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string]nodeState
	var lastErr error
	for time.Now().Before(deadline) {
		s, err := f.states()
		if err == nil && cond(s) {
			return time.Now()
		}
		last, lastErr = s, err
		time.Sleep(100 * time.Millisecond) // the poll interval of this wait on the monitor
	}
	var tails []string
	for _, k := range f.nodes {
		if k != nil {
			tails = append(tails, f.logTail(k))
		}
	}
	f.t.Fatalf("pg_auto_failover: no %s within %s; states %v (%v)\n%s", what, timeout, last, lastErr, strings.Join(tails, "\n"))
	return time.Time{}
}

// waitSteady waits for a primary and a synchronous secondary that the
// monitor no longer asks to change.
func (f *formation) waitSteady(timeout time.Duration) {
	f.t.Helper()
	f.waitStates(timeout, "primary and secondary", func(s map[string]nodeState) bool {
		roles := map[string]int{}
		for _, n := range s {
			if n.reported != n.goal {
				return false
			}
			roles[n.reported]++
		}
		return roles["primary"] == 1 && roles["secondary"] == 1
	})
}

// primary returns the node the monitor has as primary and the other one.
func (f *formation) primary() (primary, other *keeper) {
	f.t.Helper()
	s, err := f.states()
	require.NoError(f.t, err)
	for i, k := range f.nodes {
		if s[k.name].reported == "primary" {
			return k, f.nodes[1-i]
		}
	}
	f.t.Fatalf("pg_auto_failover: no primary: %v", s)
	return nil, nil
}

// kill SIGKILLs k's pg_autoctl and every process under it — its services,
// the postmaster and the backends — as a crash of its machine would, and
// waits until they are gone.
func (f *formation) kill(k *keeper) {
	f.t.Helper()
	pids := descendants(f.t, k.cmd.Process.Pid)
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	<-k.done
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for testproc.Alive(pid) {
			require.True(f.t, time.Now().Before(deadline), "process %d of %s outlived SIGKILL", pid, k.name)
			time.Sleep(10 * time.Millisecond) // the poll interval of this wait on the kernel
		}
	}
}

// fenceReadOnly makes k refuse writes in every session it has, as
// pg_auto_failover does to a node it is about to demote or promote (ALTER
// SYSTEM SET default_transaction_read_only, then a reload), and returns
// once a new session has the setting. New sessions that ask for read-write
// are refused by the node (target_session_attrs); the ones open answer
// 25006. The setting stays in postgresql.auto.conf until unfence takes it
// out: a reload is asynchronous, and each backend reads the file again only
// when it next runs a statement, so taking the setting out while the server
// runs would leave the sessions that were idle writable.
func (f *formation) fenceReadOnly(k *keeper) {
	f.t.Helper()
	url := fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", f.super, k.port)
	err := f.exec(url, func(ctx context.Context, conn *pgx.Conn) error {
		for _, q := range []string{
			"ALTER SYSTEM SET default_transaction_read_only = on",
			"SELECT pg_reload_conf()",
		} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(f.t, err, "making %s read-only", k.name)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var on string
		err := f.exec(url, func(ctx context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(ctx, "SHOW default_transaction_read_only").Scan(&on)
		})
		if err == nil && on == "on" {
			return
		}
		require.True(f.t, time.Now().Before(deadline), "%s: new sessions not read-only 10s after the reload: %q (%v)", k.name, on, err)
		time.Sleep(20 * time.Millisecond) // the poll interval of this wait on the reload
	}
}

// unfence takes fenceReadOnly's setting out of the configuration of k,
// whose server must be stopped, before it runs again.
func (f *formation) unfence(k *keeper) {
	f.t.Helper()
	path := filepath.Join(k.pgdata, "postgresql.auto.conf")
	raw, err := os.ReadFile(path)
	require.NoError(f.t, err)
	var kept []string
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(strings.TrimSpace(line), "default_transaction_read_only") {
			kept = append(kept, line)
		}
	}
	// Written in place: the file keeps its owner (the postgres user).
	require.NoError(f.t, os.WriteFile(path, []byte(strings.Join(kept, "")), 0o600))
}

// restart runs k's pg_autoctl again: the monitor tells it what it is now.
func (f *formation) restart(k *keeper) {
	f.t.Helper()
	f.start(k, "run", "--pgdata", k.pgdata)
}

// stop stops every keeper: SIGTERM, which makes pg_autoctl stop its
// PostgreSQL cleanly (its socket files go with it), then SIGKILL for what
// is left; and removes the directory.
func (f *formation) stop() {
	keepers := append([]*keeper{f.monitor}, f.nodes[:]...)
	for _, k := range keepers {
		if k != nil && k.cmd != nil {
			_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	for _, k := range keepers {
		if k == nil || k.cmd == nil {
			continue
		}
		select {
		case <-k.done:
		case <-time.After(20 * time.Second):
			f.kill(k)
		}
		// A postmaster pg_autoctl left behind.
		for _, pid := range processesIn(f.t, k.pgdata) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if k.log != nil {
			_ = k.log.Close()
		}
	}
	if f.t.Failed() {
		f.t.Logf("pg_auto_failover logs kept in %s", f.dir)
		return
	}
	_ = os.RemoveAll(f.dir)
}

// logTail returns the end of k's pg_autoctl log.
func (f *formation) logTail(k *keeper) string {
	b, err := os.ReadFile(filepath.Join(f.dir, k.name+".log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return fmt.Sprintf("--- %s.log ---\n%s", k.name, b)
}

// descendants lists every process under root, children before theirs.
func descendants(t *testing.T, root int) []int {
	t.Helper()
	children := map[int][]int{}
	for _, pid := range testproc.Processes(t, func(int) bool { return true }) {
		if st, err := testproc.ReadStat(pid); err == nil {
			children[st.PPID] = append(children[st.PPID], pid)
		}
	}
	var out []int
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// processesIn lists the live processes whose working directory is dir: a
// postmaster and its backends work in their PGDATA.
func processesIn(t *testing.T, dir string) []int {
	t.Helper()
	return testproc.Processes(t, func(pid int) bool {
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		return err == nil && cwd == dir && testproc.Alive(pid)
	})
}
