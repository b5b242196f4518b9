package httpapi

// The Sawtooth drop-in: POST /batches, and GET and POST
// /batch_statuses, answer as Hyperledger Sawtooth's REST API does, so that a
// Sawtooth client can post its BatchList to ledgerq instead of a validator
// and poll ledgerq for the outcome. The batches land in ledgerq's batch lane
// like those of POST /v1/batches; the statuses are ledgerq's, said in
// Sawtooth's four words.
//
// Every error of these routes is a Sawtooth error object,
// {"error":{"code":…,"title":…,"message":…}}, with Sawtooth's status and code
// (sawtooth_rest_api/exceptions.py) where Sawtooth meets the same condition,
// and ledgerq's own codes (100 and up) where it does not. The handlers write
// their errors themselves (sawtoothFail); sawtoothErrors, attached to these
// operations in place of the query guards, turns what escapes them (the
// parameter binder's errors) into the same shape.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/proto"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth/sawtoothpb"
	"github.com/ledgerq/ledgerq/internal/store"
)

const (
	// sawtoothMaxWait is how long a status query with wait waits at most,
	// and how long wait without a number waits: Sawtooth waits 95 % of its
	// REST API's timeout, 300 s unless configured, and a longer wait would
	// end in its own 503.
	sawtoothMaxWait = 285 * time.Second
	// statusPollInterval is how often a waiting status query reads its
	// PENDING batches again. No NOTIFY tells the API that a status was
	// recorded, and a read of a few rows by primary key is cheap.
	statusPollInterval = 200 * time.Millisecond
	// statusReadChunk bounds the ids of one database read: every row
	// carries its batch's payload.
	statusReadChunk = 100
	// maxServiceIDLen is the longest service id the table takes.
	maxServiceIDLen = 256
)

// sawtoothError is an answer given as a Sawtooth error object.
type sawtoothError struct {
	status int
	body   sawtooth.APIError
	// cause is logged for server-side failures.
	cause error
}

func (e *sawtoothError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %v", e.body, e.cause)
	}
	return e.body.String()
}

// The Sawtooth errors of the ingress: Sawtooth's own
// (sawtooth.API…), and those of conditions Sawtooth does not meet.
var (
	stUnknown = sawtooth.APIError{Code: sawtooth.CodeUnknownValidatorError, Title: "Unknown Error",
		Message: "An unknown error occurred in ledgerq while processing your request."}

	// ledgerq's own.
	stUnavailable = sawtooth.APIError{Code: sawtooth.CodeDatabaseUnavailable, Title: "Database Unavailable",
		Message: "ledgerq's database did not answer in time. Your request may or may not have been processed; sending it again is safe."}
	stTooLarge = sawtooth.APIError{Code: sawtooth.CodeRequestTooLarge, Title: "Request Too Large",
		Message: "The request is larger than ledgerq takes: "}
	stInvalidParameter = sawtooth.APIError{Code: sawtooth.CodeInvalidParameter, Title: "Invalid Parameter",
		Message: "A parameter of the request is invalid: "}
	stAccessDenied = sawtooth.APIError{Code: sawtooth.CodeAccessDenied, Title: "Access Denied", Message: ""}
	stRateLimited  = sawtooth.APIError{Code: sawtooth.CodeRateLimited, Title: "Too Many Requests", Message: ""}
)

// stErr returns the Sawtooth error base with detail appended to its message,
// as Sawtooth appends its additional information.
func stErr(status int, base sawtooth.APIError, detail string) *sawtoothError {
	base.Message += detail
	return &sawtoothError{status: status, body: base}
}

