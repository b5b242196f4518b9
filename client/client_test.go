package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/client"
)

const beef = "0x000000000000000000000000000000000000bEEF"

func transfer(value string) client.SendTxRequest {
	return client.SendTxRequest{To: beef, Value: &value}
}

// sent is one request a proxy passed on (or refused).
type sent struct {
	Path, Query, Key string
}

// proxy stands between the client and ledgerq, recording each request; the
// first refuse requests are answered 503 with Retry-After: 0 instead.
type proxy struct {
	URL  string
	mu   sync.Mutex
	seen []sent
}

func newProxy(t *testing.T, target string, refuse int) *proxy {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &proxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, sent{Path: r.URL.Path, Query: r.URL.RawQuery, Key: r.Header.Get("Idempotency-Key")})
		n := len(p.seen)
		p.mu.Unlock()
		if n <= refuse {
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"success":false,"message":"database unavailable"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *proxy) requests() []sent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sent(nil), p.seen...)
}

func newClient(t *testing.T, url, key string) *client.Client {
	t.Helper()
	c, err := client.New(url, key)
	require.NoError(t, err)
	return c
}

// The client package is for applications: it may not import ledgerq's
// internal packages (Go would refuse them to a module outside ledgerq).
func TestClient_ImportsNoInternalPackage(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/ledgerq/ledgerq/client").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/ledgerq/ledgerq/client")
	for _, d := range deps {
		require.False(t, strings.HasPrefix(d, "github.com/ledgerq/ledgerq/internal/"), "client imports %s", d)
	}
}

// Without a key of the caller's, each SendTx sends a fresh one: two sends are
// two tasks, each stored under the key its result gives.
func TestClient_SendTxWithoutAKeySendsAFreshOneEachTime(t *testing.T) {
	t.Parallel()
	lq := startLedgerq(t, 0)
	p := newProxy(t, lq.URL, 0)
	c := newClient(t, p.URL, lq.Key)
	a, err := c.SendTx(t.Context(), "hot", transfer("1"))
	require.NoError(t, err)
	b, err := c.SendTx(t.Context(), "hot", transfer("1"))
	require.NoError(t, err)
	require.NotEqual(t, a.Task.ID, b.Task.ID)
	require.True(t, a.Created)
	require.True(t, b.Created)
	reqs := p.requests()
	require.Len(t, reqs, 2)
	require.Equal(t, a.IdempotencyKey, reqs[0].Key)
	require.Equal(t, b.IdempotencyKey, reqs[1].Key)
	require.NotEqual(t, reqs[0].Key, reqs[1].Key)
	require.Equal(t, a.IdempotencyKey, *a.Task.IdempotencyKey, "the task is stored under the key")
	require.Equal(t, "task=true", reqs[0].Query, "without WithWait the send does not wait")
}

// WithRetries sends again after a 503, with the same key: the retry stores
// the task once.
func TestClient_SendTxRetriesReuseTheKey(t *testing.T) {
	t.Parallel()
	lq := startLedgerq(t, 0)
	p := newProxy(t, lq.URL, 3)
	c := newClient(t, p.URL, lq.Key)

	_, err := c.SendTx(t.Context(), "hot", transfer("1"), client.WithRetries(1))
	require.ErrorIs(t, err, client.ErrUnavailable, "two 503s: one more than one retry allows")

	res, err := c.SendTx(t.Context(), "hot", transfer("2"), client.WithRetries(1))
	require.NoError(t, err)
	require.True(t, res.Created)
	reqs := p.requests()
	require.Len(t, reqs, 4)
	require.Equal(t, reqs[0].Key, reqs[1].Key, "the first send's retry")
	require.Equal(t, reqs[2].Key, reqs[3].Key, "the second send's retry")
	require.Equal(t, res.IdempotencyKey, reqs[3].Key)
	require.NotEqual(t, reqs[0].Key, reqs[2].Key)
}

// WithWait waits on the server's long-poll: one request, answered when the
// task has ended.
func TestClient_SendTxWithWaitIsOneLongPoll(t *testing.T) {
	t.Parallel()
	lq := startLedgerq(t, 30*time.Second)
	p := newProxy(t, lq.URL, 0)
	c := newClient(t, p.URL, lq.Key)
	res, err := c.SendTx(t.Context(), "hot", transfer("3"), client.WithWait())
	require.NoError(t, err)
	require.True(t, res.Ended())
	require.Equal(t, client.WalletTaskStatusDone, res.Task.Status)
	require.True(t, lq.mined(*res.Task.TxHash))
	require.Len(t, p.requests(), 1)
	require.Empty(t, p.requests()[0].Query, "a waiting send-tx")
}

// Past the server's wait (here it does not wait at all) WithWait sends the
// request again under the same key, a replay that stores nothing, until the
// task has ended; the result says the send created the task.
func TestClient_SendTxWithWaitSendsAgainWithTheSameKeyPastTheServersWait(t *testing.T) {
	t.Parallel()
	lq := startLedgerq(t, time.Millisecond)
	p := newProxy(t, lq.URL, 0)
	c := newClient(t, p.URL, lq.Key)
	res, err := c.SendTx(t.Context(), "hot", transfer("4"), client.WithWait())
	require.NoError(t, err)
	require.Equal(t, client.WalletTaskStatusDone, res.Task.Status)
	require.True(t, res.Created)
	require.False(t, res.Replayed)
	reqs := p.requests()
	require.Greater(t, len(reqs), 1)
	for _, r := range reqs {
		require.Equal(t, res.IdempotencyKey, r.Key)
	}
	page, err := c.API().ListWalletTasksWithResponse(t.Context(), "hot", nil)
	require.NoError(t, err)
	require.NotNil(t, page.JSON200, "%s", page.Body)
	require.Len(t, page.JSON200.Tasks, 1, "the resends stored nothing")
}

