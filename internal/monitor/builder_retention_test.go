package monitor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/monitor"
)

// The builder lane's retention rules: bundles that ended (finalized, with
// their work packages and transactions; dropped) and pool transactions that
// ended (replaced, dropped) longer than the age ago are deleted; a bundle in
// flight, a chain's newest finalized bundle and a transaction that is
// pending, queued or in a bundle that is not final are kept whatever their
// age. The rows are written as the lane leaves them, each state's times
// relative to the fake clock.

const retentionChain = 100

// builderRetention is the builder lane's retention on r's store, with r.cfg's
// age and batch size.
func (r *retentionSetup) builderRetention() *monitor.Retention {
	r.t.Helper()
	cfg := builder.Defaults()
	cfg.RetentionAge, cfg.RetentionBatchSize, cfg.RetentionInterval = r.cfg.Age, r.cfg.BatchSize, r.cfg.Interval
	ret, err := monitor.NewBuilderRetention(r.st, r.deps, cfg)
	require.NoError(r.t, err)
	return ret
}

func (r *retentionSetup) exec(sql string, args ...any) {
	r.t.Helper()
	_, err := r.st.DB().Exec(r.t.Context(), sql, args...)
	require.NoError(r.t, err)
}

// hash is a 0x-hex hash made of n.
func hash(n int) string { return fmt.Sprintf("0x%064x", n) }

// bundle stores bundle number of retentionChain in state, its last change
// ago before the clock's now (finalized_at for a finalized one), with one
// work package, and returns its id.
func (r *retentionSetup) bundle(number int, state string, ago time.Duration) int64 {
	r.t.Helper()
	at := r.clock.Now().Add(-ago)
	r.exec(`INSERT INTO ledgerq.builder_chains (chain_id, processed_slot, created_at, updated_at)
		VALUES ($1, 1, $2, $2) ON CONFLICT DO NOTHING`, retentionChain, at)
	var id int64
	require.NoError(r.t, r.st.DB().QueryRow(r.t.Context(), `
		INSERT INTO ledgerq.bundles (chain_id, number, parent, hash, state, version, anchor_slot, anchor_hash,
			guaranteed_hash, guaranteed_version, accumulated_slot, drop_reason, next_submit_at, tx_count,
			created_at, guaranteed_at, accumulated_at, finalized_at, updated_at)
		SELECT $1, $2::bigint, $3::text, $3::text, $4::text::ledgerq.bundle_state, 1,
			CASE WHEN $4::text = 'queued' THEN 1 END, CASE WHEN $4::text = 'queued' THEN $3::text END,
			CASE WHEN g THEN $3::text END, CASE WHEN g THEN 1 END, CASE WHEN a THEN $2::bigint END,
			CASE WHEN $4::text = 'dropped' THEN 'no guarantee after 3 versions' END, $5::timestamptz, 1,
			$5::timestamptz, CASE WHEN g THEN $5::timestamptz END, CASE WHEN a THEN $5::timestamptz END,
			CASE WHEN $4::text = 'finalized' THEN $5::timestamptz END, $5::timestamptz
		FROM (SELECT $4::text IN ('guaranteed', 'accumulated', 'finalized') AS g, $4::text IN ('accumulated', 'finalized') AS a) s
		RETURNING id`, retentionChain, number, hash(number), state, at).Scan(&id))
	r.exec(`INSERT INTO ledgerq.bundle_versions (package_hash, bundle_id, version, core, anchor_slot, anchor_hash, submitted_at, outcome)
		VALUES ($1, $2, 1, 0, 1, $1, $3, 'sent')`, hash(1000+number), id, at)
	return id
}

// poolTx stores the transaction of sender nonce in state (included: in
// bundle), its last change ago before the clock's now, and returns its hash.
func (r *retentionSetup) poolTx(nonce int, state string, bundle int64, ago time.Duration) string {
	r.t.Helper()
	at := r.clock.Now().Add(-ago)
	h := hash(5000 + nonce)
	var bundleID *int64
	if state == "included" {
		bundleID = &bundle
	}
	r.exec(`
		INSERT INTO ledgerq.pool_txs (chain_id, tx_hash, sender, nonce, tx_type, gas_fee_cap, gas_tip_cap, gas, value_wei,
			raw, state, replaced_by, drop_reason, bundle_id, bundle_block, bundle_pos, received_at, expires_at, updated_at)
		VALUES ($1, $2, '0x00000000000000000000000000000000000000aa', $3, 2, 2, 1, 21000, 0, '\x01', $4::ledgerq.pool_tx_state,
			CASE WHEN $4 = 'replaced' THEN $6 END, CASE WHEN $4 = 'dropped' THEN 'expired' END,
			$5::bigint, CASE WHEN $5::bigint IS NOT NULL THEN 1 END, CASE WHEN $5::bigint IS NOT NULL THEN 0 END,
			$7, $7::timestamptz + interval '1 hour', $7)`,
		retentionChain, h, nonce, state, bundleID, hash(9000+nonce), at)
	return h
}

