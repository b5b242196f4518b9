-- +goose Up
-- Wallet lane: cancel and speed up a task whose transaction was sent. The API
-- records the request on the task and schedules the wallet's shard; the
-- worker of that shard, the only one that signs at the wallet's nonces, acts
-- on it in its next run: a cancel signs a no-op (a 0-value transfer to the
-- wallet itself) at the task's nonce, a speed-up signs the task's own
-- transaction again with the fees asked for, each stored as an attempt of the
-- task (the write-ahead) before it is broadcast. Which of the nonce's hashes
-- the chain mines decides how the task ends: the no-op's, cancelled; any
-- other, done.

ALTER TABLE ledgerq.wallet_tasks
    ADD COLUMN cancel_requested_at timestamptz,
    ADD COLUMN speed_up_fee_cap_wei numeric(78, 0),
    ADD COLUMN speed_up_tip_cap_wei numeric(78, 0);

-- wallet_tasks' and tx_attempts' rules are rows of row_rules, checked by
-- their triggers (see migration 00030). A task cancelled after it started
-- (its no-op was mined) has started.
UPDATE ledgerq.row_rules SET expression = 'NOT cancelled OR status = 2'
WHERE table_name = 'wallet_tasks' AND rule_name = 'wallet_tasks_cancelled_is_error';
INSERT INTO ledgerq.row_rules (table_name, rule_name, expression) VALUES
    ('wallet_tasks', 'wallet_tasks_speed_up_fees',
     '(speed_up_fee_cap_wei IS NULL) = (speed_up_tip_cap_wei IS NULL) AND (speed_up_fee_cap_wei IS NULL OR ('
     || 'speed_up_tip_cap_wei >= 0 AND speed_up_tip_cap_wei <= speed_up_fee_cap_wei AND speed_up_fee_cap_wei < 2::numeric ^ 256))'),
    ('wallet_tasks', 'wallet_tasks_cancel_requested_at_finite', 'cancel_requested_at IS NULL OR isfinite(cancel_requested_at)');
SELECT ledgerq.row_rules_apply('wallet_tasks');

COMMENT ON COLUMN ledgerq.wallet_tasks.cancelled IS 'The client cancelled the task: while it was waiting (DELETE, POST …/cancel, or the waiting request disconnected), or after it was sent and the no-op at its nonce was the transaction mined; status is then error.';
COMMENT ON COLUMN ledgerq.wallet_tasks.cancel_requested_at IS 'When the client asked to cancel the task after it was sent (POST …/cancel on an executing task); the worker sends the no-op once.';
COMMENT ON COLUMN ledgerq.wallet_tasks.speed_up_fee_cap_wei IS 'A speed-up the worker has not stored yet: the fee cap asked for (POST …/speed-up); NULL once stored, or when none is asked.';
COMMENT ON COLUMN ledgerq.wallet_tasks.speed_up_tip_cap_wei IS 'A speed-up the worker has not stored yet: the tip asked for; set with speed_up_fee_cap_wei.';

-- The worker's collect: a wallet's executing tasks with a request to act on.
CREATE INDEX wallet_tasks_requests ON ledgerq.wallet_tasks (chain_id, sender)
    WHERE status = 1 AND (cancel_requested_at IS NOT NULL OR speed_up_fee_cap_wei IS NOT NULL);

ALTER TABLE ledgerq.tx_attempts ADD COLUMN kind text;
INSERT INTO ledgerq.row_rules (table_name, rule_name, expression) VALUES
    ('tx_attempts', 'tx_attempts_kind_known', 'kind IN (''cancel'', ''speed_up'')');
SELECT ledgerq.row_rules_apply('tx_attempts');
COMMENT ON COLUMN ledgerq.tx_attempts.kind IS 'NULL for the lane''s own attempts (a send, a gas bump, a no-op); cancel: the no-op a cancel sent at its task''s nonce (it, or a gas bump of it, mined ends the task cancelled); speed_up: the task''s transaction signed again with the fees a client asked for.';

-- +goose Down
DELETE FROM ledgerq.row_rules WHERE table_name = 'tx_attempts' AND rule_name = 'tx_attempts_kind_known';
SELECT ledgerq.row_rules_apply('tx_attempts');
ALTER TABLE ledgerq.tx_attempts DROP COLUMN kind;
DROP INDEX ledgerq.wallet_tasks_requests;
DELETE FROM ledgerq.row_rules
WHERE table_name = 'wallet_tasks' AND rule_name IN ('wallet_tasks_speed_up_fees', 'wallet_tasks_cancel_requested_at_finite');
UPDATE ledgerq.row_rules SET expression = 'NOT cancelled OR (status = 2 AND started_at IS NULL)'
WHERE table_name = 'wallet_tasks' AND rule_name = 'wallet_tasks_cancelled_is_error';
SELECT ledgerq.row_rules_apply('wallet_tasks');
ALTER TABLE ledgerq.wallet_tasks
    DROP COLUMN speed_up_tip_cap_wei,
    DROP COLUMN speed_up_fee_cap_wei,
    DROP COLUMN cancel_requested_at;
COMMENT ON COLUMN ledgerq.wallet_tasks.cancelled IS 'The client cancelled the task while it was waiting (DELETE, or the waiting request disconnected); status is then error.';
