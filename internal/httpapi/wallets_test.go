package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

const (
	walletChain = int64(1337)
	recipient   = "0x8ba1f109551bd432803012645ac136ddd64dba72"
)

type walletFixture struct {
	*apiFixture
	api *httpapi.Server
	// main and other are configured wallets.
	main, other keystore.Wallet
	// key opens main and "ghost" (not configured); otherKey opens other.
	key, otherKey string
	// rows moves tasks as the wallet's worker would.
	rows *testfactory.Factory
}

func newTestWallet(t testing.TB, id string) keystore.Wallet {
	t.Helper()
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	s, err := keystore.NewKeySigner(k)
	require.NoError(t, err)
	return keystore.Wallet{ID: id, ChainID: walletChain, Signer: s}
}

// createAPIKey stores a key scoped to wallets and returns its token.
func createAPIKey(t testing.TB, st *store.Store, wallets ...string) string {
	t.Helper()
	return keyWith(t, st, store.WalletScopes(wallets...)...)
}

// setupWallets serves the API with two wallets, main and other, and a key
// for each; waiting send-tx requests wait up to 20s unless mutate says.
func setupWallets(t *testing.T, mutate ...func(*httpapi.Config)) *walletFixture {
	t.Helper()
	db := testdb.New(t)
	cfg := httpapi.DefaultConfig()
	cfg.TaskMaxWait = 20 * time.Second
	for _, m := range mutate {
		m(&cfg)
	}
	main, other := newTestWallet(t, "main"), newTestWallet(t, "other")
	reg, err := keystore.NewRegistry(main, other)
	require.NoError(t, err)
	m := metrics.New()
	clk := clock.NewFake(t0)
	api := httpapi.New(cfg, httpapi.Deps{Store: db.Store, Wallets: reg, Clock: clk, Logger: testLogger(t), Metrics: m,
		Resolver: testHosts})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &walletFixture{
		apiFixture: &apiFixture{t: t, db: db, url: srv.URL, metrics: m}, api: api,
		main: main, other: other,
		key: createAPIKey(t, db.Store, "main", "ghost"), otherKey: createAPIKey(t, db.Store, "other"),
		rows: testfactory.New(t, db.Store, clk),
	}
}

// call sends a request with headers and checks the answer against the
// document, as post and get do.
func (f *walletFixture) call(method, path string, body []byte, headers ...string) httpResult {
	f.t.Helper()
	return do(f.t, f.request(context.Background(), method, path, body, headers...))
}

func (f *walletFixture) request(ctx context.Context, method, path string, body []byte, headers ...string) *http.Request {
	f.t.Helper()
	var r *bytes.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.url+path, nil)
	require.NoError(f.t, err)
	if r != nil {
		req, err = http.NewRequestWithContext(ctx, method, f.url+path, r)
		require.NoError(f.t, err)
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	return req
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// sendTx posts a send-tx for main with f.key.
func (f *walletFixture) sendTx(query, body string, headers ...string) httpResult {
	f.t.Helper()
	return f.call(http.MethodPost, "/v1/wallets/main/send-tx"+query, []byte(body), append(bearer(f.key), headers...)...)
}

// sendTxAsync sends a send-tx in the background; the channel gets its answer.
func (f *walletFixture) sendTxAsync(query, body string) <-chan httpResult {
	answered := make(chan httpResult, 1)
	go func() { answered <- f.sendTx(query, body) }()
	return answered
}

func txBody(value string) string {
	return `{"to":"` + recipient + `","value":"` + value + `","data":"0xcafe","priority":3}`
}

type taskAnswer struct {
	Success bool `json:"success"`
	Created *bool
	Task    struct {
		ID, Wallet, From, To, Value, Data, Status, Error string
		TxHash                                           string `json:"tx_hash"`
		IdempotencyKey                                   string `json:"idempotency_key"`
		Code                                             int
		Cancelled, Reverted                              bool
		Priority                                         int32
	}
}

func decodeTask(t *testing.T, resp httpResult) taskAnswer {
	t.Helper()
	var a taskAnswer
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &a), resp.Body)
	require.True(t, a.Success, resp.Body)
	return a
}

func (f *walletFixture) task(id string) store.Task {
	f.t.Helper()
	task, err := f.db.Store.TaskGet(context.Background(), "main", id)
	require.NoError(f.t, err)
	return task
}

