-- name: BuilderChainLock :one
-- Cut, drop and block application, first statement: the chain's lock,
-- inserting its row the first time. Held to commit, it serializes what
-- changes the chain's line of bundle numbers and the reading of blocks.
INSERT INTO ledgerq.builder_chains AS c (chain_id, created_at, updated_at)
VALUES (@chain_id, @now::timestamptz, @now::timestamptz)
ON CONFLICT (chain_id) DO UPDATE SET updated_at = c.updated_at
RETURNING c.processed_slot;

-- name: BuilderChainGet :one
SELECT processed_slot FROM ledgerq.builder_chains WHERE chain_id = @chain_id;

-- name: BuilderChainSetProcessed :execrows
-- Block application, last statement, under the chain's lock.
UPDATE ledgerq.builder_chains
SET processed_slot = @slot::bigint, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND (processed_slot IS NULL OR processed_slot < @slot::bigint);

-- name: BundleLastLive :one
-- Cut, under the chain's lock: the highest live bundle, whose successor the
-- next cut is (through bundles_live_number).
SELECT number, hash FROM ledgerq.bundles
WHERE chain_id = @chain_id AND state <> 'dropped'
ORDER BY number DESC
LIMIT 1;

-- name: BundleCountQueued :one
-- Cut (the queue limit, anchor offsets) and claim (the anchor offset):
-- queued bundles of the chain, through bundles_queued.
SELECT count(*) FROM ledgerq.bundles WHERE chain_id = @chain_id AND state = 'queued';

-- name: BundleTxLockForCut :many
-- Cut, under the chain's lock: up to @max pending transactions in (sender,
-- nonce) order, never an arbitrary one (which could cut a sender's later
-- nonce before an earlier one), locked until the cut commits, through
-- pool_txs_live_nonce; with their gas limits, which the caller sums against
-- the block's.
SELECT tx_hash, gas FROM ledgerq.pool_txs
WHERE chain_id = @chain_id AND state = 'pending'
ORDER BY sender, nonce
LIMIT @max
FOR UPDATE;

-- name: BundleInsert :one
INSERT INTO ledgerq.bundles (
    chain_id, number, parent, hash, state, version, anchor_slot, anchor_hash, next_submit_at, tx_count,
    created_at, updated_at
) VALUES (
    @chain_id, @number, @parent, @hash, 'queued', 1, sqlc.narg(anchor_slot), sqlc.narg(anchor_hash), @now::timestamptz,
    @tx_count, @now::timestamptz, @now::timestamptz
)
RETURNING *;

-- name: BundleTxInclude :execrows
-- Cut, in the bundle's transaction (a transaction leaves the pool only when
-- its bundle is stored, by construction): the cut pending transactions are
-- included, each at its position in @tx_hashes. Conditional on pending; the
-- caller checks the count.
UPDATE ledgerq.pool_txs t
SET state = 'included', bundle_id = @bundle_id::bigint, bundle_block = @number::bigint, bundle_pos = p.pos - 1,
    updated_at = @now::timestamptz
FROM unnest(@tx_hashes::text[]) WITH ORDINALITY AS p(tx_hash, pos)
WHERE t.chain_id = @chain_id AND t.tx_hash = p.tx_hash AND t.state = 'pending';

-- name: CoreEnsure :exec
-- The chain's core rows 0 to cores - 1.
INSERT INTO ledgerq.cores (chain_id, core, updated_at)
SELECT @chain_id::bigint, g, @now::timestamptz FROM generate_series(0, @last_core::int) AS g
WHERE true
ON CONFLICT (chain_id, core) DO NOTHING;

-- name: CoreRemoveFreeAbove :execrows
-- Free core rows at or above @cores go; a held one stays until its bundle
-- leaves submitted.
DELETE FROM ledgerq.cores
WHERE chain_id = @chain_id AND core >= @cores::int AND bundle_id IS NULL;

-- name: CoreClaimFree :one
-- Claim, first statement (at most @cores bundles submitted at once, across
-- processes): locks the lowest free core below @cores that no other claim
-- holds, through cores_free.
SELECT core FROM ledgerq.cores
WHERE chain_id = @chain_id AND bundle_id IS NULL AND core < @cores::int
ORDER BY core
LIMIT 1
FOR UPDATE SKIP LOCKED;

-- name: BundleClaimNext :one
-- Claim, under a core's lock (lowest block number first; a bundle with a
-- version guaranteed is never claimed again): the lowest queued bundle
-- that is due, skipping one another claim holds, through bundles_queued.
SELECT * FROM ledgerq.bundles
WHERE chain_id = @chain_id AND state = 'queued' AND next_submit_at <= @now::timestamptz
  AND guaranteed_hash IS NULL
