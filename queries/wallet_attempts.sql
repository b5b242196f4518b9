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

-- name: AttemptListUnsent :many
-- Recover: attempts signed and stored but not known sent, in nonce
-- order, through tx_attempts_signed.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state = 'signed'
ORDER BY nonce
LIMIT @max;

-- name: AttemptListSentBelow :many
-- Confirm: sent attempts whose nonce the chain has passed
-- (nonce < @below), in nonce order, through tx_attempts_sent.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state = 'sent' AND nonce < @below
ORDER BY nonce
LIMIT @max;

-- name: AttemptMarkSent :many
-- Send or recover: the broadcast succeeded or its outcome is indeterminate
-- (treated as sent). Only signed attempts move; rows through the primary key.
-- Returns the moved attempts (their tasks are told: submitted).
-- Each hash is looked up by itself, then the rows are updated by id: the
-- plan AttemptConfirmFinalMany's note explains, on a new database a walk of
-- every live attempt of the chain for each round.
UPDATE ledgerq.tx_attempts
SET state = 'sent', sent_at = @now::timestamptz, updated_at = @now::timestamptz, last_error = sqlc.narg(error)
WHERE id = ANY (ARRAY(
    SELECT l.id FROM unnest(@tx_hashes::text[]) AS h(tx_hash)
    CROSS JOIN LATERAL (
        SELECT x.id FROM ledgerq.tx_attempts x
        WHERE x.chain_id = @chain_id AND x.tx_hash = h.tx_hash
          AND CASE WHEN x.state = 'signed' THEN true ELSE false END
        LIMIT 1
    ) l
)) AND CASE WHEN state = 'signed' THEN true ELSE false END
RETURNING *;

-- name: AttemptConfirm :one
-- Confirm: the attempt's receipt is deep enough to be final (from signed or
-- sent when the first receipt already is, from mined otherwise). Returns its
-- task. A live hash is unique (tx_attempts_live_nonce), so this is one row.
UPDATE ledgerq.tx_attempts
SET state = 'confirmed', confirmed_at = @now::timestamptz, updated_at = @now::timestamptz,
    mined_block = coalesce(sqlc.narg(mined_block)::bigint, mined_block),
    mined_block_hash = coalesce(sqlc.narg(mined_block_hash)::text, mined_block_hash),
    mined_at = CASE WHEN sqlc.narg(mined_block)::bigint IS NULL THEN mined_at ELSE coalesce(mined_at, @now::timestamptz) END,
    gas_used = coalesce(sqlc.narg(gas_used)::bigint, gas_used),
    effective_gas_price_wei = coalesce(sqlc.narg(effective_gas_price_wei)::numeric, effective_gas_price_wei)
WHERE chain_id = @chain_id AND tx_hash = @tx_hash AND state IN ('signed', 'sent', 'mined')
RETURNING task_id, nonce, kind;

