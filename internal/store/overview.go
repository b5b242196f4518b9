package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// The operator console's reads across the lanes (package console): how much
// work waits in each state, what ended per minute, and the signs of life
// the database holds. Each reads an index, or a table that stays small, so
// that a console polling every few seconds costs little.

// LaneState is how many of a lane's items are in one state, and since when
// the oldest of them waits (zero for counts that are not waiting).
type LaneState struct {
	State  string
	Items  int64
	Oldest time.Time
}

// LaneCounts are the items still moving in each lane, by state.
type LaneCounts struct {
	// Batches: new, queued, held, pending, unknown, delayed.
	Batches []LaneState
	// Pool: pending and queued transactions; Bundles: queued, submitted,
	// guaranteed, accumulated.
	Pool    []LaneState
	Bundles []LaneState
	// Tasks: Waiting and Executing send-tx tasks.
	Tasks []LaneState
}

// LaneCountsGet reads the live counts of every lane.
func (s *Store) LaneCountsGet(ctx context.Context) (LaneCounts, error) {
	var out LaneCounts
	batches, err := s.BatchDepthByState(ctx)
	if err != nil {
		return out, err
	}
	for _, b := range batches {
		out.Batches = append(out.Batches, LaneState(b))
	}
	pool, err := s.q.PoolTxCountWaiting(ctx)
	if err != nil {
		return out, fmt.Errorf("counting the pool's waiting transactions: %w", err)
	}
	for _, r := range pool {
		out.Pool = append(out.Pool, LaneState{State: r.State, Items: r.Items, Oldest: r.Oldest.UTC()})
	}
	bundles, err := s.q.BundleCountLive(ctx)
	if err != nil {
		return out, fmt.Errorf("counting the live bundles: %w", err)
	}
	for _, r := range bundles {
		out.Bundles = append(out.Bundles, LaneState{State: r.State, Items: r.Items, Oldest: r.Oldest.UTC()})
	}
	tasks, err := s.q.TaskCountLive(ctx)
	if err != nil {
		return out, fmt.Errorf("counting the live tasks: %w", err)
	}
	for _, r := range tasks {
		out.Tasks = append(out.Tasks, LaneState{State: TaskStatus(r.Status).String(), Items: r.Items, Oldest: r.Oldest.UTC()})
	}
	return out, nil
}

// MinuteCount is what ended in one state during the minute from Minute,
// with the percentiles of the seconds from arrival to the end (zero where
// they do not apply).
type MinuteCount struct {
	Minute   time.Time
	State    string
	Items    int64
	P50, P99 float64
}

// LaneHistory is what ended in each lane per minute since a time.
type LaneHistory struct {
	// Batches by outcome: committed (valid counted too) or invalid.
	Batches []MinuteCount
	// Tasks by status (Done, Error).
	Tasks []MinuteCount
	// Mined: attempts mined (State "mined").
	Mined []MinuteCount
	// Bundles finalized or dropped; the percentiles are of the bundles'
	// transactions, from the pool to finalization.
	Bundles []MinuteCount
}

// LaneHistoryGet reads what ended per minute since since.
func (s *Store) LaneHistoryGet(ctx context.Context, since time.Time) (LaneHistory, error) {
	var out LaneHistory
	batches, err := s.q.BatchFinishedPerMinute(ctx, since)
	if err != nil {
		return out, fmt.Errorf("reading the batches finished per minute: %w", err)
	}
	for _, r := range batches {
		out.Batches = append(out.Batches, MinuteCount{Minute: r.Minute.UTC(), State: r.State, Items: r.Items, P50: r.P50Seconds, P99: r.P99Seconds})
	}
	tasks, err := s.q.TaskFinishedPerMinute(ctx, since)
	if err != nil {
		return out, fmt.Errorf("reading the tasks finished per minute: %w", err)
	}
	for _, r := range tasks {
		out.Tasks = append(out.Tasks, MinuteCount{Minute: r.Minute.UTC(), State: TaskStatus(r.Status).String(), Items: r.Items, P50: r.P50Seconds, P99: r.P99Seconds})
	}
	mined, err := s.q.AttemptMinedPerMinute(ctx, since)
	if err != nil {
		return out, fmt.Errorf("reading the attempts mined per minute: %w", err)
	}
	for _, r := range mined {
		out.Mined = append(out.Mined, MinuteCount{Minute: r.Minute.UTC(), State: "mined", Items: r.Items})
	}
	bundles, err := s.q.BundleEndedPerMinute(ctx, since)
	if err != nil {
		return out, fmt.Errorf("reading the bundles ended per minute: %w", err)
	}
	for _, r := range bundles {
		out.Bundles = append(out.Bundles, MinuteCount{Minute: r.Minute.UTC(), State: r.State, Items: r.Items, P50: r.P50Seconds, P99: r.P99Seconds})
	}
	return out, nil
}

