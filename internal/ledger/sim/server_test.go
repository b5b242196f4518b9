package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/ledger/sim"
)

type serverBundle struct {
	*bundle
	url    string
	client *sawtooth.Client
}

// setupServer serves a simulated ledger over Sawtooth's REST API and returns
// the real Sawtooth client pointed at it.
func setupServer(t *testing.T, cfg sim.Config) *serverBundle {
	t.Helper()
	b := setup(t, cfg)
	srv := httptest.NewServer(sim.NewServer(b.l, nil))
	t.Cleanup(srv.Close)
	c, err := sawtooth.NewClient(srv.URL, srv.Client(), nil)
	require.NoError(t, err)
	return &serverBundle{bundle: b, url: srv.URL, client: c}
}

func (s *serverBundle) statuses(t *testing.T, ids ...string) map[string]ledger.BatchStatusResult {
	t.Helper()
	got, err := s.client.BatchStatuses(context.Background(), ids)
	require.NoError(t, err)
	require.Len(t, got, len(ids))
	return got
}

func TestServer_ClientSeesPendingThenCommitted(t *testing.T) {
	t.Parallel()
	s := setupServer(t, sim.Config{CommitDelay: 10 * time.Second})
	batches := s.batches(t, 3)
	errs, err := s.client.SubmitBatches(context.Background(), batches)
	require.NoError(t, err)
	require.Equal(t, make([]error, 3), errs)

	for _, r := range s.statuses(t, ids(batches)...) {
		require.Equal(t, ledger.BatchPending, r.Status)
	}
	s.clock.Advance(10 * time.Second)
	for _, r := range s.statuses(t, ids(batches)...) {
		require.Equal(t, ledger.BatchStatusResult{Status: ledger.BatchCommitted}, r)
	}
	require.Equal(t, uint64(1), s.l.Stats().SubmitCalls, "one BatchList for all batches")
}

func TestServer_ClientSeesInvalidWithTheTransactionMessage(t *testing.T) {
	t.Parallel()
	s := setupServer(t, sim.Config{RejectRate: 1})
	batch := s.batches(t, 1)[0]
	_, err := s.client.SubmitBatches(context.Background(), []ledger.Batch{batch})
	require.NoError(t, err)
	require.Equal(t, ledger.BatchStatusResult{Status: ledger.BatchInvalid, Reason: sim.InvalidReason},
		s.statuses(t, batch.ID)[batch.ID])

	// On the wire, the reason is the invalid transaction's message, under
	// the transaction's id, as Sawtooth sends it.
	resp, err := http.Get(s.url + "/batch_statuses?id=" + batch.ID)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body sawtooth.BatchStatusesResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Len(t, body.Data, 1)
	require.Len(t, body.Data[0].InvalidTransactions, 1)
	parsed, err := sawtooth.ParseBatch(batch.Payload)
	require.NoError(t, err)
	require.Equal(t, parsed.Transactions[0].HeaderSignature, body.Data[0].InvalidTransactions[0].ID)
	require.Equal(t, sim.InvalidReason, body.Data[0].InvalidTransactions[0].Message)
	require.Contains(t, body.Link, "/batch_statuses?id="+batch.ID)
}

func TestServer_ClientSeesUnknownForABatchNeverSent(t *testing.T) {
	t.Parallel()
	s := setupServer(t, sim.Config{})
	id := s.batches(t, 1)[0].ID
	require.Equal(t, ledger.BatchStatusResult{Status: ledger.BatchUnknown}, s.statuses(t, id)[id])
}

func TestServer_ClientSeesLostBatchAsUnknownAndCanResubmitIt(t *testing.T) {
	t.Parallel()
	s := setupServer(t, sim.Config{LostRate: 1, CommitDelay: time.Second})
	batch := s.batches(t, 1)
	_, err := s.client.SubmitBatches(context.Background(), batch)
	require.NoError(t, err)
	s.clock.Advance(time.Second)
	require.Equal(t, ledger.BatchUnknown, s.statuses(t, batch[0].ID)[batch[0].ID].Status)

	errs, err := s.client.SubmitBatches(context.Background(), batch)
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.Equal(t, ledger.BatchPending, s.statuses(t, batch[0].ID)[batch[0].ID].Status)
}

