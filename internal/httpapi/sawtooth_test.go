package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/metrics"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

// sawtoothStatuses is the body of a 200 answer to GET or POST /batch_statuses.
type sawtoothStatuses struct {
	Data []struct {
		ID                  string `json:"id"`
		Status              string `json:"status"`
		InvalidTransactions []struct {
			ID      string `json:"id"`
			Message string `json:"message"`
		} `json:"invalid_transactions"`
	} `json:"data"`
	Link *string `json:"link"`
}

func (f *apiFixture) postBatchList(path string, body []byte, header ...string) httpResult {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+path, bytes.NewReader(body))
	require.NoError(f.t, err)
	req.Header.Set("Content-Type", "application/octet-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	f.authorize(req)
	return do(f.t, req)
}

func (f *apiFixture) postStatuses(path, contentType, body string) httpResult {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+path, strings.NewReader(body))
	require.NoError(f.t, err)
	req.Header.Set("Content-Type", contentType)
	f.authorize(req)
	return do(f.t, req)
}

// batchList signs n batches and returns their ids and the BatchList.
func batchList(t *testing.T, n int) ([]string, []byte) {
	t.Helper()
	ids := make([]string, n)
	payloads := make([][]byte, n)
	for i := range n {
		ids[i], payloads[i] = signedBatch(t)
	}
	return ids, sawtooth.AppendBatchList(nil, payloads...)
}

// requireSawtoothError checks that resp is a Sawtooth error object with the
// status and code (the document already checked its shape).
func requireSawtoothError(t *testing.T, resp httpResult, status, code int) sawtooth.APIError {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, resp.Body)
	var body sawtooth.ErrorResponse
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &body), resp.Body)
	require.Equal(t, code, body.Error.Code, resp.Body)
	require.NotEmpty(t, body.Error.Title)
	require.NotEmpty(t, body.Error.Message)
	require.NotContains(t, resp.Body, `"success"`, "a Sawtooth route answered with ledgerq's error shape")
	return body.Error
}

func (f *apiFixture) serviceOf(id string) string {
	f.t.Helper()
	var svc string
	require.NoError(f.t, f.db.Store.Conns().QueryRow(context.Background(),
		`SELECT service_id FROM ledgerq.batch_payloads WHERE id = $1`, id).Scan(&svc))
	return svc
}