// asSawtoothError classifies any error of a Sawtooth route.
func asSawtoothError(err error) *sawtoothError {
	var se *sawtoothError
	var he *echo.HTTPError
	var ae *Error
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden):
		return stErr(ae.Status, stAccessDenied, ae.Message)
	case errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests:
		return stErr(ae.Status, stRateLimited, ae.Message)
	case bodyTooLarge(err):
		return stErr(http.StatusRequestEntityTooLarge, stTooLarge, "the body is larger than --api-max-body-bytes.")
	case errors.As(err, &he) && he.Code < http.StatusInternalServerError:
		// The binder's: a parameter given more than once.
		return stErr(he.Code, stInvalidParameter, fmt.Sprint(he.Message))
	case store.IsUnavailable(err): // a request's deadline included
		return &sawtoothError{status: http.StatusServiceUnavailable, body: stUnavailable, cause: err}
	}
	return &sawtoothError{status: http.StatusInternalServerError, body: stUnknown, cause: err}
}

func writeSawtoothError(c echo.Context, e *sawtoothError) error {
	return sawtoothJSON(c, e.status, apigen.SawtoothError{Error: apigen.SawtoothErrorDetail{
		Code: e.body.Code, Title: e.body.Title, Message: e.body.Message,
	}})
}

// sawtoothJSON answers v as JSON without escaping &, < and >, as Sawtooth
// does: a link shown by curl then reads as a URL that can be pasted.
func sawtoothJSON(c echo.Context, status int, v any) error {
	resp := c.Response()
	resp.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	resp.WriteHeader(status)
	enc := json.NewEncoder(resp)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// sawtoothErrors answers an error that escaped a Sawtooth handler (the
// parameter binder's) as a Sawtooth error object. A server-side error is
// still returned after the answer is written, so the request logger records
// it; the error handler writes nothing over a written answer.
func sawtoothErrors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if err == nil || c.Response().Committed {
			return err
		}
		e := asSawtoothError(err)
		if werr := writeSawtoothError(c, e); werr != nil {
			return werr
		}
		if e.status >= http.StatusInternalServerError {
			return err
		}
		return nil
	}
}

// sawtoothFail answers err as a Sawtooth error object and logs server-side
// failures. A client that went away gets no answer.
func (s *Server) sawtoothFail(c echo.Context, err error) error {
	req := c.Request()
	if errors.Is(req.Context().Err(), context.Canceled) {
		s.logger.Debug("httpapi: client went away", "uri", logURI(req), "error", err)
		c.Response().Status = statusClientClosedRequest
		return nil
	}
	e := asSawtoothError(err)
	switch {
	case e.status == http.StatusServiceUnavailable:
		s.logger.Warn("httpapi: database unavailable", "uri", logURI(req), "error", e.cause)
	case e.status >= http.StatusInternalServerError:
		s.logger.Error("httpapi: request failed", "uri", logURI(req), "error", e.cause)
	default:
		s.logger.Debug("httpapi: sawtooth request refused", "uri", logURI(req), "code", e.body.Code, "message", e.body.Message)
	}
	return writeSawtoothError(c, e)
}

// PostSawtoothBatches answers POST /batches: it stores every batch of the
// BatchList in the batch lane, in one transaction, and answers 202 with the
// link to their statuses.
func (s *Server) PostSawtoothBatches(c echo.Context, params apigen.PostSawtoothBatchesParams) error {
	link, err := s.storeBatchList(c, params)
	if err != nil {
		return s.sawtoothFail(c, err)
	}
	return sawtoothJSON(c, http.StatusAccepted, apigen.SawtoothLink{Link: link})
}