// onlyTask waits until main has exactly one task and returns it.
func (f *walletFixture) onlyTask() store.Task {
	f.t.Helper()
	var tasks []store.Task
	require.Eventually(f.t, func() bool {
		var err error
		tasks, err = f.db.Store.TaskList(context.Background(), store.TaskListParams{Wallet: "main", Limit: 10})
		require.NoError(f.t, err)
		return len(tasks) > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.Len(f.t, tasks, 1)
	return tasks[0]
}

func TestWallets_SendTxWithTaskTrueAnswers202AtOnceWithTheWaitingTask(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	resp := f.sendTx("?task=true", txBody("1000"), "Idempotency-Key", "k-1")
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	a := decodeTask(t, resp)
	require.True(t, *a.Created)
	require.Equal(t, "waiting", a.Task.Status)
	require.Equal(t, 0, a.Task.Code)
	require.Equal(t, "/v1/wallets/main/tasks/"+a.Task.ID, resp.Header.Get("Location"))
	require.Empty(t, resp.Header.Get("Idempotent-Replayed"))

	stored := f.task(a.Task.ID)
	require.Equal(t, strings.ToLower(f.main.Address().Hex()), stored.Sender)
	require.Equal(t, walletChain, stored.ChainID)
	require.Equal(t, recipient, stored.Request.To)
	require.Equal(t, "1000", stored.Request.Value.String())
	require.Equal(t, []byte{0xca, 0xfe}, stored.Request.Data)
	require.Equal(t, int32(3), stored.Priority)
	require.Equal(t, "k-1", stored.IdempotencyKey)
	require.Nil(t, stored.Request.GasLimit, "estimated by the worker")
}

// Without task=true the request waits until the task ends: here the
// "worker" is the test, finishing the task through the store.
func TestWallets_SendTxWithoutTaskTrueWaitsUntilTheTaskIsDone(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	answered := f.sendTxAsync("", txBody("7"))
	task := f.onlyTask()
	select {
	case resp := <-answered:
		t.Fatalf("answered %d before the task ended: %s", resp.StatusCode, resp.Body)
	default:
	}
	hash := f.rows.FinishTask(task).TxHash
	var resp httpResult
	select {
	case resp = <-answered:
	case <-time.After(15 * time.Second):
		t.Fatal("no answer after the task was done")
	}
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	a := decodeTask(t, resp)
	require.Equal(t, task.ID, a.Task.ID)
	require.Equal(t, "done", a.Task.Status)
	require.Equal(t, 3, a.Task.Code)
	require.Equal(t, hash, a.Task.TxHash)
	require.True(t, *a.Created)
}

func TestWallets_SendTxWithoutTaskTrueWaitsUntilTheTaskEndsInError(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	answered := f.sendTxAsync("?task=false", txBody("7"))
	task := f.onlyTask()
	_, err := f.db.Store.TaskFail(context.Background(), store.TaskFailParams{Now: t0, ID: task.ID, Reason: "insufficient funds for gas * price + value"})
	require.NoError(t, err)
	resp := <-answered
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	a := decodeTask(t, resp)
	require.Equal(t, "error", a.Task.Status)
	require.Equal(t, 2, a.Task.Code)
	require.Equal(t, "insufficient funds for gas * price + value", a.Task.Error)
}

// GET of a task with ?wait=N is a long-poll: it answers when the task ends,
// or as the task is once N seconds (at most the send-tx wait) have passed;
// a client that goes away cancels nothing; a bad wait is a 400 naming it.
func TestWallets_GetTaskWithWaitAnswersWhenTheTaskEnds(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	a := decodeTask(t, f.sendTx("?task=true", txBody("7")))
	get := func(ctx context.Context, query string) httpResult {
		return do(t, f.request(ctx, http.MethodGet, "/v1/wallets/main/tasks/"+a.Task.ID+query, nil, bearer(f.key)...))
	}
	answered := make(chan httpResult, 1)
	go func() { answered <- get(context.Background(), "?wait=30") }()
	select {
	case resp := <-answered:
		t.Fatalf("answered %d before the task ended: %s", resp.StatusCode, resp.Body)
	case <-time.After(300 * time.Millisecond):
	}
	f.rows.FinishTask(f.task(a.Task.ID))
	select {
	case resp := <-answered:
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		require.Equal(t, "done", decodeTask(t, resp).Task.Status)
	case <-time.After(15 * time.Second):
		t.Fatal("no answer after the task was done")
	}

	// The wait runs out: the task as it is.
	b := decodeTask(t, f.sendTx("?task=true", txBody("8")))
	start := time.Now()
	resp := do(t, f.request(context.Background(), http.MethodGet, "/v1/wallets/main/tasks/"+b.Task.ID+"?wait=1", nil, bearer(f.key)...))
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.Equal(t, "waiting", decodeTask(t, resp).Task.Status)
	require.GreaterOrEqual(t, time.Since(start), time.Second)

	// A client that goes away cancels nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req := f.request(ctx, http.MethodGet, "/v1/wallets/main/tasks/"+b.Task.ID+"?wait=30", nil, bearer(f.key)...)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
	}
	require.Equal(t, store.TaskWaiting, f.task(b.Task.ID).Status)

	// The wait is not cut by the request timeout, which bounds each of its
	// database reads instead.
	short := setupWallets(t, func(c *httpapi.Config) { c.RequestTimeout = 300 * time.Millisecond })
	d := decodeTask(t, short.sendTx("?task=true", txBody("9")))
	start = time.Now()
	resp = do(t, short.request(context.Background(), http.MethodGet, "/v1/wallets/main/tasks/"+d.Task.ID+"?wait=1", nil, bearer(short.key)...))
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.Equal(t, "waiting", decodeTask(t, resp).Task.Status)
	require.GreaterOrEqual(t, time.Since(start), time.Second)

	for _, bad := range []string{"?wait=-1", "?wait=x", "?wait=3601"} {
		resp := get(context.Background(), bad)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
		require.Contains(t, resp.Body, "wait", bad)
	}
}

// The Hathor send-tx queue: "the task is also aborted if the client disconnects".
func TestWallets_AWaitingSendTxWhoseClientDisconnectsCancelsItsWaitingTask(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(f.request(ctx, http.MethodPost, "/v1/wallets/main/send-tx", []byte(txBody("1")), bearer(f.key)...))
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	task := f.onlyTask()
	require.Equal(t, store.TaskWaiting, task.Status)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.Eventually(t, func() bool { return f.task(task.ID).Status == store.TaskError }, 10*time.Second, 10*time.Millisecond)
	got := f.task(task.ID)
	require.True(t, got.Cancelled)
	require.Nil(t, got.StartedAt, "never sent")
}

// An executing task's transaction is signed and may be out: the client of
// the request that stored it leaving does not cancel it. A replay's client
// leaving cancels nothing either: it only watched the task.
func TestWallets_AClientThatDisconnectsDoesNotCancelAnExecutingTaskNorAReplayedOne(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	// post sends a waiting send-tx under key and returns a func that makes
	// its client leave.
	post := func(key string) (leave func()) {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(f.request(ctx, http.MethodPost, "/v1/wallets/main/send-tx", []byte(txBody("1")),
				append(bearer(f.key), "Idempotency-Key", key)...))
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		return func() {
			cancel()
			require.ErrorIs(t, <-errc, context.Canceled)
		}
	}

	leave := post("exec")
	executing := f.onlyTask()
	f.rows.StartTask(executing)
	leave()

	waiting := decodeTask(t, f.sendTx("?task=true", txBody("1"), "Idempotency-Key", "replayed")).Task.ID
	leave = post("replayed")
	// A replay leaves no trace to wait for: a grace for it to reach its
	// wait. Were it to arrive later, the test would pass without checking.
	time.Sleep(200 * time.Millisecond)
	leave()
	// For half a second nothing may cancel either task: the check is that
	// nothing happens. Checked in this goroutine, not with require.Never,
	// whose last check may still run when it returns and the fixture's pool
	// is closed.
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		require.Equal(t, store.TaskExecuting, f.task(executing.ID).Status, "the executing task was cancelled")
		require.Equal(t, store.TaskWaiting, f.task(waiting).Status, "the replayed task was cancelled")
	}
}

