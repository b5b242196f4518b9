-- +goose Up
-- Builder lane: a sender's waiting (pending and queued) transactions by
-- nonce. An intake reads its sender's live transactions through
-- pool_txs_live_nonce, which also holds every included transaction of the
-- sender since its first (they keep their nonces): it read the sender's
-- whole history, and 50 000 executed transactions of one sender made each
-- of its intakes read about 1500 pages. This index holds the waiting ones
-- only; the included ones an intake still needs (from the chain's nonce up)
-- are a range of pool_txs_live_nonce.
CREATE INDEX pool_txs_waiting_by_sender ON ledgerq.pool_txs (chain_id, sender, nonce)
    WHERE state IN ('pending', 'queued');

-- +goose Down
DROP INDEX ledgerq.pool_txs_waiting_by_sender;