-- name: AttemptConfirmFinalMany :many
-- Confirm, a round at once: each live attempt @tx_hashes[i] of a task, whose
-- receipt in block @mined_blocks[i] is final, becomes confirmed and its task
-- done with that hash (reverted as @reverted[i] says), in one statement
-- instead of two per attempt. Every task it finishes is returned, with its
-- attempt's nonce; the caller rolls the statement back and records one at a
-- time when that is not every hash it gave (an attempt not live, a task
-- not executing, a cancel's no-op, whose task ends cancelled, not done), so
-- that an attempt and its task never part.
--
-- Each hash is looked up by itself, through tx_attempts_hash, and the rows
-- are then updated by id, their block read from the lists by the hash's
-- position. A join of the attempts with the unnested lists was planned,
-- on tables autovacuum had not analyzed yet (a new database's first
-- minutes), as a walk of every live attempt of the chain with the lists
-- unnested again for each: the lane times the round, about 280 000 rows
-- through its plan's nodes for a round of 30 on a lane of 6000 tasks. A
-- lookup per hash, in a LATERAL subquery that its LIMIT keeps from being
-- flattened into a join, is the plan whatever the statistics say. The state
-- tests are CASEs, which no partial index answers: `state IN (…)` let the
-- planner, which takes each state for rare until it has statistics, prefer
-- the partial indexes of live attempts, every one of the chain's, over the
-- hash.
WITH a AS (
    UPDATE ledgerq.tx_attempts t
    SET state = 'confirmed', confirmed_at = @now::timestamptz, updated_at = @now::timestamptz,
        mined_block = (@mined_blocks::bigint[])[array_position(@tx_hashes::text[], t.tx_hash)],
        mined_block_hash = (@mined_block_hashes::text[])[array_position(@tx_hashes::text[], t.tx_hash)],
        mined_at = coalesce(t.mined_at, @now::timestamptz),
        -- -1 and '': the receipt's fee is not known.
        gas_used = coalesce(nullif((@gas_used::bigint[])[array_position(@tx_hashes::text[], t.tx_hash)], -1), t.gas_used),
        effective_gas_price_wei = coalesce(nullif((@effective_gas_prices::text[])[array_position(@tx_hashes::text[], t.tx_hash)], '')::numeric, t.effective_gas_price_wei)
    WHERE t.id = ANY (ARRAY(
        SELECT l.id FROM unnest(@tx_hashes::text[]) AS h(tx_hash)
        CROSS JOIN LATERAL (
            SELECT x.id FROM ledgerq.tx_attempts x
            WHERE x.chain_id = @chain_id AND x.tx_hash = h.tx_hash
              AND CASE WHEN x.state IN ('signed', 'sent', 'mined') THEN true ELSE false END
            LIMIT 1
        ) l
    )) AND CASE WHEN t.state IN ('signed', 'sent', 'mined') THEN true ELSE false END
    RETURNING t.task_id, t.nonce, t.tx_hash, t.kind, (@reverted::boolean[])[array_position(@tx_hashes::text[], t.tx_hash)] AS reverted
)
UPDATE ledgerq.wallet_tasks w
SET status = 3, tx_hash = a.tx_hash, reverted = a.reverted, finished_at = @now::timestamptz, updated_at = @now::timestamptz
FROM a
WHERE w.id = a.task_id AND w.status = 1 AND a.kind IS DISTINCT FROM 'cancel'
RETURNING sqlc.embed(w), a.nonce AS attempt_nonce;

-- name: AttemptMarkMined :one
-- Confirm: the attempt has a receipt in @mined_block, not yet deep enough to
-- be final; a mined attempt seen in another block (re-mined after a reorg)
-- moves to it. Its task stays executing.
UPDATE ledgerq.tx_attempts
SET state = 'mined', mined_block = @mined_block::bigint, mined_block_hash = @mined_block_hash::text,
    mined_at = CASE WHEN state = 'mined' AND mined_block_hash = @mined_block_hash::text THEN mined_at ELSE @now::timestamptz END,
    gas_used = coalesce(sqlc.narg(gas_used)::bigint, gas_used),
    effective_gas_price_wei = coalesce(sqlc.narg(effective_gas_price_wei)::numeric, effective_gas_price_wei),
    updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND tx_hash = @tx_hash AND state IN ('signed', 'sent', 'mined')
RETURNING task_id, nonce, kind;

-- name: AttemptListMined :many
-- Confirm: the wallet's attempts mined but not yet final, in nonce order,
-- through tx_attempts_mined: each pass checks their receipts again.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state = 'mined'
ORDER BY nonce
LIMIT @max;

-- name: AttemptListMinedFrom :many
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

-- name: AttemptCountLive :one
-- Send (the in-flight budget): the wallet's attempts signed or sent
-- and not yet mined, through tx_attempts_signed and tx_attempts_sent; and
-- its mined attempts not yet final, through tx_attempts_mined (confirm
-- follows them; they take no room in the budget). One count per state: the
-- planner matches a partial index to `state = '…'`, not to `state IN (…)`,
-- which it reads through every attempt the wallet ever made.
SELECT ((SELECT count(*) FROM ledgerq.tx_attempts a WHERE a.chain_id = @chain_id AND a.sender = @sender AND a.state = 'signed')
      + (SELECT count(*) FROM ledgerq.tx_attempts a WHERE a.chain_id = @chain_id AND a.sender = @sender AND a.state = 'sent'))::bigint AS in_flight,
       (SELECT count(*) FROM ledgerq.tx_attempts a WHERE a.chain_id = @chain_id AND a.sender = @sender AND a.state = 'mined')::bigint AS mined;

-- name: AttemptListUncertain :many
-- Confirm: sent attempts whose last broadcast was indeterminate (last_error
-- set) and whose nonce the chain has not passed (nonce >= @from_nonce), in nonce
-- order: they are re-broadcast with the same bytes, since a transaction the
-- node never took would hold up every later nonce.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state = 'sent' AND nonce >= @from_nonce
  AND last_error IS NOT NULL
ORDER BY nonce
LIMIT @max;

-- name: AttemptListSentFrom :many
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

-- name: AttemptListHashesOfNonce :many
-- Confirm: every hash ever stored for the nonce on behalf of the same task
-- (or of a no-op, task NULL): a bump's superseded attempts may still be the
-- one mined. Through tx_attempts_nonce.
SELECT a.tx_hash FROM ledgerq.tx_attempts a
WHERE a.chain_id = @chain_id AND a.sender = @sender AND a.nonce = @nonce
  AND a.task_id IS NOT DISTINCT FROM sqlc.narg(task_id)::text
GROUP BY a.tx_hash
ORDER BY max(a.id) DESC;

-- name: AttemptGetLiveOfTask :one
-- Speed-up: the task's live attempt (signed, sent or mined), through
-- tx_attempts_task.
SELECT * FROM ledgerq.tx_attempts
WHERE task_id = @task_id AND state IN ('signed', 'sent', 'mined')
ORDER BY id DESC
LIMIT 1;

-- name: AttemptGetLiveAt :one
-- Stall: the live (signed or sent) attempt holding a nonce, if any.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND nonce = @nonce AND state IN ('signed', 'sent');

-- name: AttemptGetMaxLiveNonce :one
-- Recycled nonces: the highest nonce a live attempt (signed, sent or mined)
-- holds (-1: none).
SELECT coalesce(max(nonce), -1)::bigint AS nonce FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state IN ('signed', 'sent', 'mined');

-- name: AttemptGetMaxHeldNonce :one
-- Reconciliation: the highest nonce any attempt not dropped holds, confirmed
-- ones included (-1: none). The next nonce never moves to or below it: a
-- nonce ledgerq signed for is not signed again with other content while its
-- transaction may still land.
-- The highest first, through tx_attempts_live_nonce backwards: as max(), a
-- new database's plan (no statistics yet) read every live attempt of the
-- wallet.
SELECT coalesce((
    SELECT h.nonce FROM ledgerq.tx_attempts h
    WHERE h.chain_id = @chain_id AND h.sender = @sender AND h.state <> 'dropped'
    ORDER BY h.nonce DESC
    LIMIT 1), -1)::bigint AS nonce;

-- name: AttemptSupersede :one
-- Gas bump: the attempt a bump replaces leaves the live set (its hash may
-- still be mined: confirm looks it up with the nonce's other hashes).
UPDATE ledgerq.tx_attempts
SET state = 'dropped', superseded_by = @superseded_by::text, last_error = 'superseded by gas bump ' || @superseded_by::text,
    updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND tx_hash = @tx_hash AND state = 'sent'
RETURNING task_id;

-- name: AttemptInsertOne :exec
-- Gas bump, no-op, a cancel's no-op or a speed-up: one signed transaction,
-- stored before any broadcast.
INSERT INTO ledgerq.tx_attempts (
    chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit, max_fee_per_gas, max_priority_fee_per_gas,
    created_at, updated_at, kind
) VALUES (
    @chain_id, @tx_hash, sqlc.narg(task_id)::text, @sender, @nonce, @raw, @gas_limit, @max_fee, @max_tip,
    @now::timestamptz, @now::timestamptz, sqlc.narg(kind)::text
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
    gas_used = coalesce(sqlc.narg(gas_used)::bigint, gas_used),
    effective_gas_price_wei = coalesce(sqlc.narg(effective_gas_price_wei)::numeric, effective_gas_price_wei),
    updated_at = @now::timestamptz
WHERE id = (
    SELECT d.id FROM ledgerq.tx_attempts d
    WHERE d.chain_id = @chain_id AND d.tx_hash = @tx_hash AND d.state = 'dropped'
      AND d.task_id IS NOT DISTINCT FROM sqlc.narg(task_id)::text
    ORDER BY d.id DESC
    LIMIT 1
)
RETURNING task_id, nonce, kind;


-- name: AttemptListUnknownNonces :many
-- Restore recovery, once per wallet run: nonces up to @last_nonce (the
-- chain nonce minus one) that the chain used and that no attempt holds
-- (none, or only dropped ones), lowest first: those from the wallet's next
-- nonce on, and the freed ones below it (only dropped attempts) from the one
-- after its highest mined or confirmed attempt (the chain had passed every
-- nonce below that when the database knew: a freed nonce below it was taken
-- then, not since). A database restored from an older backup has them (what
-- it signed after the backup), as has a wallet someone else sent from. No
-- next nonce (nothing ever signed): none. Nonces below the next one with no
-- attempt at all are not listed: retention deleted their attempts, or the
-- next nonce was raised past them. One statement: the next nonce by its
-- key, the floor (the highest mined or confirmed first, backwards through
-- tx_attempts_nonce), and the dropped ones through tx_attempts_nonce from
-- the floor up. The floor and the next nonce bound that scan: the dropped
-- ones are a LATERAL subquery that OFFSET 0 keeps from being flattened,
-- since a new database's plan (no statistics yet) otherwise read every
-- attempt of the wallet below @last_nonce, its history, in every run.
WITH nx AS (
    SELECT w.next_nonce FROM ledgerq.wallet_nonces w
    WHERE w.chain_id = @chain_id AND w.sender = @sender
),
fl AS (
    SELECT coalesce((
        SELECT m.nonce + 1 FROM ledgerq.tx_attempts m
        WHERE m.chain_id = @chain_id AND m.sender = @sender AND m.state IN ('mined', 'confirmed')
        ORDER BY m.nonce DESC
        LIMIT 1), 0)::bigint AS nonce
)
SELECT u.nonce::bigint AS nonce
FROM (
    SELECT g.nonce FROM nx CROSS JOIN LATERAL generate_series(nx.next_nonce, @last_nonce::bigint) AS g(nonce)
    UNION
    SELECT d.nonce FROM nx CROSS JOIN fl CROSS JOIN LATERAL (
        SELECT d.nonce FROM ledgerq.tx_attempts d
        WHERE d.chain_id = @chain_id AND d.sender = @sender AND d.state = 'dropped'
          AND d.nonce >= fl.nonce AND d.nonce < nx.next_nonce AND d.nonce <= @last_nonce::bigint
        OFFSET 0
    ) d
) u
WHERE NOT EXISTS (
    SELECT 1 FROM ledgerq.tx_attempts a
    WHERE a.chain_id = @chain_id AND a.sender = @sender AND a.nonce = u.nonce AND a.state <> 'dropped'
)
ORDER BY u.nonce
LIMIT @max;

-- name: AttemptGetLastMinedBlock :one
-- Restore recovery: the block of the wallet's highest mined or confirmed
-- attempt (-1: none, or none with its block kept): the wallet's
-- transactions at later nonces are in it or after it.
SELECT coalesce((
    SELECT m.mined_block FROM ledgerq.tx_attempts m
    WHERE m.chain_id = @chain_id AND m.sender = @sender AND m.state IN ('mined', 'confirmed')
    ORDER BY m.nonce DESC
    LIMIT 1), -1)::bigint AS block;

-- name: AttemptListInFlight :many
-- The console's wallet page: the wallet's attempts not yet final (signed,
-- sent, mined), by nonce.
SELECT * FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state IN ('signed', 'sent', 'mined')
ORDER BY nonce, id
LIMIT @max;

-- name: AttemptMinedPerMinute :many
-- The console's charts: attempts mined since @since, per minute.
SELECT date_bin('1 minute', mined_at, @since::timestamptz)::timestamptz AS minute, count(*)::bigint AS items
FROM ledgerq.tx_attempts
WHERE mined_at >= @since::timestamptz
GROUP BY 1
ORDER BY 1;

-- name: AttemptListOfWallet :many
-- The wallet's audit (ledgerq wallet audit): every attempt the database
-- keeps for the wallet, with its task's status and done hash (NULL for a
-- no-op or an adopted transaction of no task), in nonce order, through
-- tx_attempts_nonce: what the database says the wallet sent, to be held
-- against the chain's blocks. Read-only.
SELECT a.id, a.task_id, a.nonce, a.tx_hash, a.state, a.superseded_by, a.mined_block, a.mined_block_hash,
       t.status AS task_status, t.tx_hash AS task_tx_hash
FROM ledgerq.tx_attempts a
LEFT JOIN ledgerq.wallet_tasks t ON t.id = a.task_id AND t.chain_id = a.chain_id AND t.sender = a.sender
WHERE a.chain_id = @chain_id AND a.sender = @sender
ORDER BY a.nonce, a.id;

-- name: AttemptGetFirstMinedBlock :one
-- The wallet's audit: the lowest block of the wallet's mined or confirmed
-- attempts (-1: none), and whether one of them has no block kept (confirmed
-- before blocks were kept): where the audit starts reading the chain.
SELECT coalesce(min(mined_block), -1)::bigint AS block,
       coalesce(bool_or(mined_block IS NULL), false)::boolean AS unknown
FROM ledgerq.tx_attempts
WHERE chain_id = @chain_id AND sender = @sender AND state IN ('mined', 'confirmed');