// The wait is bounded: past TaskMaxWait the answer is 202 with the task,
// which stays waiting for the client to poll. The request deadline does not
// cut the wait short (send-tx is a long-poll route).
func TestWallets_SendTxPastTheMaxWaitAnswers202AndLeavesTheTaskWaitingDespiteTheRequestDeadline(t *testing.T) {
	t.Parallel()
	f := setupWallets(t, func(c *httpapi.Config) {
		c.RequestTimeout = 100 * time.Millisecond
		c.TaskMaxWait = 700 * time.Millisecond
	})
	resp := f.sendTx("", txBody("1"))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	a := decodeTask(t, resp)
	require.Equal(t, "waiting", a.Task.Status)
	require.Equal(t, store.TaskWaiting, f.task(a.Task.ID).Status, "not cancelled")
}

// walletsBehindProxy serves the API of cfg with the wallet main, on a store
// that reaches its own database through a proxy the test can cut.
func walletsBehindProxy(t *testing.T, cfg httpapi.Config) (*walletFixture, *tcpProxy) {
	t.Helper()
	db := testdb.New(t)
	st, proxy := openBehindProxy(context.Background(), t, db)
	reg, err := keystore.NewRegistry(newTestWallet(t, "main"))
	require.NoError(t, err)
	api := httpapi.New(cfg, httpapi.Deps{Store: st, Wallets: reg, Clock: clock.NewFake(t0), Logger: testLogger(t), Metrics: metrics.New()})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &walletFixture{apiFixture: &apiFixture{t: t, db: db, url: srv.URL}, key: createAPIKey(t, db.Store, "main")}, proxy
}

// A send-tx that waits for its task has stored it: when the database goes
// away during the wait (a failover), the request keeps waiting and answers
// the task, 202 at the end of the wait, instead of a 503 that a client
// without an Idempotency-Key would answer by sending the payment again.
func TestWallets_AWaitingSendTxRidesOutADatabaseOutageAndAnswersItsTask(t *testing.T) {
	t.Parallel()
	cfg := httpapi.DefaultConfig()
	cfg.TaskMaxWait = 3 * time.Second
	cfg.RequestTimeout = 500 * time.Millisecond
	f, proxy := walletsBehindProxy(t, cfg)

	req := f.request(context.Background(), http.MethodPost, "/v1/wallets/main/send-tx", []byte(txBody("1")), bearer(f.key)...)
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			close(answered)
			return
		}
		answered <- resp
	}()
	stored := f.onlyTask()
	// The outage starts once the request waits: the task's shard is
	// scheduled only after the insert's answer came back. Seeing the task
	// committed is not enough: under load the outage could otherwise take
	// the insert's answer, and with it the request's proof that it stored.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, f.db.Store.DB().QueryRow(context.Background(),
			`SELECT count(*) FROM ledgerq.shards WHERE key LIKE 'wallet:%'`).Scan(&n))
		return n > 0
	}, 10*time.Second, 5*time.Millisecond)
	end := proxy.outage()
	time.Sleep(time.Second) // the outage lasts this long: the fault is the point
	end()

	resp, ok := <-answered
	require.True(t, ok, "the waiting send-tx was not answered")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", body)
	a := decodeTask(t, httpResult{StatusCode: resp.StatusCode, Body: string(body)})
	require.Equal(t, stored.ID, a.Task.ID)
	require.Equal(t, "waiting", a.Task.Status)
}

// The connection drops after the server committed a send-tx's task but
// before its answer reached ledgerq. The task is stored: the answer must say
// so, or a client retrying without an Idempotency-Key would store it twice.
// ledgerq reads the task it tried to store back (its id is ledgerq's own).
func TestWallets_ASendTxWhoseStoringAnswerIsLostAnswersItsStoredTask(t *testing.T) {
	t.Parallel()
	f, proxy := walletsBehindProxy(t, httpapi.DefaultConfig())

	// The insert's answer ends with its command tag, which never arrives.
	proxy.cutOnAnswer("INSERT 0 1")
	res := f.sendTx("?task=true", txBody("1"))
	require.Equal(t, http.StatusAccepted, res.StatusCode, res.Body)
	a := decodeTask(t, res)
	stored := f.onlyTask()
	require.Equal(t, stored.ID, a.Task.ID)
	require.Equal(t, "waiting", a.Task.Status)
}

// On shutdown, waiting requests are answered (202) rather than dropped, and
// their tasks are not cancelled.
func TestWallets_StopWaitingAnswersWaitingRequestsWith202AndCancelsNothing(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	answered := f.sendTxAsync("", txBody("1"))
	task := f.onlyTask()
	f.api.StopWaiting()
	f.api.StopWaiting()
	resp := <-answered
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Equal(t, store.TaskWaiting, f.task(task.ID).Status)
	// Later requests do not wait either.
	require.Equal(t, http.StatusAccepted, f.sendTx("", txBody("2")).StatusCode)
}

