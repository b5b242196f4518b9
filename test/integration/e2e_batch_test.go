package integration

// End-to-end tests of the batch lane (Grid's one-round serial rule): real ledgerq
// processes, a simulated Sawtooth ledger in its own process with its faults
// on, and only HTTP between the test and them. The ledger's event log is the
// witness: it records every batch it took, in order, so the lane's two
// promises — a service's batches reach the ledger in created_at order (ties by
// id), and never two of them at once — are checked on what the ledger saw, not
// on what ledgerq says about itself.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/sim"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
	"github.com/ledgerq/ledgerq/internal/testproc"
)

// simInvalidReason is the reason the simulated ledger gives for a batch it
// finds invalid (sim.InvalidReason; written out, as the test speaks HTTP only).
const simInvalidReason = "simulated invalid transaction"

// simEvent is one entry of the simulated ledger's GET /debug/log.
type simEvent struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	BatchID string    `json:"batch_id"`
	Reason  string    `json:"reason"`
}

// simLedger is a running `ledgerq simledger`.
type simLedger struct {
	url string
}

// startSimLedger starts `ledgerq simledger` with the given fault flags and
// waits until it answers.
func startSimLedger(t *testing.T, faults ...string) simLedger {
	t.Helper()
	addr := testproc.FreeAddr(t)
	args := append([]string{"simledger", "--addr", addr, "--log-level", "warn"}, faults...)
	p := testproc.Start(t, t.TempDir(), nil, args...)
	u := "http://" + addr
	testproc.WaitHTTP(t, p, u+"/debug/stats", http.StatusOK, time.Minute)
	return simLedger{url: u}
}

func (s simLedger) stats(t *testing.T) sim.Stats {
	t.Helper()
	resp := getJSON(t, s.url+"/debug/stats")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	var st sim.Stats
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &st))
	return st
}

// events reads the whole event log, a page at a time with ?since=, and checks
// that sequence numbers are consecutive from 1 (no event was trimmed).
func (s simLedger) events(t *testing.T) []simEvent {
	t.Helper()
	var all []simEvent
	var since uint64
	for {
		resp := getJSON(t, s.url+"/debug/log?since="+strconv.FormatUint(since, 10))
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		var page []simEvent
		require.NoError(t, json.Unmarshal([]byte(resp.Body), &page))
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			require.Equal(t, since+1, e.Seq, "the ledger's event log has a gap or is out of order")
			since = e.Seq
		}
		all = append(all, page...)
	}
	return all
}

// batchWorkload is the batches a test posts and the order the lane owes them.
type batchWorkload struct {
	// chunks are the POST /v1/batches bodies, in posting order. A service's
	// batches are posted in created_at order, so the lane never legitimately
	// sends a later batch because an earlier one had not arrived yet.
	chunks [][]batchJSON
	// service maps a batch id to its service.
	service map[string]string
	// order is, per service, its batch ids in created_at order, ties by id:
	// the order in which the ledger must first accept them.
	order map[string][]string
	// ties counts the pairs of batches that share a created_at.
	ties int
}

func (w batchWorkload) size() int { return len(w.service) }

