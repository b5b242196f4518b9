package testfactory_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func TestFactory_PutBatchesFillsTheColumnsEachStateNeedsRelativeToTheClock(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	now := clk.Now()
	f := testfactory.New(t, st, clk)
	f.PutBatches(
		testfactory.Batch{ID: "new"},
		testfactory.Batch{ID: "queued", Queued: true},
		testfactory.Batch{ID: "pending", Submitted: true, Status: store.BatchStatusPending},
		testfactory.Batch{ID: "committed", Submitted: true, Status: store.BatchStatusCommitted, Attempts: 3},
	)
	get := func(id string) store.Batch {
		b, err := st.BatchGet(t.Context(), id)
		require.NoError(t, err)
		return b
	}

	b := get("new")
	require.Equal(t, "svc", b.ServiceID)
	require.Equal(t, now.Add(-time.Hour), b.CreatedAt)
	require.Equal(t, store.BatchStatusNone, b.Status)
	require.Zero(t, b.Attempts)
	require.Nil(t, b.QueuedAt)
	require.Nil(t, b.LastSubmittedAt)
	require.Equal(t, now, b.ReceivedAt)

	require.Equal(t, now, *get("queued").QueuedAt)

	b = get("pending")
	require.Equal(t, 1, b.Attempts)
	require.Equal(t, now.Add(-time.Minute), *b.LastSubmittedAt)
	require.Equal(t, now, *b.NextCheckAt)
	require.Nil(t, b.FinishedAt)

	b = get("committed")
	require.Equal(t, 3, b.Attempts)
	require.Equal(t, now, *b.FinishedAt)
}

func TestFactory_InsertBatchReturnsTheRefusalAndLeavesTheTransactionUsable(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	f := testfactory.New(t, st, testfactory.NewClock())
	require.Error(t, f.InsertBatch(t.Context(), testfactory.Batch{ID: "x", Status: store.BatchStatusPending}), "pending but not submitted")
	require.NoError(t, f.InsertBatch(t.Context(), testfactory.Batch{ID: "y"}))
	_, err := st.BatchGet(t.Context(), "x")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestFactory_PostBatchesStoresSignedBatchesOldestFirst(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	ids := testfactory.New(t, st, clk).PostBatches("a", 2)
	require.Len(t, ids, 2)
	for i, id := range ids {
		b, err := st.BatchGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, "a", b.ServiceID)
		require.Equal(t, clk.Now().Add(time.Duration(i)*time.Second), b.CreatedAt)
		var payload []byte
		require.NoError(t, st.DB().QueryRow(t.Context(), `SELECT payload FROM ledgerq.batch_payloads WHERE id = $1`, id).Scan(&payload))
		parsed, err := sawtooth.ParseAndVerifyBatch(payload)
		require.NoError(t, err)
		require.Equal(t, id, parsed.HeaderSignature)
	}
}
