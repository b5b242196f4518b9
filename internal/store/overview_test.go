package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func TestLaneHistory_BatchesEndedPerMinuteWithTheirLatencyPercentiles(t *testing.T) {
	t.Parallel()
	st, clk, f := txRows(t)
	now := clk.Now()
	for i, status := range []store.BatchStatus{
		store.BatchStatusCommitted, store.BatchStatusCommitted, store.BatchStatusCommitted, store.BatchStatusValid, store.BatchStatusInvalid,
	} {
		id := string(rune('a' + i))
		f.PutBatches(testfactory.Batch{ID: id, Status: status})
		// Received i+1 seconds before it ended.
		_, err := st.DB().Exec(t.Context(), `UPDATE ledgerq.batches b SET received_at = b.finished_at - make_interval(secs => $2)
			FROM ledgerq.batch_payloads p WHERE p.seq = b.seq AND p.id = $1`, id, i+1)
		require.NoError(t, err)
	}
	f.PutBatches(testfactory.Batch{ID: "waiting", Status: store.BatchStatusPending, Submitted: true})

	since := now.Truncate(time.Minute).Add(-59 * time.Minute)
	h, err := st.LaneHistoryGet(t.Context(), since)
	require.NoError(t, err)
	require.Len(t, h.Batches, 2)
	committed, invalid := h.Batches[0], h.Batches[1]
	require.Equal(t, "committed", committed.State, "valid counts as committed")
	require.Equal(t, now.Truncate(time.Minute), committed.Minute)
	require.EqualValues(t, 4, committed.Items)
	require.InDelta(t, 2.5, committed.P50, 1e-9)
	require.InDelta(t, 3.97, committed.P99, 1e-9)
	require.Equal(t, "invalid", invalid.State)
	require.EqualValues(t, 1, invalid.Items)

	later, err := st.LaneHistoryGet(t.Context(), now.Add(time.Minute))
	require.NoError(t, err)
	require.Empty(t, later.Batches, "nothing ended since")

	health, err := st.HealthGet(t.Context(), now)
	require.NoError(t, err)
	require.NotNil(t, health.LastBatchFinal)
	require.Equal(t, now, *health.LastBatchFinal)
	require.Nil(t, health.LastWalletRead, "no wallet read yet")
	require.Nil(t, health.OldestWebhook)
}

func TestLaneCounts_TasksAndPoolByStateWithTheOldest(t *testing.T) {
	t.Parallel()
	st, clk, f := txRows(t)
	first := f.PostTask(testfactory.Task{})
	clk.Advance(time.Minute)
	f.PostTask(testfactory.Task{})
	f.StartTask(first)
	f.AddPoolTxs(testfactory.PoolTx(1, 0, 20, 10), testfactory.PoolTx(1, 2, 20, 10))

	c, err := st.LaneCountsGet(t.Context())
	require.NoError(t, err)
	require.Equal(t, []store.LaneState{
		{State: "Waiting", Items: 1, Oldest: testfactory.Start().Add(time.Minute)},
		{State: "Executing", Items: 1, Oldest: testfactory.Start()},
	}, c.Tasks)
	require.Equal(t, []store.LaneState{
		{State: "pending", Items: 1, Oldest: clk.Now()},
		{State: "queued", Items: 1, Oldest: clk.Now()},
	}, c.Pool, "nonce 2 waits for nonce 1")
	require.Empty(t, c.Bundles)
}
