-- +goose NO TRANSACTION
-- +goose Up
-- The hex format rules (addresses, transaction and block hashes) refuse what
-- they refused before, for less: a CHECK is evaluated on every insert and on
-- every update of its row, and PostgreSQL's regular expressions pay for a
-- counted repetition by its count ('^0x[0-9a-f]{64}$' about 12 µs a value,
-- '{40}' about 4.5 µs, against under 1 µs for octet_length and
-- '^0x[0-9a-f]+$'; the class is ASCII, so the octets are the digits). A pool
-- transaction paid its three on its insert and on each state change.
--
-- Each table's rules are replaced in one statement (the old one dropped and
-- the new one added NOT VALID, so the table is locked only for that), then
-- validated in another, which reads the table without blocking its writers.
-- Outside a transaction, so that the validation does not hold the first
-- statement's lock; run again after a crash between the two, each statement
-- replaces or validates what it finds.
ALTER TABLE ledgerq.wallet_tasks
    DROP CONSTRAINT wallet_tasks_sender_format,
    ADD CONSTRAINT wallet_tasks_sender_format CHECK (octet_length(sender) = 42 AND sender ~ '^0x[0-9a-f]+$') NOT VALID,
    DROP CONSTRAINT wallet_tasks_to_format,
    ADD CONSTRAINT wallet_tasks_to_format CHECK (octet_length(to_address) = 42 AND to_address ~ '^0x[0-9a-f]+$') NOT VALID,
    DROP CONSTRAINT wallet_tasks_tx_hash_format,
    ADD CONSTRAINT wallet_tasks_tx_hash_format CHECK (tx_hash IS NULL OR (octet_length(tx_hash) = 66 AND tx_hash ~ '^0x[0-9a-f]+$')) NOT VALID;
ALTER TABLE ledgerq.wallet_tasks VALIDATE CONSTRAINT wallet_tasks_sender_format;
ALTER TABLE ledgerq.wallet_tasks VALIDATE CONSTRAINT wallet_tasks_to_format;
ALTER TABLE ledgerq.wallet_tasks VALIDATE CONSTRAINT wallet_tasks_tx_hash_format;

ALTER TABLE ledgerq.tx_attempts
    DROP CONSTRAINT tx_attempts_tx_hash_format,
    ADD CONSTRAINT tx_attempts_tx_hash_format CHECK (octet_length(tx_hash) = 66 AND tx_hash ~ '^0x[0-9a-f]+$') NOT VALID,
    DROP CONSTRAINT tx_attempts_sender_format,
    ADD CONSTRAINT tx_attempts_sender_format CHECK (octet_length(sender) = 42 AND sender ~ '^0x[0-9a-f]+$') NOT VALID,
    DROP CONSTRAINT tx_attempts_superseded_by_format,
    ADD CONSTRAINT tx_attempts_superseded_by_format CHECK (
        superseded_by IS NULL OR (octet_length(superseded_by) = 66 AND superseded_by ~ '^0x[0-9a-f]+$')
    ) NOT VALID,
    DROP CONSTRAINT tx_attempts_mined_block,
    ADD CONSTRAINT tx_attempts_mined_block CHECK (
        (state <> 'mined' OR (mined_block IS NOT NULL AND mined_block_hash IS NOT NULL AND mined_at IS NOT NULL))
        AND (state NOT IN ('signed', 'sent') OR (mined_block IS NULL AND mined_block_hash IS NULL AND mined_at IS NULL))
        AND (mined_block IS NULL OR mined_block >= 0)
        AND (mined_block_hash IS NULL OR (octet_length(mined_block_hash) = 66 AND mined_block_hash ~ '^0x[0-9a-f]+$'))
        AND (mined_at IS NULL OR isfinite(mined_at))
    ) NOT VALID;
ALTER TABLE ledgerq.tx_attempts VALIDATE CONSTRAINT tx_attempts_tx_hash_format;
ALTER TABLE ledgerq.tx_attempts VALIDATE CONSTRAINT tx_attempts_sender_format;
ALTER TABLE ledgerq.tx_attempts VALIDATE CONSTRAINT tx_attempts_superseded_by_format;
ALTER TABLE ledgerq.tx_attempts VALIDATE CONSTRAINT tx_attempts_mined_block;

ALTER TABLE ledgerq.wallet_nonces
    DROP CONSTRAINT wallet_nonces_sender_format,
    ADD CONSTRAINT wallet_nonces_sender_format CHECK (octet_length(sender) = 42 AND sender ~ '^0x[0-9a-f]+$') NOT VALID;
ALTER TABLE ledgerq.wallet_nonces VALIDATE CONSTRAINT wallet_nonces_sender_format;

