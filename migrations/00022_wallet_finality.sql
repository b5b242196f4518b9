-- +goose Up
-- Wallet lane: finality, chain rewinds and a wallet no single task can stop.
--
-- * Attempts get a surrogate key. A signed transaction that was refused (its
--   task ended in error, its nonce freed) may be signed again, byte for byte,
--   for the identical request that follows it: the same hash is then stored
--   twice, once dropped and once live. Among live attempts the hash stays
--   unique, since tx_attempts_live_nonce holds one per nonce and a hash names
--   its nonce.
-- * A mined attempt stays 'mined' until it is deep enough (the lane's
--   confirmations), and goes back to 'sent' if its block leaves the chain.
-- * The balance threshold is what a plain transfer costs at the current
--   fees, recomputed at every balance read; it no longer rises with a
--   refused task's fees. Wallets paused by the old rule are read again.

ALTER TABLE ledgerq.tx_attempts DROP CONSTRAINT tx_attempts_pkey;
ALTER TABLE ledgerq.tx_attempts ADD COLUMN id bigint NOT NULL GENERATED ALWAYS AS IDENTITY;
ALTER TABLE ledgerq.tx_attempts ADD CONSTRAINT tx_attempts_pkey PRIMARY KEY (id);
COMMENT ON COLUMN ledgerq.tx_attempts.id IS 'Surrogate key, in the order attempts were stored. The same signed bytes (and hash) may be stored again after a refusal; among live attempts (not dropped) a hash is unique.';
-- Lookups by hash (receipts, broadcasts), through every state.
CREATE INDEX tx_attempts_hash ON ledgerq.tx_attempts (chain_id, tx_hash);

ALTER TABLE ledgerq.tx_attempts
    ADD COLUMN mined_block      bigint,
    ADD COLUMN mined_block_hash text,
    ADD COLUMN mined_at         timestamptz,
    ADD COLUMN reorgs           integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT tx_attempts_mined_block CHECK (
        (state <> 'mined' OR (mined_block IS NOT NULL AND mined_block_hash IS NOT NULL AND mined_at IS NOT NULL))
        AND (state NOT IN ('signed', 'sent') OR (mined_block IS NULL AND mined_block_hash IS NULL AND mined_at IS NULL))
        AND (mined_block IS NULL OR mined_block >= 0)
        AND (mined_block_hash IS NULL OR mined_block_hash ~ '^0x[0-9a-f]{64}$')
        AND (mined_at IS NULL OR isfinite(mined_at))
    ),
    ADD CONSTRAINT tx_attempts_reorgs_not_negative CHECK (reorgs >= 0);
COMMENT ON COLUMN ledgerq.tx_attempts.mined_block IS 'Block number its receipt was last seen in (mined and confirmed; NULL for attempts confirmed before this was kept).';
COMMENT ON COLUMN ledgerq.tx_attempts.mined_block_hash IS 'Hash of that block: a pass that finds another hash at that height, or no receipt, knows the block left the chain.';
COMMENT ON COLUMN ledgerq.tx_attempts.mined_at IS 'When its receipt was first seen in mined_block.';
COMMENT ON COLUMN ledgerq.tx_attempts.reorgs IS 'How many times its mined transaction left the chain (a reorg, or a node that lost blocks) and it went back to sent, to be broadcast again with the same bytes.';
COMMENT ON COLUMN ledgerq.tx_attempts.state IS 'signed: stored, not known broadcast (recover re-broadcasts it); sent; mined: has a receipt, not yet deep enough to be final; confirmed: final; dropped: will never be mined (or superseded by a gas bump).';
COMMENT ON COLUMN ledgerq.tx_attempts.confirmed_at IS 'When it became final (confirmed).';
-- Each pass re-checks the mined attempts of a wallet, in nonce order.
CREATE INDEX tx_attempts_mined ON ledgerq.tx_attempts (chain_id, sender, nonce)
    WHERE state = 'mined';

ALTER TABLE ledgerq.wallet_tasks
    ADD COLUMN reorgs integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT wallet_tasks_reorgs_not_negative CHECK (reorgs >= 0);
COMMENT ON COLUMN ledgerq.wallet_tasks.reorgs IS 'How many times the task''s mined transaction left the chain (a reorg, or a node that lost blocks); the task was then executing again, its same transaction sent again.';
COMMENT ON COLUMN ledgerq.wallet_tasks.status IS 'Status code: 0 Waiting, 1 Executing (a transaction is signed for it, sent, or mined but not yet deep enough), 2 Error, 3 Done (its transaction is the configured number of blocks deep). 2 and 3 are terminal, but a done task whose transaction leaves the chain is executing again.';
COMMENT ON COLUMN ledgerq.wallet_tasks.tx_hash IS 'Hash of the transaction that was mined for the task (done).';

ALTER TABLE ledgerq.wallet_health
    ADD COLUMN chain_head bigint,
    ADD CONSTRAINT wallet_health_chain_head CHECK (chain_head IS NULL OR chain_head >= 0);
COMMENT ON COLUMN ledgerq.wallet_health.chain_head IS 'The chain''s latest block number as the wallet''s last confirm pass read it: a mined attempt has chain_head - mined_block + 1 confirmations.';
COMMENT ON COLUMN ledgerq.wallet_health.threshold_wei IS 'Sending pauses while the balance is below it: what a plain transfer costs at the fees read with the balance, recomputed at every read (a task the wallet cannot afford ends in error alone).';
UPDATE ledgerq.wallet_health SET threshold_wei = 0, paused = false, balance_at = NULL;
-- Follower: wallets whose chain nonce moved a short while ago are watched.
CREATE INDEX wallet_health_nonce_since ON ledgerq.wallet_health (chain_nonce_since);

