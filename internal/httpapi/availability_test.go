package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// lockBatches holds ACCESS EXCLUSIVE on ledgerq.batches from a connection of
// its own, so that every API statement on the table waits in PostgreSQL, as
// it does while the database is frozen. The lock is released by the returned
// function, or after hold at the latest (so that a server that waits for it
// fails the test instead of hanging it).
func lockBatches(t *testing.T, dbURL string, hold time.Duration) (release func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dbURL)
	require.NoError(t, err)
	cfg.RuntimeParams["application_name"] = "locker"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE ledgerq.batches IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	done := make(chan struct{})
	released := make(chan struct{})
	go func() {
		defer close(released)
		select {
		case <-done:
		case <-time.After(hold):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tx.Rollback(ctx)
		_ = conn.Close(ctx)
	}()
	var once bool
	release = func() {
		if !once {
			once = true
			close(done)
		}
		<-released
	}
	t.Cleanup(release)
	return release
}

// lockWaiters counts the backends of the API's pool (application_name
// ledgerq) that wait for a lock in database name.
func (f *apiFixture) lockWaiters() int {
	f.t.Helper()
	return f.adminCount(`SELECT count(*) FROM pg_stat_activity
		WHERE datname = $1 AND application_name = 'ledgerq' AND wait_event_type = 'Lock'`)
}

// adminCount runs query, a count with f's database name as $1, on a
// connection of the server's admin.
func (f *apiFixture) adminCount(query string) int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.db.AdminURL)
	require.NoError(f.t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(f.t, conn.QueryRow(ctx, query, f.db.Name).Scan(&n))
	return n
}

func TestAPI_RequestsWhileTheDatabaseHangsAnswer503ByTheRequestTimeout(t *testing.T) {
	t.Parallel()
	// 1s: short beside the 20s lock, long enough for a loaded CI machine.
	f := setup(t, func(c *httpapi.Config) { c.RequestTimeout = time.Second })
	id, payload := signedBatch(t)
	// Until the lock is taken a request may still miss the deadline on a
	// busy machine; it must succeed within a few tries.
	untilStatus(t, http.StatusCreated, func() httpResult { return f.post("/v1/batches", batchBody(t, id, "svc", payload, "")) },
		"POST before the lock: %s")
	newID, newPayload := signedBatch(t)

	release := lockBatches(t, f.db.URL, 20*time.Second)
	requests := map[string]func() httpResult{
		"GET one":  func() httpResult { return f.get("/v1/batches/" + id) },
		"GET list": func() httpResult { return f.get("/v1/batches?service_id=svc") },
		"POST":     func() httpResult { return f.post("/v1/batches", batchBody(t, newID, "svc", newPayload, "")) },
	}
	for name, do := range requests {
		began := time.Now()
		resp := do()
		took := time.Since(began)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s while the table is locked: %s", name, resp.Body)
		require.JSONEq(t, `{"success":false,"message":"database did not answer within 1s"}`, resp.Body, name)
		require.Less(t, took, 5*time.Second, "%s answered after %s", name, took)
	}
	// The timed-out statements were cancelled in PostgreSQL, not left
	// waiting for the lock on connections the pool gave up.
	require.Eventually(t, func() bool { return f.lockWaiters() == 0 }, 5*time.Second, 50*time.Millisecond,
		"statements of timed-out requests still wait for the lock")

	release()
	for name, do := range requests {
		want := http.StatusOK
		if name == "POST" {
			want = http.StatusCreated
		}
		untilStatus(t, want, do, "%s after the lock is released: %s", name)
	}
	require.Equal(t, 2, f.count(), fmt.Sprintf("the POST that timed out stored nothing; its retry stored %s", newID))
}

// untilStatus repeats do, for up to 10s, until it answers want: the
// requests a test makes outside the fault it stages, on a machine that may
// be slow enough to miss a short request deadline once.
func untilStatus(t *testing.T, want int, do func() httpResult, msgAndArgs ...any) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		last := do()
		assert.Equal(c, want, last.StatusCode, append(msgAndArgs, last.Body)...)
	}, 10*time.Second, 100*time.Millisecond)
}

// serveOn serves the API over st (a store on db, perhaps through a proxy).
func serveOn(t *testing.T, db *testdb.DB, st *store.Store, mutate ...func(*httpapi.Config)) *apiFixture {
	t.Helper()
	cfg := httpapi.DefaultConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	m := metrics.New()
	api := httpapi.New(cfg, httpapi.Deps{Store: st, Clock: clock.NewFake(t0), Logger: testLogger(t), Metrics: m})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &apiFixture{t: t, db: db, url: srv.URL, metrics: m, key: adminKey(t, db.Store)}
}

