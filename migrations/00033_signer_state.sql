-- +goose Up
-- Wallet lane: the state of each wallet's signer as the lane last found it.
-- A signer that signs elsewhere (an HSM, a KMS, a remote signer) may be
-- unreachable or throttle; the wallet's tasks then wait, and these columns
-- let an operator see why (GET /v1/wallets/{wallet}, /readyz, the console).
-- The lane writes them only when the state changes, so a healthy wallet
-- pays no write per signature.
ALTER TABLE ledgerq.wallet_health
    ADD COLUMN signer_backend text,
    ADD COLUMN signer_state   text,
    ADD COLUMN signer_error   text,
    ADD COLUMN signer_since   timestamptz;
COMMENT ON COLUMN ledgerq.wallet_health.signer_backend IS 'The backend of the signer whose state signer_state is (keystore, pkcs11, awskms, clef, …). NULL before the wallet''s first signature.';
COMMENT ON COLUMN ledgerq.wallet_health.signer_state IS 'The wallet''s signer as its last signature found it: ok (it signed), unavailable (it could not be reached or throttled: the wallet''s tasks wait, no failure is counted). NULL before the first signature.';
COMMENT ON COLUMN ledgerq.wallet_health.signer_error IS 'State unavailable: the signer''s error when it became unavailable, at most 1024 bytes (cut before storing); the backends never put a secret in it. NULL otherwise.';
COMMENT ON COLUMN ledgerq.wallet_health.signer_since IS 'When the signer entered signer_state; NULL with it.';

-- wallet_health's rules are rows of row_rules, checked by its trigger (see
-- migration 00030).
INSERT INTO ledgerq.row_rules (table_name, rule_name, expression) VALUES
    ('wallet_health', 'wallet_health_signer_state',
     '(signer_state IS NULL OR signer_state IN (''ok'', ''unavailable''))
      AND (signer_state IS NULL) = (signer_since IS NULL) AND (signer_state IS NULL) = (signer_backend IS NULL)
      AND (signer_since IS NULL OR isfinite(signer_since))
      AND (signer_backend IS NULL OR (signer_backend <> '''' AND octet_length(signer_backend) <= 64))'),
    ('wallet_health', 'wallet_health_signer_error',
     '(signer_error IS NOT NULL) = (signer_state IS NOT NULL AND signer_state = ''unavailable'')
      AND (signer_error IS NULL OR (signer_error <> '''' AND octet_length(signer_error) <= 1024))');
SELECT ledgerq.row_rules_apply('wallet_health');

-- /readyz lists the wallets whose signer is unavailable on every probe: it
-- reads these few rows, not the table.
CREATE INDEX wallet_health_signer_unavailable ON ledgerq.wallet_health (chain_id, sender) WHERE signer_state = 'unavailable';
COMMENT ON INDEX ledgerq.wallet_health_signer_unavailable IS 'Wallets whose signer is unavailable: /readyz and the console list them.';

-- +goose Down
DROP INDEX ledgerq.wallet_health_signer_unavailable;
DELETE FROM ledgerq.row_rules
WHERE table_name = 'wallet_health' AND rule_name IN ('wallet_health_signer_state', 'wallet_health_signer_error');
SELECT ledgerq.row_rules_apply('wallet_health');
ALTER TABLE ledgerq.wallet_health
    DROP COLUMN signer_since,
    DROP COLUMN signer_error,
    DROP COLUMN signer_state,
    DROP COLUMN signer_backend;