// WaitTask returns ctx's error when ctx ends before the task does.
func TestClient_WaitTaskEndsWithItsContext(t *testing.T) {
	t.Parallel()
	lq := startLedgerq(t, 0)
	c := newClient(t, lq.URL, lq.Key)
	admin := newClient(t, lq.URL, lq.Admin)
	paused, err := admin.API().PauseWalletWithResponse(t.Context(), "hot")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, paused.StatusCode(), "%s", paused.Body)
	res, err := c.SendTx(t.Context(), "hot", transfer("5"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	task, err := c.WaitTask(ctx, "hot", res.Task.ID)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, client.WalletTaskStatusWaiting, task.Status, "the task as last read")
}

// WaitTask follows a task with the route's long-poll: one read held by the
// server until the task ends, not a read every few hundred milliseconds.
func TestClient_WaitTaskIsALongPoll(t *testing.T) {
	t.Parallel()
	lq := startLedgerq(t, 30*time.Second)
	p := newProxy(t, lq.URL, 0)
	c := newClient(t, p.URL, lq.Key)
	admin := newClient(t, lq.URL, lq.Admin)
	paused, err := admin.API().PauseWalletWithResponse(t.Context(), "hot")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, paused.StatusCode(), "%s", paused.Body)
	res, err := c.SendTx(t.Context(), "hot", transfer("6"))
	require.NoError(t, err)
	sent := len(p.requests())
	go func() {
		time.Sleep(2 * time.Second)
		_, _ = admin.API().ResumeWalletWithResponse(context.Background(), "hot")
	}()
	task, err := c.WaitTask(t.Context(), "hot", res.Task.ID)
	require.NoError(t, err)
	require.Equal(t, client.WalletTaskStatusDone, task.Status)
	require.True(t, lq.mined(*task.TxHash))
	reads := p.requests()[sent:]
	require.Len(t, reads, 1, "one long-poll over the task's two seconds paused")
	require.Contains(t, reads[0].Query, "wait=")
}

// Bad input is a 400 *APIError that names the field.
func TestClient_BadInputIsAnAPIErrorNamingTheField(t *testing.T) {
	t.Parallel()
	lq := startLedgerq(t, 0)
	c := newClient(t, lq.URL, lq.Key)
	_, err := c.SendTx(t.Context(), "hot", client.SendTxRequest{To: "0x12"})
	require.ErrorIs(t, err, client.ErrBadRequest)
	require.NotErrorIs(t, err, client.ErrForbidden)
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	require.Equal(t, "to", apiErr.Field())
	require.Contains(t, apiErr.Message, "0x and 40 hex digits")

	_, err = c.SendTx(t.Context(), "hot", transfer("1"), client.WithIdempotencyKey("clé"))
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	require.Empty(t, apiErr.Field(), "a header is not a field: %s", apiErr.Message)
	require.Contains(t, apiErr.Message, "header Idempotency-Key")
}

// A policy refusal is a 403 *APIError that keeps the rule and the amounts.
func TestClient_PolicyRefusalKeepsItsRule(t *testing.T) {
	t.Parallel()
	lq := startLedgerq(t, 0)
	admin := newClient(t, lq.URL, lq.Admin)
	limit := "100"
	put, err := admin.API().PutWalletPolicyWithResponse(t.Context(), "hot", client.WalletPolicy{MaxValuePerTx: &limit})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, put.StatusCode(), "%s", put.Body)

	c := newClient(t, lq.URL, lq.Key)
	_, err = c.SendTx(t.Context(), "hot", transfer("101"))
	require.ErrorIs(t, err, client.ErrPolicyRefused)
	require.ErrorIs(t, err, client.ErrForbidden)
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusForbidden, apiErr.StatusCode)
	require.Equal(t, "max_value", apiErr.Rule)
	require.Equal(t, "100", apiErr.Limit)
	require.Equal(t, "101", apiErr.Requested)

	_, err = c.SendTx(t.Context(), "hot", transfer("100"))
	require.NoError(t, err, "at the cap is allowed")
}

// The same key with another body is ErrIdempotencyConflict (422), whose
// message names the stored task.
func TestClient_KeyReusedWithAnotherBodyIsAnIdempotencyConflict(t *testing.T) {
	t.Parallel()
	lq := startLedgerq(t, 0)
	c := newClient(t, lq.URL, lq.Key)
	key := client.NewIdempotencyKey()
	first, err := c.SendTx(t.Context(), "hot", transfer("1"), client.WithIdempotencyKey(key))
	require.NoError(t, err)
	_, err = c.SendTx(t.Context(), "hot", transfer("2"), client.WithIdempotencyKey(key))
	require.ErrorIs(t, err, client.ErrIdempotencyConflict)
	require.NotErrorIs(t, err, client.ErrConflict)
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusUnprocessableEntity, apiErr.StatusCode)
	require.Contains(t, apiErr.Message, first.Task.ID)
	require.Contains(t, err.Error(), key, "the error says which key")
}

// A wallet the key may not see is ErrNotFound; no key is ErrUnauthorized.
func TestClient_StatusesMatchTheirSentinels(t *testing.T) {
	t.Parallel()
	lq := startLedgerq(t, 0)
	_, err := newClient(t, lq.URL, lq.Key).SendTx(t.Context(), "cold", transfer("1"))
	require.ErrorIs(t, err, client.ErrNotFound)
	_, err = newClient(t, lq.URL, "").GetTask(t.Context(), "hot", "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b")
	require.ErrorIs(t, err, client.ErrUnauthorized)
	var apiErr *client.APIError
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
}
