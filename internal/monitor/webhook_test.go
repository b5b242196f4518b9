package monitor_test

// Delivery rules (the wallet lane's webhooks, issue 11 item 6). Every test has
// its own committed database, a fake clock started at the wall clock (the
// receiver checks signatures with the library's Verify, which also checks the
// timestamp against the wall clock's five-minute tolerance), and a test
// receiver that verifies every request and counts receptions per (endpoint,
// webhook-id).

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/loop"
	"github.com/ledgerq/ledgerq/internal/monitor"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// reception is one request the receiver took.
type reception struct {
	endpoint string
	id       string
	body     monitor.WebhookBody
}

// receiver is the test endpoint server: one path per endpoint.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	keys   map[string]*standardwebhooks.Webhook // path -> verifier
	got    []reception
	counts map[string]int // endpoint + " " + id -> receptions
	// answer picks the status of the n-th reception (from 1) at path;
	// nil answers 204.
	answer func(path string, n int) int
	seen   map[string]int // path -> receptions
	// hang, when set, makes a request wait for it (or its own end).
	hang chan struct{}
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{t: t, keys: map[string]*standardwebhooks.Webhook{}, counts: map[string]int{}, seen: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	key := r.keys[req.URL.Path]
	r.mu.Unlock()
	if key == nil {
		r.t.Errorf("receiver: request to unknown endpoint %s", req.URL.Path)
		http.NotFound(w, req)
		return
	}
	if err := key.Verify(b, req.Header); err != nil {
		r.t.Errorf("receiver: signature of %s at %s does not verify: %v", req.Header.Get("webhook-id"), req.URL.Path, err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var body monitor.WebhookBody
	if err := json.Unmarshal(b, &body); err != nil {
		r.t.Errorf("receiver: body %q: %v", b, err)
	}
	if r.hang != nil {
		select {
		case <-r.hang:
		case <-req.Context().Done():
			return
		}
	}
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	r.seen[req.URL.Path]++
	n := r.seen[req.URL.Path]
	r.counts[req.URL.Path+" "+id]++
	r.got = append(r.got, reception{endpoint: req.URL.Path, id: id, body: body})
	answer := r.answer
	r.mu.Unlock()
	status := http.StatusNoContent
	if answer != nil {
		status = answer(req.URL.Path, n)
	}
	if status >= 300 {
		http.Error(w, "receiver says "+strconv.Itoa(status), status)
		return
	}
	w.WriteHeader(status)
}

func (r *receiver) receptions() []reception {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]reception(nil), r.got...)
}

type hookSetup struct {
	t     *testing.T
	ctx   context.Context
	st    *store.Store
	clock *clock.Fake
	rows  *testfactory.Factory
	recv  *receiver
	cfg   monitor.WebhookConfig
	deps  loop.Deps
}

func newHookSetup(t *testing.T) *hookSetup {
	t.Helper()
	clk := clock.NewFake(time.Now())
	cfg := monitor.WebhookDefaults()
	cfg.BackoffBase, cfg.BackoffMax, cfg.Lease = time.Second, 8*time.Second, time.Minute
	cfg.AllowPrivate = true // the receiver is on loopback
	st := testdb.New(t).Store
	return &hookSetup{
		t: t, ctx: context.Background(), st: st, clock: clk, rows: testfactory.New(t, st, clk), recv: newReceiver(t), cfg: cfg,
		deps: loop.Deps{Clock: clk, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))},
	}
}

// endpoint registers an endpoint of wallet at path of the receiver.
func (s *hookSetup) endpoint(wallet, path string) store.WebhookEndpoint {
	s.t.Helper()
	return s.endpointAt(wallet, strings.TrimPrefix(s.recv.srv.URL, "http://"), path)
}

// endpointAt registers an endpoint of wallet at http://hostPort/path, and
// gives the receiver its secret for path.
func (s *hookSetup) endpointAt(wallet, hostPort, path string) store.WebhookEndpoint {
	s.t.Helper()
	ep := s.rows.CreateWebhookEndpoint(testfactory.WebhookEndpoint{Wallet: wallet, URL: "http://" + hostPort + path})
	key, err := standardwebhooks.NewWebhook(ep.Secret)
	require.NoError(s.t, err)
	s.recv.mu.Lock()
	s.recv.keys[path] = key
	s.recv.mu.Unlock()
	return ep
}

