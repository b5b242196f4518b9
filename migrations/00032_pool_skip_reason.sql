-- +goose Up
-- Builder lane: a transaction the chain skipped (left out of its bundle's
-- EVM block) is dropped with reason skipped, and the chain's own reason is
-- kept beside it, as geth wrote it, for the client that asks why.
ALTER TABLE ledgerq.pool_txs ADD COLUMN chain_reason text;
COMMENT ON COLUMN ledgerq.pool_txs.chain_reason IS 'State dropped, reason skipped: why the chain left the transaction out of its bundle''s EVM block, as the chain said it (geth''s error text, for example "insufficient funds for gas * price + value: …"); NULL otherwise.';
COMMENT ON COLUMN ledgerq.pool_txs.drop_reason IS 'State dropped: why. expired (TTL passed while pending or queued), stale (the chain''s nonce for the sender passed it), evicted (the highest queued nonce of a sender at the account limit, to make room for a lower one), skipped (the chain left it out of its bundle''s block; chain_reason says why).';

-- pool_txs' rules are rows of row_rules, checked by its trigger (see
-- migration 00030).
INSERT INTO ledgerq.row_rules (table_name, rule_name, expression) VALUES
    ('pool_txs', 'pool_txs_chain_reason_iff_skipped',
     '(chain_reason IS NOT NULL) = (drop_reason IS NOT NULL AND drop_reason = ''skipped'')'),
    ('pool_txs', 'pool_txs_chain_reason_size',
     'chain_reason IS NULL OR (chain_reason <> '''' AND length(chain_reason) <= 1024)');
SELECT ledgerq.row_rules_apply('pool_txs');

-- +goose Down
DELETE FROM ledgerq.row_rules
WHERE table_name = 'pool_txs' AND rule_name IN ('pool_txs_chain_reason_iff_skipped', 'pool_txs_chain_reason_size');
SELECT ledgerq.row_rules_apply('pool_txs');
COMMENT ON COLUMN ledgerq.pool_txs.drop_reason IS 'State dropped: why. expired (TTL passed while pending or queued), stale (the chain''s nonce for the sender passed it).';
ALTER TABLE ledgerq.pool_txs DROP COLUMN chain_reason;
