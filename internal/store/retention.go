package store

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// BatchDeleteFinishedParams are the inputs of the batch lane's retention.
type BatchDeleteFinishedParams struct {
	// Cutoff: terminal batches that finished before it are deleted.
	Cutoff time.Time
	// Max is the most batches one call deletes (at least 1).
	Max int
}

// BatchDeleteFinished deletes up to Max terminal batches (committed, valid,
// invalid) whose finished_at is before Cutoff, oldest first, in one statement,
// and returns how many it deleted. Batches that are not terminal are never
// deleted, whatever their age. Fewer than Max means the backlog is cleared for
// now (or another process's round holds the rest).
func (s *Store) BatchDeleteFinished(ctx context.Context, p BatchDeleteFinishedParams) (int, error) {
	if p.Max < 1 {
		return 0, fmt.Errorf("deleting finished batches: max %d: want at least 1", p.Max)
	}
	n, err := s.q.BatchDeleteFinished(ctx, dbsqlc.BatchDeleteFinishedParams{
		Cutoff: p.Cutoff, Max: int32(min(p.Max, math.MaxInt32)),
	})
	if err != nil {
		return 0, fmt.Errorf("deleting finished batches: %w", err)
	}
	return int(n), nil
}