func (s *Server) storeBatchList(c echo.Context, params apigen.PostSawtoothBatchesParams) (string, error) {
	req := c.Request()
	if !hasMediaType(req, "application/octet-stream") {
		return "", stErr(http.StatusBadRequest, sawtooth.APISubmissionWrongType, "")
	}
	service, err := serviceParam(params)
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return "", s.bodyError(err)
	}
	if len(body) == 0 {
		return "", stErr(http.StatusBadRequest, sawtooth.APINoBatchesSubmitted, "")
	}
	raws, err := sawtooth.SplitBatchList(body)
	if err != nil {
		return "", stErr(http.StatusBadRequest, sawtooth.APIBadProtobufSubmitted, "")
	}
	if len(raws) == 0 {
		return "", stErr(http.StatusBadRequest, sawtooth.APINoBatchesSubmitted, "")
	}
	if len(raws) > s.cfg.MaxBatchesPerRequest {
		return "", stErr(http.StatusRequestEntityTooLarge, stTooLarge,
			fmt.Sprintf("the BatchList holds %d batches, at most %d are taken per request (--api-max-batches-per-request).", len(raws), s.cfg.MaxBatchesPerRequest))
	}

	// Batches of one service go to the ledger in created_at order, ties by
	// id; one microsecond apart (PostgreSQL keeps microseconds) they keep
	// the list's order instead.
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	ids := make([]string, len(raws))
	batches := make([]store.NewBatch, 0, len(raws))
	// The signature checks, on every core; the loop below answers for the
	// first batch that fails, in list order.
	verified := make([]error, len(raws))
	inParallel(len(raws), func(i int) bool {
		if len(raws[i]) > s.cfg.MaxPayloadBytes {
			return false
		}
		_, verified[i] = sawtooth.ParseAndVerifyBatch(raws[i])
		return verified[i] == nil
	})
	for i, raw := range raws {
		if len(raw) > s.cfg.MaxPayloadBytes {
			return "", stErr(http.StatusRequestEntityTooLarge, stTooLarge,
				fmt.Sprintf("batch %d is %d bytes, at most %d are taken (--api-max-payload-bytes).", i, len(raw), s.cfg.MaxPayloadBytes))
		}
		// A batch that is not even a Batch message makes the BatchList
		// undecodable, which Sawtooth's REST API answers itself (35); one
		// that decodes but does not verify is the validator's to refuse (30).
		var pb sawtoothpb.Batch
		if err := proto.Unmarshal(raw, &pb); err != nil {
			return "", stErr(http.StatusBadRequest, sawtooth.APIBadProtobufSubmitted, "")
		}
		if err := verified[i]; err != nil {
			return "", stErr(http.StatusBadRequest, sawtooth.APISubmittedBatchesInvalid, fmt.Sprintf(" Batch %d: %v", i, err))
		}
		ids[i] = pb.HeaderSignature
		if slices.Contains(ids[:i], ids[i]) {
			continue // a validator takes a batch once
		}
		svc := service
		if svc == "" {
			h, err := sawtooth.DecodeBatchHeader(&pb)
			if err != nil {
				return "", stErr(http.StatusBadRequest, sawtooth.APISubmittedBatchesInvalid, fmt.Sprintf(" Batch %d: %v", i, err))
			}
			// One signer's batches keep their order by default.
			svc = h.SignerPublicKey
		}
		if p := principalOf(req.Context()); s.cfg.Access.SawtoothRequireKey && !p.service(svc) {
			return "", forbiddenService(p, svc)
		}
		batches = append(batches, store.NewBatch{
			ID: ids[i], ServiceID: svc, Payload: raw, CreatedAt: now.Add(time.Duration(i) * time.Microsecond),
		})
	}

	res, err := s.insertBatchList(req.Context(), now, batches)
	if err != nil {
		return "", err
	}
	received, queued := s.stored(res)
	s.logger.Debug("httpapi: sawtooth batch list stored", "batches", len(raws), "new", received, "queued", queued)
	return sawtoothLink(req, "/batch_statuses", "id", strings.Join(ids, ",")), nil
}

