package integration

// Wallet lane II end to end (issue 11's acceptance): a real geth that mines
// only tips of 5 gwei or more (--miner.gasprice 5000000000), tasks posted
// with a 1 gwei tip, and two webhook receivers that are not ledgerq's code
// beyond the Standard Webhooks library: every task ends done after one or
// more gas bumps, each receiver verifies every signature and sees, per task,
// a submitted event per hash sent and exactly one confirmed, each delivery
// once.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// hookReceiver is one webhook endpoint: it verifies each delivery's
// signature and records it.
type hookReceiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	verify *standardwebhooks.Webhook
	ids    map[string]int              // webhook-id → deliveries
	events map[string]map[string][]int // task → event type → arrival order
	n      int
	bad    []string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{t: t, ids: map[string]int{}, events: map[string]map[string][]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.verify == nil {
		w.WriteHeader(http.StatusServiceUnavailable) // not registered yet: redelivered later
		return
	}
	if err := r.verify.Verify(body, req.Header); err != nil {
		r.bad = append(r.bad, err.Error())
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var ev struct {
		Type string `json:"type"`
		Data struct {
			TaskID string `json:"taskId"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.Data.TaskID == "" {
		r.bad = append(r.bad, fmt.Sprintf("undecodable event %s: %v", body, err))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.ids[req.Header.Get("webhook-id")]++
	if r.events[ev.Data.TaskID] == nil {
		r.events[ev.Data.TaskID] = map[string][]int{}
	}
	r.n++
	r.events[ev.Data.TaskID][ev.Type] = append(r.events[ev.Data.TaskID][ev.Type], r.n)
	w.WriteHeader(http.StatusNoContent)
}

func (r *hookReceiver) confirmed(task string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events[task]["task.confirmed"])
}

// register creates an endpoint for wallet w pointing at r.
func (r *hookReceiver) register(t *testing.T, api, token string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, api+"/v1/wallets/w/webhooks", strings.NewReader(`{"url":"`+r.srv.URL+`"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var out struct {
		Secret string `json:"secret"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	v, err := standardwebhooks.NewWebhook(out.Secret)
	require.NoError(t, err)
	r.mu.Lock()
	r.verify = v
	r.mu.Unlock()
}

func TestE2E_WalletLaneOnAStallingGethBumpsLowTipTasksUntilMinedAndWebhooksSeeEachEventOnce(t *testing.T) {
	e := newWalletE2E(t, testgeth.Stalling())
	e.args = append(e.args, "--wallet-stall-timeout", "2s", "--wallet-webhook-backoff", "200ms", "--wallet-webhook-backoff-max", "1s", "--wallet-webhook-interval", "100ms",
		"--wallet-webhook-allow-private") // the receivers are httptest servers on loopback
	_, api := e.start("")
	receivers := []*hookReceiver{newHookReceiver(t), newHookReceiver(t)}
	for _, r := range receivers {
		r.register(t, api, e.token)
	}

	const tasks = 3
	for i := range tasks {
		body := fmt.Sprintf(`{"to":%q,"value":"%d","max_priority_fee_per_gas":"1000000000"}`, e.recipient.Hex(), i+1)
		id, err := e.send(api, fmt.Sprintf("stall-%d", i), body)
		require.NoError(t, err)
		e.taskIDs = append(e.taskIDs, id)
	}
	done := e.awaitDone(api, 3*time.Minute)
	for id, task := range done {
		require.Positive(t, task.Bumps, "task %s was mined at the 1 gwei tip it was posted with: the node does not stall", id)
		t.Logf("task %s done after %d bump(s): %s", id, task.Bumps, task.TxHash)
	}
	e.checkChain(done)

	// Every receiver: each delivery once, valid signatures, per task at
	// least one submitted (one per hash sent) before exactly one confirmed.
	for i, r := range receivers {
		eventually(t, time.Minute, fmt.Sprintf("receiver %d got every confirmed event", i), func() bool {
			for _, id := range e.taskIDs {
				if r.confirmed(id) < 1 {
					return false
				}
			}
			return true
		})
		time.Sleep(500 * time.Millisecond) // a duplicate, if any, would arrive now
		r.mu.Lock()
		require.Empty(t, r.bad, "receiver %d: every delivery verifies", i)
		for id, n := range r.ids {
			require.Equal(t, 1, n, "receiver %d got webhook %s %d times", i, id, n)
		}
		for _, id := range e.taskIDs {
			ev := r.events[id]
			require.Len(t, ev["task.confirmed"], 1, "receiver %d: task %s confirmed once", i, id)
			require.GreaterOrEqual(t, len(ev["task.submitted"]), 1+done[id].Bumps, "receiver %d: task %s submitted once per hash sent", i, id)
			require.Less(t, ev["task.submitted"][0], ev["task.confirmed"][0], "receiver %d: task %s submitted before confirmed", i, id)
		}
		r.mu.Unlock()
	}
}