func (s *hookSetup) deliverer(opts ...monitor.WebhookOption) *monitor.WebhookDeliverer {
	s.t.Helper()
	opts = append([]monitor.WebhookOption{monitor.WithWebhookJitter(func(time.Duration) time.Duration { return 0 })}, opts...)
	d, err := monitor.NewWebhookDeliverer(s.st, s.deps, s.cfg, opts...)
	require.NoError(s.t, err)
	return d
}

func (s *hookSetup) runOnce(d *monitor.WebhookDeliverer) int {
	s.t.Helper()
	n, err := d.RunOnce(s.ctx)
	require.NoError(s.t, err)
	return n
}

func hookEvent(wallet string, typ store.WebhookEventType, taskID string) store.WebhookEvent {
	return store.TaskWebhookEvent(typ, store.Task{
		ID: taskID, Wallet: wallet, ChainID: 1337, Sender: "0x00000000000000000000000000000000000000a1", Status: store.TaskExecuting,
	}, "0x"+strings.Repeat("ab", 32), nil)
}

func (s *hookSetup) emit(evs ...store.WebhookEvent) {
	s.t.Helper()
	_, err := s.st.WebhookEmit(s.ctx, s.clock.Now(), evs...)
	require.NoError(s.t, err)
}

func (s *hookSetup) delivery(id string) store.WebhookDeliveryState {
	s.t.Helper()
	d, err := s.st.WebhookDeliveryGet(s.ctx, id)
	require.NoError(s.t, err)
	return d
}

func TestWebhookDeliverer_EachEndpointOfTheWalletGetsTheEventOnce(t *testing.T) {
	t.Parallel()
	s := newHookSetup(t)
	s.endpoint("alpha", "/a")
	s.endpoint("alpha", "/b")
	s.endpoint("beta", "/other")
	s.emit(hookEvent("alpha", store.WebhookSubmitted, "task-1"))
	d := s.deliverer()

	require.Equal(t, 2, s.runOnce(d))
	s.clock.Advance(2 * s.cfg.Lease)
	require.Equal(t, 0, s.runOnce(d), "delivered: nothing left to claim")

	got := s.recv.receptions()
	require.Len(t, got, 2)
	require.ElementsMatch(t, []string{"/a", "/b"}, []string{got[0].endpoint, got[1].endpoint})
	require.NotEqual(t, got[0].id, got[1].id, "one delivery (and webhook-id) per endpoint")
	for _, r := range got {
		require.Equal(t, "task.submitted", r.body.Type)
		var data store.WebhookTaskData
		require.NoError(t, json.Unmarshal(r.body.Data, &data))
		require.Equal(t, "task-1", data.TaskID)
		require.Equal(t, "alpha", data.Wallet)
		dv := s.delivery(r.id)
		require.NotNil(t, dv.DeliveredAt)
		require.Equal(t, 204, dv.LastStatus)
	}
}

func TestWebhookDeliverer_FailureThenSuccessRedeliversWithTheSameWebhookID(t *testing.T) {
	t.Parallel()
	s := newHookSetup(t)
	s.endpoint("alpha", "/a")
	s.recv.answer = func(_ string, n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	s.emit(hookEvent("alpha", store.WebhookConfirmed, "task-1"))
	d := s.deliverer()

	require.Equal(t, 1, s.runOnce(d))
	first := s.recv.receptions()[0]
	dv := s.delivery(first.id)
	require.Nil(t, dv.DeliveredAt)
	require.Equal(t, 500, dv.LastStatus)
	require.Contains(t, dv.LastError, "HTTP 500")
	require.Equal(t, s.clock.Now().Add(s.cfg.BackoffBase), dv.NextAttemptAt)

	s.clock.Advance(s.cfg.BackoffBase - time.Microsecond)
	require.Equal(t, 0, s.runOnce(d), "not due before its backoff")
	s.clock.Advance(time.Microsecond)
	require.Equal(t, 1, s.runOnce(d))

	got := s.recv.receptions()
	require.Len(t, got, 2)
	require.Equal(t, first.id, got[1].id, "a redelivery carries the same webhook-id")
	require.Equal(t, first.body, got[1].body, "and the same body")
	dv = s.delivery(first.id)
	require.NotNil(t, dv.DeliveredAt)
	require.Equal(t, 2, dv.Attempts)
}

func TestWebhookDeliverer_BackoffDoublesFromTheBaseAndCapsAtTheMax(t *testing.T) {
	t.Parallel()
	s := newHookSetup(t)
	s.endpoint("alpha", "/a")
	s.recv.answer = func(string, int) int { return http.StatusServiceUnavailable }
	s.emit(hookEvent("alpha", store.WebhookFailed, "task-1"))
	d := s.deliverer()

	var waits []time.Duration
	for range 6 {
		require.Equal(t, 1, s.runOnce(d))
		dv := s.delivery(s.recv.receptions()[0].id)
		wait := dv.NextAttemptAt.Sub(s.clock.Now())
		waits = append(waits, wait)
		s.clock.Advance(wait)
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}, waits)
}