ORDER BY number
LIMIT 1
FOR UPDATE SKIP LOCKED;

-- name: BundleTxListRaw :many
-- A bundle's transactions in execution order, through pool_txs_bundle.
SELECT tx_hash, raw FROM ledgerq.pool_txs
WHERE bundle_id = @bundle_id::bigint
ORDER BY bundle_pos;

-- name: BundleVersionInsert :execrows
-- Claim: the package about to be submitted. The same package claimed again
-- (a refused submission retried on the same core and anchor) is the same
-- row, renewed; a hash of another bundle's package inserts nothing.
INSERT INTO ledgerq.bundle_versions AS v (package_hash, bundle_id, version, core, anchor_slot, anchor_hash, submitted_at)
VALUES (@package_hash, @bundle_id, @version, @core, @anchor_slot, @anchor_hash, @now::timestamptz)
ON CONFLICT (package_hash) DO UPDATE SET submitted_at = EXCLUDED.submitted_at, outcome = NULL
WHERE v.bundle_id = EXCLUDED.bundle_id AND v.guaranteed_slot IS NULL;

-- name: BundleMarkSubmitted :one
-- Claim, under the core's and the bundle's locks: conditional on queued with
-- no version guaranteed (so two versions of one bundle are never both
-- guaranteed; checked again where it writes).
UPDATE ledgerq.bundles
SET state = 'submitted', core = @core::int, anchor_slot = @anchor_slot::bigint, anchor_hash = @anchor_hash::text,
    submitted_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = @id AND state = 'queued' AND guaranteed_hash IS NULL
RETURNING *;

-- name: CoreAssign :execrows
UPDATE ledgerq.cores
SET bundle_id = @bundle_id::bigint, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND core = @core AND bundle_id IS NULL;

-- name: CoreLockOf :many
-- Before a write that frees a bundle's core: locks the core row(s) the
-- bundles hold, in core order (lock order: cores before bundles).
SELECT core FROM ledgerq.cores
WHERE chain_id = @chain_id AND bundle_id = ANY(@bundle_ids::bigint[])
ORDER BY core
FOR UPDATE;

-- name: CoreFree :execrows
UPDATE ledgerq.cores
SET bundle_id = NULL, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND bundle_id = ANY(@bundle_ids::bigint[]);

-- name: BundleVersionGet :one
-- The version a package hash names, with its bundle's number and state, for
-- submission results, guarantees and accumulations (primary key).
SELECT v.package_hash, v.bundle_id, v.version, v.core, v.anchor_slot, v.anchor_hash,
       b.number, b.state, b.core AS bundle_core
FROM ledgerq.bundle_versions v
JOIN ledgerq.bundles b ON b.id = v.bundle_id
WHERE v.package_hash = @package_hash AND b.chain_id = @chain_id;

-- name: BundleVersionSetOutcome :execrows
UPDATE ledgerq.bundle_versions SET outcome = @outcome WHERE package_hash = @package_hash;

-- name: BundleSubmitRefused :execrows
-- A refused submission: the bundle goes back to queued, conditional on it
-- being submitted with this package current (the version, core and anchor
-- of @package_hash), with the backoff (or at once and a cleared anchor
-- after G15).
UPDATE ledgerq.bundles b
SET state = 'queued', core = NULL, submit_failures = b.submit_failures + 1,
    next_submit_at = @next_submit_at::timestamptz,
    anchor_slot = CASE WHEN @clear_anchor::boolean THEN NULL ELSE b.anchor_slot END,
    anchor_hash = CASE WHEN @clear_anchor::boolean THEN NULL ELSE b.anchor_hash END,
    updated_at = @now::timestamptz
FROM ledgerq.bundle_versions v
WHERE v.package_hash = @package_hash AND b.id = v.bundle_id
  AND b.state = 'submitted' AND b.version = v.version AND b.core = v.core
  AND b.anchor_slot = v.anchor_slot AND b.anchor_hash = v.anchor_hash;

-- name: BundleGuarantee :execrows
-- A block's E_G names a version of the bundle: the first guarantee wins.
-- From submitted or queued only, and only with no version guaranteed yet
-- (two versions of one bundle are never both guaranteed); conditional on
-- the core the caller locked.
UPDATE ledgerq.bundles
SET state = 'guaranteed', core = NULL, guaranteed_hash = @package_hash::text, guaranteed_version = @version::int,
    guaranteed_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = @id AND state IN ('submitted', 'queued') AND guaranteed_hash IS NULL
  AND core IS NOT DISTINCT FROM sqlc.narg(core)::int;

-- name: BundleVersionSetGuaranteed :execrows
UPDATE ledgerq.bundle_versions SET guaranteed_slot = @slot::bigint WHERE package_hash = @package_hash;

