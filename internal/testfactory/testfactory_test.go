package testfactory_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// newFactory gives a test a store on a transaction rolled back when the
// test ends, a fake clock at testfactory.Start, and the Factory under test
// writing there by that clock.
func newFactory(t *testing.T) (*store.Store, *clock.Fake, *testfactory.Factory) {
	t.Helper()
	st := testdb.NewTx(t)
	clk := testfactory.NewClock()
	return st, clk, testfactory.New(t, st, clk)
}

func TestFactory_PutBatchesFillsTheColumnsEachStateNeedsRelativeToTheClock(t *testing.T) {
	t.Parallel()
	st, clk, f := newFactory(t)
	now := clk.Now()
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
	st, _, f := newFactory(t)
	require.Error(t, f.InsertBatch(t.Context(), testfactory.Batch{ID: "x", Status: store.BatchStatusPending}), "pending but not submitted")
	require.NoError(t, f.InsertBatch(t.Context(), testfactory.Batch{ID: "y"}))
	_, err := st.BatchGet(t.Context(), "x")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestFactory_PostBatchesStoresSignedBatchesOldestFirst(t *testing.T) {
	t.Parallel()
	st, clk, f := newFactory(t)
	ids := f.PostBatches("a", 2)
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

func TestFactory_PostTasksFillsTheDefaultsAndSchedulesTheWalletsShard(t *testing.T) {
	t.Parallel()
	st, clk, f := newFactory(t)
	now := clk.Now()
	tasks := f.PostTasks(
		testfactory.Task{},
		testfactory.Task{
			Wallet: "other", ChainID: 7, Sender: "0x00000000000000000000000000000000000000c3", Priority: 3,
			Request:        store.TaskRequest{To: "0x00000000000000000000000000000000000000d4", Value: big.NewInt(5)},
			IdempotencyKey: "k", CreatedAt: now.Add(time.Second),
		},
	)
	require.Len(t, tasks, 2)

	got, err := st.TaskGet(t.Context(), "main", tasks[0].ID)
	require.NoError(t, err)
	require.Equal(t, store.TaskWaiting, got.Status)
	require.Equal(t, testfactory.WalletChainID, got.ChainID)
	require.Equal(t, testfactory.WalletSender, got.Sender)
	require.Equal(t, testfactory.WalletTo, got.Request.To)
	require.Zero(t, got.Request.Value.Sign())
	require.Equal(t, now, got.CreatedAt)
	sh, err := st.ShardGet(t.Context(), store.WalletShardKey(testfactory.WalletChainID, testfactory.WalletSender))
	require.NoError(t, err)
	require.Equal(t, store.ShardPending, sh.State, "posting schedules the wallet's shard, as the API does")

	got, err = st.TaskGet(t.Context(), "other", tasks[1].ID)
	require.NoError(t, err)
	require.Equal(t, int64(7), got.ChainID)
	require.Equal(t, "0x00000000000000000000000000000000000000c3", got.Sender)
	require.Equal(t, int32(3), got.Priority)
	require.Equal(t, "0x00000000000000000000000000000000000000d4", got.Request.To)
	require.Equal(t, int64(5), got.Request.Value.Int64())
	require.Equal(t, "k", got.IdempotencyKey)
	require.Equal(t, now.Add(time.Second), got.CreatedAt)

}

func TestFactory_SignedTxIsAnotherTransactionEveryCallNamingItsTaskAndNonce(t *testing.T) {
	t.Parallel()
	a, b := testfactory.SignedTx("t", 4), testfactory.SignedTx("t", 4)
	require.NotEqual(t, a.TxHash, b.TxHash)
	require.Regexp(t, `^0x[0-9a-f]{64}$`, a.TxHash)
	require.Equal(t, "t", a.TaskID)
	require.Equal(t, int64(4), a.Nonce)
	require.Equal(t, []byte("raw t 4"), a.Raw)
	require.Equal(t, uint64(21000), a.GasLimit)
	require.Equal(t, int64(2_000_000_000), a.MaxFeePerGas.Int64())
	require.Equal(t, int64(1_000_000_000), a.MaxPriorityFeePerGas.Int64())
	require.Empty(t, testfactory.SignedTx("", 1).TaskID, "a no-op's")
}

func TestFactory_StartTasksStoresConsecutiveNoncesAndStartTaskTakesTheNextOne(t *testing.T) {
	t.Parallel()
	st, clk, f := newFactory(t)
	a, b, c := f.PostTask(testfactory.Task{}), f.PostTask(testfactory.Task{}), f.PostTask(testfactory.Task{})
	clk.Advance(time.Second)
	atts := f.StartTasks(3, a, b)
	require.Equal(t, []int64{3, 4}, []int64{atts[0].Nonce, atts[1].Nonce})
	for i, task := range []store.Task{a, b} {
		require.Equal(t, task.ID, atts[i].TaskID)
		got, err := st.TaskGet(t.Context(), "main", task.ID)
		require.NoError(t, err)
		require.Equal(t, store.TaskExecuting, got.Status)
		require.Equal(t, clk.Now(), *got.StartedAt)
		stored, err := st.AttemptListByTask(t.Context(), task.ID)
		require.NoError(t, err)
		require.Len(t, stored, 1)
		require.Equal(t, atts[i].TxHash, stored[0].TxHash)
		require.Equal(t, store.AttemptSigned, stored[0].State)
	}
	require.Equal(t, int64(5), f.StartTask(c).Nonce, "the wallet's next nonce")
	next, err := st.WalletNonceGet(t.Context(), testfactory.WalletChainID, testfactory.WalletSender)
	require.NoError(t, err)
	require.Equal(t, int64(6), next)

	fresh := f.PostTask(testfactory.Task{Sender: "0x00000000000000000000000000000000000000c3"})
	require.Equal(t, int64(0), f.StartTask(fresh).Nonce, "a wallet with no nonce yet starts at 0")
	require.Nil(t, f.StartTasks(0))
}

func TestFactory_FinishTaskEndsTheTaskDoneAndCancelTaskInError(t *testing.T) {
	t.Parallel()
	st, _, f := newFactory(t)
	done, cancelled := f.PostTask(testfactory.Task{}), f.PostTask(testfactory.Task{})
	a := f.FinishTask(done)
	got, err := st.TaskGet(t.Context(), "main", done.ID)
	require.NoError(t, err)
	require.Equal(t, store.TaskDone, got.Status)
	require.Equal(t, a.TxHash, got.TxHash)
	stored, err := st.AttemptListByTask(t.Context(), done.ID)
	require.NoError(t, err)
	require.Equal(t, store.AttemptConfirmed, stored[0].State)

	got = f.CancelTask(cancelled)
	require.Equal(t, store.TaskError, got.Status)
	require.True(t, got.Cancelled)
	got, err = st.TaskGet(t.Context(), "main", cancelled.ID)
	require.NoError(t, err)
	require.True(t, got.Cancelled)
}

func TestFactory_CreateWebhookEndpointFillsTheDefaultsAndReturnsTheSecret(t *testing.T) {
	t.Parallel()
	st, clk, f := newFactory(t)
	ep := f.CreateWebhookEndpoint(testfactory.WebhookEndpoint{})
	require.Equal(t, "main", ep.Wallet)
	require.Equal(t, "https://example.test/hook", ep.URL)
	require.ElementsMatch(t, store.WebhookEventTypes, ep.EventTypes)
	require.True(t, ep.Enabled)
	require.True(t, store.ValidWebhookSecret(ep.Secret))
	require.Equal(t, clk.Now(), ep.CreatedAt)

	off := f.CreateWebhookEndpoint(testfactory.WebhookEndpoint{
		Wallet: "w", URL: "https://example.test/off", EventTypes: []store.WebhookEventType{store.WebhookConfirmed}, Disabled: true,
	})
	require.NotEqual(t, ep.Secret, off.Secret)
	list, err := st.WebhookEndpointList(t.Context(), "w")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "https://example.test/off", list[0].URL)
	require.Equal(t, []store.WebhookEventType{store.WebhookConfirmed}, list[0].EventTypes)
	require.False(t, list[0].Enabled)
}

func TestFactory_PoolTxIsTheSameTransactionForTheSameArguments(t *testing.T) {
	t.Parallel()
	tx := testfactory.PoolTx(1, 2, 30, 10)
	require.Equal(t, tx, testfactory.PoolTx(1, 2, 30, 10))
	require.Equal(t, testfactory.PoolChainID, tx.ChainID)
	require.Equal(t, testfactory.PoolSender(1), tx.Sender)
	require.Regexp(t, `^0x[0-9a-f]{40}$`, tx.Sender)
	require.Equal(t, uint64(2), tx.Nonce)
	require.Equal(t, int64(30), tx.GasFeeCap.Int64())
	require.Equal(t, int64(10), tx.GasTipCap.Int64())
	for _, other := range []store.NewPoolTx{
		testfactory.PoolTx(2, 2, 30, 10), testfactory.PoolTx(1, 3, 30, 10), testfactory.PoolTx(1, 2, 31, 10),
		testfactory.PoolTx(1, 2, 30, 11), testfactory.PoolTx(1, 2, 30, 10, "salt"),
	} {
		require.NotEqual(t, tx.Hash, other.Hash)
		require.NotEqual(t, tx.Raw, other.Raw)
	}
}

func TestFactory_AddPoolTxsAddsThroughThePoolsRules(t *testing.T) {
	t.Parallel()
	st, clk, f := newFactory(t)
	got := f.AddPoolTxs(testfactory.PoolTx(1, 0, 20, 10), testfactory.PoolTx(1, 2, 20, 10))
	require.Equal(t, []store.PoolTxState{store.PoolPending, store.PoolQueued}, []store.PoolTxState{got[0].State, got[1].State},
		"nonce 0 is next on a chain where every nonce is 0; nonce 2 waits for 1")
	stored, err := st.PoolGet(t.Context(), testfactory.PoolChainID, got[1].Hash)
	require.NoError(t, err)
	require.Equal(t, store.PoolQueued, stored.State)
	require.Equal(t, clk.Now(), stored.ReceivedAt)
	require.Equal(t, clk.Now().Add(store.DefaultPoolLimits().TTL), stored.ExpiresAt)
}

func TestFactory_CutBundlesCutsThePendingTransactionsAsTheBundlerDoes(t *testing.T) {
	t.Parallel()
	st, clk, f := newFactory(t)
	require.Empty(t, f.CutBundles(store.BundleCutParams{}), "nothing pending")
	f.AddPoolTxs(testfactory.PoolTx(1, 0, 20, 10), testfactory.PoolTx(1, 1, 20, 10), testfactory.PoolTx(2, 0, 20, 10))
	bs := f.CutBundles(store.BundleCutParams{Size: 2})
	require.Len(t, bs, 2)
	require.Equal(t, []uint64{1, 2}, []uint64{bs[0].Number, bs[1].Number}, "the chain's first blocks")
	require.Equal(t, []int{2, 1}, []int{bs[0].TxCount, bs[1].TxCount})
	require.Equal(t, bs[0].Hash, bs[1].Parent)
	for _, b := range bs {
		require.Equal(t, testfactory.PoolChainID, b.ChainID)
		require.Equal(t, store.BundleQueued, b.State)
		require.Equal(t, clk.Now(), b.CreatedAt)
		require.Nil(t, b.Anchor, "no recent blocks: the claim picks the anchor")
	}
	tx, err := st.PoolGet(t.Context(), testfactory.PoolChainID, testfactory.PoolTx(2, 0, 20, 10).Hash)
	require.NoError(t, err)
	require.Equal(t, store.PoolIncluded, tx.State)
	require.Equal(t, int64(2), *tx.BundleBlock)
}
