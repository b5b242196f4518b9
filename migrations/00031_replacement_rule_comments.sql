-- +goose Up
-- The pool's replacement rule is geth's (core/txpool/legacypool): a
-- replacement's fee cap and tip are each strictly above the old ones and at
-- least old * 110 / 100 in integer division. The comments said "at least
-- 110 %", which is not that rule at small values (101 → 111 is a
-- replacement; equal zero tips are not). Comments only.
COMMENT ON COLUMN ledgerq.pool_txs.gas_fee_cap IS 'Fee cap in wei: max fee per gas, or the gas price of a legacy or access-list transaction. A replacement''s fee cap must be above it and at least it * 110 / 100 in integer division (geth''s rule).';
COMMENT ON COLUMN ledgerq.pool_txs.gas_tip_cap IS 'Tip in wei: max priority fee per gas, or the gas price. A replacement''s tip must be above it and at least it * 110 / 100 in integer division too (geth''s rule); the minimum price applies to it (as in geth).';
COMMENT ON COLUMN ledgerq.pool_txs.replaced_by IS 'State replaced: hash of the transaction that took this nonce with a fee cap and a tip each above this one''s and at least 110 / 100 of them in integer division (geth''s rule).';
-- And the TTL's flag by its name since the builder lane's flags took the
-- lane's prefix (--pool-ttl still works, as a deprecated alias).
COMMENT ON COLUMN ledgerq.pool_txs.expires_at IS 'received_at + the pool''s TTL (--builder-pool-ttl, 1 h by default): a transaction still pending or queued then is dropped as expired by the sweep.';

-- +goose Down
COMMENT ON COLUMN ledgerq.pool_txs.expires_at IS 'received_at + the pool''s TTL (--pool-ttl, 1 h by default): a transaction still pending or queued then is dropped as expired by the sweep.';
COMMENT ON COLUMN ledgerq.pool_txs.gas_fee_cap IS 'Fee cap in wei: max fee per gas, or the gas price of a legacy or access-list transaction. A replacement must be at least 110 % of it.';
COMMENT ON COLUMN ledgerq.pool_txs.gas_tip_cap IS 'Tip in wei: max priority fee per gas, or the gas price. A replacement must be at least 110 % of it too; the minimum price applies to it (as in geth).';
COMMENT ON COLUMN ledgerq.pool_txs.replaced_by IS 'State replaced: hash of the transaction that took this nonce with fee cap and tip both >= 110 %.';
