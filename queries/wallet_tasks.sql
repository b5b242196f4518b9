-- name: TaskInsert :one
-- Intake: stores a send-tx task. A key already used by
-- the wallet makes this a no-op that returns no row (ON CONFLICT DO NOTHING
-- waits for a concurrent insert of the same key to commit or roll back, so of
-- N concurrent inserts exactly one stores a row); the caller then reads the
-- stored task (TaskGetByIdempotencyKey) in the same transaction and compares
-- request hashes.
-- A wallet with a policy (wallet_policies) stores nothing here either, unless
-- @policy_checked: its task goes through ledgerq.wallet_policy_refusal first,
-- in a transaction, and then here with @policy_checked (WalletPolicyRefusal).
INSERT INTO ledgerq.wallet_tasks (
    id, wallet_id, chain_id, sender, priority, status, to_address, value_wei, data, gas_limit,
    idempotency_key, request_hash, created_at, updated_at, tip_cap_wei, fee_cap_wei, call, preflight
) SELECT
    @id, @wallet_id, @chain_id, @sender, @priority, 0, @to_address, @value_wei, @data, sqlc.narg(gas_limit),
    sqlc.narg(idempotency_key), @request_hash, @now::timestamptz, @now::timestamptz,
    sqlc.narg(tip_cap_wei)::numeric, sqlc.narg(fee_cap_wei)::numeric, sqlc.narg(call)::jsonb, @preflight
WHERE @policy_checked::boolean OR NOT EXISTS (SELECT 1 FROM ledgerq.wallet_policies p WHERE p.wallet_id = @wallet_id)
ON CONFLICT (wallet_id, idempotency_key) DO NOTHING
RETURNING *;

-- name: TaskGetByIdempotencyKey :one
SELECT * FROM ledgerq.wallet_tasks WHERE wallet_id = @wallet_id AND idempotency_key = @idempotency_key;

-- name: TaskGet :one
-- A task of another wallet is not found: "missing" and "not yours" are one.
SELECT * FROM ledgerq.wallet_tasks WHERE id = @id AND wallet_id = @wallet_id;

-- name: TaskList :many
-- One wallet's tasks, keyset pagination by id (UUIDv7: creation order),
-- through (wallet_id, id); the status filter is optional.
SELECT * FROM ledgerq.wallet_tasks
WHERE wallet_id = @wallet_id
  AND (sqlc.narg(status)::smallint IS NULL OR status = sqlc.narg(status)::smallint)
  AND id > @after
ORDER BY id
LIMIT @max;

-- name: TaskCountByStatus :many
-- How many tasks of the given wallets are in each status, counted in the
-- database: ledgerq bench's progress line, which must not read every task
-- a second while the lane it measures runs.
SELECT status, count(*)::bigint AS tasks FROM ledgerq.wallet_tasks
WHERE wallet_id = ANY (@wallet_ids::text[])
GROUP BY status;

-- name: TaskCancel :one
-- Cancel: a waiting task is aborted (the client cancelled it or went away)
-- and ends in Error. Conditional on waiting: a task the worker has started
-- (its transaction is signed and stored) is not cancelled.
UPDATE ledgerq.wallet_tasks
SET status = 2, cancelled = true, error = 'cancelled', finished_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = @id AND wallet_id = @wallet_id AND status = 0
RETURNING *;

-- name: TaskNextWaitingPriority :many
-- The priority queue: the wallet's waiting tasks, highest priority first,
-- then oldest, then id (ties broken, so the order is deterministic); through
-- wallet_tasks_waiting_priority. Not a claim: only the wallet's shard reads
-- its queue, and TaskStartMany is conditional on waiting.
SELECT * FROM ledgerq.wallet_tasks
WHERE chain_id = @chain_id AND sender = @sender AND status = 0
ORDER BY priority DESC, created_at, id
LIMIT @max;

-- name: TaskNextWaitingFIFO :many
-- The FIFO queue: the wallet's waiting tasks, oldest first, then id;
-- through wallet_tasks_waiting_fifo.
SELECT * FROM ledgerq.wallet_tasks
WHERE chain_id = @chain_id AND sender = @sender AND status = 0
ORDER BY created_at, id
LIMIT @max;

