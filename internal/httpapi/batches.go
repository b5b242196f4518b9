package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/store"
)

// toBatch converts a stored batch to the API's Batch.
func toBatch(b store.Batch) batchJSON {
	o := apigen.Batch{
		ID: b.ID, ServiceID: b.ServiceID, Submitted: b.Submitted, Attempts: b.Attempts, LastError: omitZero(b.LastError),
	}
	switch {
	case b.Status != store.BatchStatusNone:
		st := apigen.BatchStatus(b.Status)
		o.Status, o.State = &st, apigen.BatchState(b.Status)
	case b.Submitted:
		o.State = apigen.BatchStateHeld
	case b.QueuedAt != nil:
		o.State = apigen.BatchStateQueued
	default:
		o.State = apigen.BatchStateNew
	}
	return batchJSON{
		Batch: o, CreatedAt: apiTime(b.CreatedAt), ReceivedAt: apiTime(b.ReceivedAt),
		QueuedAt: apiTimePtr(b.QueuedAt), LastSubmittedAt: apiTimePtr(b.LastSubmittedAt),
		FinishedAt: apiTimePtr(b.FinishedAt), UpdatedAt: apiTime(b.UpdatedAt),
	}
}

// batchJSON is apigen.Batch as the API writes it. Its time fields shadow the
// generated ones (encoding/json takes the shallower field of a name), so that
// times are written by apiTime, and every other field still comes from the
// generated type.
type batchJSON struct {
	apigen.Batch
	CreatedAt       apiTime  `json:"created_at"`
	ReceivedAt      apiTime  `json:"received_at"`
	QueuedAt        *apiTime `json:"queued_at,omitempty"`
	LastSubmittedAt *apiTime `json:"last_submitted_at,omitempty"`
	FinishedAt      *apiTime `json:"finished_at,omitempty"`
	UpdatedAt       apiTime  `json:"updated_at"`
}

// batchResultJSON, batchesResultJSON and batchPageJSON are the generated
// results with batchJSON in them.
type (
	batchResultJSON struct {
		apigen.BatchResult
		Batch batchJSON `json:"batch"`
	}
	batchesResultJSON struct {
		apigen.BatchesResult
		Batches []batchJSON `json:"batches"`
	}
	batchPageJSON struct {
		apigen.BatchPage
		Batches []batchJSON `json:"batches"`
	}
)

// apiTime is a time as the API writes it: RFC 3339 in UTC, as
// time.Time.MarshalJSON writes it, for every year. MarshalJSON fails outside
// the years 0000 to 9999, and with it the whole answer; PostgreSQL stores
// such years (in a row written by SQL, say), and RFC 3339 cannot say them. They get ISO 8601's expanded form, a sign and at least
// four digits: +10000-01-01T00:00:00Z, -0001-06-01T12:00:00Z (astronomical
// years: -0001 is 2 BC).
type apiTime time.Time

// MarshalJSON writes the time; it never fails.
func (t apiTime) MarshalJSON() ([]byte, error) {
	u := time.Time(t).UTC()
	b := make([]byte, 0, len(`"+10000-01-01T00:00:00.000000000Z"`))
	b = append(b, '"')
	if y := u.Year(); y < 0 || y > 9999 {
		b = fmt.Appendf(b, "%+05d", y)
		b = u.AppendFormat(b, "-01-02T15:04:05.999999999Z07:00")
	} else {
		b = u.AppendFormat(b, time.RFC3339Nano)
	}
	return append(b, '"'), nil
}

func apiTimePtr(t *time.Time) *apiTime {
	if t == nil {
		return nil
	}
	at := apiTime(*t)
	return &at
}