func TestServer_TransientFailureIs503AndTransientForTheClient(t *testing.T) {
	t.Parallel()
	s := setupServer(t, sim.Config{TransientRate: 1})
	batches := s.batches(t, 2)
	err := ledgertest.RequireSubmitFails(t, context.Background(), s.client, batches, ledger.Transient)
	require.Contains(t, ledger.ReasonOf(err), "Validator Disconnected")
	require.Equal(t, uint64(0), s.l.Stats().Accepted)

	resp := postBatchList(t, s.url, "application/octet-stream", sawtooth.AppendBatchList(nil, batches[0].Payload))
	require.Equal(t, http.StatusServiceUnavailable, resp.status)
	require.Equal(t, sawtooth.CodeValidatorDisconnected, resp.apiErr.Code)
}

func TestServer_DroppedResponseIsIndeterminateButTheLedgerHasTheBatches(t *testing.T) {
	t.Parallel()
	s := setupServer(t, sim.Config{DropResponseRate: 1, CommitDelay: time.Minute})
	batches := s.batches(t, 2)
	ledgertest.RequireSubmitFails(t, context.Background(), s.client, batches, ledger.Indeterminate)
	for _, r := range s.statuses(t, ids(batches)...) {
		require.Equal(t, ledger.BatchPending, r.Status)
	}
	require.Equal(t, uint64(1), s.l.Stats().DroppedResponses)
}

func TestServer_RefusesTheWholeListAndTheClientBisectsToTheBadBatch(t *testing.T) {
	t.Parallel()
	s := setupServer(t, sim.Config{CommitDelay: time.Minute})
	batches := s.batches(t, 5)
	tampered := slices.Clone(batches[3].Payload)
	tampered[10] ^= 0x01 // inside the signed header
	batches[3].Payload = tampered

	// Sent alone, the list is refused as a whole: 400 code 30, nothing taken.
	raw := postBatchList(t, s.url, "application/octet-stream", sawtooth.AppendBatchList(nil, batches[2].Payload, batches[3].Payload))
	require.Equal(t, http.StatusBadRequest, raw.status)
	require.Equal(t, sawtooth.CodeSubmittedBatchesInvalid, raw.apiErr.Code)
	require.Equal(t, uint64(0), s.l.Stats().Accepted)

	errs, err := s.client.SubmitBatches(context.Background(), batches)
	require.NoError(t, err)
	for i, e := range errs {
		if i == 3 {
			require.Equal(t, ledger.Deterministic, ledger.ClassOf(e))
			require.Contains(t, ledger.ReasonOf(e), "Submitted Batches Invalid")
			continue
		}
		require.NoError(t, e, "batch %d", i)
	}
	got := s.statuses(t, ids(batches)...)
	for i, bt := range batches {
		want := ledger.BatchPending
		if i == 3 {
			want = ledger.BatchUnknown
		}
		require.Equal(t, want, got[bt.ID].Status, "batch %d", i)
	}
	require.Equal(t, uint64(4), s.l.Stats().Accepted)
}

func TestServer_StatusesForLongListsGoOverPOST(t *testing.T) {
	t.Parallel()
	s := setupServer(t, sim.Config{})
	batches := s.batches(t, sawtooth.DefaultStatusGETLimit+5)
	_, err := s.client.SubmitBatches(context.Background(), batches)
	require.NoError(t, err)
	got := s.statuses(t, ids(batches)...)
	for _, r := range got {
		require.Equal(t, ledger.BatchCommitted, r.Status)
	}

	body, err := json.Marshal(ids(batches))
	require.NoError(t, err)
	resp, err := http.Post(s.url+"/batch_statuses", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var decoded sawtooth.BatchStatusesResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&decoded))
	require.Len(t, decoded.Data, len(batches))
	require.Equal(t, batches[0].ID, decoded.Data[0].ID, "in the order asked")
}