// terminateAPIBackends ends, as pg_terminate_backend does for an operator or
// a restarting server, every backend the API's pool holds in f's database.
func (f *apiFixture) terminateAPIBackends() int {
	f.t.Helper()
	return f.adminCount(`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND application_name = 'ledgerq' AND pid <> pg_backend_pid()) t`)
}

// requireAvailableOr503 sends each request and requires an answer that is
// either what the request gets from a working database or 503: a lost
// connection is never the client's fault (4xx) nor a server bug (500).
func requireAvailableOr503(t *testing.T, what string, requests map[string]func() httpResult, ok map[string]int) {
	t.Helper()
	for name, do := range requests {
		resp := do()
		if resp.StatusCode == http.StatusServiceUnavailable {
			require.Contains(t, resp.Body, `"success":false`)
			continue
		}
		require.Equal(t, ok[name], resp.StatusCode, "%s, %s: %s", what, name, resp.Body)
	}
}

// storedBatchRequests stores a batch through f and returns requests about
// it — a GET of it, a GET of its service's list, and its POST again — with
// the status each gets from a working database.
func storedBatchRequests(t *testing.T, f *apiFixture) (requests map[string]func() httpResult, ok map[string]int) {
	t.Helper()
	id, _, body := f.postNewBatch()
	requests = map[string]func() httpResult{
		"GET one":  func() httpResult { return f.get("/v1/batches/" + id) },
		"GET list": func() httpResult { return f.get("/v1/batches?service_id=svc") },
		"POST":     func() httpResult { return f.post("/v1/batches", body) },
	}
	ok = map[string]int{"GET one": http.StatusOK, "GET list": http.StatusOK, "POST": http.StatusOK}
	return requests, ok
}

// requireMidRequest503 locks the batches, sends each request, and once every
// one waits for the lock stages fault and requires each to answer 503 (a
// request what, in the messages); then it releases the lock.
func requireMidRequest503(t *testing.T, f *apiFixture, requests map[string]func() httpResult, what string, fault func()) {
	t.Helper()
	release := lockBatches(t, f.db.URL, 20*time.Second)
	answers := make(chan string, len(requests))
	for name, do := range requests {
		go func() {
			resp := do()
			answers <- fmt.Sprintf("%s %d %s", name, resp.StatusCode, resp.Body)
		}()
	}
	require.Eventually(t, func() bool { return f.lockWaiters() == len(requests) }, 10*time.Second, 20*time.Millisecond)
	fault()
	for range requests {
		select {
		case a := <-answers:
			require.Contains(t, a, " 503 ", "a request "+what)
		case <-time.After(10 * time.Second):
			t.Fatal("a request " + what + " did not answer")
		}
	}
	release()
}

func TestAPI_TerminatedBackendsAnswer503OrSucceedNever500(t *testing.T) {
	t.Parallel()
	f := setup(t)
	requests, ok := storedBatchRequests(t, f)

	// Between requests: the pool's idle connections are dead when the next
	// requests take them.
	for round := range 3 {
		var wg sync.WaitGroup
		for range 4 { // several pool connections
			wg.Go(func() { requests["GET one"]() })
		}
		wg.Wait()
		require.Positive(t, f.terminateAPIBackends())
		requireAvailableOr503(t, fmt.Sprintf("round %d, after its backends were terminated", round), requests, ok)
	}

	// Mid-request: the requests wait for a lock when their backends end.
	// A fresh pool, so that none of them meets a connection the last round
	// left dead, and every one reaches the lock.
	f.db.Store.Conns().Reset()
	requireMidRequest503(t, f, requests, "whose backend was terminated", func() {
		require.Equal(t, len(requests), f.terminateAPIBackends())
	})
	requireAvailableOr503(t, "after the lock is released", requests, ok)
}

// tcpProxy forwards connections to a PostgreSQL server and can cut them all
// with a reset, as a crashed server, a restarted host or a dropped network
// path does.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*net.TCPConn
	// down: new connections are closed at once, as a server that is gone.
	down bool
	// cutOn: the first answer of the server holding these bytes cuts every
	// connection instead of reaching the client, which then cannot know
	// whether its statement took effect.
	cutOn []byte
}

// openBehindProxy opens a store on db through a proxy the test can cut; the
// store is closed when t ends.
func openBehindProxy(ctx context.Context, t *testing.T, db *testdb.DB) (*store.Store, *tcpProxy) {
	t.Helper()
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	proxy := startProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	st, err := store.Open(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st, proxy
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close(); p.cut(true) })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			if down {
				_ = client.Close()
				continue
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, client.(*net.TCPConn), server.(*net.TCPConn))
			p.mu.Unlock()
			go func() { _, _ = io.Copy(server, client); _ = server.Close() }()
			go func() { p.answer(client, server); _ = client.Close() }()
		}
	}()
	return p
}