// newBatchWorkload signs perService batches for each of services services.
// Each service's created_at strictly increases, except that in the first
// tieServices services the batches at index 4 and 5 share one, so the id
// tie-break decides their order. Each chunk holds two indices of every
// service; a tie pair is posted in one chunk, the higher id first, so that
// neither arrival order nor array order can stand in for the tie-break.
func newBatchWorkload(t *testing.T, prefix string, services, perService, tieServices int) batchWorkload {
	t.Helper()
	require.GreaterOrEqual(t, perService, 6, "the tie pair is at indices 4 and 5")
	w := batchWorkload{service: map[string]string{}, order: map[string][]string{}}
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	byService := make([][]batchJSON, services)
	for s := range services {
		svc := fmt.Sprintf("%s-svc-%02d", prefix, s)
		for i := range perService {
			created := base.Add(time.Duration(i)*time.Second + time.Duration(s)*time.Millisecond)
			if s < tieServices && i == 5 {
				created = *byService[s][4].CreatedAt
			}
			id, payload := testfactory.SignedBatch(t)
			byService[s] = append(byService[s], batchJSON{
				ID: id, ServiceID: svc, Payload: base64.StdEncoding.EncodeToString(payload), CreatedAt: &created,
			})
			w.service[id] = svc
		}
		if s < tieServices {
			w.ties++
			if a, b := byService[s][4], byService[s][5]; a.ID < b.ID {
				byService[s][4], byService[s][5] = b, a // the higher id first in the array
			}
		}
		sorted := append([]batchJSON(nil), byService[s]...)
		sort.Slice(sorted, func(i, j int) bool {
			if !sorted[i].CreatedAt.Equal(*sorted[j].CreatedAt) {
				return sorted[i].CreatedAt.Before(*sorted[j].CreatedAt)
			}
			return sorted[i].ID < sorted[j].ID
		})
		for _, b := range sorted {
			w.order[svc] = append(w.order[svc], b.ID)
		}
	}
	for i := 0; i < perService; i += 2 {
		var chunk []batchJSON
		for s := range services {
			chunk = append(chunk, byService[s][i:min(i+2, perService)]...)
		}
		w.chunks = append(w.chunks, chunk)
	}
	return w
}

// post posts the workload's chunks in order, spread round-robin over apis.
func (w batchWorkload) post(t *testing.T, apis []string) {
	t.Helper()
	for i, chunk := range w.chunks {
		require.LessOrEqual(t, len(chunk), 100)
		body, err := json.Marshal(chunk)
		require.NoError(t, err)
		resp := postJSON(t, apis[i%len(apis)]+"/v1/batches", body)
		require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	}
}

