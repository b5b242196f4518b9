-- name: PoolSenderLock :one
-- Intake, first statement: takes the sender's intake
-- lock, inserting its row on its first transaction. Concurrent intakes of one
-- sender, in any process, queue here until the holder commits, so each reads
-- the sender's transactions as the previous one left them. The chain's nonce
-- only moves forward: a lagging read cannot lower it.
INSERT INTO ledgerq.pool_senders AS s (chain_id, sender, chain_nonce, next_nonce, created_at, updated_at)
VALUES (@chain_id, @sender, @chain_nonce, @chain_nonce, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id, sender) DO UPDATE
SET chain_nonce = GREATEST(s.chain_nonce, EXCLUDED.chain_nonce), updated_at = EXCLUDED.updated_at
RETURNING s.chain_nonce;

-- name: PoolSenderSetNext :execrows
-- Intake and sweep, under the sender's lock: the nonce after its pending run.
UPDATE ledgerq.pool_senders
SET next_nonce = @next_nonce, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND sender = @sender;

-- name: PoolSenderLive :many
-- Intake, under the sender's lock: the sender's pending and queued
-- transactions (through pool_txs_waiting_by_sender), and its included ones
-- from the chain's nonce up (those below have been executed; a range of
-- pool_txs_live_nonce). Neither reads the sender's history.
SELECT tx_hash, nonce, state, gas_fee_cap, gas_tip_cap, gas, value_wei
FROM ledgerq.pool_txs w
WHERE w.chain_id = @chain_id AND w.sender = @sender AND w.state IN ('pending', 'queued')
UNION ALL
SELECT tx_hash, nonce, state, gas_fee_cap, gas_tip_cap, gas, value_wei
FROM ledgerq.pool_txs i
WHERE i.chain_id = @chain_id AND i.sender = @sender AND i.state = 'included' AND i.nonce >= @chain_nonce
ORDER BY nonce;

-- name: PoolSenderRun :many
-- eth_getTransactionCount(pending): the sender's pending and included nonces
-- from the chain's nonce up, in order; the caller counts the gap-free run.
SELECT nonce
FROM ledgerq.pool_txs
WHERE chain_id = @chain_id AND sender = @sender
  AND state IN ('pending', 'included') AND nonce >= @from_nonce
ORDER BY nonce;

-- name: PoolTxGet :one
SELECT * FROM ledgerq.pool_txs WHERE chain_id = @chain_id AND tx_hash = @tx_hash;

-- name: PoolTxInsert :execrows
-- Intake: a new transaction, pending or queued. A hash already stored
-- inserts nothing (0 rows): the caller read it under the sender's lock first,
-- so that only happens when the row moved under it.
INSERT INTO ledgerq.pool_txs (
    chain_id, tx_hash, sender, nonce, tx_type, to_address, gas_fee_cap, gas_tip_cap, gas, value_wei, raw,
    state, received_at, expires_at, updated_at
) VALUES (
    @chain_id, @tx_hash, @sender, @nonce, @tx_type, sqlc.narg(to_address), @gas_fee_cap, @gas_tip_cap, @gas, @value_wei, @raw,
    @state, @now::timestamptz, @expires_at::timestamptz, @now::timestamptz
)
ON CONFLICT (chain_id, tx_hash) DO NOTHING;

-- name: PoolTxRevive :execrows
-- Intake: the same bytes sent again after they were replaced or dropped are
-- admitted again by the same rules, as the same row (the hash is its key).
UPDATE ledgerq.pool_txs
SET state = @state, replaced_by = NULL, drop_reason = NULL, chain_reason = NULL,
    received_at = @now::timestamptz, expires_at = @expires_at::timestamptz, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND tx_hash = @tx_hash AND state IN ('replaced', 'dropped');

-- name: PoolTxReplace :execrows
-- Replacement: the old transaction of the nonce retires, pointing at
-- its replacement, before the replacement is stored (one live transaction
-- per nonce). Conditional on the state the caller read: 0 rows means a
-- bundle took it meanwhile.
UPDATE ledgerq.pool_txs
SET state = 'replaced', replaced_by = @replaced_by, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND tx_hash = @tx_hash AND state = @expected;

-- name: PoolTxSetState :execrows
-- Intake, under the sender's lock: promotes queued transactions whose gap
-- closed to pending, or demotes pending ones behind a new gap to queued.
-- Conditional on the state the caller read; it checks the row count.
UPDATE ledgerq.pool_txs
SET state = @to_state, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND tx_hash = ANY(@tx_hashes::text[]) AND state = @from_state;

-- name: PoolTxDrop :execrows
-- Intake, under the sender's lock: waiting transactions whose nonce the
-- chain has passed can never run; they are dropped with the reason.
UPDATE ledgerq.pool_txs
SET state = 'dropped', drop_reason = @drop_reason::text, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND tx_hash = ANY(@tx_hashes::text[]) AND state IN ('pending', 'queued');