func TestWallets_IdempotencyReplayWithTheSameBodyAnswersTheSameTask(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	first := f.sendTx("?task=true", txBody("5"), "Idempotency-Key", "pay-42")
	require.Equal(t, http.StatusAccepted, first.StatusCode, first.Body)
	id := decodeTask(t, first).Task.ID

	again := f.sendTx("?task=true", txBody("5"), "Idempotency-Key", "pay-42")
	require.Equal(t, http.StatusAccepted, again.StatusCode, again.Body)
	a := decodeTask(t, again)
	require.Equal(t, id, a.Task.ID)
	require.False(t, *a.Created)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))

	// Once the task has ended a replay answers 200 with it, waiting or not.
	hash := f.rows.FinishTask(f.task(id)).TxHash
	for _, q := range []string{"", "?task=true"} {
		done := f.sendTx(q, txBody("5"), "Idempotency-Key", "pay-42")
		require.Equal(t, http.StatusOK, done.StatusCode, done.Body)
		require.Equal(t, hash, decodeTask(t, done).Task.TxHash)
	}
	// The key is per wallet.
	other := f.call(http.MethodPost, "/v1/wallets/other/send-tx?task=true", []byte(txBody("5")), append(bearer(f.otherKey), "Idempotency-Key", "pay-42")...)
	require.Equal(t, http.StatusAccepted, other.StatusCode, other.Body)
	require.NotEqual(t, id, decodeTask(t, other).Task.ID)
}

func TestWallets_IdempotencyKeyReusedWithADifferentBodyIs422(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	first := f.sendTx("?task=true", txBody("5"), "Idempotency-Key", "pay-42")
	require.Equal(t, http.StatusAccepted, first.StatusCode, first.Body)
	for _, body := range []string{txBody("6"), `{"to":"` + recipient + `","value":"5","data":"0xcafe"}`, `{"to":"` + recipient + `","value":"5","data":"0xcafe","priority":3,"gas_limit":21000}`} {
		resp := f.sendTx("?task=true", body, "Idempotency-Key", "pay-42")
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, resp.Body)
		require.Contains(t, resp.Body, decodeTask(t, first).Task.ID)
	}
	// The same request in other words is the same request.
	same := f.sendTx("?task=true", `{"priority":3,"data":"0xCAFE","value":"0x5","to":"`+strings.ToUpper(recipient[:2])[:1]+recipient[1:]+`"}`, "Idempotency-Key", "pay-42")
	require.Equal(t, http.StatusAccepted, same.StatusCode, same.Body)
}

