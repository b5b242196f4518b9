package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/internal/store"
)

// seedFinished stores n finished pool transactions, as a lane that ran
// long leaves them: included, 16 per sender with nonces 0 to 15, in
// finalized bundles of bundleSize with one submitted version each. One
// INSERT … SELECT per table, so a million take seconds.
//
// The transactions are on the run's chain (chainID), in the same indexes
// as the run's own, which is what their number could slow down. Their
// bundles are recorded under a chain id of their own (chainID + 1): on the
// run's chain their numbers would continue its line of bundle numbers,
// which the run's fresh simulated chain has not executed.
func seedFinished(ctx context.Context, st *store.Store, chainID int64, n, bundleSize int, now time.Time) error {
	if n == 0 {
		return nil
	}
	bundles := (n + bundleSize - 1) / bundleSize
	seedChain := chainID + 1
	then := now.Add(-time.Hour)
	return pgx.BeginFunc(ctx, st.Conns(), func(tx pgx.Tx) error {
		steps := []struct {
			what string
			sql  string
			args []any
		}{
			{"the seed chain", `
				INSERT INTO ledgerq.builder_chains (chain_id, processed_slot, created_at, updated_at)
				VALUES ($1, $2, $3, $3) ON CONFLICT (chain_id) DO NOTHING`, []any{seedChain, bundles + 10, then}},
			{"bundles", `
				INSERT INTO ledgerq.bundles (chain_id, number, parent, hash, state, version, anchor_slot, anchor_hash,
				    guaranteed_hash, guaranteed_version, accumulated_slot, next_submit_at, tx_count,
				    created_at, submitted_at, guaranteed_at, accumulated_at, finalized_at, updated_at)
				SELECT $1, b, '0x' || md5('parent' || b) || md5('p' || b), '0x' || md5('bundle' || b) || md5('b' || b),
				       'finalized', 1, b, '0x' || md5('anchor' || b) || md5('a' || b),
				       '0x' || md5('package' || b) || md5('k' || b), 1, b + 2, $3, least($4::int, $5::int - (b - 1) * $4::int),
				       $3, $3, $3, $3, $3, $3
				FROM generate_series(1, $2::int) AS b`, []any{seedChain, bundles, then, bundleSize, n}},
			{"bundle versions", `
				INSERT INTO ledgerq.bundle_versions (package_hash, bundle_id, version, core, anchor_slot, anchor_hash,
				    submitted_at, outcome, guaranteed_slot)
				SELECT guaranteed_hash, id, 1, number % 2, anchor_slot, anchor_hash, submitted_at, 'sent', number + 1
				FROM ledgerq.bundles WHERE chain_id = $1`, []any{seedChain}},
			{"pool transactions", `
				INSERT INTO ledgerq.pool_txs (chain_id, tx_hash, sender, nonce, tx_type, to_address, gas_fee_cap,
				    gas_tip_cap, gas, value_wei, raw, state, bundle_id, bundle_block, bundle_pos,
				    received_at, expires_at, updated_at)
				SELECT $1, '0x' || md5('tx' || i) || md5('t' || i), '0x' || left(md5('sender' || (i / 16)) || md5('s' || (i / 16)), 40), i % 16, 2,
				       '0x' || left(md5('to' || i) || md5('o' || i), 40), 2000000000, 1000000000, 21000, 1,
				       decode(repeat('ab', 110), 'hex'), 'included', b.id, b.number, i % $4::int,
				       $3, $3::timestamptz + interval '1 hour', $3
				FROM generate_series(0, $2::int - 1) AS i
				JOIN ledgerq.bundles b ON b.chain_id = $5 AND b.number = i / $4::int + 1`,
				[]any{chainID, n, then, bundleSize, seedChain}},
			{"statistics", `ANALYZE ledgerq.pool_txs, ledgerq.bundles, ledgerq.bundle_versions`, nil},
		}
		for _, s := range steps {
			if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
				return fmt.Errorf("--backlog-finished: seeding %s: %w", s.what, err)
			}
		}
		return nil
	})
}