// count counts the rows of table where cond holds.
func (r *retentionSetup) count(table, cond string, args ...any) int {
	r.t.Helper()
	var n int
	require.NoError(r.t, r.st.DB().QueryRow(r.t.Context(), `SELECT count(*) FROM ledgerq.`+table+` WHERE `+cond, args...).Scan(&n))
	return n
}

func TestBuilderRetention_EndedBundlesAndTransactionsOlderThanTheAgeAreDeletedLiveAndYoungerOnesKept(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	const day = 24 * time.Hour
	oldFinal := r.bundle(1, "finalized", 3*day)
	youngFinal := r.bundle(9, "finalized", 23*time.Hour) // the newest
	accumulated := r.bundle(3, "accumulated", 3*day)
	queued := r.bundle(4, "queued", 3*day)
	oldDropped := r.bundle(5, "dropped", 3*day)
	youngDropped := r.bundle(6, "dropped", 23*time.Hour)
	inOld := r.poolTx(1, "included", oldFinal, 3*day)
	inYoung := r.poolTx(2, "included", youngFinal, 3*day)
	inAccumulated := r.poolTx(3, "included", accumulated, 3*day)
	inQueued := r.poolTx(4, "included", queued, 3*day)
	pending := r.poolTx(5, "pending", 0, 3*day)
	waiting := r.poolTx(6, "queued", 0, 3*day)
	oldReplaced := r.poolTx(7, "replaced", 0, 3*day)
	oldDroppedTx := r.poolTx(8, "dropped", 0, 3*day)
	youngDroppedTx := r.poolTx(9, "dropped", 0, 23*time.Hour)

	// Two bundles and two transactions of their own.
	require.Equal(t, 4, r.rows.Run("builder retention", r.builderRetention().RunOnce))
	bundleKept := func(id int64) bool { return r.count("bundles", "id = $1", id) == 1 }
	require.False(t, bundleKept(oldFinal), "a bundle finalized longer than the age ago is deleted")
	require.False(t, bundleKept(oldDropped), "a bundle dropped longer than the age ago is deleted")
	require.Zero(t, r.count("bundle_versions", "bundle_id IN ($1, $2)", oldFinal, oldDropped), "with its work packages")
	for name, id := range map[string]int64{"finalized": youngFinal, "dropped": youngDropped, "accumulated": accumulated, "queued": queued} {
		require.True(t, bundleKept(id), "a %s bundle younger than the age, or in flight, is kept", name)
		require.Equal(t, 1, r.count("bundle_versions", "bundle_id = $1", id), "with its work package (%s)", name)
	}
	txKept := func(h string) bool { return r.count("pool_txs", "tx_hash = $1", h) == 1 }
	for name, h := range map[string]string{"replaced": oldReplaced, "dropped": oldDroppedTx, "in the old finalized bundle": inOld} {
		require.False(t, txKept(h), "an old transaction %s is deleted", name)
	}
	for name, h := range map[string]string{
		"pending": pending, "queued": waiting, "dropped 23 h ago": youngDroppedTx, "in a young finalized bundle": inYoung,
		"in an accumulated bundle": inAccumulated, "in a queued bundle": inQueued,
	} {
		require.True(t, txKept(h), "a transaction %s is kept", name)
	}
	require.Zero(t, r.rows.Run("builder retention", r.builderRetention().RunOnce), "nothing more to delete")
}

// A lane that has been idle longer than the age still has its newest
// finalized bundle: the next cut's parent, and /rpc's finalized head.
func TestBuilderRetention_AChainsNewestFinalizedBundleIsKeptWhateverItsAge(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	first := r.bundle(1, "finalized", 72*time.Hour)
	second := r.bundle(2, "finalized", 71*time.Hour)
	newest := r.bundle(3, "finalized", 70*time.Hour)
	r.poolTx(1, "included", newest, 70*time.Hour)

	require.Equal(t, 2, r.rows.Run("builder retention", r.builderRetention().RunOnce))
	require.Zero(t, r.count("bundles", "id IN ($1, $2)", first, second))
	require.Equal(t, 1, r.count("bundles", "id = $1", newest), "the newest finalized bundle is kept")
	require.Equal(t, 1, r.count("pool_txs", "bundle_id = $1", newest), "with its transactions")
	heads, err := r.st.BundleHeads(t.Context(), retentionChain)
	require.NoError(t, err)
	require.EqualValues(t, 3, heads.Finalized)
}

func TestBuilderRetention_DeletesAtMostBatchSizeOfEachPerRoundOldestFirst(t *testing.T) {
	t.Parallel()
	r := retentionSetupTx(t)
	r.cfg.BatchSize = 2
	for i := range 5 {
		r.poolTx(i, "dropped", 0, time.Duration(100-i)*time.Hour)
	}
	ret := r.builderRetention()
	require.Equal(t, 2, r.rows.Run("builder retention", ret.RunOnce))
	require.Zero(t, r.count("pool_txs", "nonce IN (0, 1)"), "the oldest first")
	require.Equal(t, 2, r.rows.Run("builder retention", ret.RunOnce))
	require.Equal(t, 1, r.rows.Run("builder retention", ret.RunOnce))
	require.Zero(t, r.rows.Run("builder retention", ret.RunOnce))
}
