package store

import (
	"context"
	"fmt"
)

// BatchWithPayload is a stored batch with its payload.
type BatchWithPayload struct {
	Batch
	Payload []byte
}

// BatchGetMany returns the stored batches among ids, with their payloads, in
// no particular order; an id that is not stored has no entry. The caller
// bounds ids: every payload is read into memory.
func (s *Store) BatchGetMany(ctx context.Context, ids []string) ([]BatchWithPayload, error) {
	rows, err := s.q.BatchGetMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading %d batches: %w", len(ids), err)
	}
	out := make([]BatchWithPayload, len(rows))
	for i, r := range rows {
		out[i] = BatchWithPayload{Batch: batchFromRow(r.ID, r.LedgerqBatch), Payload: r.Payload}
	}
	return out, nil
}