// 200 clients post one request under one key at once, through the HTTP
// handler: one task is stored, and every answer is that task.
func TestWallets_200ConcurrentPostsWithOneIdempotencyKeyStoreOneTask(t *testing.T) {
	t.Parallel()
	f := setupWallets(t, func(c *httpapi.Config) { c.RequestTimeout = time.Minute })
	const n = 200
	var wg sync.WaitGroup
	start := make(chan struct{})
	answers := make([]httpResult, n)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	for i := range n {
		wg.Go(func() {
			<-start
			req := f.request(context.Background(), http.MethodPost, "/v1/wallets/main/send-tx?task=true", []byte(txBody("9")),
				append(bearer(f.key), "Idempotency-Key", "one-key")...)
			resp, err := client.Do(req)
			if err != nil {
				answers[i] = httpResult{Body: err.Error()}
				return
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			answers[i] = httpResult{StatusCode: resp.StatusCode, Header: resp.Header, Body: b.String()}
		})
	}
	close(start)
	wg.Wait()
	created, ids := 0, map[string]bool{}
	for _, a := range answers {
		require.Equal(t, http.StatusAccepted, a.StatusCode, a.Body)
		got := decodeTask(t, a)
		ids[got.Task.ID] = true
		if *got.Created {
			created++
		}
	}
	require.Len(t, ids, 1, "every answer is the one task")
	require.Equal(t, 1, created, "one request stored it")
	var rows int
	require.NoError(t, f.db.Store.Conns().QueryRow(context.Background(), `SELECT count(*) FROM ledgerq.wallet_tasks`).Scan(&rows))
	require.Equal(t, 1, rows)
}

// walletRoutes are a request to every wallet route, for main.
func (f *walletFixture) walletRoutes(taskID string) map[string]func(headers ...string) httpResult {
	return map[string]func(...string) httpResult{
		"send-tx": func(h ...string) httpResult {
			return f.call(http.MethodPost, "/v1/wallets/main/send-tx?task=true", []byte(txBody("1")), h...)
		},
		"list": func(h ...string) httpResult { return f.call(http.MethodGet, "/v1/wallets/main/tasks", nil, h...) },
		"get": func(h ...string) httpResult {
			return f.call(http.MethodGet, "/v1/wallets/main/tasks/"+taskID, nil, h...)
		},
		"cancel": func(h ...string) httpResult {
			return f.call(http.MethodDelete, "/v1/wallets/main/tasks/"+taskID, nil, h...)
		},
		"cancel sent": func(h ...string) httpResult {
			return f.call(http.MethodPost, "/v1/wallets/main/tasks/"+taskID+"/cancel", nil, h...)
		},
		"speed-up": func(h ...string) httpResult {
			return f.call(http.MethodPost, "/v1/wallets/main/tasks/"+taskID+"/speed-up",
				[]byte(`{"max_fee_per_gas":"3000000000","max_priority_fee_per_gas":"2000000000"}`), h...)
		},
		"seed": func(h ...string) httpResult {
			return f.call(http.MethodGet, "/wallet/tasks/send-tx/"+taskID, nil, append(h, "X-Wallet-ID", "main")...)
		},
		"webhooks create": func(h ...string) httpResult {
			return f.call(http.MethodPost, "/v1/wallets/main/webhooks", []byte(`{"url":"https://hooks.example/a"}`), h...)
		},
		"webhooks list": func(h ...string) httpResult { return f.call(http.MethodGet, "/v1/wallets/main/webhooks", nil, h...) },
		"wallet":        func(h ...string) httpResult { return f.call(http.MethodGet, "/v1/wallets/main", nil, h...) },
		"pause":         func(h ...string) httpResult { return f.call(http.MethodPost, "/v1/wallets/main/pause", nil, h...) },
		"resume":        func(h ...string) httpResult { return f.call(http.MethodPost, "/v1/wallets/main/resume", nil, h...) },
	}
}

func TestWallets_EveryWalletRouteWithoutAValidAPIKeyIs401(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	id := decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID
	revoked := createAPIKey(t, f.db.Store, "main")
	keys, err := f.db.Store.APIKeyList(context.Background(), false)
	require.NoError(t, err)
	for _, k := range keys {
		if k.CreatedAt.Equal(t0) && len(k.Scopes) == 1 && k.Scopes[0] == store.WalletScope("main") {
			_, _, err := f.db.Store.APIKeyRevoke(context.Background(), store.APIKeyRevokeParams{Now: t0, ID: k.ID})
			require.NoError(t, err)
		}
	}
	unknown := "lq_" + strings.Repeat("A", 43)
	for name, do := range f.walletRoutes(id) {
		for why, headers := range map[string][]string{
			"no key":            nil,
			"unknown key":       bearer(unknown),
			"revoked key":       bearer(revoked),
			"basic auth":        {"Authorization", "Basic dXNlcjpwYXNz"},
			"bearer, no key":    {"Authorization", "Bearer "},
			"key, no scheme":    {"Authorization", f.key},
			"two keys":          append(bearer(f.key), "X-API-Key", f.otherKey),
			"two bearers":       append(bearer(f.key), bearer(f.key)...),
			"unknown X-API-Key": {"X-API-Key", unknown},
		} {
			resp := do(headers...)
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s, %s: %s", name, why, resp.Body)
			require.Contains(t, resp.Body, `"success":false`)
			require.True(t, strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Bearer realm="ledgerq"`), "%s, %s", name, why)
			require.NotContains(t, resp.Body, f.key)
		}
		// Accepted: Bearer in any case, X-API-Key, both when they agree.
		for _, headers := range [][]string{
			{"Authorization", "bearer " + f.key}, {"X-API-Key", f.key}, append(bearer(f.key), "X-API-Key", f.key),
		} {
			resp := do(headers...)
			if name == "speed-up" && resp.StatusCode == http.StatusConflict {
				continue // the key is taken; a waiting or cancelled task has no transaction to replace
			}
			require.Less(t, resp.StatusCode, 300, "%s %v: %s", name, headers[0], resp.Body)
		}
	}
	require.Equal(t, store.TaskError, f.task(id).Status, "the accepted DELETEs cancelled it")
}

// A key not scoped to the wallet, an unknown wallet, a missing task and
// another wallet's task all get the same 404: a key learns nothing of what
// it may not see.
func TestWallets_UnscopedOrUnknownWalletMissingOrOthersTaskAreTheSame404(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	mainTask := decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID
	otherTask := decodeTask(t, f.call(http.MethodPost, "/v1/wallets/other/send-tx?task=true", []byte(txBody("1")), bearer(f.otherKey)...)).Task.ID
	missing := "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b"
	var bodies []string
	check := func(what string, resp httpResult) {
		t.Helper()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", what, resp.Body)
		bodies = append(bodies, resp.Body)
	}
	for what, wallet := range map[string]string{"not scoped": "other", "unknown (scoped)": "ghost", "unknown": "nobody"} {
		check(what+" send-tx", f.call(http.MethodPost, "/v1/wallets/"+wallet+"/send-tx?task=true", []byte(txBody("1")), bearer(f.key)...))
		check(what+" list", f.call(http.MethodGet, "/v1/wallets/"+wallet+"/tasks", nil, bearer(f.key)...))
		check(what+" get", f.call(http.MethodGet, "/v1/wallets/"+wallet+"/tasks/"+otherTask, nil, bearer(f.key)...))
		check(what+" cancel", f.call(http.MethodDelete, "/v1/wallets/"+wallet+"/tasks/"+otherTask, nil, bearer(f.key)...))
		check(what+" seed", f.call(http.MethodGet, "/wallet/tasks/send-tx/"+otherTask, nil, append(bearer(f.key), "X-Wallet-ID", wallet)...))
	}
	for what, id := range map[string]string{"missing task": missing, "other wallet's task": otherTask, "not a task id": "123"} {
		check(what+" get", f.call(http.MethodGet, "/v1/wallets/main/tasks/"+id, nil, bearer(f.key)...))
		check(what+" cancel", f.call(http.MethodDelete, "/v1/wallets/main/tasks/"+id, nil, bearer(f.key)...))
		check(what+" seed", f.call(http.MethodGet, "/wallet/tasks/send-tx/"+id, nil, append(bearer(f.key), "X-Wallet-ID", "main")...))
	}
	for _, b := range bodies {
		require.Equal(t, bodies[0], b, "one 404 for all")
	}
	require.Equal(t, store.TaskWaiting, f.task(mainTask).Status)
	other, err := f.db.Store.TaskGet(context.Background(), "other", otherTask)
	require.NoError(t, err)
	require.Equal(t, store.TaskWaiting, other.Status, "no DELETE reached another wallet's task")
}

// The Hathor headless wallet's own status route answers exactly its object
// for each status.
func TestWallets_HathorStatusRouteAnswersHathorsExactBytesForEachStatus(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	newTask := func() store.Task {
		return f.task(decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID)
	}
	seed := func(task store.Task) string {
		t.Helper()
		resp := f.call(http.MethodGet, "/wallet/tasks/send-tx/"+task.ID, nil, append(bearer(f.key), "X-Wallet-ID", "main")...)
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		return resp.Body
	}
	waiting := newTask()
	require.Equal(t, `{"success":true,"code":0,"status":"Waiting"}`, seed(waiting))

	executing := newTask()
	f.rows.StartTask(executing)
	require.Equal(t, `{"success":true,"code":1,"status":"Executing"}`, seed(executing))

	failed := newTask()
	_, err := f.db.Store.TaskFail(context.Background(), store.TaskFailParams{Now: t0, ID: failed.ID, Reason: "nonce too low"})
	require.NoError(t, err)
	require.Equal(t, `{"success":true,"code":2,"status":"Error","message":"nonce too low"}`, seed(failed))

	done := newTask()
	hash := f.rows.FinishTask(done).TxHash
	require.Equal(t, `{"success":true,"code":3,"status":"Done","txId":"`+hash+`"}`, seed(done))

	// The header is required (400, the Hathor route's bad request), after the key.
	resp := f.call(http.MethodGet, "/wallet/tasks/send-tx/"+done.ID, nil, bearer(f.key)...)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, `"success":false`)
	require.Equal(t, http.StatusUnauthorized, f.call(http.MethodGet, "/wallet/tasks/send-tx/"+done.ID, nil, "X-Wallet-ID", "main").StatusCode)
}

// An operator's pause holds the wallet and a resume ends the hold; both,
// and a cancel, are in the audit log under the key that made them.
func TestWallets_PauseAndResumeHoldTheWalletAndAreAudited(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	info := func(resp httpResult) apigen.WalletInfo {
		f.t.Helper()
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		var out apigen.WalletInfo
		require.NoError(t, json.Unmarshal([]byte(resp.Body), &out))
		return out
	}
	paused := info(f.call(http.MethodPost, "/v1/wallets/main/pause", nil, bearer(f.key)...))
	require.NotNil(t, paused.Health)
	require.NotNil(t, paused.Health.HeldAt, "the hold is shown")
	require.Equal(t, "test", *paused.Health.HeldBy)
	h, err := f.db.Store.WalletHealthGet(context.Background(), f.main.ChainID, f.main.Address().Hex())
	require.NoError(t, err)
	require.NotNil(t, h.HeldAt, "the hold is stored, where the wallet's runs read it")
	require.Nil(t, info(f.call(http.MethodGet, "/v1/wallets/other", nil, bearer(f.otherKey)...)).Health, "the other wallet is not held")

	resumed := info(f.call(http.MethodPost, "/v1/wallets/main/resume", nil, bearer(f.key)...))
	require.Nil(t, resumed.Health.HeldAt)

	id := decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID
	require.Equal(t, http.StatusOK, f.call(http.MethodDelete, "/v1/wallets/main/tasks/"+id, nil, bearer(f.key)...).StatusCode)

	audit, err := f.db.Store.AuditList(context.Background(), 0, 10)
	require.NoError(t, err)
	var actions []string
	for _, a := range audit {
		require.Equal(t, "test", a.KeyName)
		require.NotEmpty(t, a.KeyID)
		var detail map[string]any
		require.NoError(t, json.Unmarshal(a.Detail, &detail))
		require.Equal(t, "api", detail["via"])
		actions = append(actions, a.Action+" "+a.Target)
	}
	require.Len(t, actions, 3, "one row per action: %v", actions)
	require.Contains(t, actions[0], id, "newest first: the cancel")
}

// A wallet recovering from a restore says why it signs nothing.
func TestWallets_AWalletRecoveringFromARestoreSaysWhy(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	require.NoError(t, f.db.Store.WalletRecoveryHold(context.Background(), t0, f.main.ChainID, f.main.Address().Hex(), "nonces 3..5 unknown"))
	resp := f.call(http.MethodGet, "/v1/wallets/main", nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	var out apigen.WalletInfo
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &out))
	require.NotNil(t, out.Health)
	require.Equal(t, "nonces 3..5 unknown", *out.Health.RecoveryReason)
	require.True(t, out.Health.RecoverySince.Equal(t0))
}

func TestWallets_DeleteCancelsAWaitingTaskAndAnyOtherIs409(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	del := func(id string) httpResult {
		return f.call(http.MethodDelete, "/v1/wallets/main/tasks/"+id, nil, bearer(f.key)...)
	}
	waiting := decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID
	resp := del(waiting)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	a := decodeTask(t, resp)
	require.Equal(t, "error", a.Task.Status)
	require.True(t, a.Task.Cancelled)
	again := del(waiting)
	require.Equal(t, http.StatusOK, again.StatusCode, "a retried DELETE succeeds: %s", again.Body)

	executing := f.task(decodeTask(t, f.sendTx("?task=true", txBody("2"))).Task.ID)
	f.rows.StartTask(executing)
	resp = del(executing.ID)
	require.Equal(t, http.StatusConflict, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "is executing")
	require.Equal(t, store.TaskExecuting, f.task(executing.ID).Status)

	done := f.task(decodeTask(t, f.sendTx("?task=true", txBody("3"))).Task.ID)
	f.rows.FinishTask(done)
	require.Equal(t, http.StatusConflict, del(done.ID).StatusCode)

	failed := f.task(decodeTask(t, f.sendTx("?task=true", txBody("4"))).Task.ID)
	_, err := f.db.Store.TaskFail(context.Background(), store.TaskFailParams{Now: t0, ID: failed.ID, Reason: "intrinsic gas too low"})
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, del(failed.ID).StatusCode, "an error that is no cancellation")
}

// A waiting task whose transaction a signer outside the process was asked
// to sign is not cancelled: its nonce is pinned to it until the attempt is
// stored (the write-ahead across signers), and the 409 says why.
func TestWallets_DeleteOfATaskWhoseTransactionIsBeingSignedIs409(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	task := f.task(decodeTask(t, f.sendTx("?task=true", txBody("1"))).Task.ID)
	r := task.Request
	require.NoError(t, f.db.Store.SignRequestRecord(context.Background(), store.SignRequestRecordParams{
		Now: t0, ChainID: task.ChainID, Sender: task.Sender,
		Requests: []store.SignRequest{{TaskID: task.ID, Nonce: 0, To: r.To, Value: r.Value, Data: r.Data, GasLimit: 21000}},
	}))
	resp := f.call(http.MethodDelete, "/v1/wallets/main/tasks/"+task.ID, nil, bearer(f.key)...)
	require.Equal(t, http.StatusConflict, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "its transaction is being signed")
	require.Equal(t, store.TaskWaiting, f.task(task.ID).Status)
}

func TestWallets_GetAndListAnswerTheWalletsTasksPagedByIdAndFilteredByStatus(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, decodeTask(t, f.sendTx("?task=true", txBody(fmt.Sprint(i)))).Task.ID)
	}
	cancelledID := ids[1]
	f.call(http.MethodDelete, "/v1/wallets/main/tasks/"+cancelledID, nil, bearer(f.key)...)

	got := f.call(http.MethodGet, "/v1/wallets/main/tasks/"+ids[0], nil, bearer(f.key)...)
	require.Equal(t, http.StatusOK, got.StatusCode, got.Body)
	a := decodeTask(t, got)
	require.Equal(t, ids[0], a.Task.ID)
	require.Equal(t, "0xcafe", a.Task.Data)
	require.Equal(t, strings.ToLower(f.main.Address().Hex()), a.Task.From)
	require.Nil(t, a.Created, "created is for send-tx answers only")

	type page struct {
		Tasks []struct {
			ID, Status string
			Data       *string
		}
		NextAfter *string `json:"next_after"`
	}
	list := func(q string) page {
		t.Helper()
		resp := f.call(http.MethodGet, "/v1/wallets/main/tasks"+q, nil, bearer(f.key)...)
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		var p page
		require.NoError(t, json.Unmarshal([]byte(resp.Body), &p))
		return p
	}
	p1 := list("?limit=3")
	require.NotNil(t, p1.NextAfter)
	p2 := list("?limit=3&after=" + *p1.NextAfter)
	require.Nil(t, p2.NextAfter)
	var all []string
	for _, tk := range append(p1.Tasks, p2.Tasks...) {
		all = append(all, tk.ID)
		require.Nil(t, tk.Data, "lists leave data out")
	}
	// The fake clock stands still, so the UUIDv7 ids share their time and
	// sort by their random part: id order, not posting order.
	slices.Sort(ids)
	require.Equal(t, ids, all)
	cancelled := list("?status=error")
	require.Len(t, cancelled.Tasks, 1)
	require.Equal(t, cancelledID, cancelled.Tasks[0].ID)
	require.Len(t, list("?status=waiting").Tasks, 4)

	for q, msg := range map[string]string{
		"?status=Done":     "query parameter status",
		"?status=3":        "query parameter status",
		"?limit=0":         "query parameter limit",
		"?after=%00":       "query parameter after: holds a NUL",
		"?after=%FF":       "query parameter after: not valid UTF-8",
		"?colour=blue":     "unknown query parameter colour",
		"?limit=1&limit=2": "given more than once",
	} {
		resp := f.call(http.MethodGet, "/v1/wallets/main/tasks"+q, nil, bearer(f.key)...)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", q, resp.Body)
		require.Contains(t, resp.Body, msg, q)
	}
}

// The body is decoded strictly and each field checked; nothing is stored
// for a refused request.
func TestWallets_SendTxRefusesABadRequestFieldByFieldAndStoresNothing(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	to := `"to":"` + recipient + `"`
	for _, tc := range []struct {
		query, body, key string
		status           int
		msg              string
	}{
		{"", `{}`, "", 400, "field to: required"},
		{"", `{"to":"0x123"}`, "", 400, "field to: must be 0x and 40 hex digits"},
		{"", `{"to":"8ba1f109551bd432803012645ac136ddd64dba72"}`, "", 400, "field to"},
		{"", `{"to":"0x8Ba1f109551bD432803012645Ac136ddd64DBA72"}`, "", 400, "EIP-55"},
		{"", `{"to":"0x8ba1f109551bd432803012645ac136ddd64dba7\u0000"}`, "", 400, "field to"},
		{"", `{` + to + `,"value":"-1"}`, "", 400, "field value"},
		{"", `{` + to + `,"value":"1.5"}`, "", 400, "field value"},
		{"", `{` + to + `,"value":"115792089237316195423570985008687907853269984665640564039457584007913129639936"}`, "", 400, "field value"},
		{"", `{` + to + `,"value":"0x1` + strings.Repeat("0", 64) + `"}`, "", 400, "field value"},
		{"", `{` + to + `,"value":"` + strings.Repeat("9", 5000) + `"}`, "", 400, "field value"},
		{"", `{` + to + `,"value":""}`, "", 400, "field value"},
		{"", `{` + to + `,"value":12}`, "", 400, "field value: must be a string"},
		{"", `{` + to + `,"data":"cafe"}`, "", 400, "field data: must be 0x-prefixed"},
		{"", `{` + to + `,"data":"0xcaf"}`, "", 400, "field data"},
		{"", `{` + to + `,"data":"0xzz"}`, "", 400, "field data"},
		{"", `{` + to + `,"data":"0x` + strings.Repeat("00", 128<<10+1) + `"}`, "", 413, "field data: larger than 131072 bytes"},
		{"", `{` + to + `,"gas_limit":0}`, "", 400, "field gas_limit"},
		{"", `{` + to + `,"gas_limit":-5}`, "", 400, "field gas_limit"},
		{"", `{` + to + `,"gas_limit":1.5}`, "", 400, "field gas_limit"},
		{"", `{` + to + `,"gas_limit":1e30}`, "", 400, "field gas_limit"},
		{"", `{` + to + `,"priority":4294967296}`, "", 400, "field priority"},
		{"", `{` + to + `,"colour":"blue"}`, "", 400, `unknown field`},
		{"", `{` + to + `,"Value":"1"}`, "", 400, "case-sensitive"},
		{"", `{` + to + `,` + to + `}`, "", 400, "given more than once"},
		{"", `{` + to + `,"data":"0x` + "\xff" + `"}`, "", 400, "UTF-8"},
		{"", `{` + to + `} {}`, "", 400, "one JSON value"},
		{"", `[{` + to + `}]`, "", 400, "must be an object"},
		{"?task=maybe", `{` + to + `}`, "", 400, "query parameter task"},
		{"?task=true&task=true", `{` + to + `}`, "", 400, "given more than once"},
		{"?task=true", `{` + to + `}`, "é", 400, "header Idempotency-Key"},
		{"?task=true", `{` + to + `}`, strings.Repeat("k", 257), 400, "header Idempotency-Key"},
	} {
		var headers []string
		if tc.key != "" {
			headers = []string{"Idempotency-Key", tc.key}
		}
		resp := f.sendTx(tc.query, tc.body, headers...)
		require.Equal(t, tc.status, resp.StatusCode, "%.100s: %s", tc.body, resp.Body)
		require.Contains(t, resp.Body, tc.msg, "%.100s", tc.body)
	}
	var rows int
	require.NoError(t, f.db.Store.Conns().QueryRow(context.Background(), `SELECT count(*) FROM ledgerq.wallet_tasks`).Scan(&rows))
	require.Zero(t, rows)

	// What is accepted: a checksummed or one-case address, hex or decimal
	// values up to 2^256-1, empty data, a gas limit.
	for _, body := range []string{
		`{"to":"0x8ba1f109551bD432803012645Ac136ddd64DBA72"}`,
		`{"to":"0x8BA1F109551BD432803012645AC136DDD64DBA72","value":"0xff","data":"0x"}`,
		`{` + to + `,"value":"115792089237316195423570985008687907853269984665640564039457584007913129639935","gas_limit":21000,"priority":-2}`,
		`{` + to + `,"value":"0x` + strings.Repeat("f", 64) + `"}`,
		`{` + to + `,"value":"000000000000000000000000000000000000000000000000000000000000000000000000000000000001"}`,
	} {
		resp := f.sendTx("?task=true", body)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s: %s", body, resp.Body)
	}
}

// The batch-only configuration (no wallets) keeps working, and the wallet
// routes answer cleanly: 401 without a key, 404 with one.
func TestWallets_WithoutWalletsConfiguredTheRoutesAnswer401Or404(t *testing.T) {
	t.Parallel()
	f := setup(t)
	key := createAPIKey(t, f.db.Store, "main")
	wf := &walletFixture{apiFixture: f, key: key}
	for name, do := range wf.walletRoutes("0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b") {
		require.Equal(t, http.StatusUnauthorized, do().StatusCode, name)
		resp := do(bearer(key)...)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", name, resp.Body)
	}
	id, payload := signedBatch(t)
	require.Equal(t, http.StatusCreated, f.post("/v1/batches", batchBody(t, id, "svc", payload, "")).StatusCode)
}

// While the database is unreachable every wallet route answers 503, the
// key's check included (never 401 or 500).
func TestWallets_UnreachableDatabaseIs503(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	key := createAPIKey(t, db.Store, "main")
	down, err := store.Open(context.Background(), "postgres://ledgerq@127.0.0.1:1/none?connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(down.Close)
	reg, err := keystore.NewRegistry(newTestWallet(t, "main"))
	require.NoError(t, err)
	api := httpapi.New(httpapi.DefaultConfig(), httpapi.Deps{Store: down, Wallets: reg, Clock: clock.NewFake(t0), Logger: testLogger(t), Metrics: metrics.New()})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	wf := &walletFixture{apiFixture: &apiFixture{t: t, db: db, url: srv.URL}, key: key}
	for name, do := range wf.walletRoutes("0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b") {
		resp := do(bearer(key)...)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s: %s", name, resp.Body)
		require.Contains(t, resp.Body, `"success":false`)
	}
}

// A task's answer is read from one snapshot: its attempts and the chain
// head their confirmations are counted from are of one moment. Here the
// lane keeps recording, in one transaction each time, the attempt mined in
// a new block and the wallet's head at that block: every answer counts 1
// confirmation, never a head newer than the attempt it shows.
func TestWalletAPI_ATaskIsReadFromOneSnapshotWhileTheLaneCommits(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	f.sendTx("?task=true", txBody("1"))
	task := f.onlyTask()
	f.rows.StartTask(task)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	wrote := make(chan error, 1)
	go func() {
		var err error
		for block := int64(1); ctx.Err() == nil && err == nil; block++ {
			err = pgx.BeginFunc(ctx, f.db.Store.Conns(), func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `UPDATE ledgerq.tx_attempts
					SET state = 'mined', sent_at = coalesce(sent_at, now()), mined_block = $2, mined_block_hash = '0x' || lpad(to_hex($2::bigint), 64, '0'), mined_at = now()
					WHERE task_id = $1`, task.ID, block); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `INSERT INTO ledgerq.wallet_health (chain_id, sender, chain_head, created_at, updated_at)
					VALUES ($1, $2, $3, now(), now())
					ON CONFLICT (chain_id, sender) DO UPDATE SET chain_head = excluded.chain_head`, task.ChainID, task.Sender, block)
				return err
			})
		}
		if ctx.Err() != nil {
			err = nil
		}
		wrote <- err
	}()
	counted := 0
	for range 300 {
		var a struct {
			Task struct {
				MinedBlock    *int64 `json:"mined_block"`
				Confirmations *int64 `json:"confirmations"`
			} `json:"task"`
		}
		resp := f.call(http.MethodGet, "/v1/wallets/main/tasks/"+task.ID, nil, bearer(f.key)...)
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		require.NoError(t, json.Unmarshal([]byte(resp.Body), &a), resp.Body)
		if a.Task.Confirmations != nil {
			counted++
			require.Equal(t, int64(1), *a.Task.Confirmations, "block %d: %s", *a.Task.MinedBlock, resp.Body)
		}
	}
	stop()
	require.NoError(t, <-wrote)
	require.Greater(t, counted, 100, "the answers showed the attempt mined")
}