-- name: TaskStartMany :execrows
-- Write-ahead: the tasks whose attempts are being stored move
-- waiting -> executing, locked in id order. The caller checks that every one
-- moved: a task cancelled meanwhile fails the whole store.
-- Each id is looked up by itself, through the primary key, in a LATERAL
-- subquery its lock keeps from being flattened: with the ids as a filter,
-- the plan on a new database (no statistics yet) walked every waiting task
-- of the wallet through wallet_tasks_waiting_fifo for each round. The
-- status test is a CASE, which no partial index answers (the waiting
-- indexes' is `status = 0`).
UPDATE ledgerq.wallet_tasks t
SET status = 1, started_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE t.id = ANY (ARRAY(
    SELECT l.id FROM (SELECT DISTINCT unnest(@ids::text[]) AS id ORDER BY 1) i
    CROSS JOIN LATERAL (
        SELECT w.id FROM ledgerq.wallet_tasks w
        WHERE w.id = i.id AND w.chain_id = @chain_id AND w.sender = @sender
          AND CASE WHEN w.status = 0 THEN true ELSE false END
        FOR UPDATE
    ) l
));

-- name: TaskFinishDone :one
-- Confirm: the task's transaction was mined; a reverted receipt is
-- still done, with reverted set.
UPDATE ledgerq.wallet_tasks
SET status = 3, tx_hash = @tx_hash, reverted = @reverted, finished_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = @id AND status = 1
RETURNING *;

-- name: TaskFinishError :one
-- A deterministic failure ends a waiting or executing task in error. A task
-- whose transaction has a receipt (an attempt mined or confirmed) never does:
-- it was sent, whatever else failed. Attempts through tx_attempts_task.
UPDATE ledgerq.wallet_tasks t
SET status = 2, error = @error::text, finished_at = @now::timestamptz, updated_at = @now::timestamptz,
    revert = coalesce(sqlc.narg(revert)::json, t.revert)
WHERE t.id = @id AND t.status IN (0, 1)
  AND NOT EXISTS (SELECT 1 FROM ledgerq.tx_attempts a WHERE a.task_id = t.id AND a.state IN ('mined', 'confirmed'))
RETURNING *;

-- name: TaskDeleteFinished :execrows
-- Retention: up to @max tasks finished before @before, oldest first, through
-- wallet_tasks_finished; their attempts go with them (ON DELETE CASCADE).
-- SKIP LOCKED: a row another transaction holds is left for the next round.
-- A task with a signature request (wallet_sign_requests, which refuses the
-- delete) is kept: the lane never lets one finish, and a round that stopped
-- on one would stop every round after it.
WITH old AS (
    SELECT f.id FROM ledgerq.wallet_tasks f
    WHERE f.finished_at IS NOT NULL AND f.finished_at < @before::timestamptz
      AND NOT EXISTS (SELECT 1 FROM ledgerq.wallet_sign_requests r WHERE r.chain_id = f.chain_id AND r.sender = f.sender AND r.task_id = f.id)
    ORDER BY f.finished_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
DELETE FROM ledgerq.wallet_tasks t
WHERE t.id = ANY (ARRAY(SELECT old.id FROM old));

-- name: TaskGetMany :many
-- The tasks of attempts that changed, in id order, through the primary key.
SELECT * FROM ledgerq.wallet_tasks WHERE id = ANY(@ids::text[]) ORDER BY id;

-- name: TaskReopen :one
-- Confirm: the task's mined transaction left the chain; a done task is
-- executing again (its transaction is being sent again, with the same
-- bytes), and the reorg is counted. So is a task a cancel's mined no-op
-- ended: the no-op is being sent again, and the race is not decided.
UPDATE ledgerq.wallet_tasks
SET status = 1, tx_hash = NULL, reverted = false, cancelled = false, error = NULL, finished_at = NULL,
    reorgs = reorgs + 1, updated_at = @now::timestamptz
WHERE id = @id AND (status IN (1, 3) OR status = 2 AND cancelled AND started_at IS NOT NULL)
RETURNING *;

-- name: TaskRequeue :one
-- The task's only live attempt was dropped without being mined: the task goes
-- back to waiting, to be sent again with a new nonce.
UPDATE ledgerq.wallet_tasks
SET status = 0, started_at = NULL, updated_at = @now::timestamptz
WHERE id = @id AND status = 1
RETURNING *;

-- name: TaskCountBump :execrows
UPDATE ledgerq.wallet_tasks
SET bumps = bumps + 1, price_capped_at = NULL, updated_at = @now::timestamptz
WHERE id = @id AND status = 1;

-- name: TaskMarkPriceCapped :execrows
-- A bump the price cap refused: the task stays, the operator is told once.
UPDATE ledgerq.wallet_tasks
SET price_capped_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = @id AND status = 1 AND price_capped_at IS NULL;

-- name: TaskRequeueReplaced :one
-- Replacement: another transaction took the task's nonce; the task goes back
-- to waiting and counts it.
UPDATE ledgerq.wallet_tasks
SET status = 0, started_at = NULL, replacements = replacements + 1, updated_at = @now::timestamptz
WHERE id = @id AND status = 1
RETURNING *;

-- name: TaskCountLive :many
-- The console's wallet lane panel: waiting and executing tasks per status,
-- with the oldest of each.
SELECT status, count(*)::bigint AS items, min(created_at)::timestamptz AS oldest
FROM ledgerq.wallet_tasks
WHERE status IN (0, 1)
GROUP BY status
ORDER BY status;

-- name: TaskFinishedPerMinute :many
-- The console's charts: tasks that ended since @since, per minute and
-- status, with the 50th and 99th percentile of the seconds from created to
-- finished, through wallet_tasks_finished.
SELECT date_bin('1 minute', finished_at, @since::timestamptz)::timestamptz AS minute,
       status,
       count(*)::bigint AS items,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at)))::float8 AS p50_seconds,
       (percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at)))::float8 AS p99_seconds