func TestWebhookBackoff_JitterTakesAtMostAQuarterOff(t *testing.T) {
	t.Parallel()
	most := func(n time.Duration) time.Duration { return n - 1 }
	none := func(time.Duration) time.Duration { return 0 }
	for attempt, want := range []time.Duration{0, 4, 8, 16, 32, 40, 40} {
		if attempt == 0 {
			continue
		}
		require.Equal(t, want*time.Second, monitor.WebhookBackoff(4*time.Second, 40*time.Second, attempt, none), "attempt %d", attempt)
		require.Equal(t, want*time.Second-(want*time.Second/4-1), monitor.WebhookBackoff(4*time.Second, 40*time.Second, attempt, most), "attempt %d", attempt)
	}
	require.Equal(t, time.Hour, monitor.WebhookBackoff(time.Second, time.Hour, 1000, none), "a huge attempt number stays at the cap")
}

func TestWebhookDeliverer_GivesUpAfterTheAttemptLimitAndKeepsTheLastError(t *testing.T) {
	t.Parallel()
	s := newHookSetup(t)
	s.cfg.MaxAttempts = 3
	s.endpoint("alpha", "/a")
	s.recv.answer = func(string, int) int { return http.StatusBadGateway }
	s.emit(hookEvent("alpha", store.WebhookReplaced, "task-1"))
	d := s.deliverer()

	for range 3 {
		require.Equal(t, 1, s.runOnce(d))
		s.clock.Advance(s.cfg.BackoffMax)
	}
	s.clock.Advance(time.Hour)
	require.Equal(t, 0, s.runOnce(d), "given up: never claimed again")
	got := s.recv.receptions()
	require.Len(t, got, 3)
	dv := s.delivery(got[0].id)
	require.NotNil(t, dv.GaveUpAt)
	require.Nil(t, dv.DeliveredAt)
	require.Equal(t, 3, dv.Attempts)
	require.Equal(t, 502, dv.LastStatus)
	require.Contains(t, dv.LastError, "HTTP 502")
}

