-- name: TaskInsert :one
-- Intake (seed 004, DESIGN §2.3): stores a send-tx task. A key already used by
-- the wallet makes this a no-op that returns no row (ON CONFLICT DO NOTHING
-- waits for a concurrent insert of the same key to commit or roll back, so of
-- N concurrent inserts exactly one stores a row); the caller then reads the
-- stored task (TaskGetByIdempotencyKey) in the same transaction and compares
-- request hashes.
INSERT INTO ledgerq.wallet_tasks (
    id, wallet_id, chain_id, sender, priority, status, to_address, value_wei, data, gas_limit,
    idempotency_key, request_hash, created_at, updated_at, tip_cap_wei, fee_cap_wei
) VALUES (
    @id, @wallet_id, @chain_id, @sender, @priority, 0, @to_address, @value_wei, @data, sqlc.narg(gas_limit),
    sqlc.narg(idempotency_key), @request_hash, @now::timestamptz, @now::timestamptz,
    sqlc.narg(tip_cap_wei)::numeric, sqlc.narg(fee_cap_wei)::numeric
)
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

-- name: TaskCancel :one
-- Seed 004: a waiting task is aborted (the client cancelled it or went away)
-- and ends in Error. Conditional on waiting: a task the worker has started
-- (its transaction is signed and stored) is not cancelled.
UPDATE ledgerq.wallet_tasks
SET status = 2, cancelled = true, error = 'cancelled', finished_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = @id AND wallet_id = @wallet_id AND status = 0
RETURNING *;

-- name: TaskNextWaitingPriority :many
-- Seed 004 priority queue, made deterministic: the wallet's waiting tasks,
-- highest priority first, then oldest, then id; through
-- wallet_tasks_waiting_priority. Not a claim: only the wallet's shard reads
-- its queue, and TaskStartMany is conditional on waiting.
SELECT * FROM ledgerq.wallet_tasks
WHERE chain_id = @chain_id AND sender = @sender AND status = 0
ORDER BY priority DESC, created_at, id
LIMIT @max;

-- name: TaskNextWaitingFIFO :many
-- Seed 004 FIFO queue: the wallet's waiting tasks, oldest first, then id;
-- through wallet_tasks_waiting_fifo.
SELECT * FROM ledgerq.wallet_tasks
WHERE chain_id = @chain_id AND sender = @sender AND status = 0
ORDER BY created_at, id
LIMIT @max;

-- name: TaskStartMany :execrows
-- Write-ahead (DESIGN §2.3): the tasks whose attempts are being stored move
-- waiting -> executing, locked in id order. The caller checks that every one
-- moved: a task cancelled meanwhile fails the whole store.
UPDATE ledgerq.wallet_tasks t
SET status = 1, started_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE t.id = ANY (ARRAY(
    SELECT w.id FROM ledgerq.wallet_tasks w
    WHERE w.id = ANY(@ids::text[]) AND w.chain_id = @chain_id AND w.sender = @sender AND w.status = 0
    ORDER BY w.id
    FOR UPDATE
));

-- name: TaskFinishDone :one
-- Confirm (seed 003): the task's transaction was mined; a reverted receipt is
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
SET status = 2, error = @error::text, finished_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE t.id = @id AND t.status IN (0, 1)
  AND NOT EXISTS (SELECT 1 FROM ledgerq.tx_attempts a WHERE a.task_id = t.id AND a.state IN ('mined', 'confirmed'))
RETURNING *;

