package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth/sawtoothpb"
)

// MaxBatchListBytes bounds a POST /batches body; larger ones get 413.
const MaxBatchListBytes = 32 << 20

// maxStatusBodyBytes bounds a POST /batch_statuses body.
const maxStatusBodyBytes = 4 << 20

// NewServer serves l over Sawtooth's REST API, so that the real
// sawtooth.Client (or any Sawtooth client) can use it:
//
//	POST /batches          a BatchList (application/octet-stream); 202
//	GET  /batch_statuses   ?id=a,b,c; 200 {"data":[…],"link":…}
//	POST /batch_statuses   a JSON array of ids (application/json); 200
//
// As Sawtooth does, it refuses a whole BatchList (400, code 30) when any batch
// in it is refused, and takes none of them. A simulated transient failure is a
// 503 (code 18, Validator Disconnected); a simulated dropped response cuts the
// connection after the ledger has taken the batches.
//
// For tests and operators it also serves GET /debug/log (the event log as a
// JSON array; ?since=N returns the events after seq N) and GET /debug/stats.
func NewServer(l *Ledger, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &server{l: l, log: logger}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /batches", s.submitBatches)
	mux.HandleFunc("GET /batch_statuses", s.getBatchStatuses)
	mux.HandleFunc("POST /batch_statuses", s.postBatchStatuses)
	mux.HandleFunc("GET /debug/log", s.debugLog)
	mux.HandleFunc("GET /debug/stats", s.debugStats)
	return mux
}

type server struct {
	l   *Ledger
	log *slog.Logger
}

// errTooLarge is the simulated REST API's own: Sawtooth has no code for it.
var errTooLarge = sawtooth.APIError{Code: 0, Title: "Request Entity Too Large",
	Message: "The BatchList is larger than the simulated REST API accepts."}

func (s *server) submitBatches(w http.ResponseWriter, r *http.Request) {
	if !hasMediaType(r, "application/octet-stream") {
		writeAPIError(w, http.StatusBadRequest, sawtooth.APISubmissionWrongType)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBatchListBytes))
	if err != nil {
		if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
			writeAPIError(w, http.StatusRequestEntityTooLarge, errTooLarge)
			return
		}
		s.log.DebugContext(r.Context(), "simledger: reading batch list failed", "error", err)
		writeAPIError(w, http.StatusBadRequest, sawtooth.APIBadProtobufSubmitted)
		return
	}
	payloads, err := sawtooth.SplitBatchList(body)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, sawtooth.APIBadProtobufSubmitted)
		return
	}
	if len(payloads) == 0 {
		writeAPIError(w, http.StatusBadRequest, sawtooth.APINoBatchesSubmitted)
		return
	}
	batches := make([]ledger.Batch, len(payloads))
	for i, p := range payloads {
		// A batch that is not even a Batch message makes the BatchList
		// undecodable, which Sawtooth's REST API answers itself (35); one that
		// decodes but is wrong is the validator's to refuse (30).
		var pb sawtoothpb.Batch
		if err := proto.Unmarshal(p, &pb); err != nil {
			writeAPIError(w, http.StatusBadRequest, sawtooth.APIBadProtobufSubmitted)
			return
		}
		batches[i] = ledger.Batch{ID: pb.HeaderSignature, Payload: p}
	}

	res, err := s.l.submitBatches(r.Context(), batches, true)
	if err != nil {
		writeAPIError(w, http.StatusServiceUnavailable, sawtooth.APIValidatorDisconnected)
		return
	}
	if res.refused {
		s.log.InfoContext(r.Context(), "simledger: batch list refused", "batches", len(batches))
		writeAPIError(w, http.StatusBadRequest, sawtooth.APISubmittedBatchesInvalid)
		return
	}
	if res.callErr != nil {
		// The ledger has the batches; the caller must not learn it. Aborting
		// the handler cuts the connection (HTTP/1) or resets the stream
		// (HTTP/2) without a response, as a crash or network fault would.
		panic(http.ErrAbortHandler)
	}
	ids := make([]string, len(batches))
	for i, b := range batches {
		ids[i] = b.ID
	}
	writeJSON(w, http.StatusAccepted, sawtooth.SubmitResponse{Link: statusLink(r, ids)})
}

func (s *server) getBatchStatuses(w http.ResponseWriter, r *http.Request) {
	var ids []string
	for _, id := range strings.Split(r.URL.Query().Get("id"), ",") {
		if id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		writeAPIError(w, http.StatusBadRequest, sawtooth.APIStatusIDQueryInvalid)
		return
	}
	s.batchStatuses(w, r, ids)
}

func (s *server) postBatchStatuses(w http.ResponseWriter, r *http.Request) {
	if !hasMediaType(r, "application/json") {
		writeAPIError(w, http.StatusBadRequest, sawtooth.APIStatusWrongContentType)
		return
	}
	var ids []string
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxStatusBodyBytes))
	if err := dec.Decode(&ids); err != nil || len(ids) == 0 {
		writeAPIError(w, http.StatusBadRequest, sawtooth.APIStatusBodyInvalid)
		return
	}
	s.batchStatuses(w, r, ids)
}

func (s *server) batchStatuses(w http.ResponseWriter, r *http.Request, ids []string) {
	for _, id := range ids {
		if !sawtooth.IsID(id) {
			e := sawtooth.APIInvalidResourceID
			e.Message += id
			writeAPIError(w, http.StatusBadRequest, e)
			return
		}
	}
	entries, err := s.l.batchStatusEntries(r.Context(), ids)
	if err != nil {
		writeAPIError(w, http.StatusServiceUnavailable, sawtooth.APIValidatorDisconnected)
		return
	}
	writeJSON(w, http.StatusOK, sawtooth.BatchStatusesResponse{Data: entries, Link: statusLink(r, ids)})
}

func (s *server) debugLog(w http.ResponseWriter, r *http.Request) {
	var since uint64
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			http.Error(w, "since must be a sequence number", http.StatusBadRequest)
			return
		}
		since = n
	}
	writeJSON(w, http.StatusOK, s.l.EventsSince(since))
}

func (s *server) debugStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.l.Stats())
}

// statusLink is the batch_statuses URL for ids on the host the caller used.
func statusLink(r *http.Request, ids []string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s/batch_statuses?id=%s", scheme, r.Host, strings.Join(ids, ","))
}

func hasMediaType(r *http.Request, want string) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == want
}

func writeAPIError(w http.ResponseWriter, status int, e sawtooth.APIError) {
	writeJSON(w, status, sawtooth.ErrorResponse{Error: e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An encoding error here is a client gone away; there is no one to tell.
	_ = json.NewEncoder(w).Encode(v)
}
