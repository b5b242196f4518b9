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

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/store"
)

// batchIn is one batch in POST /v1/batches.
type batchIn struct {
	ID        *string `json:"id"`
	ServiceID *string `json:"service_id"`
	Payload   *string `json:"payload"`
	CreatedAt *string `json:"created_at"`
}

// batchOut is a batch in responses.
type batchOut struct {
	ID              string     `json:"id"`
	ServiceID       string     `json:"service_id"`
	Status          *string    `json:"status"`
	State           string     `json:"state"`
	Submitted       bool       `json:"submitted"`
	CreatedAt       time.Time  `json:"created_at"`
	ReceivedAt      time.Time  `json:"received_at"`
	QueuedAt        *time.Time `json:"queued_at,omitempty"`
	Attempts        int        `json:"attempts"`
	LastSubmittedAt *time.Time `json:"last_submitted_at,omitempty"`
	LastError       string     `json:"last_error,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	UpdatedAt       time.Time  `json:"updated_at"`
	Created         *bool      `json:"created,omitempty"`
}

func toBatchOut(b store.Batch) batchOut {
	o := batchOut{
		ID: b.ID, ServiceID: b.ServiceID, Submitted: b.Submitted, CreatedAt: b.CreatedAt,
		ReceivedAt: b.ReceivedAt, QueuedAt: b.QueuedAt, Attempts: b.Attempts,
		LastSubmittedAt: b.LastSubmittedAt, LastError: b.LastError, FinishedAt: b.FinishedAt, UpdatedAt: b.UpdatedAt,
	}
	switch {
	case b.Status != store.BatchStatusNone:
		st := string(b.Status)
		o.Status, o.State = &st, st
	case b.Submitted:
		o.State = "held"
	case b.QueuedAt != nil:
		o.State = "queued"
	default:
		o.State = "new"
	}
	return o
}

// postBatches takes one batch object or an array of them. Everything is
// stored in one transaction: one invalid or conflicting batch stores none.
func (s *Server) postBatches(c echo.Context) error {
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return err
	}
	var in []batchIn
	single := false
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		if err := strictUnmarshal(raw, &in); err != nil {
			return err
		}
	case len(trimmed) > 0 && trimmed[0] == '{':
		var one batchIn
		if err := strictUnmarshal(raw, &one); err != nil {
			return err
		}
		in, single = []batchIn{one}, true
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
	out := make([]batchOut, len(res))
	received := 0
	for i, r := range res {
		created := r.Created
		out[i] = toBatchOut(r.Batch)
		out[i].Created = &created
		if created {
			status = http.StatusCreated
			received++
		}
	}
	s.metrics.Transition("batch", "received", received)
	if single {
		return c.JSON(status, map[string]any{"success": true, "batch": out[0]})
	}
	return c.JSON(status, map[string]any{"success": true, "batches": out})
}

func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	return nil
}

func (s *Server) validateBatch(b batchIn) (store.NewBatch, *Error) {
	switch {
	case b.ID == nil || *b.ID == "":
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field id: required")
	case len(*b.ID) > 256:
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field id: longer than 256 characters")
	case b.ServiceID == nil || *b.ServiceID == "":
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field service_id: required")
	case len(*b.ServiceID) > 256:
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field service_id: longer than 256 characters")
	case b.Payload == nil || *b.Payload == "":
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field payload: required (base64)")
	}
	if base64.StdEncoding.DecodedLen(len(*b.Payload)) > s.cfg.MaxPayloadBytes+2 {
		return store.NewBatch{}, errorf(http.StatusRequestEntityTooLarge, "field payload: larger than %d bytes", s.cfg.MaxPayloadBytes)
	}
	payload, err := base64.StdEncoding.DecodeString(*b.Payload)
	if err != nil {
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field payload: not valid base64: %v", err)
	}
	if len(payload) > s.cfg.MaxPayloadBytes {
		return store.NewBatch{}, errorf(http.StatusRequestEntityTooLarge, "field payload: larger than %d bytes", s.cfg.MaxPayloadBytes)
	}
	if err := sawtooth.CheckBatchForID(*b.ID, payload); err != nil {
		return store.NewBatch{}, errorf(http.StatusBadRequest, "field payload: %v", err)
	}
	nb := store.NewBatch{ID: *b.ID, ServiceID: *b.ServiceID, Payload: payload}
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

func (s *Server) getBatch(c echo.Context) error {
	b, err := s.store.BatchGet(c.Request().Context(), c.Param("id"))
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "batch %q not found", c.Param("id"))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"success": true, "batch": toBatchOut(b)})
}

func (s *Server) listBatches(c echo.Context) error {
	for name := range c.QueryParams() {
		switch name {
		case "service_id", "status", "limit", "after":
		default:
			return errorf(http.StatusBadRequest, "unknown query parameter %s", name)
		}
	}
	f := store.BatchListParams{ServiceID: c.QueryParam("service_id"), After: c.QueryParam("after"), Limit: 100}
	if st := c.QueryParam("status"); st != "" {
		parsed, err := store.ParseBatchStatus(st)
		if err != nil {
			return errorf(http.StatusBadRequest, "query parameter status: %v", err)
		}
		f.Status = parsed
	}
	if l := c.QueryParam("limit"); l != "" {
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
	out := make([]batchOut, len(batches))
	for i, b := range batches {
		out[i] = toBatchOut(b)
	}
	resp := map[string]any{"success": true, "batches": out}
	if len(batches) == f.Limit {
		resp["next_after"] = batches[len(batches)-1].ID
	}
	return c.JSON(http.StatusOK, resp)
}
