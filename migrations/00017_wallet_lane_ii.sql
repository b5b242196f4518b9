-- +goose Up
-- Wallet lane II (engine-core's EOA executor): what keeps a wallet moving — gas
-- bumps, no-op transactions, nonce resets, balance health, replacement
-- limits.

ALTER TABLE ledgerq.wallet_tasks
    ADD COLUMN bumps           integer     NOT NULL DEFAULT 0,
    ADD COLUMN replacements    integer     NOT NULL DEFAULT 0,
    ADD COLUMN price_capped_at timestamptz,
    ADD CONSTRAINT wallet_tasks_counts_not_negative CHECK (bumps >= 0 AND replacements >= 0),
    ADD CONSTRAINT wallet_tasks_price_capped_finite CHECK (price_capped_at IS NULL OR isfinite(price_capped_at));
COMMENT ON COLUMN ledgerq.wallet_tasks.bumps IS 'Gas bumps: how many times the task''s stalled transaction was signed again with higher fees.';
COMMENT ON COLUMN ledgerq.wallet_tasks.replacements IS 'How many times another transaction took the task''s nonce (every hash of ours definitively absent) and the task went back to waiting.';
COMMENT ON COLUMN ledgerq.wallet_tasks.price_capped_at IS 'When a gas bump of the task was refused by the configured price cap (the operator is told; the task stays).';

-- A no-op transaction (a 0-value transfer to self that fills a nonce no task
-- holds) is an attempt of no task.
ALTER TABLE ledgerq.tx_attempts ALTER COLUMN task_id DROP NOT NULL;
COMMENT ON COLUMN ledgerq.tx_attempts.task_id IS 'The task this transaction carries out; deleted with it. NULL for a no-op (0-value transfer to self filling a nonce no task holds).';

-- A bump drops the attempt it replaces (state dropped, superseded_by set) in
-- the transaction that stores the bump; the dropped attempt's hash may still
-- be mined, so confirm looks up every hash of the nonce.
ALTER TABLE ledgerq.tx_attempts
    ADD COLUMN superseded_by text,
    ADD CONSTRAINT tx_attempts_superseded_by_format CHECK (superseded_by IS NULL OR superseded_by ~ '^0x[0-9a-f]{64}$');
COMMENT ON COLUMN ledgerq.tx_attempts.superseded_by IS 'Hash of the gas bump that replaced this attempt for its nonce (the attempt is dropped but may still be mined).';
-- Confirm: every attempt ever stored for a nonce.
CREATE INDEX tx_attempts_nonce ON ledgerq.tx_attempts (chain_id, sender, nonce);

CREATE TABLE ledgerq.wallet_health (
    chain_id            bigint         NOT NULL,
    sender              text           NOT NULL,
    chain_nonce         bigint,
    chain_nonce_since   timestamptz,
    balance_wei         numeric(78, 0),
    balance_at          timestamptz,
    threshold_wei       numeric(78, 0) NOT NULL DEFAULT 0,
    paused              boolean        NOT NULL DEFAULT false,
    resets              integer        NOT NULL DEFAULT 0,
    last_reset_at       timestamptz,
    last_reset_from     bigint,
    last_reset_to       bigint,
    created_at          timestamptz    NOT NULL,
    updated_at          timestamptz    NOT NULL,

    PRIMARY KEY (chain_id, sender),
    CONSTRAINT wallet_health_sender_format CHECK (sender ~ '^0x[0-9a-f]{40}$'),
    CONSTRAINT wallet_health_nonce_since CHECK ((chain_nonce IS NULL) = (chain_nonce_since IS NULL) AND (chain_nonce IS NULL OR chain_nonce >= 0)),
    CONSTRAINT wallet_health_balance_at CHECK ((balance_wei IS NULL) OR (balance_wei >= 0)),
    CONSTRAINT wallet_health_threshold CHECK (threshold_wei >= 0),
    CONSTRAINT wallet_health_reset CHECK (resets >= 0 AND (last_reset_at IS NULL) = (last_reset_from IS NULL) AND (last_reset_at IS NULL) = (last_reset_to IS NULL)),
    CONSTRAINT wallet_health_times_finite CHECK (
        isfinite(created_at) AND isfinite(updated_at)
        AND (chain_nonce_since IS NULL OR isfinite(chain_nonce_since))
        AND (balance_at IS NULL OR isfinite(balance_at))
        AND (last_reset_at IS NULL OR isfinite(last_reset_at))
    )
);
COMMENT ON TABLE ledgerq.wallet_health IS 'Wallet lane: per (chain, sender) health: when the chain''s nonce last moved, the balance and the threshold below which sending pauses, and the last nonce reset.';
COMMENT ON COLUMN ledgerq.wallet_health.chain_id IS 'Chain id.';
COMMENT ON COLUMN ledgerq.wallet_health.sender IS 'Address, lower-case hex.';
COMMENT ON COLUMN ledgerq.wallet_health.chain_nonce IS 'The chain''s nonce (by the latest block) as confirm last read it.';
COMMENT ON COLUMN ledgerq.wallet_health.chain_nonce_since IS 'When confirm first read chain_nonce: the nonce has not moved since (the stall timeout counts from here).';
COMMENT ON COLUMN ledgerq.wallet_health.balance_wei IS 'Balance by the latest block, as last read.';
COMMENT ON COLUMN ledgerq.wallet_health.balance_at IS 'When balance_wei was read; NULL asks for a new read.';
COMMENT ON COLUMN ledgerq.wallet_health.threshold_wei IS 'Sending pauses while the balance is below it; it rises to the cost of a transaction refused for insufficient funds.';
COMMENT ON COLUMN ledgerq.wallet_health.paused IS 'Sending is paused: the balance is below the threshold (tasks wait, no send is made).';
COMMENT ON COLUMN ledgerq.wallet_health.resets IS 'How many nonce resets the wallet had.';
COMMENT ON COLUMN ledgerq.wallet_health.last_reset_at IS 'When the next nonce was last reset to the chain''s.';
COMMENT ON COLUMN ledgerq.wallet_health.last_reset_from IS 'The next nonce before the last reset.';
COMMENT ON COLUMN ledgerq.wallet_health.last_reset_to IS 'The next nonce after the last reset (the chain''s nonce).';
COMMENT ON COLUMN ledgerq.wallet_health.created_at IS 'When the row was first written.';
COMMENT ON COLUMN ledgerq.wallet_health.updated_at IS 'Last change to the row.';

-- +goose Down
DROP TABLE ledgerq.wallet_health;
DROP INDEX ledgerq.tx_attempts_nonce;
ALTER TABLE ledgerq.tx_attempts DROP COLUMN superseded_by;
DELETE FROM ledgerq.tx_attempts WHERE task_id IS NULL;
ALTER TABLE ledgerq.tx_attempts ALTER COLUMN task_id SET NOT NULL;
ALTER TABLE ledgerq.wallet_tasks DROP COLUMN price_capped_at, DROP COLUMN replacements, DROP COLUMN bumps;