// PostBatches answers POST /v1/batches: one batch object or an array of
// them. Everything is stored in one transaction: one invalid or conflicting
// batch stores none. The body is decoded here rather than by generated code,
// so that field names must be exact, unknown and repeated ones are refused,
// and every error names its field (and its batch, in an array).
func (s *Server) PostBatches(c echo.Context) error {
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return err
	}
	var items []json.RawMessage
	single := false
	trimmed := bytes.TrimLeft(raw, jsonSpace)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		// The array itself has no keys to check; each item is decoded
		// strictly below. decodeJSON already refused malformed text, so
		// the array is split without decoding it again.
		items = splitArray(raw)
	case len(trimmed) > 0 && trimmed[0] == '{':
		items, single = []json.RawMessage{raw}, true
	default:
		return errorf(http.StatusBadRequest, "request body must be a batch object or an array of batches")
	}
	if len(items) == 0 {
		return errorf(http.StatusBadRequest, "no batches in request")
	}
	if len(items) > s.cfg.MaxBatchesPerRequest {
		return errorf(http.StatusRequestEntityTooLarge, "too many batches: %d, at most %d per request", len(items), s.cfg.MaxBatchesPerRequest)
	}

	batches, i, bad := decodeBatches(items, s.decodeBatch)
	if bad != nil {
		if !single {
			bad.Message = fmt.Sprintf("batches[%d]: %s", i, bad.Message)
		}
		return bad
	}
	seen := make(map[string]int, len(items))
	for i, nb := range batches {
		if j, dup := seen[nb.ID]; dup {
			return errorf(http.StatusBadRequest, "batches[%d]: id %q repeats batches[%d]", i, nb.ID, j)
		}
		seen[nb.ID] = i
	}
	p := principalOf(c.Request().Context())
	for _, b := range batches {
		if !p.service(b.ServiceID) {
			return forbiddenService(p, b.ServiceID)
		}
	}

	res, err := s.store.BatchInsert(c.Request().Context(), store.BatchInsertParams{Now: s.clock.Now(), Batches: batches})
	var conflict *store.ConflictError
	if errors.As(err, &conflict) {
		return errorf(http.StatusConflict, "%s", conflict.Error())
	}
	if err != nil {
		return err
	}
	status := http.StatusOK
	out := make([]batchJSON, len(res))
	for i, r := range res {
		created := r.Created
		out[i] = toBatch(r.Batch)
		out[i].Created = &created
		if created {
			status = http.StatusCreated
		}
	}
	s.stored(res)
	if single {
		return c.JSON(status, batchResultJSON{BatchResult: apigen.BatchResult{Success: true}, Batch: out[0]})
	}
	return c.JSON(status, batchesResultJSON{BatchesResult: apigen.BatchesResult{Success: true}, Batches: out})
}

// stored counts what an intake stored — batches received, and those queued
// at once (their service was idle) — and wakes this process's submitters
// for the queued ones. It returns the two counts.
func (s *Server) stored(res []store.InsertedBatch) (received, queued int) {
	for _, r := range res {
		if r.Created {
			received++
			if r.Batch.QueuedAt != nil {
				queued++
			}
		}
	}
	s.metrics.Transition("batch", "received", received)
	s.metrics.Transition("batch", "queued", queued)
	if queued > 0 && s.onQueued != nil {
		s.onQueued()
	}
	return received, queued
}

// decodeBatches decodes and checks the items of a request with decode, on
// every core (inParallel). On failure it returns the error of the first
// failing item in request order and that item's index, as a loop over the
// items would.
func decodeBatches(items []json.RawMessage, decode func(json.RawMessage) (store.NewBatch, *Error)) ([]store.NewBatch, int, *Error) {
	batches := make([]store.NewBatch, len(items))
	errs := make([]*Error, len(items))
	if i := inParallel(len(items), func(i int) bool {
		batches[i], errs[i] = decode(items[i])
		return errs[i] == nil
	}); i >= 0 {
		return nil, i, errs[i]
	}
	return batches, 0, nil
}

