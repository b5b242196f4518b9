package sawtooth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
)

// fakeRESTAPI is a scripted Sawtooth REST API. By default it accepts every
// BatchList; refuse lists ids that make any list holding them a 400 code 30,
// as a validator refuses the whole list for one bad batch.
type fakeRESTAPI struct {
	t      *testing.T
	refuse map[string]bool
	// submit, when set, answers POST /batches instead.
	submit func(w http.ResponseWriter, r *http.Request, ids []string)
	// statuses answers batch status queries by id; missing ids are left out.
	statuses map[string]sawtooth.BatchStatusEntry

	mu         sync.Mutex
	lists      [][]string // ids of every POST /batches, in order
	accepted   []string
	statusReqs []*http.Request
	statusIDs  [][]string
}

func newFake(t *testing.T) (*fakeRESTAPI, *sawtooth.Client) {
	t.Helper()
	f := &fakeRESTAPI{t: t, refuse: map[string]bool{}, statuses: map[string]sawtooth.BatchStatusEntry{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := sawtooth.NewClient(srv.URL+"/", srv.Client(), nil)
	require.NoError(t, err)
	return f, c
}

func (f *fakeRESTAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/batches":
		f.serveSubmit(w, r)
	case r.URL.Path == "/batch_statuses":
		f.serveStatuses(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeRESTAPI) serveSubmit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	require.NoError(f.t, err)
	require.Equal(f.t, "application/octet-stream", r.Header.Get("Content-Type"))
	payloads, err := sawtooth.SplitBatchList(body)
	require.NoError(f.t, err)
	ids := make([]string, len(payloads))
	for i, p := range payloads {
		b, err := sawtooth.ParseBatch(p)
		require.NoError(f.t, err)
		ids[i] = b.HeaderSignature
	}
	f.mu.Lock()
	f.lists = append(f.lists, ids)
	f.mu.Unlock()
	if f.submit != nil {
		f.submit(w, r, ids)
		return
	}
	for _, id := range ids {
		if f.refuse[id] {
			writeError(w, http.StatusBadRequest, sawtooth.CodeSubmittedBatchesInvalid, "Submitted Batches Invalid")
			return
		}
	}
	f.mu.Lock()
	f.accepted = append(f.accepted, ids...)
	f.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"link":"http://x/batch_statuses"}`)
}

func (f *fakeRESTAPI) serveStatuses(w http.ResponseWriter, r *http.Request) {
	var ids []string
	if r.Method == http.MethodGet {
		ids = strings.Split(r.URL.Query().Get("id"), ",")
	} else {
		require.Equal(f.t, "application/json", r.Header.Get("Content-Type"))
		require.NoError(f.t, json.NewDecoder(r.Body).Decode(&ids))
	}
	f.mu.Lock()
	f.statusReqs = append(f.statusReqs, r)
	f.statusIDs = append(f.statusIDs, ids)
	f.mu.Unlock()
	resp := sawtooth.BatchStatusesResponse{Data: []sawtooth.BatchStatusEntry{}}
	for _, id := range ids {
		if e, ok := f.statuses[id]; ok {
			resp.Data = append(resp.Data, e)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	require.NoError(f.t, json.NewEncoder(w).Encode(resp))
}

func writeError(w http.ResponseWriter, status, code int, title string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(sawtooth.ErrorResponse{Error: sawtooth.APIError{Code: code, Title: title, Message: title + "."}})
}

func makeBatches(t *testing.T, n int) []ledger.Batch {
	t.Helper()
	s := testSigner(t, 9)
	out := make([]ledger.Batch, n)
	for i := range out {
		id, p := newBatch(t, s, fmt.Appendf(nil, "payload %d", i))
		out[i] = ledger.Batch{ID: id, Payload: p}
	}
	return out
}

func ids(batches []ledger.Batch) []string {
	out := make([]string, len(batches))
	for i, b := range batches {
		out[i] = b.ID
	}
	return out
}

func TestClient_SubmitSendsAllBatchesInOneBatchList(t *testing.T) {
	t.Parallel()
	f, c := newFake(t)
	batches := makeBatches(t, 5)

	errs, err := c.SubmitBatches(context.Background(), batches)
	require.NoError(t, err)
	require.Equal(t, make([]error, 5), errs)
	require.Equal(t, [][]string{ids(batches)}, f.lists)
}

func TestClient_SubmitBisectsARefusedListAndDeliversTheRest(t *testing.T) {
	t.Parallel()
	f, c := newFake(t)
	batches := makeBatches(t, 8)
	f.refuse[batches[2].ID] = true
	f.refuse[batches[7].ID] = true

	errs, err := c.SubmitBatches(context.Background(), batches)
	require.NoError(t, err)
	for i, e := range errs {
		if i == 2 || i == 7 {
			require.Equal(t, ledger.Deterministic, ledger.ClassOf(e), "batch %d", i)
			require.Contains(t, ledger.ReasonOf(e), "Submitted Batches Invalid")
			continue
		}
		require.NoError(t, e, "batch %d", i)
	}
	all := ids(batches)
	want := append(all[:2:2], all[3:7]...)
	require.ElementsMatch(t, want, f.accepted)
	require.Equal(t, ids(batches), f.lists[0], "the whole list is tried first")
}

func TestClient_SubmitClassifiesTheLedgersAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		code   int
		want   ledger.Class
	}{
		{"rate limited", http.StatusTooManyRequests, sawtooth.CodeSubmitBufferFull, ledger.Transient},
		{"validator disconnected", http.StatusServiceUnavailable, sawtooth.CodeValidatorDisconnected, ledger.Transient},
		{"validator not ready", http.StatusServiceUnavailable, sawtooth.CodeValidatorNotReady, ledger.Transient},
		{"unknown validator error", http.StatusInternalServerError, sawtooth.CodeUnknownValidatorError, ledger.Transient},
		{"validator timed out", http.StatusServiceUnavailable, sawtooth.CodeValidatorTimedOut, ledger.Indeterminate},
		{"gateway timeout", http.StatusGatewayTimeout, 0, ledger.Indeterminate},
		{"bad gateway", http.StatusBadGateway, 0, ledger.Indeterminate},
		// A 400 that blames the request, not the batches, must not mark
		// every batch invalid.
		{"wrong content type", http.StatusBadRequest, sawtooth.CodeSubmissionWrongType, ledger.Transient},
		{"not found", http.StatusNotFound, 0, ledger.Transient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, c := newFake(t)
			f.submit = func(w http.ResponseWriter, _ *http.Request, _ []string) {
				writeError(w, tc.status, tc.code, tc.name)
			}
			err := ledgertest.RequireSubmitFails(t, context.Background(), c, makeBatches(t, 3), tc.want)
			require.ErrorIs(t, err, sawtooth.ErrHTTPStatus)
			require.Len(t, f.lists, 1, "no bisection for a failure that is not about the batches")
		})
	}
}

func TestClient_SubmitSplitsAListTooLargeForTheLedger(t *testing.T) {
	t.Parallel()
	f, c := newFake(t)
	batches := makeBatches(t, 4)
	huge := batches[3].ID
	f.submit = func(w http.ResponseWriter, _ *http.Request, ids []string) {
		if len(ids) > 1 || ids[0] == huge {
			writeError(w, http.StatusRequestEntityTooLarge, 0, "Request Entity Too Large")
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
	errs, err := c.SubmitBatches(context.Background(), batches)
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.NoError(t, errs[2])
	require.Equal(t, ledger.Deterministic, ledger.ClassOf(errs[3]))
}

func TestClient_SubmitFailureDuringBisectionAppliesToThatHalfOnly(t *testing.T) {
	t.Parallel()
	f, c := newFake(t)
	batches := makeBatches(t, 4)
	calls := 0
	f.submit = func(w http.ResponseWriter, _ *http.Request, ids []string) {
		calls++
		switch calls {
		case 1: // the whole list
			writeError(w, http.StatusBadRequest, sawtooth.CodeSubmittedBatchesInvalid, "Submitted Batches Invalid")
		case 2: // first half
			w.WriteHeader(http.StatusAccepted)
		default: // second half: the validator goes away
			writeError(w, http.StatusServiceUnavailable, sawtooth.CodeValidatorDisconnected, "Validator Disconnected")
		}
	}
	errs, err := c.SubmitBatches(context.Background(), batches)
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, ledger.Transient, ledger.ClassOf(errs[2]))
	require.Equal(t, ledger.Transient, ledger.ClassOf(errs[3]))
}

func TestClient_SubmitConnectionRefusedIsTransient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := sawtooth.NewClient(url, nil, nil)
	require.NoError(t, err)

	ledgertest.RequireSubmitFails(t, context.Background(), c, makeBatches(t, 2), ledger.Transient)
}

func TestClient_SubmitConnectionCutAfterSendingIsIndeterminate(t *testing.T) {
	t.Parallel()
	f, c := newFake(t)
	f.submit = func(http.ResponseWriter, *http.Request, []string) {
		// The body has been read: the ledger may well have the batches.
		panic(http.ErrAbortHandler)
	}
	ledgertest.RequireSubmitFails(t, context.Background(), c, makeBatches(t, 2), ledger.Indeterminate)
}

func TestClient_SubmitCancelledWhileWaitingForTheAnswerIsIndeterminate(t *testing.T) {
	t.Parallel()
	f, c := newFake(t)
	received := make(chan struct{})
	f.submit = func(_ http.ResponseWriter, r *http.Request, _ []string) {
		close(received)
		<-r.Context().Done()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-received
		cancel()
	}()
	err := ledgertest.RequireSubmitFails(t, ctx, c, makeBatches(t, 1), ledger.Indeterminate)
	require.ErrorIs(t, err, context.Canceled)
}

func TestClient_SubmitCancelledBeforeSendingIsTransient(t *testing.T) {
	t.Parallel()
	f, c := newFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ledgertest.RequireSubmitFails(t, ctx, c, makeBatches(t, 1), ledger.Transient)
	require.Empty(t, f.lists)
}

func TestClient_SubmitRefusesPayloadsThatAreNotBatchesWithoutSendingThem(t *testing.T) {
	t.Parallel()
	f, c := newFake(t)
	batches := makeBatches(t, 3)
	batches[0].Payload = []byte("not a batch")
	batches[1].ID = batches[2].ID // id is not this batch's header_signature

	errs, err := c.SubmitBatches(context.Background(), batches)
	require.NoError(t, err)
	require.Equal(t, ledger.Deterministic, ledger.ClassOf(errs[0]))
	require.ErrorIs(t, errs[0], sawtooth.ErrMalformedBatch)
	require.Equal(t, ledger.Deterministic, ledger.ClassOf(errs[1]))
	require.NoError(t, errs[2])
	require.Equal(t, [][]string{{batches[2].ID}}, f.lists)
}

func TestClient_BatchStatusesUsesGETForShortListsAndPOSTForLongOnes(t *testing.T) {
	t.Parallel()
	f, c := newFake(t)
	all := ids(makeBatches(t, sawtooth.DefaultStatusGETLimit+1))
	for _, id := range all {
		f.statuses[id] = sawtooth.BatchStatusEntry{ID: id, Status: ledger.BatchPending}
	}

	got, err := c.BatchStatuses(context.Background(), all[:sawtooth.DefaultStatusGETLimit])
	require.NoError(t, err)
	require.Len(t, got, sawtooth.DefaultStatusGETLimit)
	got, err = c.BatchStatuses(context.Background(), all)
	require.NoError(t, err)
	require.Len(t, got, len(all))

	require.Len(t, f.statusReqs, 2)
	require.Equal(t, http.MethodGet, f.statusReqs[0].Method)
	require.Equal(t, http.MethodPost, f.statusReqs[1].Method)
	require.Equal(t, all, f.statusIDs[1])
}

func TestClient_BatchStatusesSplitsLongListsIntoSeveralRequests(t *testing.T) {
	t.Parallel()
	f := &fakeRESTAPI{t: t, statuses: map[string]sawtooth.BatchStatusEntry{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := sawtooth.NewClient(srv.URL, srv.Client(), nil, sawtooth.WithStatusLimits(2, 3))
	require.NoError(t, err)
	all := ids(makeBatches(t, 7))

	got, err := c.BatchStatuses(context.Background(), all)
	require.NoError(t, err)
	require.Len(t, got, 7)
	require.Equal(t, [][]string{all[0:3], all[3:6], all[6:7]}, f.statusIDs)
	require.Equal(t, []string{http.MethodPost, http.MethodPost, http.MethodGet},
		[]string{f.statusReqs[0].Method, f.statusReqs[1].Method, f.statusReqs[2].Method})
}

func TestClient_BatchStatusesReportsEachStatusAndUnknownForMissingIDs(t *testing.T) {
	t.Parallel()
	f, c := newFake(t)
	all := ids(makeBatches(t, 5))
	f.statuses[all[0]] = sawtooth.BatchStatusEntry{ID: all[0], Status: ledger.BatchCommitted}
	f.statuses[all[1]] = sawtooth.BatchStatusEntry{ID: all[1], Status: ledger.BatchPending}
	f.statuses[all[2]] = sawtooth.BatchStatusEntry{ID: all[2], Status: ledger.BatchInvalid,
		InvalidTransactions: []sawtooth.InvalidTransaction{{ID: "t1", Message: "no such product"}, {ID: "t2", Message: "bad owner"}}}
	f.statuses[all[3]] = sawtooth.BatchStatusEntry{ID: all[3], Status: ledger.BatchUnknown}
	// all[4] is left out of the answer.
	asked := append(all, "not-an-id")

	got, err := c.BatchStatuses(context.Background(), asked)
	require.NoError(t, err)
	require.Equal(t, map[string]ledger.BatchStatusResult{
		all[0]:      {Status: ledger.BatchCommitted},
		all[1]:      {Status: ledger.BatchPending},
		all[2]:      {Status: ledger.BatchInvalid, Reason: "no such product; bad owner"},
		all[3]:      {Status: ledger.BatchUnknown},
		all[4]:      {Status: ledger.BatchUnknown},
		"not-an-id": {Status: ledger.BatchUnknown},
	}, got)
	require.Equal(t, [][]string{all}, f.statusIDs, "a malformed id is not sent")
}

func TestClient_BatchStatusesFailsOnAnUnknownStatusString(t *testing.T) {
	t.Parallel()
	f, c := newFake(t)
	id := ids(makeBatches(t, 1))[0]
	f.statuses[id] = sawtooth.BatchStatusEntry{ID: id, Status: "MAYBE"}
	_, err := c.BatchStatuses(context.Background(), []string{id})
	require.ErrorContains(t, err, "MAYBE")
}

func TestClient_BatchStatusesServerErrorIsTransient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusServiceUnavailable, sawtooth.CodeValidatorDisconnected, "Validator Disconnected")
	}))
	t.Cleanup(srv.Close)
	c, err := sawtooth.NewClient(srv.URL, srv.Client(), nil)
	require.NoError(t, err)
	_, err = c.BatchStatuses(context.Background(), ids(makeBatches(t, 1)))
	require.Equal(t, ledger.Transient, ledger.ClassOf(err))
	require.Contains(t, ledger.ReasonOf(err), "Validator Disconnected")
}

func TestNewClient_RefusesABaseURLThatIsNotHTTP(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "localhost:8008", "ftp://x", "http://"} {
		_, err := sawtooth.NewClient(u, nil, nil)
		require.Error(t, err, u)
	}
}
