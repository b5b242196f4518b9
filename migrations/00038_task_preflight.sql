-- +goose Up
-- Wallet lane, preflight: before a task takes a nonce, its call is run at
-- the pending state (eth_call) and a revert ends it in error with the
-- decoded reason, spending no nonce; a task may opt out ("preflight":
-- false). A transaction that reverts on chain anyway has its revert
-- replayed and decoded, and a task that ends done keeps its receipt's logs.
ALTER TABLE ledgerq.wallet_tasks
    ADD COLUMN preflight boolean NOT NULL DEFAULT true,
    ADD COLUMN revert json,
    ADD COLUMN logs json;
COMMENT ON COLUMN ledgerq.wallet_tasks.preflight IS 'Whether the send runs the task''s call at the pending state before it takes a nonce (the request''s "preflight", default true).';
COMMENT ON COLUMN ledgerq.wallet_tasks.revert IS 'Why the task''s call reverted, decoded (calldata.Revert: {"kind": error|panic|custom|raw|unavailable, "data": hex, …}): the preflight''s verdict for a task ended in error, the replay of its transaction for a task done with reverted set. NULL: none (or not replayed yet).';
COMMENT ON COLUMN ledgerq.wallet_tasks.logs IS 'The logs of the task''s mined transaction (calldata.Logs: {"logs": [...], "count": n, "truncated": bool}), at most 64, each decoded by the task''s ABI when it declares the event. NULL: not done, or not recorded yet.';

-- Both are json, not jsonb: they are written once and shown as written,
-- a custom error's and an event's arguments in their declaration's order.
-- wallet_tasks' rules are rows of row_rules, checked by its trigger (see
-- migration 00030). The sizes are the stored values' (pg_column_size):
-- revert data is cut to 8 KiB before it is decoded, 64 logs of at most
-- 4 KiB of data each.
INSERT INTO ledgerq.row_rules (table_name, rule_name, expression) VALUES
    ('wallet_tasks', 'wallet_tasks_revert_shape',
     'revert IS NULL OR (json_typeof(revert) = ''object''
        AND coalesce(json_typeof(revert -> ''kind'') = ''string'', false))'),
    ('wallet_tasks', 'wallet_tasks_revert_size',
     'revert IS NULL OR pg_column_size(revert) <= 65536'),
    ('wallet_tasks', 'wallet_tasks_logs_shape',
     'logs IS NULL OR (json_typeof(logs) = ''object''
        AND coalesce(json_typeof(logs -> ''logs'') = ''array'', false))'),
    ('wallet_tasks', 'wallet_tasks_logs_size',
     'logs IS NULL OR pg_column_size(logs) <= 1048576');
SELECT ledgerq.row_rules_apply('wallet_tasks');

-- +goose Down
DELETE FROM ledgerq.row_rules
WHERE table_name = 'wallet_tasks'
  AND rule_name IN ('wallet_tasks_revert_shape', 'wallet_tasks_revert_size', 'wallet_tasks_logs_shape', 'wallet_tasks_logs_size');
SELECT ledgerq.row_rules_apply('wallet_tasks');
ALTER TABLE ledgerq.wallet_tasks DROP COLUMN logs, DROP COLUMN revert, DROP COLUMN preflight;