// insertBatchList stores batches in one transaction. A batch stored already
// keeps its service, payload and place: the store refuses to store it again
// with other content, so the call is repeated with the stored content.
func (s *Server) insertBatchList(ctx context.Context, now time.Time, batches []store.NewBatch) ([]store.InsertedBatch, error) {
	for attempt := 1; ; attempt++ {
		dctx, cancel := s.dbContext(ctx)
		res, err := s.store.BatchInsert(dctx, store.BatchInsertParams{Now: now, Batches: batches})
		cancel()
		var conflict *store.ConflictError
		// A second conflict means the stored batch changed between the read
		// and the insert (retention deleted it and a client stored it
		// again); a third is not worth waiting for.
		if !errors.As(err, &conflict) || attempt == 3 {
			return res, err
		}
		ids := make([]string, len(batches))
		for i, b := range batches {
			ids[i] = b.ID
		}
		dctx, cancel = s.dbContext(ctx)
		stored, err := s.store.BatchGetMany(dctx, ids)
		cancel()
		if err != nil {
			return nil, err
		}
		for _, st := range stored {
			i := slices.IndexFunc(batches, func(b store.NewBatch) bool { return b.ID == st.ID })
			batches[i].ServiceID, batches[i].Payload, batches[i].CreatedAt = st.ServiceID, st.Payload, st.CreatedAt
		}
	}
}

// serviceParam returns the service id the request names, or "" for the
// batch signer's public key.
func serviceParam(p apigen.PostSawtoothBatchesParams) (string, error) {
	query, header := deref(p.ServiceID), deref(p.XLedgerqServiceID)
	if query != "" && header != "" && query != header {
		return "", stErr(http.StatusBadRequest, stInvalidParameter,
			fmt.Sprintf("the X-Ledgerq-Service-Id header (%q) and the service_id query parameter (%q) name different services.", header, query))
	}
	svc := cmp.Or(query, header)
	if problem := textProblem(svc); problem != "" {
		return "", stErr(http.StatusBadRequest, stInvalidParameter, "the service id "+problem+".")
	}
	if utf8.RuneCountInString(svc) > maxServiceIDLen {
		return "", stErr(http.StatusBadRequest, stInvalidParameter,
			fmt.Sprintf("the service id is longer than %d characters.", maxServiceIDLen))
	}
	return svc, nil
}

// bodyTooLarge reports whether err, from reading a request body, is the
// body limit's: http.MaxBytesError, or echo's 413 for a body without a
// Content-Length.
func bodyTooLarge(err error) bool {
	var maxErr *http.MaxBytesError
	var he *echo.HTTPError
	return errors.As(err, &maxErr) || errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge
}

func (s *Server) bodyError(err error) error {
	if bodyTooLarge(err) {
		return stErr(http.StatusRequestEntityTooLarge, stTooLarge,
			fmt.Sprintf("the body is larger than %d bytes (--api-max-body-bytes).", s.cfg.MaxBodyBytes))
	}
	// The client broke off the body.
	return stErr(http.StatusBadRequest, sawtooth.APIBadProtobufSubmitted, "")
}

// GetSawtoothBatchStatuses answers GET /batch_statuses?id=a,b[&wait[=N]].
func (s *Server) GetSawtoothBatchStatuses(c echo.Context, params apigen.GetSawtoothBatchStatusesParams) error {
	if params.ID == nil {
		return s.sawtoothFail(c, stErr(http.StatusBadRequest, sawtooth.APIStatusIDQueryInvalid, ""))
	}
	return s.answerStatuses(c, strings.Split(*params.ID, ","), params.Wait, true)
}

// PostSawtoothBatchStatuses answers POST /batch_statuses, the ids a JSON
// array in the body. As Sawtooth's, its answer has no link.
func (s *Server) PostSawtoothBatchStatuses(c echo.Context, params apigen.PostSawtoothBatchStatusesParams) error {
	req := c.Request()
	if !hasMediaType(req, "application/json") {
		return s.sawtoothFail(c, stErr(http.StatusBadRequest, sawtooth.APIStatusWrongContentType, ""))
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		if bodyTooLarge(err) {
			return s.sawtoothFail(c, s.bodyError(err))
		}
		return s.sawtoothFail(c, stErr(http.StatusBadRequest, sawtooth.APIStatusBodyInvalid, ""))
	}
	var ids []string
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ids); err != nil || len(ids) == 0 || dec.More() {
		return s.sawtoothFail(c, stErr(http.StatusBadRequest, sawtooth.APIStatusBodyInvalid, ""))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return s.sawtoothFail(c, stErr(http.StatusBadRequest, sawtooth.APIStatusBodyInvalid, ""))
	}
	return s.answerStatuses(c, ids, params.Wait, false)
}

