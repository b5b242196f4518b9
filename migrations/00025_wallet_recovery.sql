-- +goose Up
-- Wallet lane: a wallet held because the chain used nonces its database does
-- not know (the database was restored from a backup older than the chain, or
-- someone else sent from the address) and the lane could not yet read which
-- transactions took them. Nothing is signed for a held wallet: signing before
-- its own forgotten transactions are found could pay a task a second time.

ALTER TABLE ledgerq.wallet_health
    ADD COLUMN recovery_reason text,
    ADD COLUMN recovery_since  timestamptz,
    ADD COLUMN scan_block  bigint,
    ADD CONSTRAINT wallet_health_recovery CHECK (
        (recovery_reason IS NULL) = (recovery_since IS NULL) AND (recovery_since IS NULL OR isfinite(recovery_since))
        AND (scan_block IS NULL OR scan_block >= 0)
    );
COMMENT ON COLUMN ledgerq.wallet_health.recovery_reason IS 'Why nothing is signed for the wallet now: the chain used nonces no attempt in this database holds, and the lane could not read the transactions at them yet (they are matched to waiting tasks before anything new is signed). NULL: not held.';
COMMENT ON COLUMN ledgerq.wallet_health.recovery_since IS 'When the wallet was first held for recovery_reason; NULL with it.';
COMMENT ON COLUMN ledgerq.wallet_health.scan_block IS 'While the chain''s blocks are read one by one for the wallet''s transactions at nonces the database does not know (the node cannot search by the account''s nonce at past blocks): the next block to read. NULL: no such read under way.';

-- +goose Down
ALTER TABLE ledgerq.wallet_health
    DROP CONSTRAINT wallet_health_recovery,
    DROP COLUMN scan_block,
    DROP COLUMN recovery_since,
    DROP COLUMN recovery_reason;
