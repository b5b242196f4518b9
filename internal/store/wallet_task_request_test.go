package store_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// sentTask is a task of wallet "main" started at the wallet's next nonce
// with its attempt broadcast (sent): what a cancel or a speed-up acts on.
func sentTask(t *testing.T, st *store.Store, rows *testfactory.Factory, now time.Time) (store.Task, store.Attempt) {
	t.Helper()
	task := rows.PostTask(testfactory.Task{})
	a := rows.StartTask(task)
	_, err := st.AttemptMarkSent(t.Context(), store.AttemptMarkSentParams{Now: now, ChainID: a.ChainID, TxHashes: []string{a.TxHash}})
	require.NoError(t, err)
	return task, a
}

func auditActions(t *testing.T, st *store.Store) []string {
	t.Helper()
	recs, err := st.AuditList(t.Context(), 0, 100)
	require.NoError(t, err)
	var out []string
	for _, r := range recs {
		out = append(out, r.Action+" "+r.Target)
	}
	return out
}

func TestTaskRequest_CancelOfAnExecutingTaskIsRecordedOnceAuditedAndSchedulesItsShard(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx := t.Context()
	now := clk.Now()
	task, _ := sentTask(t, st, rows, now)
	key := store.WalletShardKey(task.ChainID, task.Sender)
	// The wallet's shard ran and went idle: the cancel must schedule it.
	claim, err := st.ShardClaim(ctx, store.ShardClaimParams{Now: now, Owner: "w/0", LeaseUntil: now.Add(time.Minute), Kinds: []string{"wallet"}})
	require.NoError(t, err)
	require.Equal(t, key, claim.Key)
	state, err := st.ShardRelease(ctx, store.ShardReleaseParams{Now: now, Claim: claim})
	require.NoError(t, err)
	require.Equal(t, store.ShardIdle, state)
	audit := &store.AuditEntry{KeyName: "ops", Via: "api"}

	got, outcome, err := st.TaskRequestCancel(ctx, store.TaskCancelParams{Now: now.Add(time.Second), Wallet: "main", ID: task.ID, Audit: audit})
	require.NoError(t, err)
	require.Equal(t, store.CancelRequested, outcome)
	require.Equal(t, store.TaskExecuting, got.Status, "the worker decides how it ends")
	require.False(t, got.Cancelled)
	require.Equal(t, now.Add(time.Second), *got.CancelRequestedAt)

	again, outcome, err := st.TaskRequestCancel(ctx, store.TaskCancelParams{Now: now.Add(2 * time.Second), Wallet: "main", ID: task.ID, Audit: audit})
	require.NoError(t, err)
	require.Equal(t, store.CancelRequested, outcome)
	require.Equal(t, now.Add(time.Second), *again.CancelRequestedAt, "a repeated request keeps the first")
	require.Equal(t, []string{"task.cancel wallet/main/task/" + task.ID}, auditActions(t, st), "audited once")

	shard, err := st.ShardGet(ctx, key)
	require.NoError(t, err)
	require.Equal(t, store.ShardPending, shard.State, "the wallet's worker is poked")

	_, _, err = st.TaskRequestCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "other", ID: task.ID})
	require.ErrorIs(t, err, store.ErrNotFound, "another wallet's task is not found")
}

func TestTaskRequest_CancelOfAWaitingTaskEndsItAndAnEndedTaskIsRefused(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx := t.Context()
	now := clk.Now()
	waiting := rows.PostTask(testfactory.Task{})
	got, outcome, err := st.TaskRequestCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: waiting.ID, Audit: &store.AuditEntry{Via: "api"}})
	require.NoError(t, err)
	require.Equal(t, store.CancelledNow, outcome)
	require.Equal(t, store.TaskError, got.Status)
	require.True(t, got.Cancelled)
	require.Nil(t, got.CancelRequestedAt, "a waiting task is cancelled, not asked to be")

	_, outcome, err = st.TaskRequestCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: waiting.ID})
	require.NoError(t, err)
	require.Equal(t, store.CancelledBefore, outcome)

	done := rows.PostTask(testfactory.Task{})
	rows.FinishTask(done)
	_, _, err = st.TaskRequestCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: done.ID, Audit: &store.AuditEntry{Via: "api"}})
	var refused *store.TaskRefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, store.TaskDone, refused.Status)
	require.Equal(t, []string{"task.cancel wallet/main/task/" + waiting.ID}, auditActions(t, st), "a refusal is not audited")
}