-- A done task whose transaction leaves the chain is executing again: its
-- endpoints hear "reorged". Endpoints on the old default (every event) get it.
ALTER TABLE ledgerq.webhook_endpoints DROP CONSTRAINT webhook_endpoints_event_types_valid;
ALTER TABLE ledgerq.webhook_endpoints ADD CONSTRAINT webhook_endpoints_event_types_valid CHECK (
    cardinality(event_types) >= 1
    AND array_ndims(event_types) = 1
    AND array_position(event_types, NULL) IS NULL
    AND event_types <@ ARRAY['submitted', 'confirmed', 'failed', 'replaced', 'reorged']
);
ALTER TABLE ledgerq.webhook_endpoints ALTER COLUMN event_types SET DEFAULT ARRAY['submitted', 'confirmed', 'failed', 'replaced', 'reorged'];
UPDATE ledgerq.webhook_endpoints SET event_types = event_types || ARRAY['reorged']
WHERE event_types @> ARRAY['submitted', 'confirmed', 'failed', 'replaced'];
COMMENT ON COLUMN ledgerq.webhook_endpoints.event_types IS 'Events the endpoint is subscribed to: any of submitted, confirmed, failed, replaced, reorged (default all).';
ALTER TABLE ledgerq.webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_type_valid;
ALTER TABLE ledgerq.webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_type_valid
    CHECK (event_type IN ('submitted', 'confirmed', 'failed', 'replaced', 'reorged'));
COMMENT ON COLUMN ledgerq.webhook_deliveries.event_type IS 'submitted, confirmed, failed, replaced or reorged.';

-- +goose Down
DELETE FROM ledgerq.webhook_deliveries WHERE event_type = 'reorged';
ALTER TABLE ledgerq.webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_type_valid;
ALTER TABLE ledgerq.webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_type_valid
    CHECK (event_type IN ('submitted', 'confirmed', 'failed', 'replaced'));
COMMENT ON COLUMN ledgerq.webhook_deliveries.event_type IS 'submitted, confirmed, failed or replaced.';
UPDATE ledgerq.webhook_endpoints SET event_types = array_remove(event_types, 'reorged');
ALTER TABLE ledgerq.webhook_endpoints DROP CONSTRAINT webhook_endpoints_event_types_valid;
ALTER TABLE ledgerq.webhook_endpoints ADD CONSTRAINT webhook_endpoints_event_types_valid CHECK (
    cardinality(event_types) >= 1
    AND array_ndims(event_types) = 1
    AND array_position(event_types, NULL) IS NULL
    AND event_types <@ ARRAY['submitted', 'confirmed', 'failed', 'replaced']
);
ALTER TABLE ledgerq.webhook_endpoints ALTER COLUMN event_types SET DEFAULT ARRAY['submitted', 'confirmed', 'failed', 'replaced'];
COMMENT ON COLUMN ledgerq.webhook_endpoints.event_types IS 'Events the endpoint is subscribed to: any of submitted, confirmed, failed, replaced (default all).';
UPDATE ledgerq.wallet_health SET balance_at = NULL;
DROP INDEX ledgerq.wallet_health_nonce_since;
ALTER TABLE ledgerq.wallet_health DROP CONSTRAINT wallet_health_chain_head, DROP COLUMN chain_head;
COMMENT ON COLUMN ledgerq.wallet_health.threshold_wei IS 'Sending pauses while the balance is below it; it rises to the cost of a transaction refused for insufficient funds.';
ALTER TABLE ledgerq.wallet_tasks DROP CONSTRAINT wallet_tasks_reorgs_not_negative, DROP COLUMN reorgs;
COMMENT ON COLUMN ledgerq.wallet_tasks.status IS 'Status code: 0 Waiting, 1 Executing (a transaction is signed for it), 2 Error, 3 Done (mined). 2 and 3 are terminal.';
DROP INDEX ledgerq.tx_attempts_mined;
-- A mined attempt is back to sent: the worker before this migration asks
-- for its receipt again.
UPDATE ledgerq.tx_attempts SET state = 'sent', sent_at = coalesce(sent_at, updated_at) WHERE state = 'mined';
ALTER TABLE ledgerq.tx_attempts
    DROP CONSTRAINT tx_attempts_mined_block, DROP CONSTRAINT tx_attempts_reorgs_not_negative,
    DROP COLUMN mined_block, DROP COLUMN mined_block_hash, DROP COLUMN mined_at, DROP COLUMN reorgs;
COMMENT ON COLUMN ledgerq.tx_attempts.state IS 'signed: stored, not known broadcast (recover re-broadcasts it); sent; confirmed: mined; dropped: will never be mined.';
COMMENT ON COLUMN ledgerq.tx_attempts.confirmed_at IS 'When its receipt was recorded.';
DROP INDEX ledgerq.tx_attempts_hash;
-- Of several attempts with one hash (a refused transaction signed again),
-- the live one, else the newest, keeps it.
DELETE FROM ledgerq.tx_attempts a USING ledgerq.tx_attempts b
WHERE a.chain_id = b.chain_id AND a.tx_hash = b.tx_hash AND a.id <> b.id
  AND (a.state = 'dropped' AND b.state <> 'dropped' OR (a.state = 'dropped') = (b.state = 'dropped') AND a.id < b.id);
ALTER TABLE ledgerq.tx_attempts DROP CONSTRAINT tx_attempts_pkey;
ALTER TABLE ledgerq.tx_attempts DROP COLUMN id;
ALTER TABLE ledgerq.tx_attempts ADD CONSTRAINT tx_attempts_pkey PRIMARY KEY (chain_id, tx_hash);
