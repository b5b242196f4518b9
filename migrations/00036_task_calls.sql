-- +goose Up
-- Wallet lane, contract calls by name: a send-tx may name its call by a
-- function signature or by a method of an ABI fragment, with JSON arguments,
-- which the API encodes into the task's data. The task keeps the call as the
-- client named it, so that the API and the console show what it calls, and
-- the ABI fragment, so that what the call answers (a revert's custom error,
-- its receipt's events) can be decoded later.
ALTER TABLE ledgerq.wallet_tasks ADD COLUMN call jsonb;
COMMENT ON COLUMN ledgerq.wallet_tasks.call IS 'The contract call the client named, encoded into data: {"function": canonical signature, "args": the arguments normalised (integers as decimal strings, checksummed addresses, 0x hex bytes, tuples as arrays)}, and, for a call named by an ABI, "method" and "abi" (the fragment, an array). NULL: the client sent data.';

-- wallet_tasks' rules are rows of row_rules, checked by its trigger (see
-- migration 00030). A missing key reads as NULL, which a rule would pass:
-- hence the coalesce. The size is the stored value's (pg_column_size, read
-- without writing the value out); the API refuses a call whose JSON is
-- larger than 256 KiB.
INSERT INTO ledgerq.row_rules (table_name, rule_name, expression) VALUES
    ('wallet_tasks', 'wallet_tasks_call_shape',
     'call IS NULL OR (jsonb_typeof(call) = ''object''
        AND coalesce(jsonb_typeof(call -> ''function'') = ''string'', false)
        AND coalesce(jsonb_typeof(call -> ''args'') = ''array'', false)
        AND coalesce(jsonb_typeof(call -> ''abi''), ''array'') = ''array''
        AND coalesce(jsonb_typeof(call -> ''method''), ''string'') = ''string'')'),
    ('wallet_tasks', 'wallet_tasks_call_size',
     'call IS NULL OR pg_column_size(call) <= 393216');
SELECT ledgerq.row_rules_apply('wallet_tasks');

-- +goose Down
DELETE FROM ledgerq.row_rules
WHERE table_name = 'wallet_tasks' AND rule_name IN ('wallet_tasks_call_shape', 'wallet_tasks_call_size');
SELECT ledgerq.row_rules_apply('wallet_tasks');
ALTER TABLE ledgerq.wallet_tasks DROP COLUMN call;
