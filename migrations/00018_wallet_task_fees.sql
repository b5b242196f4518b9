-- +goose Up
-- A send-tx task may name the fees of its first transaction (the API's
-- max_priority_fee_per_gas and max_fee_per_gas); without them the worker
-- asks the node. Gas bumps start from these.
ALTER TABLE ledgerq.wallet_tasks
    ADD COLUMN tip_cap_wei numeric(78, 0),
    ADD COLUMN fee_cap_wei numeric(78, 0),
    ADD CONSTRAINT wallet_tasks_fees_uint256 CHECK (
        (tip_cap_wei IS NULL OR (tip_cap_wei >= 0 AND tip_cap_wei < 2::numeric ^ 256))
        AND (fee_cap_wei IS NULL OR (fee_cap_wei >= 0 AND fee_cap_wei < 2::numeric ^ 256))
        AND (tip_cap_wei IS NULL OR fee_cap_wei IS NULL OR tip_cap_wei <= fee_cap_wei)
    );
COMMENT ON COLUMN ledgerq.wallet_tasks.tip_cap_wei IS 'The tip (max priority fee per gas, wei) the request asked for its first transaction; NULL: the node''s suggestion. Bumps raise it.';
COMMENT ON COLUMN ledgerq.wallet_tasks.fee_cap_wei IS 'The fee cap (max fee per gas, wei) the request asked for its first transaction; NULL: 2 x base fee + tip. Never below tip_cap_wei.';

-- +goose Down
ALTER TABLE ledgerq.wallet_tasks
    DROP CONSTRAINT wallet_tasks_fees_uint256,
    DROP COLUMN fee_cap_wei,
    DROP COLUMN tip_cap_wei;