// inParallel runs check for 0..n-1 on every core — the signature checks of
// a request's batches are most of an intake's work, and a request checked on
// one core leaves the others idle — and returns the lowest i whose check
// failed, or -1: the answer of a loop that stops at the first failure.
// Checks after a failure may be skipped.
func inParallel(n int, check func(i int) bool) int {
	ok := make([]bool, n)
	done := make([]bool, n)
	var next atomic.Int64
	var failed atomic.Bool
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n || failed.Load() {
				return
			}
			ok[i], done[i] = check(i), true
			if !ok[i] {
				failed.Store(true)
			}
		}
	}
	if workers := min(runtime.GOMAXPROCS(0), n); workers > 1 {
		var wg sync.WaitGroup
		for range workers - 1 {
			wg.Go(work)
		}
		work()
		wg.Wait()
	} else {
		work()
	}
	for i := range n {
		// An index below the failing one may have been skipped after the
		// failure was seen: it is checked here, so the answer is the first.
		if !done[i] {
			ok[i] = check(i)
		}
		if !ok[i] {
			return i
		}
	}
	return -1
}

// decodeBatch decodes and checks one batch of a request.
func (s *Server) decodeBatch(raw json.RawMessage) (store.NewBatch, *Error) {
	b, ok := fastNewBatch(raw)
	if !ok {
		b = apigen.NewBatch{}
		if err := strictUnmarshal(raw, &b); err != nil {
			return store.NewBatch{}, err
		}
	}
	return s.validateBatch(b)
}

func (s *Server) validateBatch(b apigen.NewBatch) (store.NewBatch, *Error) {
	if err := checkKey("id", b.ID); err != nil {
		return store.NewBatch{}, err
	}
	if err := checkKey("service_id", b.ServiceID); err != nil {
		return store.NewBatch{}, err
	}
	if b.Payload == "" {
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field payload: required (base64)")
	}
	if base64.StdEncoding.DecodedLen(len(b.Payload)) > s.cfg.MaxPayloadBytes+2 {
		return store.NewBatch{}, errorf(http.StatusRequestEntityTooLarge, "field payload: larger than %d bytes", s.cfg.MaxPayloadBytes)
	}
	payload, err := base64.StdEncoding.DecodeString(b.Payload)
	if err != nil {
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field payload: not valid base64: %v", err)
	}
	if len(payload) > s.cfg.MaxPayloadBytes {
		return store.NewBatch{}, errorf(http.StatusRequestEntityTooLarge, "field payload: larger than %d bytes", s.cfg.MaxPayloadBytes)
	}
	if err := sawtooth.CheckBatchForID(b.ID, payload); err != nil {
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field payload: %v", err)
	}
	nb := store.NewBatch{ID: b.ID, ServiceID: b.ServiceID, Payload: payload}
	if b.CreatedAt != nil {
		at, err := time.Parse(time.RFC3339Nano, *b.CreatedAt)
		if err != nil {
			return store.NewBatch{}, errorf(http.StatusBadRequest, "field created_at: must be an RFC 3339 time such as 2026-01-02T15:04:05.123456Z, got %q", *b.CreatedAt)
		}
		// PostgreSQL keeps microseconds; truncating here makes a re-post
		// compare equal with what was stored.
		at = at.UTC().Truncate(time.Microsecond)
		if y := at.Year(); y < 0 || y > 9999 {
			// PostgreSQL would store it, but the API could not write it
			// back as RFC 3339.
			return store.NewBatch{}, errorf(http.StatusBadRequest, "field created_at: %q is in the year %d in UTC; it must be in the years 0000 to 9999", *b.CreatedAt, y)
		}
		if at.IsZero() {
			// The store takes the zero time for "not given" and would put
			// the time of receipt in its place; an explicit time is kept or
			// refused, never replaced.
			return store.NewBatch{}, errorf(http.StatusBadRequest, "field created_at: %q is 0001-01-01T00:00:00Z, which is reserved (it means \"not given\"); omit created_at for the time of receipt, or give another time", *b.CreatedAt)
		}
		nb.CreatedAt = at
	}
	return nb, nil
}

// checkKey checks an id or service_id as the batches table will: its CHECK
// is length(…) <= 256, and PostgreSQL's length counts characters.
func checkKey(field, value string) *Error {
	if value == "" {
		return errorf(http.StatusBadRequest, "field %s: required", field)
	}
	if problem := textProblem(value); problem != "" {
		return errorf(http.StatusBadRequest, "field %s: %s", field, problem)
	}
	if utf8.RuneCountInString(value) > 256 {
		return errorf(http.StatusBadRequest, "field %s: longer than 256 characters", field)
	}
	return nil
}

