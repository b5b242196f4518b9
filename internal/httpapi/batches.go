package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/store"
)

// toBatch converts a stored batch to the API's Batch.
func toBatch(b store.Batch) apigen.Batch {
	o := apigen.Batch{
		ID: b.ID, ServiceID: b.ServiceID, Submitted: b.Submitted, CreatedAt: b.CreatedAt,
		ReceivedAt: b.ReceivedAt, QueuedAt: b.QueuedAt, Attempts: b.Attempts,
		LastSubmittedAt: b.LastSubmittedAt, FinishedAt: b.FinishedAt, UpdatedAt: b.UpdatedAt,
	}
	if b.LastError != "" {
		o.LastError = &b.LastError
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
	return o
}

// PostBatches answers POST /v1/batches: one batch object or an array of
// them. Everything is stored in one transaction: one invalid or conflicting
// batch stores none. The body is decoded here rather than by generated code,
// so that unknown fields are refused and every error names its field.
func (s *Server) PostBatches(c echo.Context) error {
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return err
	}
	var in []apigen.NewBatch
	single := false
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		if err := strictUnmarshal(raw, &in); err != nil {
			return err
		}
	case len(trimmed) > 0 && trimmed[0] == '{':
		var one apigen.NewBatch
		if err := strictUnmarshal(raw, &one); err != nil {
			return err
		}
		in, single = []apigen.NewBatch{one}, true
	default:
		return errorf(http.StatusBadRequest, "request body must be a batch object or an array of batches")
	}
	if len(in) == 0 {
		return errorf(http.StatusBadRequest, "no batches in request")
	}
	if len(in) > s.cfg.MaxBatchesPerRequest {
		return errorf(http.StatusRequestEntityTooLarge, "too many batches: %d, at most %d per request", len(in), s.cfg.MaxBatchesPerRequest)
	}

	batches := make([]store.NewBatch, len(in))
	seen := make(map[string]int, len(in))
	for i, b := range in {
		nb, err := s.validateBatch(b)
		if err != nil {
			if !single {
				err.Message = fmt.Sprintf("batches[%d]: %s", i, err.Message)
			}
			return err
		}
		if j, dup := seen[nb.ID]; dup {
			return errorf(http.StatusBadRequest, "batches[%d]: id %q repeats batches[%d]", i, nb.ID, j)
		}
		seen[nb.ID] = i
		batches[i] = nb
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
	out := make([]apigen.Batch, len(res))
	received, queued := 0, 0
	for i, r := range res {
		created := r.Created
		out[i] = toBatch(r.Batch)
		out[i].Created = &created
		if created {
			status = http.StatusCreated
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
	if single {
		return c.JSON(status, apigen.BatchResult{Success: true, Batch: out[0]})
	}
	return c.JSON(status, apigen.BatchesResult{Success: true, Batches: out})
}

func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	return nil
}

func (s *Server) validateBatch(b apigen.NewBatch) (store.NewBatch, *Error) {
	switch {
	case b.ID == "":
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field id: required")
	case len(b.ID) > 256:
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field id: longer than 256 characters")
	case b.ServiceID == "":
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field service_id: required")
	case len(b.ServiceID) > 256:
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field service_id: longer than 256 characters")
	case b.Payload == "":
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
		nb.CreatedAt = at.UTC().Truncate(time.Microsecond)
	}
	return nb, nil
}

// GetBatch answers GET /v1/batches/{id}.
func (s *Server) GetBatch(c echo.Context, id string) error {
	b, err := s.store.BatchGet(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "batch %q not found", id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apigen.BatchResult{Success: true, Batch: toBatch(b)})
}

// ListBatches answers GET /v1/batches: one page of batches by id. Unknown and
// repeated query parameters were refused before the parameters were bound (see
// queryGuards); limit arrives as text, so that a bad one gets this message.
func (s *Server) ListBatches(c echo.Context, params apigen.ListBatchesParams) error {
	f := store.BatchListParams{ServiceID: deref(params.ServiceID), After: deref(params.After), Limit: 100}
	if st := deref(params.Status); st != "" {
		parsed, err := store.ParseBatchStatus(string(st))
		if err != nil {
			return errorf(http.StatusBadRequest, "query parameter status: %v", err)
		}
		f.Status = parsed
	}
	if l := deref(params.Limit); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			return errorf(http.StatusBadRequest, "query parameter limit: must be a whole number from 1 to 1000")
		}
		f.Limit = n
	}
	batches, err := s.store.BatchList(c.Request().Context(), f)
	if err != nil {
		return err
	}
	page := apigen.BatchPage{Success: true, Batches: make([]apigen.Batch, len(batches))}
	for i, b := range batches {
		page.Batches[i] = toBatch(b)
	}
	if len(batches) == f.Limit {
		page.NextAfter = &batches[len(batches)-1].ID
	}
	return c.JSON(http.StatusOK, page)
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
