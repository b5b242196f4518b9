package integration

import (
	"cmp"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testproc"
	"github.com/ledgerq/ledgerq/migrations"
)

// embeddedMigration is one migration file the binary embeds.
type embeddedMigration struct {
	file    string
	version int64 // goose's version: the file name's leading number
}

// embeddedMigrations lists the migrations the binary embeds, oldest first.
func embeddedMigrations(t *testing.T) []embeddedMigration {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no migration is embedded")
	var out []embeddedMigration
	for _, f := range files {
		digits, _, ok := strings.Cut(f, "_")
		require.True(t, ok, "migration %s has no version prefix", f)
		v, err := strconv.ParseInt(digits, 10, 64)
		require.NoError(t, err, "migration %s", f)
		out = append(out, embeddedMigration{file: f, version: v})
	}
	slices.SortFunc(out, func(a, b embeddedMigration) int { return cmp.Compare(a.version, b.version) })
	return out
}

func TestMigrateCommand_UpStatusVersionDown(t *testing.T) {
	t.Parallel()
	migs := embeddedMigrations(t)
	latest := migs[len(migs)-1].version
	var previous int64 // the version after rolling back the latest
	if len(migs) > 1 {
		previous = migs[len(migs)-2].version
	}
	u := testdb.NewEmpty(t)
	env := []string{"DATABASE_URL=" + u}
	run := func(args ...string) (int, string) {
		p := testproc.Start(t, t.TempDir(), env, append([]string{"migrate"}, args...)...)
		code := p.Wait(t, time.Minute)
		return code, p.Stdout.String() + p.Stderr.String()
	}
	code, out := run("up")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, fmt.Sprintf("applied %d migration(s)", len(migs)))

	code, out = run("version")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, fmt.Sprintf("database: %d\n", latest))

	code, out = run("status")
	require.Equal(t, 0, code, out)
	for _, m := range migs {
		require.Contains(t, out, m.file)
	}
	require.NotContains(t, out, "pending")

	code, out = run("down")
	require.Equal(t, 0, code, out)
	code, out = run("version")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, fmt.Sprintf("database: %d\n", previous))

	code, out = run("sideways")
	require.NotEqual(t, 0, code)
	require.Contains(t, out, "unknown migrate command")
}

// listProcesses returns the pids whose command line mentions needle.
func listProcesses(t *testing.T, needle string) []int {
	t.Helper()
	return testproc.Processes(t, func(pid int) bool {
		if pid == os.Getpid() {
			return false
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		return err == nil && strings.Contains(string(cmdline), needle)
	})
}

func TestDev_StartsFromAnEmptyDataDirStopsCleanlyAndReusesTheData(t *testing.T) {
	t.Parallel()
	dev := newDevRun(t)
	dataDir, addr := dev.dataDir, dev.addr
	stop := func(p *testproc.Proc) {
		p.Signal(t, syscall.SIGTERM)
		require.Equal(t, 0, p.Wait(t, time.Minute), "dev exits 0 on SIGTERM")
		eventually(t, 10*time.Second, "no process left for the data dir", func() bool {
			return len(listProcesses(t, dataDir)) == 0
		})
	}

	p := dev.start()
	require.Contains(t, p.Stdout.String(), "http://"+addr)
	keyFile, err := os.ReadFile(filepath.Join(dataDir, "dev-api-key"))
	require.NoError(t, err)
	key := strings.TrimSpace(string(keyFile))
	require.Contains(t, p.Stdout.String(), key, "dev prints its admin key")
	id, body := signedBatchJSON(t, "svc-dev")
	require.Equal(t, http.StatusUnauthorized, postJSON(t, "http://"+addr+"/v1/batches", body).StatusCode, "dev needs the key too")
	resp := postJSON(t, "http://"+addr+"/v1/batches", body, key)
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	stop(p)

	p = dev.start()
	resp = getJSON(t, "http://"+addr+"/v1/batches/"+url.PathEscape(id), key)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the batch stored by the first run is still there: %s", resp.Body)
	require.NotContains(t, p.Stderr.String(), `"initdb":true`, "the second run reuses the cluster")
	stop(p)
}

func TestOnce_ExitsZeroAgainstAMigratedDatabase(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	p := testproc.Start(t, t.TempDir(), []string{"DATABASE_URL=" + db.URL}, "once")
	require.Equal(t, 0, p.Wait(t, time.Minute), p.Stderr.String())
	require.Contains(t, p.Stderr.String(), "once: batch monitor round")
}

func TestOnce_UnreachableDatabaseFailsFastWithAClearMessage(t *testing.T) {
	t.Parallel()
	addr := testproc.FreeAddr(t) // nothing listens there
	began := time.Now()
	p := testproc.Start(t, t.TempDir(), []string{"DATABASE_URL=postgres://ledgerq:secret@" + addr + "/ledgerq?sslmode=disable"}, "once")
	code := p.Wait(t, 30*time.Second)
	require.NotEqual(t, 0, code)
	require.Less(t, time.Since(began), 20*time.Second)
	require.Contains(t, p.Stderr.String(), "cannot reach the database at postgres://ledgerq:xxxxx@"+addr)
	require.NotContains(t, p.Stderr.String(), "secret", "the password is not printed")
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
	p := &tcpProxy{t: t, addr: testproc.FreeAddr(t), target: target}
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
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, t.TempDir(), []string{"DATABASE_URL=" + proxied}, "serve", "--api-addr", addr)
	testproc.WaitHTTP(t, p, "http://"+addr+"/readyz", http.StatusOK, time.Minute)

	proxy.Close()
	testproc.WaitHTTP(t, nil, "http://"+addr+"/readyz", http.StatusServiceUnavailable, 30*time.Second)
	testproc.WaitHTTP(t, nil, "http://"+addr+"/healthz", http.StatusOK, 5*time.Second)

	proxy.Open()
	testproc.WaitHTTP(t, nil, "http://"+addr+"/readyz", http.StatusOK, 30*time.Second)
}

