package store

import (
	"context"
	"fmt"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// wake notifies channel (one of package notify's) from inside a transaction:
// the loop wakes when the work it is told about has committed.
func wake(ctx context.Context, q *dbsqlc.Queries, channel string) error {
	if err := q.Notify(ctx, dbsqlc.NotifyParams{Channel: channel, Payload: ""}); err != nil {
		return fmt.Errorf("notifying %s: %w", channel, err)
	}
	return nil
}

// Notify wakes the loops listening on channel.
func (s *Store) Notify(ctx context.Context, channel string) error {
	return wake(ctx, s.q, channel)
}

// wakeIf is a channel to notify when cond holds.
type wakeIf struct {
	cond    bool
	channel string
}

// wakeAll notifies each channel whose condition holds.
func wakeAll(ctx context.Context, q *dbsqlc.Queries, channels ...wakeIf) error {
	for _, w := range channels {
		if w.cond {
			if err := wake(ctx, q, w.channel); err != nil {
				return err
			}
		}
	}
	return nil
}