-- name: TaskDeleteFinished :execrows
-- Retention: up to @max tasks finished before @before, oldest first, through
-- wallet_tasks_finished; their attempts go with them (ON DELETE CASCADE).
-- SKIP LOCKED: a row another transaction holds is left for the next round.
WITH old AS (
    SELECT f.id FROM ledgerq.wallet_tasks f
    WHERE f.finished_at IS NOT NULL AND f.finished_at < @before::timestamptz
    ORDER BY f.finished_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
DELETE FROM ledgerq.wallet_tasks t
WHERE t.id = ANY (ARRAY(SELECT old.id FROM old));

-- name: WalletNonceGet :one
SELECT * FROM ledgerq.wallet_nonces WHERE chain_id = @chain_id AND sender = @sender;

-- name: WalletNonceAdvance :one
-- Write-ahead: the next nonce moves from @expected to @next, but only if it
-- is still @expected (compare-and-set: the caller signed with the nonces it
-- read); the first store of an address inserts the row. No row: another
-- writer moved it, and nothing may be stored.
INSERT INTO ledgerq.wallet_nonces AS n (chain_id, sender, next_nonce, created_at, updated_at)
VALUES (@chain_id, @sender, @next, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET next_nonce = @next, updated_at = @now::timestamptz
WHERE n.next_nonce = @expected
RETURNING n.next_nonce;

-- name: AttemptInsertMany :execrows
-- Write-ahead: stores signed transactions before any broadcast, in nonce
-- order. tx_attempts_live_nonce refuses a second live attempt for a nonce.
WITH u AS (
    SELECT unnest(@tx_hashes::text[]) AS tx_hash, unnest(@task_ids::text[]) AS task_id,
           unnest(@nonces::bigint[]) AS nonce, unnest(@raws::bytea[]) AS raw,
           unnest(@gas_limits::bigint[]) AS gas_limit, unnest(@max_fees::numeric[]) AS max_fee,
           unnest(@max_tips::numeric[]) AS max_tip
)
INSERT INTO ledgerq.tx_attempts (
    chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit, max_fee_per_gas, max_priority_fee_per_gas,
    created_at, updated_at
)
SELECT @chain_id, u.tx_hash, u.task_id, @sender, u.nonce, u.raw, u.gas_limit, u.max_fee, u.max_tip,
       @now::timestamptz, @now::timestamptz
FROM u
ORDER BY u.nonce;

-- name: AttemptsUnsent :many
-- Recover (seed 003): attempts signed and stored but not known sent, in nonce
-- order, through tx_attempts_signed.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state = 'signed'
ORDER BY nonce
LIMIT @max;

-- name: AttemptsSentBelow :many
-- Confirm (seed 003): sent attempts whose nonce the chain has passed
-- (nonce < @below), in nonce order, through tx_attempts_sent.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state = 'sent' AND nonce < @below
ORDER BY nonce
LIMIT @max;

-- name: AttemptMarkSent :many
-- Send or recover: the broadcast succeeded or its outcome is indeterminate
-- (treated as sent). Only signed attempts move; rows through the primary key.
-- Returns the moved attempts (their tasks are told: submitted).
UPDATE ledgerq.tx_attempts
SET state = 'sent', sent_at = @now::timestamptz, updated_at = @now::timestamptz, last_error = sqlc.narg(error)
WHERE chain_id = @chain_id AND tx_hash = ANY(@tx_hashes::text[]) AND state = 'signed'
RETURNING *;

-- name: TaskGetMany :many
-- The tasks of attempts that changed, in id order, through the primary key.
SELECT * FROM ledgerq.wallet_tasks WHERE id = ANY(@ids::text[]) ORDER BY id;

-- name: AttemptConfirm :one
-- Confirm: the attempt's receipt is deep enough to be final (from signed or
-- sent when the first receipt already is, from mined otherwise). Returns its
-- task. A live hash is unique (tx_attempts_live_nonce), so this is one row.
UPDATE ledgerq.tx_attempts
SET state = 'confirmed', confirmed_at = @now::timestamptz, updated_at = @now::timestamptz,
    mined_block = coalesce(sqlc.narg(mined_block)::bigint, mined_block),
    mined_block_hash = coalesce(sqlc.narg(mined_block_hash)::text, mined_block_hash),
    mined_at = CASE WHEN sqlc.narg(mined_block)::bigint IS NULL THEN mined_at ELSE coalesce(mined_at, @now::timestamptz) END
WHERE chain_id = @chain_id AND tx_hash = @tx_hash AND state IN ('signed', 'sent', 'mined')
RETURNING task_id, nonce;

-- name: AttemptMarkMined :one
-- Confirm: the attempt has a receipt in @mined_block, not yet deep enough to
-- be final; a mined attempt seen in another block (re-mined after a reorg)
-- moves to it. Its task stays executing.
UPDATE ledgerq.tx_attempts
SET state = 'mined', mined_block = @mined_block::bigint, mined_block_hash = @mined_block_hash::text,
    mined_at = CASE WHEN state = 'mined' AND mined_block_hash = @mined_block_hash::text THEN mined_at ELSE @now::timestamptz END,
    updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND tx_hash = @tx_hash AND state IN ('signed', 'sent', 'mined')
RETURNING task_id, nonce;

-- name: AttemptsMined :many
-- Confirm: the wallet's attempts mined but not yet final, in nonce order,
-- through tx_attempts_mined: each pass checks their receipts again.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state = 'mined'
ORDER BY nonce
LIMIT @max;

-- name: AttemptsMinedFrom :many
-- Confirm: mined or confirmed attempts at or above @from_nonce (the chain's
-- nonce): the chain says none of them is in it (a reorg, a node that lost
-- blocks or was restored from an older state, a node behind the others).
-- Through tx_attempts_nonce.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND nonce >= @from_nonce AND state IN ('mined', 'confirmed')
ORDER BY nonce
LIMIT @max;

-- name: AttemptReopen :one
-- Confirm: a mined or confirmed attempt whose transaction left the chain goes
-- back to sent, with its same bytes, to be broadcast again (its nonce stays
-- held: it is never signed with other content while this may still land).
-- @error records why and makes it due for a broadcast.
UPDATE ledgerq.tx_attempts
SET state = 'sent', sent_at = coalesce(sent_at, @now::timestamptz), confirmed_at = NULL,
    mined_block = NULL, mined_block_hash = NULL, mined_at = NULL, reorgs = reorgs + 1,
    last_error = @error::text, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND tx_hash = @tx_hash AND state IN ('mined', 'confirmed')
RETURNING task_id, nonce, mined_block;

-- name: TaskReopen :one
-- Confirm: the task's mined transaction left the chain; a done task is
-- executing again (its transaction is being sent again, with the same
-- bytes), and the reorg is counted.
UPDATE ledgerq.wallet_tasks
SET status = 1, tx_hash = NULL, reverted = false, finished_at = NULL, reorgs = reorgs + 1, updated_at = @now::timestamptz
WHERE id = @id AND status IN (1, 3)
RETURNING *;

-- name: AttemptDropByTask :many
-- A task that failed deterministically: its live, unmined attempts will never
-- be mined, and their nonces are free again (recycling them is the next step).
UPDATE ledgerq.tx_attempts
SET state = 'dropped', last_error = @error::text, updated_at = @now::timestamptz
WHERE task_id = @task_id AND state IN ('signed', 'sent')
RETURNING tx_hash, nonce;

-- name: AttemptListByTask :many
-- A task's attempts in the order they were stored, through tx_attempts_task.
SELECT * FROM ledgerq.tx_attempts WHERE task_id = @task_id ORDER BY id;

-- name: WalletNonceRaise :execrows
-- Reconciliation (seed 003's nonce sync, upward only): the chain's nonce
-- passed the next nonce (someone else sent from the address), so the next new
-- nonce starts at the chain's. No live attempt can sit at or above the old
-- next nonce, so none is skipped over. Lowering it is a nonce reset (the next
-- issue).
UPDATE ledgerq.wallet_nonces
SET next_nonce = @at_least, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND sender = @sender AND next_nonce < @at_least;

-- name: WalletNoncesFreed :many
-- Send (seed 003's recycled nonces): nonces from @from_nonce (the chain's nonce) up
-- to the next nonce that no live attempt holds — their attempt was dropped (a
-- deterministic rejection, a replacement) — lowest first. The next send fills
-- them before taking new nonces, so the chain never waits on a gap. The
-- attempts are read through tx_attempts_live_nonce from @from_nonce on only
-- (the confirmed ones below it may be many).
SELECT g.nonce::bigint AS nonce
FROM ledgerq.wallet_nonces w
CROSS JOIN LATERAL generate_series(@from_nonce::bigint, w.next_nonce - 1) AS g(nonce)
WHERE w.chain_id = @chain_id AND w.sender = @sender
  AND NOT EXISTS (
      SELECT 1 FROM ledgerq.tx_attempts a
      WHERE a.chain_id = w.chain_id AND a.sender = w.sender AND a.nonce = g.nonce AND a.state <> 'dropped'
        AND a.nonce >= @from_nonce::bigint
  )
ORDER BY g.nonce
LIMIT @max;

-- name: AttemptsInFlight :one
-- Send (seed 003's in-flight budget): the wallet's attempts signed or sent
-- and not yet mined, through tx_attempts_signed and tx_attempts_sent; and
-- its mined attempts not yet final, through tx_attempts_mined (confirm
-- follows them; they take no room in the budget).
SELECT count(*) FILTER (WHERE state IN ('signed', 'sent')) AS in_flight,
       count(*) FILTER (WHERE state = 'mined') AS mined
FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state IN ('signed', 'sent', 'mined');

-- name: AttemptsSentUncertain :many
-- Confirm: sent attempts whose last broadcast was indeterminate (last_error
-- set) and whose nonce the chain has not passed (nonce >= @from_nonce), in nonce
-- order: they are re-broadcast with the same bytes, since a transaction the
-- node never took would hold up every later nonce.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state = 'sent' AND nonce >= @from_nonce
  AND last_error IS NOT NULL
ORDER BY nonce
LIMIT @max;

-- name: AttemptsSentFrom :many
-- Confirm: every sent attempt whose nonce the chain has not passed (nonce >=
-- @from_nonce), in nonce order, through tx_attempts_sent: broadcast again
-- with the same bytes when the chain lost blocks or its nonce has not moved
-- for a while (a node that restarted has forgotten its pool).
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state = 'sent' AND nonce >= @from_nonce
ORDER BY nonce
LIMIT @max;

-- name: AttemptRecordBroadcast :execrows
-- Confirm: the outcome of re-broadcasting a sent attempt; @error NULL when the
-- node took it (or already had it).
UPDATE ledgerq.tx_attempts
SET last_error = sqlc.narg(error), updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND tx_hash = @tx_hash AND state = 'sent';

-- name: AttemptDrop :one
-- A live attempt that will never be final (its nonce went to another
-- transaction, it was signed and never broadcast and is released, or a
-- superseded attempt of its nonce was the one mined) is dropped; its nonce is
-- free again unless another attempt takes it in the same transaction.
-- Returns its task and nonce.
UPDATE ledgerq.tx_attempts
SET state = 'dropped', last_error = @error::text, updated_at = @now::timestamptz,
    mined_block = NULL, mined_block_hash = NULL, mined_at = NULL
WHERE chain_id = @chain_id AND tx_hash = @tx_hash AND state IN ('signed', 'sent', 'mined')
RETURNING task_id, nonce;

-- name: TaskRequeue :one
-- The task's only live attempt was dropped without being mined: the task goes
-- back to waiting, to be sent again with a new nonce.
UPDATE ledgerq.wallet_tasks
SET status = 0, started_at = NULL, updated_at = @now::timestamptz
WHERE id = @id AND status = 1
RETURNING *;

-- name: WalletsWithWork :many
-- Follower: the (chain, sender) pairs with live attempts (signed, sent or
-- mined) or waiting tasks, and those whose chain nonce moved after
-- @watch_since (their final transactions are watched a while longer, in case
-- the chain loses them), in (chain_id, sender) order after the given pair.
-- Each attempts and tasks part is a loose index scan (one index probe per
-- distinct pair, through tx_attempts_signed, tx_attempts_sent,
-- tx_attempts_mined and wallet_tasks_waiting_fifo), so a long queue of one
-- wallet costs no more than a short one; wallet_health has a row per wallet.
WITH RECURSIVE
signed(chain_id, sender) AS (
    (SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
     WHERE a.state = 'signed' AND (a.chain_id, a.sender) > (@after_chain_id::bigint, @after_sender::text)
     ORDER BY a.chain_id, a.sender LIMIT 1)
    UNION ALL
    SELECT n.chain_id, n.sender FROM signed s CROSS JOIN LATERAL (
        SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
        WHERE a.state = 'signed' AND (a.chain_id, a.sender) > (s.chain_id, s.sender)
        ORDER BY a.chain_id, a.sender LIMIT 1
    ) n
),
sent(chain_id, sender) AS (
    (SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
     WHERE a.state = 'sent' AND (a.chain_id, a.sender) > (@after_chain_id::bigint, @after_sender::text)
     ORDER BY a.chain_id, a.sender LIMIT 1)
    UNION ALL
    SELECT n.chain_id, n.sender FROM sent s CROSS JOIN LATERAL (
        SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
        WHERE a.state = 'sent' AND (a.chain_id, a.sender) > (s.chain_id, s.sender)
        ORDER BY a.chain_id, a.sender LIMIT 1
    ) n
),
mined(chain_id, sender) AS (
    (SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
     WHERE a.state = 'mined' AND (a.chain_id, a.sender) > (@after_chain_id::bigint, @after_sender::text)
     ORDER BY a.chain_id, a.sender LIMIT 1)
    UNION ALL
    SELECT n.chain_id, n.sender FROM mined m CROSS JOIN LATERAL (
        SELECT a.chain_id, a.sender FROM ledgerq.tx_attempts a
        WHERE a.state = 'mined' AND (a.chain_id, a.sender) > (m.chain_id, m.sender)
        ORDER BY a.chain_id, a.sender LIMIT 1
    ) n
),
waiting(chain_id, sender) AS (
    (SELECT t.chain_id, t.sender FROM ledgerq.wallet_tasks t
     WHERE t.status = 0 AND (t.chain_id, t.sender) > (@after_chain_id::bigint, @after_sender::text)
     ORDER BY t.chain_id, t.sender LIMIT 1)
    UNION ALL
    SELECT n.chain_id, n.sender FROM waiting w CROSS JOIN LATERAL (
        SELECT t.chain_id, t.sender FROM ledgerq.wallet_tasks t
        WHERE t.status = 0 AND (t.chain_id, t.sender) > (w.chain_id, w.sender)
        ORDER BY t.chain_id, t.sender LIMIT 1
    ) n
),
watched(chain_id, sender) AS (
    SELECT h.chain_id, h.sender FROM ledgerq.wallet_health h
    WHERE h.chain_nonce_since > @watch_since::timestamptz
      AND (h.chain_id, h.sender) > (@after_chain_id::bigint, @after_sender::text)
)
SELECT u.chain_id::bigint AS chain_id, u.sender::text AS sender
FROM (SELECT * FROM signed UNION SELECT * FROM sent UNION SELECT * FROM mined
      UNION SELECT * FROM waiting UNION SELECT * FROM watched) u
ORDER BY u.chain_id, u.sender
LIMIT @max;

-- Wallet lane II (seed 003): bumps, no-ops, resets, balance health.

-- name: AttemptHashesOfNonce :many
-- Confirm: every hash ever stored for the nonce on behalf of the same task
-- (or of a no-op, task NULL): a bump's superseded attempts may still be the
-- one mined. Through tx_attempts_nonce.
SELECT a.tx_hash FROM ledgerq.tx_attempts a
WHERE a.chain_id = @chain_id AND a.sender = @sender AND a.nonce = @nonce
  AND a.task_id IS NOT DISTINCT FROM sqlc.narg(task_id)::text
GROUP BY a.tx_hash
ORDER BY max(a.id) DESC;

-- name: AttemptLiveAt :one
-- Stall: the live (signed or sent) attempt holding a nonce, if any.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND nonce = @nonce AND state IN ('signed', 'sent');

-- name: AttemptMaxLiveNonce :one
-- Recycled nonces: the highest nonce a live attempt (signed, sent or mined)
-- holds (-1: none).
SELECT coalesce(max(nonce), -1)::bigint AS nonce FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state IN ('signed', 'sent', 'mined');

-- name: AttemptMaxHeldNonce :one
-- Reconciliation: the highest nonce any attempt not dropped holds, confirmed
-- ones included (-1: none). The next nonce never moves to or below it: a
-- nonce ledgerq signed for is not signed again with other content while its
-- transaction may still land.
SELECT coalesce(max(nonce), -1)::bigint AS nonce FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state <> 'dropped';

-- name: AttemptSupersede :one
-- Gas bump: the attempt a bump replaces leaves the live set (its hash may
-- still be mined: confirm looks it up with the nonce's other hashes).
UPDATE ledgerq.tx_attempts
SET state = 'dropped', superseded_by = @superseded_by::text, last_error = 'superseded by gas bump ' || @superseded_by::text,
    updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND tx_hash = @tx_hash AND state = 'sent'
RETURNING task_id;

-- name: AttemptInsertOne :exec
-- Gas bump or no-op: one signed transaction, stored before any broadcast.
INSERT INTO ledgerq.tx_attempts (
    chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit, max_fee_per_gas, max_priority_fee_per_gas,
    created_at, updated_at
) VALUES (
    @chain_id, @tx_hash, sqlc.narg(task_id)::text, @sender, @nonce, @raw, @gas_limit, @max_fee, @max_tip,
    @now::timestamptz, @now::timestamptz
);

-- name: AttemptMineSuperseded :one
-- Confirm: a superseded attempt of a nonce was the one mined (its bump was
-- dropped first, in the same transaction): it becomes the nonce's live
-- attempt again, mined or, with @final, confirmed. The same bytes may have
-- been stored more than once for the task (signed again after a refusal):
-- the newest row takes it.
UPDATE ledgerq.tx_attempts
SET state = CASE WHEN @final::boolean THEN 'confirmed' ELSE 'mined' END::ledgerq.tx_attempt_state,
    confirmed_at = CASE WHEN @final::boolean THEN @now::timestamptz END,
    mined_block = sqlc.narg(mined_block)::bigint, mined_block_hash = sqlc.narg(mined_block_hash)::text,
    mined_at = CASE WHEN sqlc.narg(mined_block)::bigint IS NULL THEN NULL ELSE @now::timestamptz END,
    updated_at = @now::timestamptz
WHERE id = (
    SELECT d.id FROM ledgerq.tx_attempts d
    WHERE d.chain_id = @chain_id AND d.tx_hash = @tx_hash AND d.state = 'dropped'
      AND d.task_id IS NOT DISTINCT FROM sqlc.narg(task_id)::text
    ORDER BY d.id DESC
    LIMIT 1
)
RETURNING task_id, nonce;

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

-- name: WalletNonceReset :execrows
-- Nonce reset / recycled nonces above the highest live one: the next nonce
-- moves (down or up) from @from to @to, only if it is still @from and no
-- attempt that is not dropped (confirmed ones included) sits at or above @to:
-- none is skipped over or signed again with other content.
UPDATE ledgerq.wallet_nonces w
SET next_nonce = @to_nonce::bigint, updated_at = @now::timestamptz
WHERE w.chain_id = @chain_id AND w.sender = @sender AND w.next_nonce = @from_nonce::bigint
  AND NOT EXISTS (
      SELECT 1 FROM ledgerq.tx_attempts a
      WHERE a.chain_id = w.chain_id AND a.sender = w.sender AND a.state <> 'dropped'
        AND a.nonce >= @to_nonce::bigint
  );

-- name: WalletHealthGet :one
SELECT * FROM ledgerq.wallet_health WHERE chain_id = @chain_id AND sender = @sender;

-- name: WalletHealthObserveNonce :exec
-- Confirm: the chain's nonce and head as read; chain_nonce_since moves only
-- when the nonce changed (the stall timeout counts from it).
INSERT INTO ledgerq.wallet_health AS h (chain_id, sender, chain_nonce, chain_nonce_since, chain_head, created_at, updated_at)
VALUES (@chain_id, @sender, @chain_nonce::bigint, @now::timestamptz, @chain_head::bigint, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET chain_nonce = @chain_nonce::bigint, chain_head = @chain_head::bigint, updated_at = @now::timestamptz,
    chain_nonce_since = CASE WHEN h.chain_nonce IS DISTINCT FROM @chain_nonce::bigint THEN @now::timestamptz ELSE h.chain_nonce_since END;

-- name: WalletHealthSetBalance :one
-- Balance health: the balance as read, and the threshold computed with it
-- (what a plain transfer costs at the fees of the moment); sending pauses
-- while the balance is below it. Returns the row.
INSERT INTO ledgerq.wallet_health AS h (chain_id, sender, balance_wei, balance_at, threshold_wei, paused, created_at, updated_at)
VALUES (@chain_id, @sender, @balance::numeric, @now::timestamptz, @threshold::numeric, @balance::numeric < @threshold::numeric,
        @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET balance_wei = @balance::numeric, balance_at = @now::timestamptz, threshold_wei = @threshold::numeric,
    paused = @balance::numeric < @threshold::numeric, updated_at = @now::timestamptz
RETURNING *;

-- name: WalletHealthBalanceStale :exec
-- A send refused for insufficient funds: the balance is read again before
-- the next send (the refused task alone ended in error).
UPDATE ledgerq.wallet_health SET balance_at = NULL, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND sender = @sender;

-- name: WalletHealthRecordReset :exec
INSERT INTO ledgerq.wallet_health AS h (chain_id, sender, resets, last_reset_at, last_reset_from, last_reset_to, created_at, updated_at)
VALUES (@chain_id, @sender, 1, @now::timestamptz, @from_nonce::bigint, @to_nonce::bigint, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET resets = h.resets + 1, last_reset_at = @now::timestamptz, last_reset_from = @from_nonce::bigint,
    last_reset_to = @to_nonce::bigint, updated_at = @now::timestamptz;