// Health is what the database says of the lanes' health.
type Health struct {
	// LastBatchFinal, LastWalletRead and LastBlockApplied are the last
	// answers of the lanes' ledgers the database records: a batch's final
	// status, confirm's read of a wallet's chain, a JAM block applied to the
	// bundles (nil: none yet).
	LastBatchFinal, LastWalletRead, LastBlockApplied *time.Time
	// Stopped are the wallets that send nothing new: paused for their
	// balance, or held by an operator.
	Stopped []WalletHealth
	// ShardsPastLease are running shards whose lease passed, the oldest
	// lease's end in OldestLease.
	ShardsPastLease int64
	OldestLease     *time.Time
	// WebhookBacklog deliveries are still to be made, the oldest since
	// OldestWebhook; WebhooksGivenUp were given up.
	WebhookBacklog  int64
	OldestWebhook   *time.Time
	WebhooksGivenUp int64
}

// HealthGet reads the lanes' health at now.
func (s *Store) HealthGet(ctx context.Context, now time.Time) (Health, error) {
	var h Health
	v, err := one(s.q.BatchLastFinishedAt(ctx))
	if err != nil {
		return h, fmt.Errorf("reading the last final batch: %w", err)
	}
	h.LastBatchFinal = anyTime(v)
	if v, err = one(s.q.WalletHealthLastRead(ctx)); err != nil {
		return h, fmt.Errorf("reading the last wallet read: %w", err)
	}
	h.LastWalletRead = anyTime(v)
	if v, err = one(s.q.BuilderChainLastApplied(ctx)); err != nil {
		return h, fmt.Errorf("reading the last JAM block applied: %w", err)
	}
	h.LastBlockApplied = anyTime(v)
	stopped, err := s.q.WalletHealthListStopped(ctx)
	if err != nil {
		return h, fmt.Errorf("listing the stopped wallets: %w", err)
	}
	for _, r := range stopped {
		h.Stopped = append(h.Stopped, healthFromRow(r))
	}
	shards, err := one(s.q.ShardCountPastLease(ctx, now))
	if err != nil {
		return h, fmt.Errorf("counting the shards past their lease: %w", err)
	}
	h.ShardsPastLease, h.OldestLease = shards.Shards, anyTime(shards.Oldest)
	hooks, err := one(s.q.WebhookDeliveryCounts(ctx))
	if err != nil {
		return h, fmt.Errorf("counting the webhook deliveries: %w", err)
	}
	h.WebhookBacklog, h.OldestWebhook, h.WebhooksGivenUp = hooks.Backlog, anyTime(hooks.OldestBacklog), hooks.GivenUp
	return h, nil
}

// anyTime is a nullable timestamptz that sqlc typed as any (an aggregate
// over no rows is NULL).
func anyTime(v any) *time.Time {
	t, ok := v.(time.Time)
	if !ok {
		return nil
	}
	t = t.UTC()
	return &t
}

// BatchListInOrderParams select a page of a service's batches in the order
// they are sent.
type BatchListInOrderParams struct {
	ServiceID string
	// AfterCreatedAt and AfterID are the last batch of the previous page
	// (zero for the first: the zero time is before every batch).
	AfterCreatedAt time.Time
	AfterID        string
	Limit          int
}

// BatchListInOrder returns up to Limit of the service's batches in the order
// they are sent (created_at, then id), after the given one.
func (s *Store) BatchListInOrder(ctx context.Context, p BatchListInOrderParams) ([]Batch, error) {
	rows, err := s.q.BatchListByServiceInOrder(ctx, dbsqlc.BatchListByServiceInOrderParams{
		ServiceID: p.ServiceID, AfterCreatedAt: p.AfterCreatedAt, AfterID: p.AfterID, Max: int32(p.Limit),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the batches of service %q: %w", p.ServiceID, err)
	}
	out := make([]Batch, len(rows))
	for i, r := range rows {
		out[i] = batchFromRow(r.ID, r.LedgerqBatch)
	}
	return out, nil
}

// AttemptListInFlight returns up to max of the wallet's attempts not yet
// final (signed, sent, mined), by nonce.
func (s *Store) AttemptListInFlight(ctx context.Context, chainID int64, sender string, max int) ([]Attempt, error) {
	rows, err := s.q.AttemptListInFlight(ctx, dbsqlc.AttemptListInFlightParams{ChainID: chainID, Sender: lowerHex(sender), Max: int32(max)})
	if err != nil {
		return nil, fmt.Errorf("listing the attempts in flight of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return fromRows(rows, attemptFromRow), nil
}

// PoolTxListBySenderParams select a page of a sender's pool transactions.
type PoolTxListBySenderParams struct {
	Sender string
	// AfterNonce and AfterHash are the last transaction of the previous
	// page (AfterNonce -1 for the first).
	AfterNonce int64
	AfterHash  string
	Limit      int
}

// PoolTxListBySender returns up to Limit of the sender's transactions in
// every state and chain, by nonce then hash.
func (s *Store) PoolTxListBySender(ctx context.Context, p PoolTxListBySenderParams) ([]PoolTx, error) {
	rows, err := s.q.PoolTxListBySender(ctx, dbsqlc.PoolTxListBySenderParams{
		Sender: lowerHex(p.Sender), AfterNonce: p.AfterNonce, AfterHash: lowerHex(p.AfterHash), Max: int32(p.Limit),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the pool transactions of %s: %w", p.Sender, err)
	}
	return fromRows(rows, poolTxFromRow), nil
}