func (s *Server) answerStatuses(c echo.Context, ids []string, waitParam *string, withLink bool) error {
	for _, id := range ids {
		if !sawtooth.IsID(id) {
			return s.sawtoothFail(c, stErr(http.StatusBadRequest, sawtooth.APIInvalidResourceID, id))
		}
	}
	req := c.Request()
	byID, err := s.statusesWithin(req.Context(), ids, parseWait(waitParam))
	if err != nil {
		return s.sawtoothFail(c, err)
	}
	out := apigen.SawtoothBatchStatuses{Data: make([]apigen.SawtoothBatchStatus, len(ids))}
	for i, id := range ids {
		out.Data[i] = byID[id]
	}
	if withLink {
		link := sawtoothLink(req, "", "", "")
		out.Link = &link
	}
	return sawtoothJSON(c, http.StatusOK, out)
}

// parseWait reads the wait query parameter as Sawtooth does: absent or
// "false", no wait; a whole number, that many seconds; anything else (wait
// without a value, wait=true), the longest wait.
func parseWait(p *string) time.Duration {
	if p == nil || strings.EqualFold(*p, "false") {
		return 0
	}
	n, err := strconv.Atoi(*p)
	switch {
	case err != nil:
		return sawtoothMaxWait
	case n <= 0:
		return 0
	}
	return min(time.Duration(n)*time.Second, sawtoothMaxWait)
}

// statusesWithin reads the status of every id and, while some are PENDING,
// reads those again every statusPollInterval until none is or wait has
// passed. Each read is bounded by RequestTimeout; the whole wait is wall
// time, as it bounds a request, not a rule of the lane. A read during the
// wait that finds the database unavailable (a failover) is tried again at
// the next poll; only the first must succeed. It returns the request
// context's error when the client goes away.
func (s *Server) statusesWithin(ctx context.Context, ids []string, wait time.Duration) (map[string]apigen.SawtoothBatchStatus, error) {
	distinct := slices.Compact(slices.Sorted(slices.Values(ids)))
	byID := make(map[string]apigen.SawtoothBatchStatus, len(distinct))
	if err := s.readStatuses(ctx, distinct, byID); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		var pending []string
		for _, id := range distinct {
			if byID[id].Status == apigen.SawtoothBatchStatusStatusPENDING {
				pending = append(pending, id)
			}
		}
		left := time.Until(deadline)
		if len(pending) == 0 || left <= 0 {
			return byID, nil
		}
		timer := time.NewTimer(min(statusPollInterval, left))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
		err := s.readStatuses(ctx, pending, byID)
		switch {
		case err != nil && ctx.Err() == nil && store.IsUnavailable(err):
			s.logger.Debug("httpapi: database unavailable while a status query waits; waiting on", "error", err)
		case err != nil:
			return nil, err
		}
	}
}

// readStatuses sets byID[id] for every id: UNKNOWN for one ledgerq does not
// store.
func (s *Server) readStatuses(ctx context.Context, ids []string, byID map[string]apigen.SawtoothBatchStatus) error {
	for start := 0; start < len(ids); start += statusReadChunk {
		chunk := ids[start:min(start+statusReadChunk, len(ids))]
		dctx, cancel := s.dbContext(ctx)
		rows, err := s.store.BatchGetMany(dctx, chunk)
		cancel()
		if err != nil {
			return err
		}
		for _, id := range chunk {
			byID[id] = apigen.SawtoothBatchStatus{ID: id, Status: apigen.SawtoothBatchStatusStatusUNKNOWN,
				InvalidTransactions: []apigen.SawtoothInvalidTransaction{}}
		}
		for _, r := range rows {
			byID[r.ID] = sawtoothStatus(r)
		}
	}
	return nil
}