func TestSawtooth_PostBatchListStoresEveryBatchAndLinksToTheirStatuses(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ids, list := batchList(t, 3)

	resp := f.postBatchList("/batches", list)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	var accepted struct {
		Link string `json:"link"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &accepted))
	require.Equal(t, f.url+"/batch_statuses?id="+strings.Join(ids, ","), accepted.Link)
	require.Equal(t, 3, f.count())
	for _, id := range ids {
		require.Equal(t, testSigner.PublicKey(), f.serviceOf(id), "a batch's service defaults to its signer's public key")
	}

	got := f.get(strings.TrimPrefix(accepted.Link, f.url))
	require.Equal(t, http.StatusOK, got.StatusCode, got.Body)
	var st sawtoothStatuses
	require.NoError(t, json.Unmarshal([]byte(got.Body), &st))
	require.Len(t, st.Data, 3)
	for i, d := range st.Data {
		require.Equal(t, ids[i], d.ID, "entries follow the ids' order")
		require.Equal(t, "PENDING", d.Status, "stored and queued or new: still in ledgerq's hands")
		require.NotNil(t, d.InvalidTransactions)
		require.Empty(t, d.InvalidTransactions)
	}
	require.NotNil(t, st.Link)
	require.Equal(t, accepted.Link, *st.Link)
	require.Contains(t, got.Body, `"invalid_transactions":[]`, "Sawtooth answers an empty list, not null")

	// Posting the list again stores nothing new and is accepted, as a
	// validator takes a batch it already has.
	again := f.postBatchList("/batches", list)
	require.Equal(t, http.StatusAccepted, again.StatusCode, again.Body)
	require.Equal(t, 3, f.count())
}

func TestSawtooth_ABatchListKeepsItsOrderWithinAService(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// Ids in descending order: were the batches stored with one created_at,
	// the tie-break by id would send them in the reverse of the list.
	var ids []string
	payloads := map[string][]byte{}
	for range 5 {
		id, p := signedBatch(t)
		ids = append(ids, id)
		payloads[id] = p
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	var list []byte
	for _, id := range ids {
		list = sawtooth.AppendBatchList(list, payloads[id])
	}
	resp := f.postBatchList("/batches", list)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)

	rows, err := f.db.Store.Conns().Query(context.Background(),
		`SELECT p.id FROM ledgerq.batches b JOIN ledgerq.batch_payloads p ON p.seq = b.seq
		 WHERE b.service_id = $1 ORDER BY b.created_at, p.id`, testSigner.PublicKey())
	require.NoError(t, err)
	var order []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		order = append(order, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, ids, order, "the lane's order (created_at, then id) is the list's order")
}

func TestSawtooth_TheServiceComesFromTheHeaderOrTheQuery(t *testing.T) {
	t.Parallel()
	f := setup(t)

	ids, list := batchList(t, 1)
	resp := f.postBatchList("/batches", list, "X-Ledgerq-Service-Id", "orders")
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Equal(t, "orders", f.serviceOf(ids[0]))

	ids, list = batchList(t, 2)
	resp = f.postBatchList("/batches?service_id=payments", list)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Equal(t, "payments", f.serviceOf(ids[0]))
	require.Contains(t, resp.Body, "/batch_statuses?id="+strings.Join(ids, ",")+"&service_id=payments",
		"the link carries the request's query, as Sawtooth's does")

	// The same batch posted again under another service keeps its service.
	resp = f.postBatchList("/batches?service_id=other", list)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Equal(t, "payments", f.serviceOf(ids[1]))
	require.Equal(t, 3, f.count())

	_, list = batchList(t, 1)
	requireSawtoothError(t, f.postBatchList("/batches?service_id=a", list, "X-Ledgerq-Service-Id", "b"), http.StatusBadRequest, sawtooth.CodeInvalidParameter)
	requireSawtoothError(t, f.postBatchList("/batches?service_id="+strings.Repeat("x", 257), list), http.StatusBadRequest, sawtooth.CodeInvalidParameter)
	requireSawtoothError(t, f.postBatchList("/batches", list, "X-Ledgerq-Service-Id", "a", "X-Ledgerq-Service-Id", "b"), http.StatusBadRequest, sawtooth.CodeInvalidParameter)
	require.Equal(t, 3, f.count())
}

func TestSawtooth_RefusalsAreSawtoothErrorsAndStoreNothing(t *testing.T) {
	t.Parallel()
	f := setup(t) // 5 batches per request, 4096-byte batches
	good, goodPayload := signedBatch(t)
	_, bad := signedBatch(t)
	pb, err := sawtooth.ParseBatch(bad)
	require.NoError(t, err)
	// Another well-formed signature: it does not verify over this header.
	pb.HeaderSignature = good
	forged := marshal(t, pb)
	_, sixBatches := batchList(t, 6)
	_, bigPayload, err := testSigner.NewBatch(make([]byte, 5000))
	require.NoError(t, err)

	for _, tc := range []struct {
		name         string
		contentType  string
		body         []byte
		status, code int
	}{
		{"wrong content type", "application/json", sawtooth.AppendBatchList(nil, goodPayload), 400, sawtooth.CodeSubmissionWrongType},
		{"empty body", "application/octet-stream", nil, 400, sawtooth.CodeNoBatchesSubmitted},
		{"not a protobuf message", "application/octet-stream", []byte("\xff\xff\xff"), 400, sawtooth.CodeBadProtobufSubmitted},
		{"a list with no batch", "application/octet-stream", []byte{0x10, 0x01}, 400, sawtooth.CodeNoBatchesSubmitted},
		{"a batch that is not a Batch message", "application/octet-stream", sawtooth.AppendBatchList(nil, goodPayload, []byte("\xff\xff")), 400, sawtooth.CodeBadProtobufSubmitted},
		{"a batch whose signature does not verify", "application/octet-stream", sawtooth.AppendBatchList(nil, goodPayload, forged), 400, sawtooth.CodeSubmittedBatchesInvalid},
		// Checked on every core, answered for the first in list order.
		{"two batches that do not verify", "application/octet-stream", sawtooth.AppendBatchList(nil, goodPayload, forged, forged, goodPayload, forged), 400, sawtooth.CodeSubmittedBatchesInvalid},
		{"more batches than a request takes", "application/octet-stream", sixBatches, 413, sawtooth.CodeRequestTooLarge},
		{"a batch larger than --api-max-payload-bytes", "application/octet-stream", sawtooth.AppendBatchList(nil, bigPayload), 413, sawtooth.CodeRequestTooLarge},
	} {
		req, err := http.NewRequest(http.MethodPost, f.url+"/batches", bytes.NewReader(tc.body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", tc.contentType)
		e := requireSawtoothError(t, do(t, req), tc.status, tc.code)
		if tc.code == sawtooth.CodeSubmittedBatchesInvalid {
			require.Contains(t, e.Message, "Batch 1: invalid batch", "the message says which batch and why")
		}
	}
	require.Zero(t, f.count(), "a refused list stores none of its batches")
}

func TestSawtooth_ABodyOverTheLimitIs413WithASawtoothError(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *httpapi.Config) { c.MaxBodyBytes = 1000 })
	_, list := batchList(t, 5)
	require.Greater(t, len(list), 1000)
	// Without a Content-Length, the limit is met while the handler reads.
	req, err := http.NewRequest(http.MethodPost, f.url+"/batches", io.MultiReader(bytes.NewReader(list)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/octet-stream")
	// (A client request's ContentLength 0 with a body means "unknown".)
	require.Zero(t, req.ContentLength)
	requireSawtoothError(t, do(t, req), http.StatusRequestEntityTooLarge, sawtooth.CodeRequestTooLarge)

	req, err = http.NewRequest(http.MethodPost, f.url+"/batch_statuses", io.MultiReader(strings.NewReader(`["`+strings.Repeat("a", 2000)+`"]`)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	requireSawtoothError(t, do(t, req), http.StatusRequestEntityTooLarge, sawtooth.CodeRequestTooLarge)

	// With a Content-Length over the limit (as curl sends), echo's body
	// limit refuses the request before the route's middleware runs.
	req, err = http.NewRequest(http.MethodPost, f.url+"/batches", bytes.NewReader(list))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/octet-stream")
	require.Equal(t, int64(len(list)), req.ContentLength)
	requireSawtoothError(t, do(t, req), http.StatusRequestEntityTooLarge, sawtooth.CodeRequestTooLarge)
	require.Zero(t, f.count())
}

func TestSawtooth_BadStatusQueriesAreSawtoothErrors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id, _ := signedBatch(t)
	requireSawtoothError(t, f.get("/batch_statuses"), 400, sawtooth.CodeStatusIDQueryInvalid)
	e := requireSawtoothError(t, f.get("/batch_statuses?id="+id+",nope"), 400, sawtooth.CodeInvalidResourceID)
	require.True(t, strings.HasSuffix(e.Message, "invalid: nope"), e.Message)
	requireSawtoothError(t, f.get("/batch_statuses?id="), 400, sawtooth.CodeInvalidResourceID)
	requireSawtoothError(t, f.get("/batch_statuses?id="+strings.ToUpper(id)), 400, sawtooth.CodeInvalidResourceID)
	requireSawtoothError(t, f.postStatuses("/batch_statuses", "text/plain", `["`+id+`"]`), 400, sawtooth.CodeStatusWrongContentType)
	for _, body := range []string{``, `[]`, `{}`, `[1]`, `"` + id + `"`, `["` + id + `"] []`, `[`} {
		requireSawtoothError(t, f.postStatuses("/batch_statuses", "application/json", body), 400, sawtooth.CodeStatusBodyInvalid)
	}
	requireSawtoothError(t, f.postStatuses("/batch_statuses", "application/json", `["x"]`), 400, sawtooth.CodeInvalidResourceID)
	requireSawtoothError(t, f.get("/batch_statuses?id="+id+"&id="+id), 400, sawtooth.CodeInvalidParameter)

	// Query parameters Sawtooth does not know are ignored, as Sawtooth does.
	resp := f.get("/batch_statuses?id=" + id + "&colour=blue")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, "colour=blue", "the link is the query as asked")
}

// setState puts a stored batch in a lane state by SQL, as the loops would.
func (f *apiFixture) setState(id, state string) {
	f.t.Helper()
	sets := map[string]string{
		"held":      `submitted = true, queued_at = NULL, claim_expires_at = now() + interval '1 hour', attempts = 1, last_submitted_at = now()`,
		"pending":   `submitted = true, status = 'pending', queued_at = NULL, attempts = 1, last_submitted_at = now(), next_check_at = now()`,
		"delayed":   `submitted = false, status = 'delayed', queued_at = NULL, attempts = 1, last_submitted_at = now()`,
		"unknown":   `submitted = false, status = 'unknown', queued_at = NULL, attempts = 1, last_submitted_at = now()`,
		"committed": `submitted = true, status = 'committed', queued_at = NULL, attempts = 1, last_submitted_at = now(), finished_at = now()`,
		"valid":     `submitted = true, status = 'valid', queued_at = NULL, attempts = 1, last_submitted_at = now(), finished_at = now()`,
		"invalid":   `submitted = true, status = 'invalid', queued_at = NULL, attempts = 1, last_submitted_at = now(), finished_at = now(), last_error = 'Submitted Batches Invalid (code 30): bad nonce'`,
	}
	set, ok := sets[state]
	require.True(f.t, ok, state)
	tag, err := f.db.Store.Conns().Exec(context.Background(), `UPDATE ledgerq.batches SET `+set+` WHERE seq = (SELECT seq FROM ledgerq.batch_payloads WHERE id = $1)`, id)
	require.NoError(f.t, err)
	require.Equal(f.t, int64(1), tag.RowsAffected())
}

func TestSawtooth_StatusesSayLedgerqStatesInSawtoothWords(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// Two batches of one service: the first is queued, the second new.
	ids, list := batchList(t, 2)
	require.Equal(t, http.StatusAccepted, f.postBatchList("/batches?service_id=two", list).StatusCode)
	want := map[string]string{ids[0]: "PENDING", ids[1]: "PENDING"} // queued, new
	order := slices.Clone(ids)
	for _, tc := range []struct{ state, status string }{
		{"held", "PENDING"}, {"pending", "PENDING"}, {"delayed", "PENDING"}, {"unknown", "PENDING"},
		{"committed", "COMMITTED"}, {"valid", "COMMITTED"}, {"invalid", "INVALID"},
	} {
		// Each in a service of its own, so that the states do not meet the
		// lane's rules for one service.
		id, payload, err := testSigner.NewBatch([]byte("a"), []byte("b"))
		require.NoError(t, err)
		resp := f.postBatchList("/batches?service_id="+tc.state, sawtooth.AppendBatchList(nil, payload))
		require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
		f.setState(id, tc.state)
		want[id] = tc.status
		order = append(order, id)
	}
	unknown, _ := signedBatch(t)
	want[unknown] = "UNKNOWN"
	order = append(order, unknown, ids[0]) // an id asked twice is answered twice

	body, err := json.Marshal(order)
	require.NoError(t, err)
	resp := f.postStatuses("/batch_statuses", "application/json", string(body))
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	var st sawtoothStatuses
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &st))
	require.Nil(t, st.Link, "POST /batch_statuses has no link, as Sawtooth's")
	require.Len(t, st.Data, len(order))
	for i, d := range st.Data {
		require.Equal(t, order[i], d.ID)
		require.Equal(t, want[d.ID], d.Status, "batch %d", i)
		if d.Status != "INVALID" {
			require.Empty(t, d.InvalidTransactions)
			continue
		}
		pb, err := sawtooth.ParseBatch(mustPayload(t, f, d.ID))
		require.NoError(t, err)
		require.Len(t, d.InvalidTransactions, 2, "every transaction of the batch is named")
		for j, txn := range d.InvalidTransactions {
			require.Equal(t, pb.Transactions[j].HeaderSignature, txn.ID)
			require.Equal(t, "Submitted Batches Invalid (code 30): bad nonce", txn.Message, "the message is the reason ledgerq recorded")
		}
	}
	require.NotContains(t, resp.Body, "extended_data", "empty fields are left out, as Sawtooth leaves them out")
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

func mustPayload(t *testing.T, f *apiFixture, id string) []byte {
	t.Helper()
	rows, err := f.db.Store.BatchGetMany(context.Background(), []string{id})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	return rows[0].Payload
}

func TestSawtooth_WaitAnswersWhenNoBatchIsPendingOrTheTimeIsUp(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ids, list := batchList(t, 1)
	require.Equal(t, http.StatusAccepted, f.postBatchList("/batches", list).StatusCode)

	// Still PENDING when the time is up: the answer comes after it.
	began := time.Now()
	resp := f.get("/batch_statuses?id=" + ids[0] + "&wait=1")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.GreaterOrEqual(t, time.Since(began), time.Second, "wait=1 waited a second for the PENDING batch")
	require.Contains(t, resp.Body, `"status":"PENDING"`)
	require.Contains(t, resp.Body, "&wait=1", "the link repeats the query")

	// Committed while a query waits: the query answers then, not at its end.
	type answer struct {
		resp httpResult
		took time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		began := time.Now()
		req, _ := http.NewRequest(http.MethodGet, f.url+"/batch_statuses?wait&id="+ids[0], nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{resp: httpResult{Body: err.Error()}}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		done <- answer{resp: httpResult{StatusCode: resp.StatusCode, Body: string(body)}, took: time.Since(began)}
	}()
	time.Sleep(300 * time.Millisecond) // lets the query read the batch as PENDING first
	f.setState(ids[0], "committed")
	select {
	case a := <-done:
		require.Equal(t, http.StatusOK, a.resp.StatusCode, a.resp.Body)
		require.Contains(t, a.resp.Body, `"status":"COMMITTED"`)
		require.Less(t, a.took, 10*time.Second)
	case <-time.After(30 * time.Second):
		t.Fatal("a wait without a number did not answer when the batch was committed")
	}

	// No batch PENDING: the answer is immediate whatever the wait.
	began = time.Now()
	resp = f.get("/batch_statuses?id=" + ids[0] + "&wait=60")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	require.Less(t, time.Since(began), 5*time.Second)
}

func TestSawtooth_AWaitingQueryStopsWhenTheClientGoesAway(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ids, list := batchList(t, 1)
	require.Equal(t, http.StatusAccepted, f.postBatchList("/batches", list).StatusCode)

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/batch_statuses?wait=120&id="+ids[0], nil)
	require.NoError(t, err)
	_, err = http.DefaultClient.Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// The handler returns, and the request is counted, long before 120 s.
	require.Eventually(t, func() bool {
		return metricLine(f.get("/metrics").Body, "ledgerq_http_requests_total", `route="/batch_statuses"`, `code="499"`) != ""
	}, 10*time.Second, 50*time.Millisecond, "the waiting query did not end when its client went away")
}

// A waiting status query whose first read found its batch PENDING waits on
// through a database outage (a failover): a read that finds no database is
// tried again at the next poll, and the answer at the end of the wait is
// the statuses as last read, not a 503.
func TestSawtooth_AWaitingQueryRidesOutADatabaseOutage(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	st, proxy := openBehindProxy(context.Background(), t, db)
	f := serveOn(t, db, st, func(c *httpapi.Config) { c.RequestTimeout = 500 * time.Millisecond })
	ids, list := batchList(t, 1)
	// The batch is stored before the outage; under a loaded machine's race
	// detector a first transaction through the proxy can outlast the short
	// request timeout, so the post is repeated (a batch stored already is
	// accepted again).
	require.Eventually(t, func() bool { return f.postBatchList("/batches", list).StatusCode == http.StatusAccepted },
		10*time.Second, 50*time.Millisecond, "the batch is stored before the outage")

	done := make(chan httpResult, 1)
	go func() {
		resp, err := http.Get(f.url + "/batch_statuses?wait=3&id=" + ids[0])
		if err != nil {
			done <- httpResult{Body: err.Error()}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		done <- httpResult{StatusCode: resp.StatusCode, Body: string(body)}
	}()
	time.Sleep(300 * time.Millisecond) // lets the query read the batch as PENDING first
	end := proxy.outage()
	time.Sleep(time.Second) // the outage lasts this long: the fault is the point
	end()
	select {
	case resp := <-done:
		require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
		require.Contains(t, resp.Body, `"status":"PENDING"`)
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting query did not answer")
	}
}

// silentDB is a TCP listener that takes connections and never answers: a
// database that hangs.
func silentDB(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return ln.Addr().String()
}

func TestSawtooth_ADatabaseThatDoesNotAnswerIs503WithinTheRequestTimeout(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), "postgres://ledgerq:x@"+silentDB(t)+"/ledgerq?sslmode=disable")
	require.NoError(t, err)
	t.Cleanup(st.Close)
	cfg := httpapi.DefaultConfig()
	cfg.RequestTimeout = 300 * time.Millisecond
	api := httpapi.New(cfg, httpapi.Deps{Store: st, Clock: clock.NewFake(t0), Logger: testLogger(t), Metrics: metrics.New()})
	f := &apiFixture{t: t, url: serve(t, api)}
	ids, list := batchList(t, 1)

	began := time.Now()
	requireSawtoothError(t, f.postBatchList("/batches", list), http.StatusServiceUnavailable, sawtooth.CodeDatabaseUnavailable)
	require.Less(t, time.Since(began), 3*time.Second)

	// A waiting query too: each read is bounded, not only the whole wait.
	began = time.Now()
	requireSawtoothError(t, f.get("/batch_statuses?wait=60&id="+url.QueryEscape(ids[0])), http.StatusServiceUnavailable, sawtooth.CodeDatabaseUnavailable)
	require.Less(t, time.Since(began), 3*time.Second)
}

// The service id of the Sawtooth ingress is checked as POST /v1/batches
// checks it: NUL and invalid UTF-8 are refused before the database sees them
// (PostgreSQL would answer 22021, a 500), and its length counts characters.
func TestSawtooth_TheServiceIDIsCheckedAsTheBatchAPIChecksIt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, list := batchList(t, 1)
	for _, q := range []string{"a%00b", "%FF", "%C3"} {
		requireSawtoothError(t, f.postBatchList("/batches?service_id="+q, list), http.StatusBadRequest, sawtooth.CodeInvalidParameter)
	}
	requireSawtoothError(t, f.postBatchList("/batches", list, "X-Ledgerq-Service-Id", "svc\xff"), http.StatusBadRequest, sawtooth.CodeInvalidParameter)
	require.Zero(t, f.count())

	ids, list := batchList(t, 1)
	euros := strings.Repeat("€", 256) // 768 bytes, 256 characters: the table takes it
	resp := f.postBatchList("/batches?service_id="+url.QueryEscape(euros), list)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Equal(t, euros, f.serviceOf(ids[0]))
}
