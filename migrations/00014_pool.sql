-- +goose Up
-- Builder lane, the transaction pool (jamduna's EVM builder's txpool): raw EVM
-- transactions received over JSON-RPC or REST wait here, per sender in nonce
-- order, until a bundle takes them. Intake for a sender runs under its
-- pool_senders row lock; intake that grows the pool also locks its chain's
-- pool_chains row, which makes the global limits exact across processes.

CREATE TYPE ledgerq.pool_tx_state AS ENUM ('pending', 'queued', 'included', 'replaced', 'dropped');
COMMENT ON TYPE ledgerq.pool_tx_state IS 'Pool transaction: pending (its nonce is next in line: the chain''s nonce, then gap-free), queued (a nonce gap before it), included (in a bundle: bundle_block), replaced (a dearer transaction took its nonce: replaced_by), dropped (will not be bundled: drop_reason).';

CREATE TABLE ledgerq.pool_txs (
    chain_id     bigint                NOT NULL,
    tx_hash      text                  NOT NULL,
    sender       text                  NOT NULL,
    nonce        bigint                NOT NULL,
    tx_type      smallint              NOT NULL,
    to_address   text,
    gas_fee_cap  numeric(78, 0)        NOT NULL,
    gas_tip_cap  numeric(78, 0)        NOT NULL,
    gas          bigint                NOT NULL,
    value_wei    numeric(78, 0)        NOT NULL,
    raw          bytea                 NOT NULL,
    state        ledgerq.pool_tx_state NOT NULL,
    replaced_by  text,
    drop_reason  text,
    bundle_block bigint,
    received_at  timestamptz           NOT NULL,
    expires_at   timestamptz           NOT NULL,
    updated_at   timestamptz           NOT NULL,

    PRIMARY KEY (chain_id, tx_hash),
    CONSTRAINT pool_txs_chain_id_positive CHECK (chain_id > 0),
    CONSTRAINT pool_txs_tx_hash_format CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    CONSTRAINT pool_txs_sender_format CHECK (sender ~ '^0x[0-9a-f]{40}$'),
    CONSTRAINT pool_txs_nonce_not_negative CHECK (nonce >= 0),
    -- Legacy (0), access-list (1) and dynamic-fee (2): what go-ethereum's
    -- types decode and the pool accepts.
    CONSTRAINT pool_txs_tx_type_known CHECK (tx_type IN (0, 1, 2)),
    CONSTRAINT pool_txs_to_format CHECK (to_address IS NULL OR to_address ~ '^0x[0-9a-f]{40}$'),
    -- uint256 fees, the tip never above the cap (geth's ErrTipAboveFeeCap).
    CONSTRAINT pool_txs_fees_uint256 CHECK (
        gas_tip_cap >= 0 AND gas_tip_cap <= gas_fee_cap AND gas_fee_cap < 2::numeric ^ 256
    ),
    -- jamduna's txpool validation: gas > 0, value >= 0.
    CONSTRAINT pool_txs_gas_positive CHECK (gas > 0),
    CONSTRAINT pool_txs_value_uint256 CHECK (value_wei >= 0 AND value_wei < 2::numeric ^ 256),
    -- jamduna's txpool size limit is configurable (32 KiB by default); geth's pool
    -- never takes more than 128 KiB, and neither does this table.
    CONSTRAINT pool_txs_raw_size CHECK (octet_length(raw) BETWEEN 1 AND 131072),
    -- Each terminal or bundled state carries what it points at, and only it.
    CONSTRAINT pool_txs_replaced_iff_replaced_by CHECK ((replaced_by IS NOT NULL) = (state = 'replaced')),
    CONSTRAINT pool_txs_replaced_by_format CHECK (
        replaced_by IS NULL OR (replaced_by ~ '^0x[0-9a-f]{64}$' AND replaced_by <> tx_hash)
    ),
    CONSTRAINT pool_txs_dropped_iff_reason CHECK ((drop_reason IS NOT NULL) = (state = 'dropped')),
    CONSTRAINT pool_txs_drop_reason_not_empty CHECK (drop_reason IS NULL OR (drop_reason <> '' AND length(drop_reason) <= 256)),
    CONSTRAINT pool_txs_included_iff_bundle CHECK ((bundle_block IS NOT NULL) = (state = 'included')),
    CONSTRAINT pool_txs_bundle_block_not_negative CHECK (bundle_block IS NULL OR bundle_block >= 0),
    CONSTRAINT pool_txs_expires_after_received CHECK (expires_at > received_at),
    CONSTRAINT pool_txs_times_finite CHECK (isfinite(received_at) AND isfinite(expires_at) AND isfinite(updated_at))
);

COMMENT ON TABLE ledgerq.pool_txs IS 'Builder lane transaction pool: one row per transaction received, kept in every state (nothing is deleted silently).';
COMMENT ON COLUMN ledgerq.pool_txs.chain_id IS 'EVM chain id the transaction is signed for (the configured one; others are refused).';
COMMENT ON COLUMN ledgerq.pool_txs.tx_hash IS 'Transaction hash, lower-case hex; with chain_id, the primary key. The same bytes sent again are this row (already known), never a new one.';
COMMENT ON COLUMN ledgerq.pool_txs.sender IS 'Address recovered from the signature, lower-case hex.';
COMMENT ON COLUMN ledgerq.pool_txs.nonce IS 'Account nonce; at most one pending, queued or included transaction per (chain_id, sender, nonce).';
COMMENT ON COLUMN ledgerq.pool_txs.tx_type IS 'EIP-2718 type: 0 legacy, 1 access list, 2 dynamic fee.';
COMMENT ON COLUMN ledgerq.pool_txs.to_address IS 'Recipient, lower-case hex; NULL for a contract creation.';
COMMENT ON COLUMN ledgerq.pool_txs.gas_fee_cap IS 'Fee cap in wei: max fee per gas, or the gas price of a legacy or access-list transaction. A replacement must be at least 110 % of it.';
COMMENT ON COLUMN ledgerq.pool_txs.gas_tip_cap IS 'Tip in wei: max priority fee per gas, or the gas price. A replacement must be at least 110 % of it too; the minimum price applies to it (as in geth).';
COMMENT ON COLUMN ledgerq.pool_txs.gas IS 'Gas limit.';
COMMENT ON COLUMN ledgerq.pool_txs.value_wei IS 'Value in wei.';
COMMENT ON COLUMN ledgerq.pool_txs.raw IS 'The signed transaction as received (RLP or typed envelope): what a bundle carries.';
COMMENT ON COLUMN ledgerq.pool_txs.state IS 'pending, queued, included (in bundle bundle_block), replaced (by replaced_by), dropped (drop_reason). The first three are live: they hold the nonce.';
COMMENT ON COLUMN ledgerq.pool_txs.replaced_by IS 'State replaced: hash of the transaction that took this nonce with fee cap and tip both >= 110 %.';
COMMENT ON COLUMN ledgerq.pool_txs.drop_reason IS 'State dropped: why. expired (TTL passed while pending or queued), stale (the chain''s nonce for the sender passed it).';
COMMENT ON COLUMN ledgerq.pool_txs.bundle_block IS 'State included: block number of the bundle the transaction is in (a later migration makes it a foreign key to the bundles table).';
COMMENT ON COLUMN ledgerq.pool_txs.received_at IS 'When ledgerq stored it (or stored the same bytes again after it was replaced or dropped).';
COMMENT ON COLUMN ledgerq.pool_txs.expires_at IS 'received_at + TTL (1 h by default): a transaction still pending or queued then is dropped as expired by the sweep.';
COMMENT ON COLUMN ledgerq.pool_txs.updated_at IS 'Last change to the row.';

-- One live transaction per (chain, sender, nonce): a replacement must retire
-- the old one in the same database transaction, and no race can store two.
-- Also intake's read of a sender's live transactions.
CREATE UNIQUE INDEX pool_txs_live_nonce ON ledgerq.pool_txs (chain_id, sender, nonce)
    WHERE state IN ('pending', 'queued', 'included');
-- The global limits (counted per state under the pool_chains lock) and the
-- TTL sweep (by expiry): the waiting transactions only.
CREATE INDEX pool_txs_waiting ON ledgerq.pool_txs (chain_id, state, expires_at)
    WHERE state IN ('pending', 'queued');
-- A bundle's transactions.
CREATE INDEX pool_txs_bundle ON ledgerq.pool_txs (chain_id, bundle_block)
    WHERE bundle_block IS NOT NULL;

CREATE TABLE ledgerq.pool_senders (
    chain_id    bigint      NOT NULL,
    sender      text        NOT NULL,
    chain_nonce bigint      NOT NULL,
    next_nonce  bigint      NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,

    PRIMARY KEY (chain_id, sender),
    CONSTRAINT pool_senders_sender_format CHECK (sender ~ '^0x[0-9a-f]{40}$'),
    CONSTRAINT pool_senders_nonces CHECK (chain_nonce >= 0 AND next_nonce >= 0),
    CONSTRAINT pool_senders_times_finite CHECK (isfinite(created_at) AND isfinite(updated_at))
);

COMMENT ON TABLE ledgerq.pool_senders IS 'Builder lane: one row per sender the pool has seen. Its row lock is the sender''s intake lock: every intake and sweep of a sender''s transactions holds it, so the pool''s nonce-order rules and the per-sender limit stay exact across processes.';
COMMENT ON COLUMN ledgerq.pool_senders.chain_id IS 'Chain id.';
COMMENT ON COLUMN ledgerq.pool_senders.sender IS 'Address, lower-case hex.';
COMMENT ON COLUMN ledgerq.pool_senders.chain_nonce IS 'Highest account nonce the chain reported for the sender at an intake (it never moves back, so a lagging read cannot lower it).';
COMMENT ON COLUMN ledgerq.pool_senders.next_nonce IS 'The nonce after the sender''s pending run (chain_nonce, then its included and pending transactions without a gap), as the last intake or sweep left it; a transaction with it becomes pending.';
COMMENT ON COLUMN ledgerq.pool_senders.created_at IS 'When the sender''s first transaction arrived.';
COMMENT ON COLUMN ledgerq.pool_senders.updated_at IS 'Last intake or sweep of the sender.';

CREATE TABLE ledgerq.pool_chains (
    chain_id   bigint      NOT NULL PRIMARY KEY,
    created_at timestamptz NOT NULL,

    CONSTRAINT pool_chains_chain_id_positive CHECK (chain_id > 0),
    CONSTRAINT pool_chains_times_finite CHECK (isfinite(created_at))
);

COMMENT ON TABLE ledgerq.pool_chains IS 'Builder lane: one row per chain the pool serves. An intake that adds a pending or queued transaction locks it (FOR UPDATE) as its last step, counts the pool and commits: so the global limits (1000 pending, 1000 queued) are exact across processes. Held only for the count and the commit.';
COMMENT ON COLUMN ledgerq.pool_chains.chain_id IS 'Chain id.';
COMMENT ON COLUMN ledgerq.pool_chains.created_at IS 'When the chain''s first transaction arrived.';

CREATE VIEW ledgerq.pool_overview AS
SELECT
    t.chain_id,
    t.state::text AS state,
    t.drop_reason,
    count(*) AS txs,
    count(DISTINCT t.sender) AS senders,
    min(t.received_at) AS oldest_received_at,
    (array_agg(t.tx_hash ORDER BY t.received_at, t.tx_hash))[1] AS oldest_tx_hash,
    min(t.expires_at) FILTER (WHERE t.state IN ('pending', 'queued')) AS next_expires_at,
    count(DISTINCT t.bundle_block) AS bundles
FROM ledgerq.pool_txs t
GROUP BY t.chain_id, t.state, t.drop_reason;
COMMENT ON VIEW ledgerq.pool_overview IS 'Builder lane pool at a glance: transactions per chain, state and (for dropped) reason, with the oldest of each group and the next expiry.';
COMMENT ON COLUMN ledgerq.pool_overview.chain_id IS 'Chain id.';
COMMENT ON COLUMN ledgerq.pool_overview.state IS 'pending, queued, included, replaced or dropped.';
COMMENT ON COLUMN ledgerq.pool_overview.drop_reason IS 'For dropped transactions, why (expired, stale); NULL for the other states.';
COMMENT ON COLUMN ledgerq.pool_overview.txs IS 'Number of transactions in this state (and reason). The pool''s limits count pending and queued.';
COMMENT ON COLUMN ledgerq.pool_overview.senders IS 'Number of distinct senders among them.';
COMMENT ON COLUMN ledgerq.pool_overview.oldest_received_at IS 'received_at of the oldest among them.';
COMMENT ON COLUMN ledgerq.pool_overview.oldest_tx_hash IS 'Hash of the oldest among them.';
COMMENT ON COLUMN ledgerq.pool_overview.next_expires_at IS 'For pending and queued, the earliest expires_at: the next transaction the TTL sweep will drop (NULL for the other states).';
COMMENT ON COLUMN ledgerq.pool_overview.bundles IS 'For included, the number of bundles holding them (0 for the other states).';

-- +goose Down
DROP VIEW ledgerq.pool_overview;
DROP TABLE ledgerq.pool_chains;
DROP TABLE ledgerq.pool_senders;
DROP TABLE ledgerq.pool_txs;
DROP TYPE ledgerq.pool_tx_state;