// sawtoothStatus says a stored batch's state in Sawtooth's words:
//
//   - committed → COMMITTED;
//   - valid → COMMITTED too: in the lane, valid is as final as committed
//     (no one asks the ledger about the batch again), and Sawtooth has no
//     word for it; PENDING would make a client that waits for the batch wait
//     forever;
//   - invalid → INVALID, naming the batch's transactions with the reason
//     ledgerq recorded (the ledger's messages, or why ledgerq refused it):
//     ledgerq does not know which transaction was at fault;
//   - everything still in ledgerq's hands (new, queued, held, pending,
//     delayed, unknown and waiting to be sent again) → PENDING.
func sawtoothStatus(b store.BatchWithPayload) apigen.SawtoothBatchStatus {
	e := apigen.SawtoothBatchStatus{ID: b.ID, Status: apigen.SawtoothBatchStatusStatusPENDING,
		InvalidTransactions: []apigen.SawtoothInvalidTransaction{}}
	switch b.Status {
	case store.BatchStatusCommitted, store.BatchStatusValid:
		e.Status = apigen.SawtoothBatchStatusStatusCOMMITTED
	case store.BatchStatusInvalid:
		e.Status = apigen.SawtoothBatchStatusStatusINVALID
		msg := cmp.Or(b.LastError, "ledgerq recorded no reason")
		// A row written by hand may lack its payload: then there are no
		// transactions to name.
		txnIDs, _ := sawtooth.TransactionIDs(b.Payload)
		for _, id := range txnIDs {
			e.InvalidTransactions = append(e.InvalidTransactions, apigen.SawtoothInvalidTransaction{ID: id, Message: msg})
		}
	}
	return e
}

// sawtoothLink builds a URL the way Sawtooth's REST API builds its links: on
// the scheme, host and path prefix the client used (the Forwarded or
// X-Forwarded-* headers of a proxy, else the request's), the given path (the
// request's when empty), and the request's query with key set to value, the
// parameters sorted by name, each once.
func sawtoothLink(r *http.Request, path, key, value string) string {
	query := make(map[string]string)
	for k, vs := range r.URL.Query() {
		query[k] = vs[0]
	}
	if key != "" {
		query[key] = value
	}
	var qs []string
	for _, k := range slices.Sorted(maps.Keys(query)) {
		if query[k] == "" {
			qs = append(qs, escapeQuery(k))
		} else {
			qs = append(qs, escapeQuery(k)+"="+escapeQuery(query[k]))
		}
	}
	scheme := forwarded(r, "proto")
	if scheme == "" {
		scheme = "http"
		if r.TLS != nil {
			scheme = "https"
		}
	}
	host := cmp.Or(forwarded(r, "host"), r.Host)
	if path == "" {
		path = r.URL.Path
	}
	link := scheme + "://" + host + forwarded(r, "path") + path
	if len(qs) > 0 {
		link += "?" + strings.Join(qs, "&")
	}
	return link
}

// escapeQuery escapes a query key or value, keeping the commas between ids
// literal, as Sawtooth writes them.
func escapeQuery(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "%2C", ",")
}

// forwarded returns the key (proto, host, path) a proxy passed on in the
// Forwarded header, or else in X-Forwarded-<Key>; "" when neither has it.
func forwarded(r *http.Request, key string) string {
	for _, elem := range strings.FieldsFunc(r.Header.Get("Forwarded"), func(c rune) bool { return c == ',' || c == ';' }) {
		k, v, ok := strings.Cut(strings.TrimSpace(elem), "=")
		if ok && strings.EqualFold(k, key) {
			return strings.Trim(v, `"`)
		}
	}
	return r.Header.Get("X-Forwarded-" + key)
}

func hasMediaType(r *http.Request, want string) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == want
}