ALTER TABLE ledgerq.wallet_health
    DROP CONSTRAINT wallet_health_sender_format,
    ADD CONSTRAINT wallet_health_sender_format CHECK (octet_length(sender) = 42 AND sender ~ '^0x[0-9a-f]+$') NOT VALID;
ALTER TABLE ledgerq.wallet_health VALIDATE CONSTRAINT wallet_health_sender_format;

ALTER TABLE ledgerq.pool_txs
    DROP CONSTRAINT pool_txs_tx_hash_format,
    ADD CONSTRAINT pool_txs_tx_hash_format CHECK (octet_length(tx_hash) = 66 AND tx_hash ~ '^0x[0-9a-f]+$') NOT VALID,
    DROP CONSTRAINT pool_txs_sender_format,
    ADD CONSTRAINT pool_txs_sender_format CHECK (octet_length(sender) = 42 AND sender ~ '^0x[0-9a-f]+$') NOT VALID,
    DROP CONSTRAINT pool_txs_to_format,
    ADD CONSTRAINT pool_txs_to_format CHECK (
        to_address IS NULL OR (octet_length(to_address) = 42 AND to_address ~ '^0x[0-9a-f]+$')
    ) NOT VALID,
    DROP CONSTRAINT pool_txs_replaced_by_format,
    ADD CONSTRAINT pool_txs_replaced_by_format CHECK (
        replaced_by IS NULL OR (octet_length(replaced_by) = 66 AND replaced_by ~ '^0x[0-9a-f]+$' AND replaced_by <> tx_hash)
    ) NOT VALID;
ALTER TABLE ledgerq.pool_txs VALIDATE CONSTRAINT pool_txs_tx_hash_format;
ALTER TABLE ledgerq.pool_txs VALIDATE CONSTRAINT pool_txs_sender_format;
ALTER TABLE ledgerq.pool_txs VALIDATE CONSTRAINT pool_txs_to_format;
ALTER TABLE ledgerq.pool_txs VALIDATE CONSTRAINT pool_txs_replaced_by_format;

ALTER TABLE ledgerq.pool_senders
    DROP CONSTRAINT pool_senders_sender_format,
    ADD CONSTRAINT pool_senders_sender_format CHECK (octet_length(sender) = 42 AND sender ~ '^0x[0-9a-f]+$') NOT VALID;
ALTER TABLE ledgerq.pool_senders VALIDATE CONSTRAINT pool_senders_sender_format;

ALTER TABLE ledgerq.bundles
    DROP CONSTRAINT bundles_hashes_format,
    ADD CONSTRAINT bundles_hashes_format CHECK (
        octet_length(parent) = 66 AND parent ~ '^0x[0-9a-f]+$' AND octet_length(hash) = 66 AND hash ~ '^0x[0-9a-f]+$'
    ) NOT VALID,
    DROP CONSTRAINT bundles_anchor_format,
    ADD CONSTRAINT bundles_anchor_format CHECK (
        anchor_slot IS NULL OR (anchor_slot >= 0 AND octet_length(anchor_hash) = 66 AND anchor_hash ~ '^0x[0-9a-f]+$')
    ) NOT VALID,
    DROP CONSTRAINT bundles_guarantee_format,
    ADD CONSTRAINT bundles_guarantee_format CHECK (
        guaranteed_hash IS NULL OR (octet_length(guaranteed_hash) = 66 AND guaranteed_hash ~ '^0x[0-9a-f]+$'
                                    AND guaranteed_version BETWEEN 1 AND version)
    ) NOT VALID;
ALTER TABLE ledgerq.bundles VALIDATE CONSTRAINT bundles_hashes_format;
ALTER TABLE ledgerq.bundles VALIDATE CONSTRAINT bundles_anchor_format;
ALTER TABLE ledgerq.bundles VALIDATE CONSTRAINT bundles_guarantee_format;

ALTER TABLE ledgerq.bundle_versions
    DROP CONSTRAINT bundle_versions_hash_format,
    ADD CONSTRAINT bundle_versions_hash_format CHECK (
        octet_length(package_hash) = 66 AND package_hash ~ '^0x[0-9a-f]+$'
        AND octet_length(anchor_hash) = 66 AND anchor_hash ~ '^0x[0-9a-f]+$'
    ) NOT VALID;
ALTER TABLE ledgerq.bundle_versions VALIDATE CONSTRAINT bundle_versions_hash_format;