FROM ledgerq.wallet_tasks
WHERE finished_at >= @since::timestamptz
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: TaskSeedFinished :execrows
-- Bench only (`ledgerq bench wallets --backlog-finished N`): N done tasks,
-- each with its confirmed attempt, as a long-running lane leaves behind, on
-- 1000 senders of the chain made up for the seed (wallet ids the prefix and
-- 0 to 999, nonces from 0), finished at @at. Their ids ascend, as UUIDv7s
-- made one after the other do, so the seed appends to the id indexes. No
-- loop or API path runs it.
WITH seed AS (
    SELECT s - 1 AS n,
           substr(md5(@prefix::text), 1, 8) || '-0000-7000-8000-' || lpad(to_hex(s), 12, '0') AS task_id,
           '0x' || lpad(to_hex((s - 1) % 1000 + 1), 40, '0') AS from_address,
           '0x' || md5(@prefix::text || (s - 1)::text) || md5((s - 1)::text || @prefix::text) AS hash
    FROM generate_series(1, @n::int) AS s
),
seeded AS (
    INSERT INTO ledgerq.wallet_tasks (id, wallet_id, chain_id, sender, status, to_address, value_wei,
        request_hash, tx_hash, created_at, updated_at, started_at, finished_at)
    SELECT seed.task_id, @prefix::text || (seed.n % 1000)::text, @chain_id::bigint, seed.from_address, 3,
        '0x00000000000000000000000000000000000b3c11', 1,
        sha256(convert_to(seed.task_id, 'UTF8')), seed.hash, @at::timestamptz, @at::timestamptz, @at::timestamptz, @at::timestamptz
    FROM seed
)
INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit, max_fee_per_gas,
    max_priority_fee_per_gas, state, created_at, updated_at, sent_at, confirmed_at, mined_block, mined_block_hash, mined_at)
SELECT @chain_id::bigint, seed.hash, seed.task_id, seed.from_address, seed.n / 1000, '\x02'::bytea, 21000, 2000000000, 1000000000,
    'confirmed', @at::timestamptz, @at::timestamptz, @at::timestamptz, @at::timestamptz, seed.n / 1000 + 1, seed.hash, @at::timestamptz
