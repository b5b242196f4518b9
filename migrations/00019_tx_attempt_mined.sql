-- +goose NO TRANSACTION
-- +goose Up
-- Wallet lane: a transaction attempt can be mined but not yet final (fewer
-- blocks on top of it than the wallet lane's confirmations). A new enum value
-- cannot be used in the transaction that adds it, so it is added alone,
-- outside any transaction; 00022 uses it.
ALTER TYPE ledgerq.tx_attempt_state ADD VALUE IF NOT EXISTS 'mined' AFTER 'sent';

-- +goose Down
-- An enum value cannot be dropped; 00022's Down has moved every mined
-- attempt back to sent, and 00010's Down drops the type.
SELECT 1;