func TestServer_RefusesMalformedRequestsWithSawtoothErrorCodes(t *testing.T) {
	t.Parallel()
	s := setupServer(t, sim.Config{})
	good := s.batches(t, 1)[0]
	for _, tc := range []struct {
		name        string
		contentType string
		body        []byte
		code        int
	}{
		{"undecodable list", "application/octet-stream", []byte{0x0a, 0x7f, 0x01}, sawtooth.CodeBadProtobufSubmitted},
		{"undecodable batch", "application/octet-stream", sawtooth.AppendBatchList(nil, []byte{0xff, 0xff}), sawtooth.CodeBadProtobufSubmitted},
		{"empty list", "application/octet-stream", nil, sawtooth.CodeNoBatchesSubmitted},
		{"wrong content type", "application/json", sawtooth.AppendBatchList(nil, good.Payload), sawtooth.CodeSubmissionWrongType},
	} {
		resp := postBatchList(t, s.url, tc.contentType, tc.body)
		require.Equal(t, http.StatusBadRequest, resp.status, tc.name)
		require.Equal(t, tc.code, resp.apiErr.Code, tc.name)
	}

	for _, tc := range []struct {
		name string
		do   func() (*http.Response, error)
		code int
	}{
		{"GET without ids", func() (*http.Response, error) { return http.Get(s.url + "/batch_statuses") }, sawtooth.CodeStatusIDQueryInvalid},
		{"GET with a malformed id", func() (*http.Response, error) { return http.Get(s.url + "/batch_statuses?id=xyz") }, sawtooth.CodeInvalidResourceID},
		{"POST not JSON", func() (*http.Response, error) {
			return http.Post(s.url+"/batch_statuses", "text/plain", strings.NewReader(`["a"]`))
		}, sawtooth.CodeStatusWrongContentType},
		{"POST empty array", func() (*http.Response, error) {
			return http.Post(s.url+"/batch_statuses", "application/json", strings.NewReader(`[]`))
		}, sawtooth.CodeStatusBodyInvalid},
	} {
		resp, err := tc.do()
		require.NoError(t, err, tc.name)
		var e sawtooth.ErrorResponse
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e), tc.name)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, tc.name)
		require.Equal(t, tc.code, e.Error.Code, tc.name)
	}
	require.Equal(t, uint64(0), s.l.Stats().SubmitCalls, "the ledger never saw a malformed request")
}

func TestServer_DebugEndpointsServeTheLogAndStats(t *testing.T) {
	t.Parallel()
	s := setupServer(t, sim.Config{CommitDelay: time.Second})
	batches := s.batches(t, 2)
	_, err := s.client.SubmitBatches(context.Background(), batches)
	require.NoError(t, err)
	s.clock.Advance(time.Second)

	var events []sim.Event
	getJSON(t, s.url+"/debug/log", &events)
	require.Equal(t, s.l.Events(), events)
	require.Equal(t, []sim.EventKind{sim.EventAccepted, sim.EventAccepted, sim.EventCommitted, sim.EventCommitted}, kinds(events))
	require.Equal(t, batches[0].ID, events[0].BatchID)

	var since []sim.Event
	getJSON(t, s.url+"/debug/log?since=3", &since)
	require.Equal(t, events[3:], since)

	var stats sim.Stats
	getJSON(t, s.url+"/debug/stats", &stats)
	require.Equal(t, s.l.Stats(), stats)
	require.Equal(t, uint64(2), stats.Committed)

	// The wire names are the documented snake_case ones.
	var raw []map[string]any
	getJSON(t, s.url+"/debug/log", &raw)
	require.Equal(t, "accepted", raw[0]["kind"])
	require.Equal(t, batches[0].ID, raw[0]["batch_id"])
	require.EqualValues(t, 1, raw[0]["seq"])
	require.NotEmpty(t, raw[0]["time"])
}

type rawAnswer struct {
	status int
	apiErr sawtooth.APIError
}

func postBatchList(t *testing.T, url, contentType string, body []byte) rawAnswer {
	t.Helper()
	resp, err := http.Post(url+"/batches", contentType, bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var e sawtooth.ErrorResponse
	if resp.StatusCode != http.StatusAccepted {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	}
	return rawAnswer{status: resp.StatusCode, apiErr: e.Error}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}