-- name: BundleAccumulate :execrows
UPDATE ledgerq.bundles
SET state = 'accumulated', accumulated_slot = @slot::bigint, accumulated_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = @id AND state = 'guaranteed';

-- name: BundleFinalize :execrows
-- Bundles accumulated depth slots before the block's slot are final, through
-- bundles_accumulated.
UPDATE ledgerq.bundles
SET state = 'finalized', finalized_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE chain_id = @chain_id AND state = 'accumulated' AND accumulated_slot <= @max_slot::bigint;

-- name: BundleRequeue :execrows
-- Guarantee timeout, guarded where it writes against a guarantee of an
-- earlier version: version + 1 and a fresh anchor at the next claim, only while
-- the same version is still submitted and no version of the bundle is
-- guaranteed. A guarantee applied meanwhile makes it change nothing.
UPDATE ledgerq.bundles b
SET state = 'queued', version = b.version + 1, core = NULL, anchor_slot = NULL, anchor_hash = NULL,
    next_submit_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE b.id = @id AND b.chain_id = @chain_id AND b.state = 'submitted' AND b.version = @version
  AND b.guaranteed_hash IS NULL
  AND NOT EXISTS (
      SELECT 1 FROM ledgerq.bundle_versions v WHERE v.bundle_id = @id AND v.guaranteed_slot IS NOT NULL
  );

-- name: BundleListTimedOut :many
-- Guarantee timeout: submitted bundles claimed at or before @before, in
-- number order, with the newest anchor over their versions, through
-- bundles_submitted.
SELECT b.id, b.number, b.version,
       (SELECT max(v.anchor_slot) FROM ledgerq.bundle_versions v WHERE v.bundle_id = b.id)::bigint AS max_anchor_slot
FROM ledgerq.bundles b
WHERE b.chain_id = @chain_id AND b.state = 'submitted' AND b.submitted_at <= @before::timestamptz
ORDER BY b.number
LIMIT @max;

-- name: BundleListToDrop :many
-- Drop, under the chain's lock: the bundle and every live one above it that
-- has not executed (their parent never will), through bundles_unexecuted.
SELECT id FROM ledgerq.bundles
WHERE chain_id = @chain_id AND number >= @number
  AND state IN ('queued', 'submitted', 'guaranteed')
ORDER BY number;

-- name: BundleDrop :execrows
-- Drop (retry limit), under the chain's and the core's locks: conditional
-- on the same version still submitted with no version guaranteed.
UPDATE ledgerq.bundles b
SET state = 'dropped', core = NULL, drop_reason = @reason::text, updated_at = @now::timestamptz
WHERE b.id = @id AND b.state = 'submitted' AND b.version = @version AND b.guaranteed_hash IS NULL
  AND NOT EXISTS (
      SELECT 1 FROM ledgerq.bundle_versions v WHERE v.bundle_id = @id AND v.guaranteed_slot IS NOT NULL
  );

-- name: BundleDropMany :many
-- Drop's cascade: the given live bundles that have not executed.
UPDATE ledgerq.bundles
SET state = 'dropped', core = NULL, drop_reason = @reason::text, updated_at = @now::timestamptz
WHERE id = ANY(@ids::bigint[]) AND state IN ('queued', 'submitted', 'guaranteed')
RETURNING id, number;

-- name: BundleTxReturn :execrows
-- Drop: a dropped bundle's transactions go back to pending (none is lost),
-- through pool_txs_bundle.
UPDATE ledgerq.pool_txs
SET state = 'pending', bundle_id = NULL, bundle_block = NULL, bundle_pos = NULL, updated_at = @now::timestamptz
WHERE bundle_id = ANY(@bundle_ids::bigint[]) AND state = 'included';

-- name: BundleGet :one
-- The live bundle numbered @number, else the newest dropped one.
SELECT * FROM ledgerq.bundles
WHERE chain_id = @chain_id AND number = @number
ORDER BY (state <> 'dropped') DESC, id DESC
LIMIT 1;

-- name: BundleGetByID :one
SELECT * FROM ledgerq.bundles WHERE id = @id;

-- name: BundleList :many
-- Bundles by number after @after, optionally of one state, through
-- bundles_number.
SELECT * FROM ledgerq.bundles
WHERE chain_id = @chain_id AND number > @after
  AND (sqlc.narg(state)::ledgerq.bundle_state IS NULL OR state = sqlc.narg(state)::ledgerq.bundle_state)
ORDER BY number, id
LIMIT @max;

-- name: BundleVersionList :many
SELECT * FROM ledgerq.bundle_versions WHERE bundle_id = @bundle_id ORDER BY version, submitted_at, package_hash;