FROM seed;

-- name: TaskRequestCancel :one
-- Cancel of a sent task: the request is recorded on an executing task; the
-- wallet's worker sends the no-op in its next run. Conditional on executing
-- and on no request yet: a repeated request keeps the first.
UPDATE ledgerq.wallet_tasks
SET cancel_requested_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = @id AND wallet_id = @wallet_id AND status = 1 AND cancel_requested_at IS NULL
RETURNING *;

-- name: TaskGetForRequest :one
-- Speed-up: the task, locked, so that its live attempt read next and the
-- request written after agree (the worker's store of an attempt locks the
-- task too: TaskCountBump, TaskFinishDone).
SELECT * FROM ledgerq.wallet_tasks WHERE id = @id AND wallet_id = @wallet_id FOR UPDATE;

-- name: TaskRequestSpeedUp :one
-- Speed-up: the fees asked for, on an executing task no cancel was asked
-- of; a newer request replaces one the worker has not stored yet.
UPDATE ledgerq.wallet_tasks
SET speed_up_fee_cap_wei = @fee_cap::numeric, speed_up_tip_cap_wei = @tip_cap::numeric, updated_at = @now::timestamptz
WHERE id = @id AND wallet_id = @wallet_id AND status = 1 AND cancel_requested_at IS NULL
RETURNING *;

-- name: TaskClearSpeedUp :execrows
-- Speed-up: stored as an attempt (or no longer a replacement of the live
-- one), the request is done.
UPDATE ledgerq.wallet_tasks
SET speed_up_fee_cap_wei = NULL, speed_up_tip_cap_wei = NULL, updated_at = @now::timestamptz
WHERE id = @id AND speed_up_fee_cap_wei IS NOT NULL;

-- name: TaskListRequests :many
-- The worker: the wallet's executing tasks with a cancel or speed-up to act
-- on, through wallet_tasks_requests, each with its live attempt (signed,
-- sent or mined) and whether a cancel's no-op was stored already.
SELECT sqlc.embed(t), sqlc.embed(a),
       EXISTS (SELECT 1 FROM ledgerq.tx_attempts c
               WHERE c.chain_id = @chain_id AND c.sender = @sender AND c.task_id = t.id AND c.kind = 'cancel') AS cancel_stored
FROM ledgerq.wallet_tasks t
JOIN ledgerq.tx_attempts a ON a.chain_id = @chain_id AND a.sender = @sender AND a.task_id = t.id
    AND a.state IN ('signed', 'sent', 'mined')
WHERE t.chain_id = @chain_id AND t.sender = @sender AND t.status = 1
  AND (t.cancel_requested_at IS NOT NULL OR t.speed_up_fee_cap_wei IS NOT NULL)
ORDER BY t.id
LIMIT @max;

-- name: TaskFinishCancelled :one
-- A task whose cancel won: the no-op at its nonce was mined (executing), or
-- its transaction left its nonce to another before the no-op went out and
-- the task went back to waiting (it is not sent again). Ends in error,
-- cancelled.
UPDATE ledgerq.wallet_tasks
SET status = 2, cancelled = true, error = 'cancelled', speed_up_fee_cap_wei = NULL, speed_up_tip_cap_wei = NULL,
    finished_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = @id AND status IN (0, 1)
RETURNING *;

-- name: TaskRecordOutcomes :execrows
-- Confirm, in the transaction that ends tasks done: what their transactions
-- left, for the ones that left something (a plain transfer has no logs and
-- is not named here): @ids[i]'s logs (a calldata.Logs, its events decoded
-- when the task is read) and, for a reverted one, the decoded revert of its
-- replay; '' for neither. One statement for the confirm's tasks; each is
-- written once.
UPDATE ledgerq.wallet_tasks t
SET logs = coalesce(t.logs, nullif(u.logs, '')::json), revert = coalesce(t.revert, nullif(u.revert, '')::json)
FROM (SELECT unnest(@ids::text[]) AS id, unnest(@logs::text[]) AS logs, unnest(@reverts::text[]) AS revert) u
WHERE t.id = u.id AND t.status = 3;