func TestTaskRequest_ASpeedUpMustReplaceTheLiveTransactionByGethsRule(t *testing.T) {
	t.Parallel()
	st, clk, rows := txRows(t)
	ctx := t.Context()
	now := clk.Now()
	task, live := sentTask(t, st, rows, now)
	require.Equal(t, int64(2_000_000_000), live.MaxFeePerGas.Int64())
	audit := &store.AuditEntry{KeyName: "ops", Via: "api"}
	speedUp := func(feeCap, tip int64) (store.Task, error) {
		return st.TaskRequestSpeedUp(ctx, store.TaskSpeedUpParams{Now: now, Wallet: "main", ID: task.ID, Audit: audit,
			Fees: store.SpeedUpFees{FeeCap: big.NewInt(feeCap), TipCap: big.NewInt(tip)}})
	}

	_, err := speedUp(2_199_999_999, 1_100_000_000)
	var low *store.SpeedUpTooLowError
	require.ErrorAs(t, err, &low, "a fee cap 1 wei short of +10%% is no replacement")
	require.Equal(t, int64(2_200_000_000), low.Min.FeeCap.Int64())
	require.Equal(t, int64(1_100_000_000), low.Min.TipCap.Int64())
	_, err = speedUp(5_000_000_000, 1_000_000_000)
	require.ErrorAs(t, err, &low, "the tip must rise too")

	got, err := speedUp(2_200_000_000, 1_100_000_000)
	require.NoError(t, err)
	require.Equal(t, int64(2_200_000_000), got.SpeedUp.FeeCap.Int64())
	require.Equal(t, int64(1_100_000_000), got.SpeedUp.TipCap.Int64())
	require.Equal(t, []string{"task.speed_up wallet/main/task/" + task.ID}, auditActions(t, st))

	_, _, err = st.TaskRequestCancel(ctx, store.TaskCancelParams{Now: now, Wallet: "main", ID: task.ID})
	require.NoError(t, err)
	_, err = speedUp(3_000_000_000, 2_000_000_000)
	var refused *store.TaskRefusedError
	require.ErrorAs(t, err, &refused, "a task being cancelled is not sped up")

	waiting := rows.PostTask(testfactory.Task{})
	_, err = st.TaskRequestSpeedUp(ctx, store.TaskSpeedUpParams{Now: now, Wallet: "main", ID: waiting.ID,
		Fees: store.SpeedUpFees{FeeCap: big.NewInt(3_000_000_000), TipCap: big.NewInt(2_000_000_000)}})
	require.ErrorAs(t, err, &refused, "a waiting task has no transaction to replace")
}

// The race a cancel starts is decided by the hash mined: the no-op's ends
// the task cancelled (not done), the task's own ends it done.
func TestAttempt_TheCancelsNoopMinedEndsTheTaskCancelledAndItsOwnTransactionMinedEndsItDone(t *testing.T) {
	t.Parallel()
	for _, noopWins := range []bool{true, false} {
		t.Run(map[bool]string{true: "no-op mined", false: "original mined"}[noopWins], func(t *testing.T) {
			t.Parallel()
			st, clk, rows := txRows(t)
			ctx := t.Context()
			now := clk.Now()
			task, live := sentTask(t, st, rows, now)
			noop := testfactory.SignedTx(task.ID, live.Nonce)
			noop.Kind = store.AttemptCancel
			require.NoError(t, st.AttemptBump(ctx, store.AttemptBumpParams{Now: now, ChainID: live.ChainID, Sender: live.Sender, Old: live.TxHash, New: noop}))
			cur, err := st.TaskGet(ctx, "main", task.ID)
			require.NoError(t, err)
			require.Zero(t, cur.Bumps, "a cancel's no-op is no gas bump")

			mined := live.TxHash
			if noopWins {
				mined = noop.TxHash
			}
			got, err := st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: now, ChainID: live.ChainID, TxHash: mined, Live: noop.TxHash,
				Block: 7, BlockHash: "0x" + "ab" + "00000000000000000000000000000000000000000000000000000000000000", Final: true})
			require.NoError(t, err)
			atts, err := st.AttemptListByTask(ctx, task.ID)
			require.NoError(t, err)
			require.Len(t, atts, 2)
			require.Equal(t, store.AttemptCancel, atts[1].Kind, "the no-op is among the task's attempts, marked")
			if noopWins {
				require.Equal(t, store.TaskError, got.Status)
				require.True(t, got.Cancelled)
				require.Equal(t, "cancelled", got.Error)
				require.Empty(t, got.TxHash)
				require.Equal(t, store.AttemptConfirmed, atts[1].State)
			} else {
				require.Equal(t, store.TaskDone, got.Status)
				require.False(t, got.Cancelled)
				require.Equal(t, live.TxHash, got.TxHash)
				require.Equal(t, store.AttemptConfirmed, atts[0].State)
				require.Equal(t, store.AttemptDropped, atts[1].State)
			}
		})
	}
}