// textProblem says why PostgreSQL would refuse s as text, or "". It refuses
// invalid UTF-8 and NUL with an error (SQLSTATE 22021) that would otherwise
// be a 500, so every string a query is given passes here first.
func textProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "holds a NUL character (U+0000), which PostgreSQL text cannot hold"
	}
	return ""
}

// GetBatch answers GET /v1/batches/{id}.
func (s *Server) GetBatch(c echo.Context, id string) error {
	if problem := textProblem(id); problem != "" {
		return errorf(http.StatusBadRequest, "path parameter id: %s", problem)
	}
	b, err := s.store.BatchGet(c.Request().Context(), id)
	if p := principalOf(c.Request().Context()); errors.Is(err, store.ErrNotFound) || (err == nil && !p.reads() && !p.service(b.ServiceID)) {
		// A batch of a service the key may not read is answered as a
		// missing one: the key learns nothing of it.
		return errorf(http.StatusNotFound, "batch %q not found", id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, batchResultJSON{BatchResult: apigen.BatchResult{Success: true}, Batch: toBatch(b)})
}

// ListBatches answers GET /v1/batches: one page of batches by id. Unknown and
// repeated query parameters were refused before the parameters were bound (see
// queryGuards); limit arrives as text (parseLimit).
func (s *Server) ListBatches(c echo.Context, params apigen.ListBatchesParams) error {
	f := store.BatchListParams{ServiceID: deref(params.ServiceID), After: deref(params.After)}
	if p := principalOf(c.Request().Context()); !p.reads() && !p.has(store.ScopeAnyService) && (f.ServiceID == "" || !p.service(f.ServiceID)) {
		if f.ServiceID == "" {
			return errorf(http.StatusForbidden, "forbidden: key %q has scopes %s; listing every service's batches needs read or service:*, or name a service of the key with service_id",
				p.name(), store.JoinScopes(p.key.Scopes, ","))
		}
		return forbiddenService(p, f.ServiceID)
	}
	for _, q := range []struct{ name, value string }{{"service_id", f.ServiceID}, {"after", f.After}} {
		if problem := textProblem(q.value); problem != "" {
			return errorf(http.StatusBadRequest, "query parameter %s: %s", q.name, problem)
		}
	}
	if st := deref(params.Status); st != "" {
		parsed, err := store.ParseBatchStatus(string(st))
		if err != nil {
			return errorf(http.StatusBadRequest, "query parameter status: %v", err)
		}
		f.Status = parsed
	}
	page := batchPageJSON{BatchPage: apigen.BatchPage{Success: true}}
	var err error
	page.Batches, page.NextAfter, err = listPage(c, params.Limit, func(ctx context.Context, limit int) ([]store.Batch, error) {
		f.Limit = limit
		return s.store.BatchList(ctx, f)
	}, toBatch, func(b store.Batch) string { return b.ID })
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// listPage reads one page of a list route: up to the limit parameter's
// number of items (parseLimit) from list, converted, and the next page's
// after when the page is full.
func listPage[T, J, A any](c echo.Context, limitParam *string, list func(ctx context.Context, limit int) ([]T, error),
	convert func(T) J, after func(T) A) ([]J, *A, error) {
	limit, apiErr := parseLimit(limitParam)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	items, err := list(c.Request().Context(), limit)
	if err != nil {
		return nil, nil, err
	}
	out := make([]J, len(items))
	for i, item := range items {
		out[i] = convert(item)
	}
	var next *A
	if len(items) == limit {
		next = ptr(after(items[len(items)-1]))
	}
	return out, next, nil
}

// parseLimit reads the limit query parameter of a list: absent, 100; else
// a whole number from 1 to 1000. It arrives as text, so that a bad one gets
// this message.
func parseLimit(p *string) (int, *Error) {
	l := deref(p)
	if l == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 1 || n > 1000 {
		return 0, errorf(http.StatusBadRequest, "query parameter limit: must be a whole number from 1 to 1000")
	}
	return n, nil
}

// deref returns what p points to, or the zero value for nil: optional
// parameters are pointers in the generated code.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
