package integration

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/notify"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

func TestMigrations_UpDownUpOnAFreshDatabase(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 2*time.Minute)
	u := testdb.NewEmpty(t)
	st, err := store.Open(ctx, u)
	require.NoError(t, err)
	defer st.Close()
	m, err := st.NewMigrator(nil)
	require.NoError(t, err)
	defer m.Close()

	tables := func() []string {
		rows, err := st.Pool().Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'ledgerq' ORDER BY 1`)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}

	res, err := m.Up(ctx)
	require.NoError(t, err)
	require.Len(t, res, int(m.LatestVersion()))
	require.Contains(t, tables(), "batches")
	require.Contains(t, tables(), "goose_db_version", "goose's version table lives in the ledgerq schema")

	_, err = m.DownTo(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"goose_db_version"}, tables(), "down removes everything the migrations made")
	current, _, err := m.Versions(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 0, current)

	_, err = m.Up(ctx)
	require.NoError(t, err)
	require.Contains(t, tables(), "batches")
	current, latest, err := m.Versions(ctx)
	require.NoError(t, err)
	require.Equal(t, latest, current)
}

func TestMigrations_EveryTableViewAndColumnHasAComment(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := ctxT(t, time.Minute)
	rows, err := db.Store.Pool().Query(ctx, `
		SELECT c.relname || coalesce('.' || a.attname, '')
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'ledgerq'
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE c.relkind IN ('r', 'v', 'p')
		  AND (obj_description(c.oid, 'pg_class') IS NULL
		       OR (a.attname IS NOT NULL AND col_description(c.oid, a.attnum) IS NULL))
		ORDER BY 1`)
	require.NoError(t, err)
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, missing, "tables, views or columns without a COMMENT")
}

func TestMigrateCommand_UpStatusVersionDown(t *testing.T) {
	t.Parallel()
	u := testdb.NewEmpty(t)
	env := []string{"DATABASE_URL=" + u}
	run := func(args ...string) (int, string) {
		p := startProc(t, t.TempDir(), env, append([]string{"migrate"}, args...)...)
		code := p.wait(t, time.Minute)
		return code, p.stdout.String() + p.stderr.String()
	}
	code, out := run("up")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "applied 2 migration(s)")

	code, out = run("version")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "database: 2")

	code, out = run("status")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "00002_batches.sql")
	require.NotContains(t, out, "pending")

	code, out = run("down")
	require.Equal(t, 0, code, out)
	code, out = run("version")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "database: 1")

	code, out = run("sideways")
	require.NotEqual(t, 0, code)
	require.Contains(t, out, "unknown migrate command")
}

// listProcesses returns the pids whose command line mentions needle.
func listProcesses(t *testing.T, needle string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), needle) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestDev_StartsFromAnEmptyDataDirStopsCleanlyAndReusesTheData(t *testing.T) {
	t.Parallel()
	work := reachableTempDir(t)
	dataDir := filepath.Join(work, "data")
	addr := freeAddr(t)
	start := func() *proc {
		p := startProc(t, work, nil, "dev", "--data-dir", dataDir, "--http-addr", addr)
		waitHTTPWhile(t, p, "http://"+addr+"/readyz", http.StatusOK, 2*time.Minute)
		return p
	}
	stop := func(p *proc) {
		p.signal(t, syscall.SIGTERM)
		require.Equal(t, 0, p.wait(t, time.Minute), "dev exits 0 on SIGTERM")
		eventually(t, 10*time.Second, "no process left for the data dir", func() bool {
			return len(listProcesses(t, dataDir)) == 0
		})
	}

	p := start()
	require.Contains(t, p.stdout.String(), "http://"+addr)
	id, body := signedBatchJSON(t, "svc-dev")
	resp := postJSON(t, "http://"+addr+"/v1/batches", body)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	stop(p)

	p = start()
	resp = getJSON(t, "http://"+addr+"/v1/batches/"+url.PathEscape(id))
	require.Equal(t, http.StatusOK, resp.StatusCode, "the batch stored by the first run is still there: %s", resp.Body)
	require.NotContains(t, p.stderr.String(), `"initdb":true`, "the second run reuses the cluster")
	stop(p)
}

func TestOnce_ExitsZeroAgainstAMigratedDatabase(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	p := startProc(t, t.TempDir(), []string{"DATABASE_URL=" + db.URL}, "once")
	require.Equal(t, 0, p.wait(t, time.Minute), p.stderr.String())
	require.Contains(t, p.stderr.String(), "once: monitor round")
}

func TestOnce_UnreachableDatabaseFailsFastWithAClearMessage(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t) // nothing listens there
	began := time.Now()
	p := startProc(t, t.TempDir(), []string{"DATABASE_URL=postgres://ledgerq:secret@" + addr + "/ledgerq?sslmode=disable"}, "once")
	code := p.wait(t, 30*time.Second)
	require.NotEqual(t, 0, code)
	require.Less(t, time.Since(began), 20*time.Second)
	require.Contains(t, p.stderr.String(), "cannot reach the database at postgres://ledgerq:xxxxx@"+addr)
	require.NotContains(t, p.stderr.String(), "secret", "the password is not printed")
}

// roundCounter is a loop round that reports each run on a channel.
func roundCounter() (loop.Round, <-chan struct{}) {
	ran := make(chan struct{}, 100)
	return func(context.Context) (bool, error) {
		ran <- struct{}{}
		return false, nil
	}, ran
}

func waitRound(t *testing.T, ran <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-ran:
	case <-time.After(within):
		t.Fatalf("no round within %s: %s", within, what)
	}
}

// startListener starts a notification listener subscribed to channel and
// waits until it listens.
func startListener(t *testing.T, ctx context.Context, dbURL, channel string) (*notify.Listener, <-chan struct{}) {
	t.Helper()
	l := notify.NewListener(dbURL, testLogger(t))
	wake := l.Subscribe(channel)
	connected := l.Connected()
	require.NoError(t, l.Start(ctx))
	t.Cleanup(l.Stop)
	<-connected
	return l, wake
}

func TestLoop_WakesOnNotifyWellBeforeItsPollInterval(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := ctxT(t, time.Minute)
	_, wake := startListener(t, ctx, db.URL, store.ChannelQueuer)

	round, ran := roundCounter()
	lp := loop.New(loop.Config{Name: "test", Interval: time.Hour, Wake: wake}, round)
	require.NoError(t, lp.Start(ctx))
	t.Cleanup(lp.Stop)
	waitRound(t, ran, 5*time.Second, "the first round runs at start")
	drain(ran)

	began := time.Now()
	require.NoError(t, db.Store.Notify(ctx, store.ChannelQueuer))
	waitRound(t, ran, 5*time.Second, "NOTIFY wakes the loop")
	require.Less(t, time.Since(began), 5*time.Second)

	// Another channel's notification does not wake it.
	drain(ran)
	require.NoError(t, db.Store.Notify(ctx, store.ChannelMonitor))
	select {
	case <-ran:
		t.Fatal("a notification on another channel woke the loop")
	case <-time.After(300 * time.Millisecond):
	}
}

func TestLoop_KeepsPollingWhenItsListenerConnectionIsKilledAndTheListenerReconnects(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := ctxT(t, time.Minute)
	l, wake := startListener(t, ctx, db.URL, store.ChannelSubmitter)

	round, ran := roundCounter()
	lp := loop.New(loop.Config{Name: "test", Interval: 200 * time.Millisecond, Wake: wake}, round)
	require.NoError(t, lp.Start(ctx))
	t.Cleanup(lp.Stop)

	pid := l.BackendPID()
	require.NotZero(t, pid)
	reconnected := l.Connected()
	var killed bool
	require.NoError(t, db.Store.Pool().QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int(pid)).Scan(&killed))
	require.True(t, killed)

	// Rounds go on at the poll interval while the listener is down.
	drain(ran)
	for i := range 3 {
		waitRound(t, ran, 2*time.Second, "poll round "+strconv.Itoa(i))
	}

	select {
	case <-reconnected:
	case <-time.After(20 * time.Second):
		t.Fatal("the listener did not reconnect")
	}
	require.NotEqual(t, pid, l.BackendPID())
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// tcpProxy forwards a loopback port to a target; Close cuts every connection
// and stops listening, Open listens again on the same port.
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, addr: freeAddr(t), target: target}
	p.Open()
	t.Cleanup(p.Close)
	return p
}

func (p *tcpProxy) Open() {
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err)
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go pipe(c, up)
			go pipe(up, c)
		}
	}()
}

func pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

func (p *tcpProxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// viaProxy rewrites a database URL to go through the proxy.
func viaProxy(t *testing.T, dbURL string) (*tcpProxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	p := newTCPProxy(t, u.Host)
	u.Host = p.addr
	return p, u.String()
}

func TestReadyz_TurnsUnavailableWhenTheDatabaseGoesAwayAndRecoversWithoutARestart(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	proxy, proxied := viaProxy(t, db.URL)
	addr := freeAddr(t)
	p := startProc(t, t.TempDir(), []string{"DATABASE_URL=" + proxied}, "serve", "--http-addr", addr)
	waitHTTPWhile(t, p, "http://"+addr+"/readyz", http.StatusOK, time.Minute)

	proxy.Close()
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable, 30*time.Second)
	waitHTTP(t, "http://"+addr+"/healthz", http.StatusOK, 5*time.Second)

	proxy.Open()
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK, 30*time.Second)
}

func TestReadyz_IsUnavailableWhileTheSchemaIsBehind(t *testing.T) {
	t.Parallel()
	u := testdb.NewEmpty(t)
	addr := freeAddr(t)
	startProc(t, t.TempDir(), []string{"DATABASE_URL=" + u}, "serve", "--migrate=false", "--http-addr", addr,
		"--queuer=false", "--submitter=false", "--monitor=false")
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable, time.Minute)
	resp := getJSON(t, "http://"+addr+"/readyz")
	require.Contains(t, resp.Body, "ledgerq migrate up")
}

// SIGTERM drains: the submitter stops claiming, the ledger call in flight
// finishes and its outcome is recorded, and the process exits 0.
func TestServe_SIGTERMLetsTheSendInFlightFinishAndRecordsItsOutcome(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	addr := freeAddr(t)
	p := startProc(t, t.TempDir(), []string{"DATABASE_URL=" + db.URL}, "serve", "--http-addr", addr,
		"--sim-latency", "2s", "--poll-interval", "100ms", "--monitor=false")
	waitHTTPWhile(t, p, "http://"+addr+"/readyz", http.StatusOK, time.Minute)
	id, body := signedBatchJSON(t, "svc")
	require.Equal(t, http.StatusCreated, postJSON(t, "http://"+addr+"/v1/batches", body).StatusCode)

	ctx := ctxT(t, time.Minute)
	eventually(t, 30*time.Second, "the submitter holds the batch", func() bool {
		b, err := db.Store.GetBatch(ctx, id)
		require.NoError(t, err)
		return b.Submitted && b.ClaimExpiresAt != nil
	})
	p.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, p.wait(t, 30*time.Second), "exits 0 after draining")

	b, err := db.Store.GetBatch(ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.BatchStatusPending, b.Status, "the send finished and its outcome was recorded")
	require.Nil(t, b.ClaimExpiresAt)
	require.Equal(t, 1, b.Attempts)
	require.NotContains(t, p.stderr.String(), "outcome unknown", "the ledger call was not cut short")
}
