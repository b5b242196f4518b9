package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// AuditEntry says who acts, for a store method that changes something for
// an operator (a task cancelled, a wallet held, a delivery sent again): the
// method writes it to ledgerq.audit_log in the same transaction as the
// change, with what it did.
type AuditEntry struct {
	// KeyID is the acting key's id; empty when the API is open without
	// keys.
	KeyID string
	// KeyName is the key's name; empty (no key) is recorded as
	// "anonymous".
	KeyName string
	// Via is where the action came from: "api" or "console".
	Via string

	at     time.Time
	action string
	target string
	detail map[string]any
}

// with returns a copy of e for one action.
func (e *AuditEntry) with(at time.Time, action, target string, detail map[string]any) *AuditEntry {
	c := *e
	c.at, c.action, c.target, c.detail = at, action, target, detail
	return &c
}

// AuditRecord is one row of the audit.
type AuditRecord struct {
	ID      int64
	At      time.Time
	KeyID   string
	KeyName string
	Action  string
	Target  string
	Detail  json.RawMessage
}

func auditInsert(ctx context.Context, q *dbsqlc.Queries, e *AuditEntry) error {
	detail := map[string]any{}
	for k, v := range e.detail {
		detail[k] = v
	}
	if e.Via != "" {
		detail["via"] = e.Via
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("recording %s of %s: %w", e.action, e.target, err)
	}
	name := e.KeyName
	if name == "" {
		name = "anonymous"
	}
	var keyID *string
	if e.KeyID != "" {
		keyID = &e.KeyID
	}
	if err := q.AuditInsert(ctx, dbsqlc.AuditInsertParams{
		At: e.at, KeyID: keyID, KeyName: name, Action: e.action, Target: e.target, Detail: raw,
	}); err != nil {
		return fmt.Errorf("recording %s of %s: %w", e.action, e.target, err)
	}
	return nil
}

// AuditList returns up to max actions, newest first; with beforeID > 0 those
// older than that row (the next page).
func (s *Store) AuditList(ctx context.Context, beforeID int64, max int) ([]AuditRecord, error) {
	var before *int64
	if beforeID > 0 {
		before = &beforeID
	}
	rows, err := s.q.AuditList(ctx, dbsqlc.AuditListParams{BeforeID: before, Max: int32(max)})
	if err != nil {
		return nil, fmt.Errorf("listing the audit: %w", err)
	}
	out := make([]AuditRecord, len(rows))
	for i, r := range rows {
		out[i] = AuditRecord{ID: r.ID, At: r.At.UTC(), KeyID: deref(r.KeyID), KeyName: r.KeyName, Action: r.Action,
			Target: r.Target, Detail: json.RawMessage(r.Detail)}
	}
	return out, nil
}

// AuditDeleteOld deletes up to max actions recorded before before, oldest
// first (the audit's retention), and returns how many.
func (s *Store) AuditDeleteOld(ctx context.Context, before time.Time, max int) (int64, error) {
	n, err := s.q.AuditDeleteOld(ctx, dbsqlc.AuditDeleteOldParams{Before: before, Max: int32(max)})
	if err != nil {
		return 0, fmt.Errorf("deleting old audit rows: %w", err)
	}
	return n, nil
}