-- +goose Down
ALTER TABLE ledgerq.wallet_tasks
    DROP CONSTRAINT wallet_tasks_sender_format,
    ADD CONSTRAINT wallet_tasks_sender_format CHECK (sender ~ '^0x[0-9a-f]{40}$'),
    DROP CONSTRAINT wallet_tasks_to_format,
    ADD CONSTRAINT wallet_tasks_to_format CHECK (to_address ~ '^0x[0-9a-f]{40}$'),
    DROP CONSTRAINT wallet_tasks_tx_hash_format,
    ADD CONSTRAINT wallet_tasks_tx_hash_format CHECK (tx_hash IS NULL OR tx_hash ~ '^0x[0-9a-f]{64}$');

ALTER TABLE ledgerq.tx_attempts
    DROP CONSTRAINT tx_attempts_tx_hash_format,
    ADD CONSTRAINT tx_attempts_tx_hash_format CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    DROP CONSTRAINT tx_attempts_sender_format,
    ADD CONSTRAINT tx_attempts_sender_format CHECK (sender ~ '^0x[0-9a-f]{40}$'),
    DROP CONSTRAINT tx_attempts_superseded_by_format,
    ADD CONSTRAINT tx_attempts_superseded_by_format CHECK (superseded_by IS NULL OR superseded_by ~ '^0x[0-9a-f]{64}$'),
    DROP CONSTRAINT tx_attempts_mined_block,
    ADD CONSTRAINT tx_attempts_mined_block CHECK (
        (state <> 'mined' OR (mined_block IS NOT NULL AND mined_block_hash IS NOT NULL AND mined_at IS NOT NULL))
        AND (state NOT IN ('signed', 'sent') OR (mined_block IS NULL AND mined_block_hash IS NULL AND mined_at IS NULL))
        AND (mined_block IS NULL OR mined_block >= 0)
        AND (mined_block_hash IS NULL OR mined_block_hash ~ '^0x[0-9a-f]{64}$')
        AND (mined_at IS NULL OR isfinite(mined_at))
    );

ALTER TABLE ledgerq.wallet_nonces
    DROP CONSTRAINT wallet_nonces_sender_format,
    ADD CONSTRAINT wallet_nonces_sender_format CHECK (sender ~ '^0x[0-9a-f]{40}$');

ALTER TABLE ledgerq.wallet_health
    DROP CONSTRAINT wallet_health_sender_format,
    ADD CONSTRAINT wallet_health_sender_format CHECK (sender ~ '^0x[0-9a-f]{40}$');

ALTER TABLE ledgerq.pool_txs
    DROP CONSTRAINT pool_txs_tx_hash_format,
    ADD CONSTRAINT pool_txs_tx_hash_format CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    DROP CONSTRAINT pool_txs_sender_format,
    ADD CONSTRAINT pool_txs_sender_format CHECK (sender ~ '^0x[0-9a-f]{40}$'),
    DROP CONSTRAINT pool_txs_to_format,
    ADD CONSTRAINT pool_txs_to_format CHECK (to_address IS NULL OR to_address ~ '^0x[0-9a-f]{40}$'),
    DROP CONSTRAINT pool_txs_replaced_by_format,
    ADD CONSTRAINT pool_txs_replaced_by_format CHECK (
        replaced_by IS NULL OR (replaced_by ~ '^0x[0-9a-f]{64}$' AND replaced_by <> tx_hash)
    );

ALTER TABLE ledgerq.pool_senders
    DROP CONSTRAINT pool_senders_sender_format,
    ADD CONSTRAINT pool_senders_sender_format CHECK (sender ~ '^0x[0-9a-f]{40}$');

ALTER TABLE ledgerq.bundles
    DROP CONSTRAINT bundles_hashes_format,
    ADD CONSTRAINT bundles_hashes_format CHECK (parent ~ '^0x[0-9a-f]{64}$' AND hash ~ '^0x[0-9a-f]{64}$'),
    DROP CONSTRAINT bundles_anchor_format,
    ADD CONSTRAINT bundles_anchor_format CHECK (
        anchor_slot IS NULL OR (anchor_slot >= 0 AND anchor_hash ~ '^0x[0-9a-f]{64}$')
    ),
    DROP CONSTRAINT bundles_guarantee_format,
    ADD CONSTRAINT bundles_guarantee_format CHECK (
        guaranteed_hash IS NULL OR (guaranteed_hash ~ '^0x[0-9a-f]{64}$' AND guaranteed_version BETWEEN 1 AND version)
    );

ALTER TABLE ledgerq.bundle_versions
    DROP CONSTRAINT bundle_versions_hash_format,
    ADD CONSTRAINT bundle_versions_hash_format CHECK (package_hash ~ '^0x[0-9a-f]{64}$' AND anchor_hash ~ '^0x[0-9a-f]{64}$');