func TestWebhookDeliverer_ConcurrentDeliverersNeverSendOneDeliveryTwice(t *testing.T) {
	t.Parallel()
	s := newHookSetup(t)
	s.cfg.BatchSize, s.cfg.Concurrency = 7, 3
	s.endpoint("alpha", "/a")
	s.endpoint("alpha", "/b")
	const events = 60
	evs := make([]store.WebhookEvent, events)
	for i := range evs {
		evs[i] = hookEvent("alpha", store.WebhookSubmitted, "task-"+strconv.Itoa(i))
	}
	s.emit(evs...)

	const deliverers = 4
	var wg sync.WaitGroup
	for range deliverers {
		d := s.deliverer()
		wg.Go(func() {
			for {
				n, err := d.RunOnce(s.ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()

	s.recv.mu.Lock()
	defer s.recv.mu.Unlock()
	require.Len(t, s.recv.counts, 2*events, "every (event, endpoint) was received")
	for k, n := range s.recv.counts {
		require.Equal(t, 1, n, "%s received %d times", k, n)
	}
}

func TestWebhookEmit_EventOfARolledBackTransactionIsNeverDelivered(t *testing.T) {
	t.Parallel()
	s := newHookSetup(t)
	s.endpoint("alpha", "/a")
	tx, err := s.st.DB().Begin(s.ctx)
	require.NoError(t, err)
	n, err := store.NewTx(tx).WebhookEmit(s.ctx, s.clock.Now(), hookEvent("alpha", store.WebhookConfirmed, "rolled-back"))
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the event was written inside the transaction")
	require.NoError(t, tx.Rollback(s.ctx))
	s.emit(hookEvent("alpha", store.WebhookConfirmed, "committed"))

	d := s.deliverer()
	require.Equal(t, 1, s.runOnce(d))
	s.clock.Advance(24 * time.Hour)
	require.Equal(t, 0, s.runOnce(d))
	got := s.recv.receptions()
	require.Len(t, got, 1)
	var data store.WebhookTaskData
	require.NoError(t, json.Unmarshal(got[0].body.Data, &data))
	require.Equal(t, "committed", data.TaskID)
}

func TestWebhookDeliverer_ClaimedButNeverAnsweredIsRedeliveredAfterTheLeaseWithTheSameID(t *testing.T) {
	t.Parallel()
	s := newHookSetup(t)
	s.endpoint("alpha", "/a")
	s.emit(hookEvent("alpha", store.WebhookSubmitted, "task-1"))

	// A deliverer claims the delivery and dies before it sends or records
	// anything.
	now := s.clock.Now()
	crashed, err := s.st.WebhookDeliveryClaim(s.ctx, store.WebhookDeliveryClaimParams{Now: now, LeaseUntil: now.Add(s.cfg.Lease), Max: 10})
	require.NoError(t, err)
	require.Len(t, crashed, 1)

	d := s.deliverer()
	require.Equal(t, 0, s.runOnce(d), "leased: not sent by another deliverer meanwhile")
	s.clock.Advance(s.cfg.Lease - time.Microsecond)
	require.Equal(t, 0, s.runOnce(d), "leased until the lease ends")
	s.clock.Advance(time.Microsecond)
	require.Equal(t, 1, s.runOnce(d))

	got := s.recv.receptions()
	require.Len(t, got, 1)
	require.Equal(t, crashed[0].ID, got[0].id, "redelivered with the same webhook-id")
	dv := s.delivery(got[0].id)
	require.NotNil(t, dv.DeliveredAt)
	require.Equal(t, 2, dv.Attempts, "the crashed attempt counts")
}

func TestWebhookDeliverer_TimedOutRequestIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	s := newHookSetup(t)
	s.cfg.RequestTimeout = 50 * time.Millisecond
	s.recv.hang = make(chan struct{}) // never answers
	s.endpoint("alpha", "/a")
	s.emit(hookEvent("alpha", store.WebhookSubmitted, "task-1"))
	d := s.deliverer()
	require.Equal(t, 1, s.runOnce(d))
	got, err := s.st.WebhookDeliveryClaim(s.ctx, store.WebhookDeliveryClaimParams{Now: s.clock.Now().Add(time.Hour), LeaseUntil: s.clock.Now().Add(2 * time.Hour), Max: 1})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 2, got[0].Attempt)
	dv := s.delivery(got[0].ID)
	require.Equal(t, 0, dv.LastStatus, "no answer")
	require.Contains(t, dv.LastError, "deadline exceeded")
}

func TestWebhookDeliverer_RunningLoopDeliversAndStops(t *testing.T) {
	t.Parallel()
	s := newHookSetup(t)
	s.cfg.Interval = 10 * time.Millisecond
	s.endpoint("alpha", "/a")
	done := make(chan struct{})
	var once sync.Once
	s.recv.answer = func(string, int) int { once.Do(func() { close(done) }); return http.StatusOK }
	s.emit(hookEvent("alpha", store.WebhookConfirmed, "task-1"))
	d := s.deliverer()
	require.NoError(t, d.Start(s.ctx))
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the loop delivered nothing")
	}
	d.Stop()
	d.Stop()
}

func TestWebhookConfig_LeaseMustOutlastTheRequestAndTheRecord(t *testing.T) {
	t.Parallel()
	cfg := monitor.WebhookDefaults()
	require.NoError(t, cfg.Validate())
	cfg.Lease = cfg.RequestTimeout + cfg.DBTimeout
	require.Error(t, cfg.Validate())
}