-- name: BundleHeads :one
-- The chain's newest executed bundle (accumulated or finalized) and newest
-- finalized one, 0 for none: the /rpc's latest and finalized blocks. Each
-- walks bundles_number down from the top, past the few bundles still in
-- flight.
SELECT
  coalesce((SELECT number FROM ledgerq.bundles e
            WHERE e.chain_id = @chain_id AND e.state IN ('accumulated', 'finalized')
            ORDER BY e.number DESC LIMIT 1), 0)::bigint AS executed,
  coalesce((SELECT number FROM ledgerq.bundles f
            WHERE f.chain_id = @chain_id AND f.state = 'finalized'
            ORDER BY f.number DESC LIMIT 1), 0)::bigint AS finalized;

-- name: BundleCountLive :many
-- The console's builder lane panel: bundles not yet executed or final
-- (queued, submitted, guaranteed, accumulated), with the oldest of each.
SELECT state::text AS state, count(*)::bigint AS items, min(created_at)::timestamptz AS oldest
FROM ledgerq.bundles
WHERE state IN ('queued', 'submitted', 'guaranteed', 'accumulated')
GROUP BY state
ORDER BY state;

-- name: BundleEndedPerMinute :many
-- The console's charts: bundles finalized or dropped since @since, per
-- minute and state; for finalized ones the 50th and 99th percentile of the
-- seconds from their transactions' arrival in the pool to finalization
-- (0 for dropped ones, and for a bundle without transactions).
SELECT date_bin('1 minute', coalesce(b.finalized_at, b.updated_at), @since::timestamptz)::timestamptz AS minute,
       b.state::text AS state,
       count(DISTINCT b.id)::bigint AS items,
       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM b.finalized_at - t.received_at)), 0)::float8 AS p50_seconds,
       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM b.finalized_at - t.received_at)), 0)::float8 AS p99_seconds
FROM ledgerq.bundles b LEFT JOIN ledgerq.pool_txs t ON t.bundle_id = b.id
WHERE (b.state = 'finalized' AND b.finalized_at >= @since::timestamptz)
   OR (b.state = 'dropped' AND b.updated_at >= @since::timestamptz)
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: BuilderChainLastApplied :one
-- When a JAM block was last applied to a chain's bundles: the console's sign
-- of life of the builder lane's ledger.
SELECT max(updated_at) AS at FROM ledgerq.builder_chains WHERE processed_slot IS NOT NULL;

-- name: BundleDeleteFinished :execrows
-- Builder lane retention: up to @max finalized bundles (through
-- bundles_finalized) and up to @max dropped ones (through bundles_dropped)
-- that ended before @before, oldest first, with their work packages and,
-- for a finalized one, its transactions (included and executed: the chain's
-- nonce of their senders has passed them, so the pool's intake no longer
-- reads them). A bundle queued, submitted, guaranteed or accumulated is never
-- deleted, and neither is a chain's newest finalized bundle: it is the next
-- cut's parent (BundleLastLive) and /rpc's finalized head (BundleHeads). A
-- dropped bundle that a core or a transaction still points at (none should:
-- the drop frees them) is kept, so that one inconsistent row cannot stop
-- every round after it. SKIP LOCKED: a bundle another transaction holds is
-- left for the next round. The three DELETEs are one statement: the foreign
-- keys are checked at its end, when what points at the bundles is gone.
WITH finalized AS (
    SELECT f.id FROM ledgerq.bundles f
    WHERE f.state = 'finalized' AND f.finalized_at < @before::timestamptz
      AND EXISTS (
          SELECT 1 FROM ledgerq.bundles n
          WHERE n.chain_id = f.chain_id AND n.number > f.number AND n.state = 'finalized'
      )
    ORDER BY f.finalized_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
), dropped AS (
    SELECT d.id FROM ledgerq.bundles d
    WHERE d.state = 'dropped' AND d.updated_at < @before::timestamptz
      AND NOT EXISTS (SELECT 1 FROM ledgerq.cores c WHERE c.bundle_id = d.id)
      AND NOT EXISTS (SELECT 1 FROM ledgerq.pool_txs t WHERE t.bundle_id = d.id AND t.bundle_id IS NOT NULL)
    ORDER BY d.updated_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
), txs AS (
    DELETE FROM ledgerq.pool_txs t
    WHERE t.bundle_id = ANY (ARRAY(SELECT finalized.id FROM finalized))
), versions AS (
    DELETE FROM ledgerq.bundle_versions v
    WHERE v.bundle_id = ANY (ARRAY(SELECT finalized.id FROM finalized UNION ALL SELECT dropped.id FROM dropped))
)
DELETE FROM ledgerq.bundles b
WHERE b.id = ANY (ARRAY(SELECT finalized.id FROM finalized UNION ALL SELECT dropped.id FROM dropped));