// batchStatuses lists every batch with the given status through the API,
// following the keyset cursor.
func batchStatuses(t *testing.T, api, status string) []string {
	t.Helper()
	var ids []string
	after := ""
	for {
		q := url.Values{"status": {status}, "limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		resp := getJSON(t, api+"/v1/batches?"+q.Encode())
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		var page struct {
			Batches []struct {
				ID     string  `json:"id"`
				Status *string `json:"status"`
			} `json:"batches"`
			NextAfter string `json:"next_after"`
		}
		require.NoError(t, json.Unmarshal([]byte(resp.Body), &page))
		for _, b := range page.Batches {
			require.NotNil(t, b.Status)
			require.Equal(t, status, *b.Status, "the status filter returned a batch in another status")
			ids = append(ids, b.ID)
		}
		if page.NextAfter == "" {
			return ids
		}
		after = page.NextAfter
	}
}

// finalStatuses returns each batch's terminal status as the API reports it,
// and whether every batch of w has one.
func finalStatuses(t *testing.T, api string, w batchWorkload) (map[string]string, bool) {
	t.Helper()
	final := map[string]string{}
	for _, st := range []string{"committed", "invalid"} {
		for _, id := range batchStatuses(t, api, st) {
			final[id] = st
		}
	}
	return final, len(final) == w.size()
}

// waitAllFinal waits until every batch is terminal in the API, checking the
// ledger's cheap counters first so the listing runs only near the end.
func waitAllFinal(t *testing.T, api string, sim simLedger, w batchWorkload, timeout time.Duration) map[string]string {
	t.Helper()
	var final map[string]string
	eventually(t, timeout, "every batch committed or invalid", func() bool {
		st := sim.stats(t)
		if st.Committed+st.Invalid < uint64(w.size()) {
			return false
		}
		var done bool
		final, done = finalStatuses(t, api, w)
		return done
	})
	return final
}

// laneFigures is what the ledger's log shows about a run.
type laneFigures struct {
	resubmissions int // accepted events beyond the first per batch, plus duplicates
	reaccepted    int
	duplicates    int
	lost          int
	invalid       int
}

// checkLedgerLog checks, on the ledger's event log, the lane's promises for
// every service of w, and that the ledger's final word on each batch is the
// status ledgerq reports (final):
//   - the order in which batches were first accepted is created_at order,
//     ties by id;
//   - replaying the log, a batch is outstanding from "accepted" until
//     "committed", "invalid" or "lost", and no batch of a service is accepted
//     while another batch of that service is outstanding;
//   - a batch is invalid in ledgerq only if the ledger found it invalid, and
//     committed only if the ledger committed it.
func checkLedgerLog(t *testing.T, w batchWorkload, events []simEvent, final map[string]string) laneFigures {
	t.Helper()
	var fig laneFigures
	firstAccepted := map[string][]string{} // service → ids, by first acceptance
	accepted := map[string]int{}
	outstanding := map[string]string{} // service → the batch at the ledger
	ledgerEnd := map[string]string{}   // batch → committed or invalid
	var violations []string
	for _, e := range events {
		svc, ours := w.service[e.BatchID]
		if !ours {
			violations = append(violations, fmt.Sprintf("seq %d: %s of a batch the test never posted: %q", e.Seq, e.Kind, e.BatchID))
			continue
		}
		switch e.Kind {
		case "accepted":
			if cur := outstanding[svc]; cur != "" {
				violations = append(violations, fmt.Sprintf("seq %d: service %s: batch %.12s accepted while %.12s is outstanding",
					e.Seq, svc, e.BatchID, cur))
			}
			outstanding[svc] = e.BatchID
			accepted[e.BatchID]++
			if accepted[e.BatchID] == 1 {
				firstAccepted[svc] = append(firstAccepted[svc], e.BatchID)
			} else {
				fig.reaccepted++
			}
		case "duplicate":
			// A copy of a batch the ledger holds changes nothing on the
			// ledger. It is not held against the lane even when another batch
			// of the service is outstanding: a copy sent before ledgerq moved
			// on can be processed by the ledger after the next batch arrived.
			fig.duplicates++
		case "committed", "invalid", "lost":
			if outstanding[svc] == e.BatchID {
				delete(outstanding, svc)
			}
			switch e.Kind {
			case "lost":
				fig.lost++
			case "invalid":
				fig.invalid++
				require.Equal(t, simInvalidReason, e.Reason, "seq %d", e.Seq)
				ledgerEnd[e.BatchID] = e.Kind
			default:
				ledgerEnd[e.BatchID] = e.Kind
			}
		case "refused":
			violations = append(violations, fmt.Sprintf("seq %d: the ledger refused batch %.12s: %s", e.Seq, e.BatchID, e.Reason))
		default:
			violations = append(violations, fmt.Sprintf("seq %d: unknown event kind %q", e.Seq, e.Kind))
		}
	}
	if n := len(violations); n > 20 {
		violations = append(violations[:20], fmt.Sprintf("… and %d more", n-20))
	}
	require.Empty(t, violations, "the ledger's log breaks the batch lane's promises")

	for svc, want := range w.order {
		require.Equal(t, want, firstAccepted[svc],
			"service %s: the ledger first accepted its batches out of created_at order (ties by id)", svc)
	}
	for id, st := range final {
		require.Equal(t, ledgerEnd[id], st, "batch %.12s is %s in ledgerq but %q on the ledger", id, st, ledgerEnd[id])
	}
	fig.resubmissions = fig.reaccepted + fig.duplicates
	return fig
}

func (f laneFigures) log(t *testing.T, st sim.Stats) {
	t.Helper()
	t.Logf("ledger log: resubmissions %d (re-accepted after loss %d, duplicates %d); lost %d; invalid %d",
		f.resubmissions, f.reaccepted, f.duplicates, f.lost, f.invalid)
	t.Logf("ledger stats: submit calls %d, batches submitted %d, accepted %d, duplicates %d, refused %d, "+
		"transient failures %d, dropped responses %d, committed %d, invalid %d, lost %d, pending %d, status calls %d",
		st.SubmitCalls, st.BatchesSubmitted, st.Accepted, st.Duplicates, st.Refused,
		st.TransientFailures, st.DroppedResponses, st.Committed, st.Invalid, st.Lost, st.Pending, st.StatusCalls)
}

// submitterWarnings counts, in ledgerq logs, the two reasons a batch the
// ledger already holds is sent again: a send whose outcome was unknown
// (treated as sent, then found UNKNOWN while the ledger was still taking it),
// and a claim that expired before its outcome was recorded.
func submitterWarnings(logs ...string) (unknownOutcome, expiredClaims int) {
	for _, l := range logs {
		unknownOutcome += strings.Count(l, "submitter: outcome unknown")
		expiredClaims += strings.Count(l, "submitter: some claims expired")
	}
	return unknownOutcome, expiredClaims
}

// requireFaults fails a run in which the ledger's faults did not happen: it
// would prove nothing about retries.
func requireFaults(t *testing.T, st sim.Stats, fig laneFigures) {
	t.Helper()
	require.Positive(t, st.TransientFailures, "no transient failure happened")
	require.Positive(t, st.Lost, "no batch was lost")
	require.Equal(t, int(st.Lost), fig.lost)
	require.Positive(t, fig.reaccepted, "no lost batch was sent again")
}

// startServe starts `ledgerq serve` on the database against the Sawtooth REST
// API at ledgerURL and waits until its API is ready. It returns the process
// and its API's base URL.
func startServe(t *testing.T, dbURL, ledgerURL string, extra ...string) (*testproc.Proc, string) {
	t.Helper()
	// The lane's rules are tested here, its access in TestServe_EveryV1RouteNeedsAKey.
	args := append([]string{"serve", "--api-insecure-open", "--batch-ledger", "sawtooth", "--batch-ledger-url", ledgerURL}, extra...)
	return testproc.StartReady(t, t.TempDir(), []string{"DATABASE_URL=" + dbURL}, args...)
}

func running(p *testproc.Proc) bool {
	select {
	case <-p.Done():
		return false
	default:
		return true
	}
}

// stallingLedger is a reverse proxy to the simulated ledger that, once armed,
// holds the next submit call that passes through it: it never reaches the
// ledger and never gets an answer. A process behind it is then, for certain,
// in the middle of a send, holding the batches it claimed.
type stallingLedger struct {
	url    string
	rp     *httputil.ReverseProxy
	mu     sync.Mutex
	armed  bool
	caught chan []byte // the body of the submit call it holds
}

func newStallingLedger(t *testing.T, sim simLedger) *stallingLedger {
	t.Helper()
	target, err := url.Parse(sim.url)
	require.NoError(t, err)
	p := &stallingLedger{rp: httputil.NewSingleHostReverseProxy(target), caught: make(chan []byte, 1)}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *stallingLedger) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

func (p *stallingLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	stall := p.armed && r.Method == http.MethodPost && r.URL.Path == "/batches"
	if stall {
		p.armed = false
	}
	p.mu.Unlock()
	if !stall {
		p.rp.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	p.caught <- body
	<-r.Context().Done() // until the caller gives up or dies
}

// contained returns the batches of w whose payload is in body: a BatchList
// holds each Batch message verbatim.
func (w batchWorkload) contained(t *testing.T, body []byte) []string {
	t.Helper()
	var ids []string
	for _, chunk := range w.chunks {
		for _, b := range chunk {
			payload, err := base64.StdEncoding.DecodeString(b.Payload)
			require.NoError(t, err)
			if bytes.Contains(body, payload) {
				ids = append(ids, b.ID)
			}
		}
	}
	return ids
}

// e2eFaults are the simulated ledger's faults for the end-to-end runs. The
// ledger draws every random choice from one seeded source, in the order calls
// reach it: each submit call draws "transient?" then "dropped response?", and
// each batch it takes draws "lost?" then "invalid?". Which process makes a
// call varies from run to run, but the first draws do not: with seed 829 the
// first submit call fails transiently (draw 0.003), the second goes through
// (0.96) and the first batch it takes is lost (0.032). So every run has both
// faults; the rates add more of them at random.
var e2eFaults = []string{"--sim-seed", "829", "--sim-transient-rate", "0.1", "--sim-lost-rate", "0.05",
	"--sim-reject-rate", "0.02", "--sim-commit-delay", "200ms"}

func TestE2E_ThreeServeProcessesWithFaultsAndAKilledProcessCommitEveryBatchInOrder(t *testing.T) {
	t.Parallel()
	began := time.Now()
	db := testdb.New(t).URL
	sim := startSimLedger(t, e2eFaults...)
	timings := []string{"--poll-interval", "200ms", "--batch-delay-window", "500ms", "--batch-delay-cap", "2s",
		"--batch-claim-lease", "3s", "--batch-ledger-timeout", "2s", "--batch-check-interval", "200ms"}

	// The third process reaches the ledger through a proxy that can hold one
	// of its submit calls, so that it is killed in the middle of a send. It
	// logs at debug, so the test can see it has sent batches before.
	stall := newStallingLedger(t, sim)
	var procs []*testproc.Proc
	var apis []string
	for i := range 3 {
		ledgerURL, extra := sim.url, timings
		if i == 2 {
			ledgerURL = stall.url
			extra = append(append([]string(nil), timings...), "--log-level", "debug")
		}
		p, api := startServe(t, db, ledgerURL, extra...)
		procs, apis = append(procs, p), append(apis, api)
	}
	victim := procs[2]

	w := newBatchWorkload(t, "e2e", 50, 20, 3)
	w.post(t, apis)
	t.Logf("posted %d batches of %d services in %d requests (%d created_at ties) after %s",
		w.size(), len(w.order), len(w.chunks), w.ties, time.Since(began).Round(time.Millisecond))

	eventually(t, 2*time.Minute, "some batches committed while others are at the ledger and the victim has sent some", func() bool {
		st := sim.stats(t)
		return st.Committed >= 150 && st.Pending > 0 && strings.Contains(victim.Stderr.String(), "submitter: sent batches")
	})
	stall.arm()
	var held []byte
	select {
	case held = <-stall.caught:
	case <-time.After(time.Minute):
		t.Fatal("the victim sent no batch within a minute of arming the proxy")
	}
	// Kill at once: the victim's ledger timeout (2 s) must not end the send first.
	killedAt := time.Now()
	require.NoError(t, victim.Cmd.Process.Signal(syscall.SIGKILL))
	require.Equal(t, -1, victim.Wait(t, 30*time.Second), "the victim died of SIGKILL")
	before := sim.stats(t)
	stranded := w.contained(t, held)
	require.NotEmpty(t, stranded, "the held submit call carries batches of the workload")
	t.Logf("SIGKILLed one serve process in the middle of sending %d batches, after %s, with %d committed and %d pending on the ledger",
		len(stranded), time.Since(began).Round(time.Millisecond), before.Committed, before.Pending)

	final := waitAllFinal(t, apis[0], sim, w, 3*time.Minute)
	t.Logf("every batch final after %s", time.Since(began).Round(time.Millisecond))
	for _, p := range procs[:2] {
		require.True(t, running(p), "a surviving serve process exited: %v\n%s", p.Err(), p.Stderr)
	}

	st := sim.stats(t)
	events := sim.events(t)
	fig := checkLedgerLog(t, w, events, final)
	fig.log(t, st)
	unknownOutcome, expiredClaims := submitterWarnings(procs[0].Stderr.String(), procs[1].Stderr.String(), victim.Stderr.String())
	t.Logf("submitter warnings: outcome unknown %d, claims expired before recording %d", unknownOutcome, expiredClaims)
	requireFaults(t, st, fig)
	require.Zero(t, st.Pending, "nothing is left at the ledger")

	// The batches the victim died holding never reached the ledger through
	// it: a survivor's monitor took them over when the claim lease ran out,
	// found them unknown, and they were sent again.
	resent := map[string]time.Time{}
	for _, e := range events {
		if e.Kind == "accepted" && e.Time.After(killedAt) {
			if _, seen := resent[e.BatchID]; !seen {
				resent[e.BatchID] = e.Time
			}
		}
	}
	var slowest time.Duration
	for _, id := range stranded {
		at, ok := resent[id]
		require.True(t, ok, "stranded batch %.12s was not accepted again after the kill", id)
		slowest = max(slowest, at.Sub(killedAt))
		resp := getJSON(t, apis[0]+"/v1/batches/"+url.PathEscape(id))
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		var got struct {
			Batch struct {
				Attempts int `json:"attempts"`
			} `json:"batch"`
		}
		require.NoError(t, json.Unmarshal([]byte(resp.Body), &got))
		require.GreaterOrEqual(t, got.Batch.Attempts, 2, "stranded batch %.12s was claimed again", id)
	}
	t.Logf("the %d stranded batches were accepted again within %s of the kill (claim lease 3s)",
		len(stranded), slowest.Round(time.Millisecond))

	// The survivors drain and exit cleanly.
	for _, p := range procs[:2] {
		p.Signal(t, syscall.SIGTERM)
	}
	for _, p := range procs[:2] {
		require.Equal(t, 0, p.Wait(t, time.Minute), "serve exits 0 on SIGTERM: %s", p.Stderr)
	}

	// No transaction of the three processes was a deadlock victim (issue 8):
	// a backend reports its statistics at the latest when it exits, and every
	// connection of the processes has ended by now.
	conn, err := pgx.Connect(t.Context(), db)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	var deadlocks int64
	require.NoError(t, conn.QueryRow(t.Context(),
		`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&deadlocks))
	require.Zero(t, deadlocks, "PostgreSQL detected deadlocks between the processes")
}

func TestE2E_OnceRunFromCronDrivesTheWorkloadToCompletion(t *testing.T) {
	t.Parallel()
	began := time.Now()
	dbURL := testdb.NewEmpty(t)
	env := []string{"DATABASE_URL=" + dbURL}
	mig := testproc.Start(t, t.TempDir(), env, "migrate", "up")
	require.Equal(t, 0, mig.Wait(t, time.Minute), mig.Stderr.String())

	sim := startSimLedger(t, e2eFaults...)
	_, api := startServe(t, dbURL, sim.url, "--database-migrate=false", "--queuer=false", "--submitter=false", "--monitor=false")

	w := newBatchWorkload(t, "cron", 10, 8, 2)
	w.post(t, []string{api})

	onceArgs := []string{"once", "--batch-ledger", "sawtooth", "--batch-ledger-url", sim.url, "--batch-delay-window", "200ms",
		"--batch-delay-cap", "1s", "--batch-claim-lease", "3s", "--batch-ledger-timeout", "2s", "--batch-check-interval", "100ms",
		"--timeout", "1m", "--log-level", "warn"}
	const maxRuns = 400
	deadline := time.Now().Add(2 * time.Minute)
	runs, pairs := 0, 0
	var final map[string]string
	var onceLogs []string
	for round := 0; ; round++ {
		var done bool
		if st := sim.stats(t); st.Committed+st.Invalid >= uint64(w.size()) {
			if final, done = finalStatuses(t, api, w); done {
				break
			}
		}
		require.Less(t, runs, maxRuns, "the workload was not done after %d once runs", runs)
		require.True(t, time.Now().Before(deadline), "the workload was not done after %s (%d once runs)", time.Since(began), runs)
		// Every other round, two runs start together, as two cron hosts
		// whose schedules coincide would.
		n := 1
		if round%2 == 0 {
			n = 2
			pairs++
		}
		ps := make([]*testproc.Proc, n)
		for i := range ps {
			ps[i] = testproc.Start(t, t.TempDir(), env, onceArgs...)
		}
		for i, p := range ps {
			code := p.Wait(t, 90*time.Second)
			require.Equal(t, 0, code, "once run %d exited %d: %s", runs+i+1, code, p.Stderr)
			onceLogs = append(onceLogs, p.Stderr.String())
		}
		runs += n
	}
	t.Logf("every batch final after %d once runs (%d started in pairs) in %s",
		runs, 2*pairs, time.Since(began).Round(time.Millisecond))

	st := sim.stats(t)
	fig := checkLedgerLog(t, w, sim.events(t), final)
	fig.log(t, st)
	unknownOutcome, expiredClaims := submitterWarnings(onceLogs...)
	t.Logf("submitter warnings: outcome unknown %d, claims expired before recording %d", unknownOutcome, expiredClaims)
	requireFaults(t, st, fig)
	require.Zero(t, st.Pending, "nothing is left at the ledger")
}