-- name: PoolChainEnsure :exec
-- The chain's row and its 16 admission slots, the first time.
WITH chain AS (
    INSERT INTO ledgerq.pool_chains (chain_id, created_at) VALUES (@chain_id, @now::timestamptz)
    ON CONFLICT (chain_id) DO NOTHING
)
INSERT INTO ledgerq.pool_admission_slots (chain_id, slot)
SELECT @chain_id, g FROM generate_series(0, 15) AS g
ON CONFLICT (chain_id, slot) DO NOTHING;

-- name: PoolSlotTake :one
-- Intake, last steps when it grows the pool by at most one pending and one
-- queued transaction: takes a free admission slot, from @start on (so that
-- concurrent intakes spread over the 16), records its growth in it and
-- holds it to commit. No row: every slot is held (or none exists yet).
UPDATE ledgerq.pool_admission_slots s
SET pending_growth = s.pending_growth + @pending::bigint, queued_growth = s.queued_growth + @queued::bigint
WHERE s.chain_id = @chain_id AND s.slot = (
    SELECT f.slot FROM ledgerq.pool_admission_slots f
    WHERE f.chain_id = @chain_id
    ORDER BY (f.slot + 16 - @start::int) % 16
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING s.slot;

-- name: PoolSlotTakeMany :many
-- Grouped intake (the intakes of several senders in one transaction), last
-- steps: takes up to @n free admission slots, from @start on, holds them to
-- commit and records one pending transaction in the k-th of them (k from 1)
-- while k <= @pending, one queued while k <= @queued. No slot holds more
-- than one of each, as the bound's allowance for the slots an intake cannot
-- see assumes. Fewer rows than @n: the other slots are held.
WITH free AS (
    SELECT f.slot FROM ledgerq.pool_admission_slots f
    WHERE f.chain_id = @chain_id
    ORDER BY (f.slot + 16 - @start::int) % 16
    LIMIT @n::int
    FOR UPDATE SKIP LOCKED
),
ranked AS (
    SELECT free.slot, row_number() OVER (ORDER BY (free.slot + 16 - @start::int) % 16) AS k FROM free
)
UPDATE ledgerq.pool_admission_slots s
SET pending_growth = s.pending_growth + CASE WHEN r.k <= @pending::bigint THEN 1 ELSE 0 END,
    queued_growth = s.queued_growth + CASE WHEN r.k <= @queued::bigint THEN 1 ELSE 0 END
FROM ranked r
WHERE s.chain_id = @chain_id AND s.slot = r.slot
RETURNING s.slot;

-- name: PoolSlotWait :one
-- Intake, when every slot was held: waits for slot @slot.
UPDATE ledgerq.pool_admission_slots
SET pending_growth = pending_growth + @pending::bigint, queued_growth = queued_growth + @queued::bigint
WHERE chain_id = @chain_id AND slot = @slot
RETURNING slot;

-- name: PoolAdmissionBound :one
-- Intake, after taking its slot (a statement of its own, so its snapshot
-- is taken under the slot): the bound on the chain's pending and queued
-- transactions, its own growth included; NULL before the first count.
SELECT c.pending_base, c.queued_base, g.pending::bigint AS pending_growth, g.queued::bigint AS queued_growth
FROM ledgerq.pool_chains c,
     (SELECT coalesce(sum(s.pending_growth), 0)::bigint AS pending, coalesce(sum(s.queued_growth), 0)::bigint AS queued
      FROM ledgerq.pool_admission_slots s WHERE s.chain_id = @chain_id) g
WHERE c.chain_id = @chain_id;

-- name: PoolSlotLockAll :many
-- Intake, when the bound cannot admit: every slot of the chain, in order,
-- held to commit, so no other intake that grows the pool is in flight.
SELECT slot FROM ledgerq.pool_admission_slots
WHERE chain_id = @chain_id
ORDER BY slot
FOR UPDATE;

-- name: PoolChainLock :one
-- Intake, after every slot: the chain's row, held to commit, so that no cut,
-- drop or sweep changes the base between the exact count and the rebase.
SELECT chain_id FROM ledgerq.pool_chains WHERE chain_id = @chain_id FOR UPDATE;

-- name: PoolCountWaiting :one
-- Intake, under every slot and the chain's row: the pool's pending and
-- queued transactions (its own writes included), through pool_txs_waiting.
SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
       count(*) FILTER (WHERE state = 'queued') AS queued
FROM ledgerq.pool_txs
WHERE chain_id = @chain_id AND state IN ('pending', 'queued');

-- name: PoolChainRebase :exec
-- Intake, under every slot and the chain's row: the exact count becomes the
-- base and the slots' growth starts again from 0.
WITH slots AS (
    UPDATE ledgerq.pool_admission_slots s SET pending_growth = 0, queued_growth = 0
    WHERE s.chain_id = @chain_id
)
UPDATE ledgerq.pool_chains c SET pending_base = @pending::bigint, queued_base = @queued::bigint
WHERE c.chain_id = @chain_id;

-- name: PoolChainAdjust :exec
-- A cut (negative), a bundle drop or a sweep that sends pending transactions
-- back to queued (positive), as its last statement: moves the base by what
-- it changed, committed with the change, so the bound stays at or above the
-- pool. Waits for an intake's exact count and rebase, and applies on top.
UPDATE ledgerq.pool_chains
SET pending_base = pending_base + @pending::bigint, queued_base = queued_base + @queued::bigint
WHERE chain_id = @chain_id;

-- name: PoolSenderLockExpired :many
-- TTL sweep: locks, in sender order,
-- up to @max senders that have a pending or queued transaction expired at
-- @now. A sender whose intake holds its lock is skipped (SKIP LOCKED) and
-- swept by a later round.
SELECT s.sender FROM ledgerq.pool_senders s
WHERE s.chain_id = @chain_id
  AND s.sender IN (
      SELECT t.sender FROM ledgerq.pool_txs t
      WHERE t.chain_id = @chain_id AND t.state IN ('pending', 'queued') AND t.expires_at <= @now::timestamptz
  )
ORDER BY s.sender
LIMIT @max
FOR UPDATE SKIP LOCKED;

-- name: PoolTxExpire :many
-- TTL sweep, under the locks of @senders: their pending and queued
-- transactions expired at @now become dropped (expired). Returns each with
-- the state it had, so the caller can demote pending successors of a gap.
WITH expired AS (
    SELECT e.tx_hash, e.state AS was
    FROM ledgerq.pool_txs e
    WHERE e.chain_id = @chain_id AND e.sender = ANY(@senders::text[])
      AND e.state IN ('pending', 'queued') AND e.expires_at <= @now::timestamptz
    FOR UPDATE
)
UPDATE ledgerq.pool_txs t
SET state = 'dropped', drop_reason = 'expired', updated_at = @now::timestamptz
FROM expired
WHERE t.chain_id = @chain_id AND t.tx_hash = expired.tx_hash
RETURNING t.sender, t.nonce, expired.was;

-- name: PoolTxDemoteAbove :execrows
-- TTL sweep, under the sender's lock: a pending transaction dropped at
-- nonce @gap leaves a gap; the sender's pending ones above it wait again
-- (queued) until it is filled.
UPDATE ledgerq.pool_txs
SET state = 'queued', updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND sender = @sender AND state = 'pending' AND nonce > @gap;

-- name: PoolSenderLowerNext :execrows
-- TTL sweep, under the sender's lock: the pending run now ends at @gap.
UPDATE ledgerq.pool_senders
SET next_nonce = LEAST(next_nonce, @gap), updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND sender = @sender;

-- name: PoolTxCountWaiting :many
-- The console's builder lane panel: pending and queued transactions, with
-- the oldest of each, through pool_txs_waiting.
SELECT state::text AS state, count(*)::bigint AS items, min(received_at)::timestamptz AS oldest
FROM ledgerq.pool_txs
WHERE state IN ('pending', 'queued')
GROUP BY state
ORDER BY state;

-- name: PoolTxListBySender :many
-- The console's sender page: a sender's transactions in every state, by
-- nonce then hash; keyset pagination after (@after_nonce, @after_hash).
SELECT * FROM ledgerq.pool_txs
WHERE sender = @sender AND (nonce, tx_hash) > (@after_nonce::bigint, @after_hash::text)
ORDER BY nonce, tx_hash
LIMIT @max;

-- name: PoolTxUnbundleSkipped :one
-- Block application, under the sender's lock: a transaction of bundle
-- @bundle_id that the chain left out of the bundle's EVM block leaves the
-- bundle: queued again (a nonce gap: it may run once the nonces below it
-- have), pending (its gap is already filled) or dropped (skipped, with the
-- chain's reason). Conditional on it still being included in that bundle:
-- no row when it is not (a block applied twice, another bundle's).
UPDATE ledgerq.pool_txs
SET state = @state, drop_reason = sqlc.narg(drop_reason), chain_reason = sqlc.narg(chain_reason),
    bundle_id = NULL, bundle_pos = NULL, bundle_block = NULL, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND sender = @sender AND tx_hash = @tx_hash AND bundle_id = @bundle_id AND state = 'included'
RETURNING nonce;

-- name: PoolTxDeleteFinished :execrows
-- Builder lane retention: up to @max transactions replaced or dropped before
-- @before (their last change), oldest first, through pool_txs_ended. Neither
-- holds a nonce or will be bundled; the same bytes sent again after the
-- delete are a new row, admitted by the same rules (an intake that read the
-- row before the delete finds it gone and runs again). A pending, queued or
-- included transaction is never deleted here (an included one goes with its
-- finalized bundle, BundleDeleteFinished). SKIP LOCKED: a row an intake
-- holds is left for the next round.
WITH old AS (
    SELECT o.chain_id, o.tx_hash FROM ledgerq.pool_txs o
    WHERE o.state IN ('replaced', 'dropped') AND o.updated_at < @before::timestamptz
    ORDER BY o.updated_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
DELETE FROM ledgerq.pool_txs t
USING old
WHERE t.chain_id = old.chain_id AND t.tx_hash = old.tx_hash;