func TestReadyz_IsUnavailableWhileTheSchemaIsBehind(t *testing.T) {
	t.Parallel()
	u := testdb.NewEmpty(t)
	addr := testproc.FreeAddr(t)
	testproc.Start(t, t.TempDir(), []string{"DATABASE_URL=" + u}, "serve", "--database-migrate=false", "--api-addr", addr,
		"--queuer=false", "--submitter=false", "--monitor=false")
	testproc.WaitHTTP(t, nil, "http://"+addr+"/readyz", http.StatusServiceUnavailable, time.Minute)
	resp := getJSON(t, "http://"+addr+"/readyz")
	require.Contains(t, resp.Body, "ledgerq migrate up")
}

// SIGTERM drains: the submitter stops claiming, the ledger call in flight
// finishes and its outcome is recorded, and the process exits 0.
func TestServe_SIGTERMLetsTheSendInFlightFinishAndRecordsItsOutcome(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, t.TempDir(), []string{"DATABASE_URL=" + db.URL}, "serve", "--api-addr", addr,
		"--batch-sim-latency", "2s", "--poll-interval", "100ms", "--monitor=false")
	testproc.WaitHTTP(t, p, "http://"+addr+"/readyz", http.StatusOK, time.Minute)
	id, body := signedBatchJSON(t, "svc")
	require.Equal(t, http.StatusCreated, postJSON(t, "http://"+addr+"/v1/batches", body, createKey(t, db.URL, "service:svc")).StatusCode)

	ctx := ctxT(t, time.Minute)
	eventually(t, 30*time.Second, "the submitter holds the batch", func() bool {
		b, err := db.Store.BatchGet(ctx, id)
		require.NoError(t, err)
		return b.Submitted && b.ClaimExpiresAt != nil
	})
	p.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, p.Wait(t, 30*time.Second), "exits 0 after draining")

	b, err := db.Store.BatchGet(ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.BatchStatusPending, b.Status, "the send finished and its outcome was recorded")
	require.Nil(t, b.ClaimExpiresAt)
	require.Equal(t, 1, b.Attempts)
	require.NotContains(t, p.Stderr.String(), "outcome unknown", "the ledger call was not cut short")
}

// serve needs an API key on every /v1 route and /metrics, says so at start,
// and a key from `ledgerq keys create` opens what its scopes name; the
// Sawtooth drop-in stays open.
func TestServe_EveryV1RouteNeedsAKey(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	p, api := testproc.StartReady(t, t.TempDir(), []string{"DATABASE_URL=" + db.URL}, "serve", "--log-level", "info")
	for _, path := range []string{"/v1/batches", "/v1/batches/x", "/metrics", "/v1/bundles", "/ui/", "/ui/overview.json", "/ui/wallets"} {
		require.Equal(t, http.StatusUnauthorized, getJSON(t, api+path).StatusCode, path)
	}
	require.Equal(t, http.StatusOK, getJSON(t, api+"/batch_statuses?id="+strings.Repeat("a", 128)).StatusCode, "Sawtooth's drop-in is open")
	read := createKey(t, db.URL, "read")
	require.Equal(t, http.StatusOK, getJSON(t, api+"/v1/batches", read).StatusCode)
	require.Equal(t, http.StatusOK, getJSON(t, api+"/metrics", read).StatusCode)
	_, body := signedBatchJSON(t, "svc")
	require.Equal(t, http.StatusForbidden, postJSON(t, api+"/v1/batches", body, read).StatusCode)
	require.Equal(t, http.StatusCreated, postJSON(t, api+"/v1/batches", body, createKey(t, db.URL, "service:svc")).StatusCode)
	require.Contains(t, p.Stderr.String(), "need an API key", "serve says so at start")
}