// answer copies the server's answers to the client until either side ends,
// or cuts every connection instead when an answer holds p.cutOn.
func (p *tcpProxy) answer(client, server net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			cut := p.cutOn != nil && bytes.Contains(buf[:n], p.cutOn)
			if cut {
				p.cutOn = nil
			}
			p.mu.Unlock()
			if cut {
				p.cut(true)
				return
			}
			if _, err := client.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cutOnAnswer makes the first answer of the server that holds b cut every
// connection before it reaches the client.
func (p *tcpProxy) cutOnAnswer(b string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutOn = []byte(b)
}

// cut closes every connection the proxy holds, on both sides: with a reset
// (RST) when reset is set, as a dropped path or a rebooted host does, or
// else with a FIN, as when the server's process dies.
func (p *tcpProxy) cut(reset bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if reset {
			_ = c.SetLinger(0)
		}
		_ = c.Close()
	}
	n := len(p.conns)
	p.conns = nil
	return n
}

// outage cuts every connection and refuses new ones until the returned
// function ends it: the database is gone, as during a failover.
func (p *tcpProxy) outage() (end func()) {
	p.cut(true)
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.down = false
		p.mu.Unlock()
	}
}

func TestAPI_ConnectionsCutMidRequestAnswer503OrSucceedNever500(t *testing.T) {
	t.Parallel()
	for name, reset := range map[string]bool{"reset": true, "closed": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testConnectionsCut(t, reset)
		})
	}
}

func testConnectionsCut(t *testing.T, reset bool) {
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, proxy := openBehindProxy(ctx, t, db)
	f := serveOn(t, db, st)

	requests, ok := storedBatchRequests(t, f)

	requireMidRequest503(t, f, requests, "whose connection was cut", func() {
		require.Positive(t, proxy.cut(reset))
	})
	// Between requests: the pool's idle connections were cut.
	for range 3 {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { requests["GET one"]() })
		}
		wg.Wait()
		require.Positive(t, proxy.cut(reset))
		requireAvailableOr503(t, "after the pool's connections were cut", requests, ok)
	}
}

// A client that gives up while its request waits for the database is not a
// server failure: the request is counted as 499 (nginx's "client closed
// request"), never as 500, and logged at debug.
func TestAPI_AClientThatGoesAwayIsNotA500(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *httpapi.Config) { c.RequestTimeout = 20 * time.Second })
	release := lockBatches(t, f.db.URL, 20*time.Second)
	defer release()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/v1/batches/abc", nil)
	require.NoError(t, err)
	f.authorize(req)
	_, err = http.DefaultClient.Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the client gave up")
	var body string
	require.Eventually(t, func() bool {
		body = f.get("/metrics").Body
		return strings.Contains(body, `ledgerq_http_requests_total{code="499",method="GET",route="/v1/batches/:id"} 1`)
	}, 10*time.Second, 50*time.Millisecond, "the abandoned request is counted as 499")
	require.NotContains(t, body, `code="500"`)
}

// A 503 is a promise that the request may succeed later, so it says when
// to ask again (Retry-After, in seconds) on every kind of route: REST, the
// Sawtooth drop-in and the readiness probe. Other answers do not carry it.
func TestAPI_UnavailableAnswersSayWhenToRetry(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	down, err := store.Open(context.Background(), "postgres://ledgerq@127.0.0.1:1/none?connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(down.Close)
	serve := func(access httpapi.AccessConfig) *apiFixture {
		cfg := httpapi.DefaultConfig()
		cfg.Access = access
		api := httpapi.New(cfg, httpapi.Deps{Store: down, Ready: notReady{}, Clock: clock.NewFake(t0), Logger: testLogger(t), Metrics: metrics.New()})
		srv := httptest.NewServer(api.Handler())
		t.Cleanup(srv.Close)
		return &apiFixture{t: t, db: db, url: srv.URL}
	}
	// A key cannot be checked without the database: 503, not 401.
	secured := serve(httpapi.AccessConfig{})
	resp := secured.as("lq_"+strings.Repeat("k", 43), http.MethodGet, "/v1/bundles", "")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, resp.Body)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	f := serve(httpapi.AccessConfig{Open: true})
	id, payload := signedBatch(t)
	_, list := batchList(t, 1)
	for name, do := range map[string]func() httpResult{
		"POST /v1/batches":     func() httpResult { return f.post("/v1/batches", batchBody(t, id, "svc", payload, "")) },
		"GET /v1/batches/{id}": func() httpResult { return f.get("/v1/batches/" + id) },
		"POST /batches":        func() httpResult { return f.postBatchList("/batches", list) },
		"GET /batch_statuses":  func() httpResult { return f.get("/batch_statuses?id=" + id) },
		"GET /readyz":          func() httpResult { return f.get("/readyz") },
	} {
		resp := do()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s: %s", name, resp.Body)
		require.Equal(t, "1", resp.Header.Get("Retry-After"), "%s", name)
	}
	resp = f.get("/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Retry-After"))
}
