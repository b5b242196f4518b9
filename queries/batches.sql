-- name: BatchInsert :one
-- Stores a new batch. ON CONFLICT makes a re-post of a known id a no-op; the
-- caller compares the stored row to decide between "same batch" and conflict.
INSERT INTO ledgerq.batches (id, service_id, payload, created_at, received_at, updated_at)
VALUES (@id, @service_id, @payload, @created_at, @now::timestamptz, @now::timestamptz)
ON CONFLICT (id) DO NOTHING
RETURNING *;

-- name: BatchGet :one
SELECT * FROM ledgerq.batches WHERE id = @id;

-- name: BatchList :many
-- Keyset pagination by id; the filters are optional.
SELECT * FROM ledgerq.batches
WHERE (sqlc.narg(service_id)::text IS NULL OR service_id = sqlc.narg(service_id)::text)
  AND (sqlc.narg(status)::ledgerq.batch_status IS NULL OR status = sqlc.narg(status)::ledgerq.batch_status)
  AND id > @after
ORDER BY id
LIMIT @max;

-- name: BatchQueue :many
-- Queuer round: seed 001 (Grid) one-round serial algorithm, steps 1-6, in one
-- statement, marking the "queue now" set with queued_at.
--   step 1: terminal batches are never read (every branch reads a partial index
--           that leaves them out);
--   step 3: every unknown batch;
--   step 4: every delayed batch whose last attempt is outside the delay window
--           (base x 2^(attempts-1), capped);
--   step 5: services with a batch pending, unknown or delayed are skipped, and so
--           are services whose batch the submitter holds (submitted, no status):
--           the seed would pick that held batch again, which breaks seriality;
--   step 6: for each other service, its oldest never-sent batch, ties broken by id.
-- A batch already queued is left as it is, and the outer WHERE re-checks each
-- row under its lock, so concurrent queuers cannot queue a batch the submitter
-- has claimed in the meantime. The services CTE is a loose index scan: one
-- index probe per service with never-sent batches, not one per batch.
WITH RECURSIVE services AS (
    (SELECT n.service_id FROM ledgerq.batches n
     WHERE n.status IS NULL AND NOT n.submitted
     ORDER BY n.service_id LIMIT 1)
    UNION ALL
    SELECT (SELECT n.service_id FROM ledgerq.batches n
            WHERE n.status IS NULL AND NOT n.submitted AND n.service_id > s.service_id
            ORDER BY n.service_id LIMIT 1)
    FROM services s
    WHERE s.service_id IS NOT NULL
),
oldest AS (
    SELECT o.id, o.queued_at
    FROM services s,
    LATERAL (
        SELECT n.id, n.queued_at FROM ledgerq.batches n
        WHERE n.service_id = s.service_id AND n.status IS NULL AND NOT n.submitted
        ORDER BY n.created_at, n.id
        LIMIT 1
    ) o
    WHERE s.service_id IS NOT NULL
      AND NOT EXISTS (
        SELECT 1 FROM ledgerq.batches a
        WHERE a.service_id = s.service_id
          AND (a.status IN ('pending', 'unknown', 'delayed') OR (a.submitted AND a.status IS NULL))
      )
),
candidates AS (
    SELECT r.id FROM ledgerq.batches r
    WHERE r.status IN ('unknown', 'delayed') AND NOT r.submitted AND r.queued_at IS NULL
      AND (r.status = 'unknown'
           OR r.last_submitted_at <= sqlc.arg(now)::timestamptz - make_interval(0, 0, 0, 0, 0, 0,
                least(sqlc.arg(delay_window_secs)::float8 * power(2, least(greatest(r.attempts - 1, 0), 40)),
                      sqlc.arg(delay_cap_secs)::float8)))
    UNION
    SELECT o.id FROM oldest o WHERE o.queued_at IS NULL
)
UPDATE ledgerq.batches b
SET queued_at = @now::timestamptz, updated_at = @now::timestamptz
FROM candidates c
WHERE b.id = c.id
  AND NOT b.submitted AND b.queued_at IS NULL
  AND (b.status IS NULL OR b.status IN ('unknown', 'delayed'))
RETURNING b.id, b.service_id, b.status;

-- name: BatchClaimQueued :many
-- Submitter claim: takes up to @max queued batches, oldest first, that no other
-- submitter holds (SKIP LOCKED), and marks them held with a lease (seed 001:
-- submitted = true guards against re-queuing while the submitter has them).
-- attempts is incremented here and is the fencing token of the outcome update.
WITH claimable AS (
    SELECT q.id FROM ledgerq.batches q
    WHERE q.queued_at IS NOT NULL
    ORDER BY q.queued_at, q.created_at, q.id
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
UPDATE ledgerq.batches b
SET submitted = true,
    queued_at = NULL,
    claim_expires_at = @lease_expires_at::timestamptz,
    attempts = b.attempts + 1,
    last_submitted_at = @now::timestamptz,
    updated_at = @now::timestamptz
FROM claimable
WHERE b.id = claimable.id
RETURNING b.id, b.service_id, b.payload, b.attempts;

-- name: BatchMarkPending :execrows
-- Submitter outcome: the ledger accepted the batch. Applies only while this
-- claim (same attempt) still holds the batch.
UPDATE ledgerq.batches
SET status = 'pending', claim_expires_at = NULL, next_check_at = @next_check_at::timestamptz,
    last_error = NULL, updated_at = @now::timestamptz
WHERE id = @id AND attempts = @attempts AND claim_expires_at IS NOT NULL;

-- name: BatchMarkDelayed :execrows
-- Submitter outcome: a transient failure. The batch goes back to the queuer,
-- which retries it after the delay window.
UPDATE ledgerq.batches
SET status = 'delayed', submitted = false, claim_expires_at = NULL,
    last_error = sqlc.arg(last_error)::text, updated_at = @now::timestamptz
WHERE id = @id AND attempts = @attempts AND claim_expires_at IS NOT NULL;

-- name: BatchMarkRejected :execrows
-- Submitter outcome: the ledger refused the batch itself; it will never be valid.
UPDATE ledgerq.batches
SET status = 'invalid', claim_expires_at = NULL, last_error = sqlc.arg(last_error)::text,
    finished_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = @id AND attempts = @attempts AND claim_expires_at IS NOT NULL;

-- name: BatchClaimPendingForCheck :many
-- Monitor claim: pending batches due for a status check. Moving next_check_at
-- forward in the claiming statement keeps other monitors off them.
WITH due AS (
    SELECT p.id FROM ledgerq.batches p
    WHERE p.status = 'pending' AND p.next_check_at <= @now::timestamptz
    ORDER BY p.next_check_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
UPDATE ledgerq.batches b
SET next_check_at = @next_check_at::timestamptz, updated_at = @now::timestamptz
FROM due
WHERE b.id = due.id
RETURNING b.id, b.service_id, b.attempts;

-- name: BatchClaimExpiredHeld :many
-- Monitor claim: batches a submitter claimed but never answered for (it died
-- mid-send). The monitor takes over the lease while it asks the ledger.
WITH expired AS (
    SELECT h.id FROM ledgerq.batches h
    WHERE h.claim_expires_at IS NOT NULL AND h.claim_expires_at <= @now::timestamptz
    ORDER BY h.claim_expires_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
UPDATE ledgerq.batches b
SET claim_expires_at = @lease_expires_at::timestamptz, updated_at = @now::timestamptz
FROM expired
WHERE b.id = expired.id
RETURNING b.id, b.service_id, b.attempts;

-- name: BatchRecordStatus :execrows
-- Monitor outcome for a pending batch or an expired held one, conditional on
-- the attempt it checked:
--   PENDING   -> pending (a held batch the ledger has after all);
--   COMMITTED -> committed, INVALID -> invalid (terminal);
--   UNKNOWN   -> unknown with submitted = false (seed 001 (Grid) note), so the queuer
--               sends it again.
UPDATE ledgerq.batches
SET status = @status::ledgerq.batch_status,
    submitted = (@status::ledgerq.batch_status <> 'unknown'),
    claim_expires_at = NULL,
    next_check_at = CASE WHEN @status::ledgerq.batch_status = 'pending' THEN @next_check_at::timestamptz END,
    last_error = CASE WHEN @status::ledgerq.batch_status = 'pending' THEN NULL ELSE sqlc.narg(last_error)::text END,
    finished_at = CASE WHEN @status::ledgerq.batch_status IN ('committed', 'valid', 'invalid') THEN @now::timestamptz END,
    updated_at = @now::timestamptz
WHERE id = @id AND attempts = @attempts
  AND (status = 'pending' OR claim_expires_at IS NOT NULL);

-- name: BatchCountByState :many
-- Depth of the batch lane per state, for metrics and the bench.
SELECT coalesce(status::text, CASE WHEN submitted THEN 'held' WHEN queued_at IS NOT NULL THEN 'queued' ELSE 'new' END)::text AS state,
       count(*) AS batches
FROM ledgerq.batches
GROUP BY 1
ORDER BY 1;

-- name: BatchDepthByState :many
-- Depth of the batch lane for metrics: per non-terminal state, how many
-- batches and when the oldest of them was received. It reads only the
-- batches_unfinished partial index and the rows it names, so its cost grows with
-- the work waiting, not with the terminal rows kept.
SELECT (CASE WHEN b.status IS NOT NULL THEN b.status::text
             WHEN b.submitted THEN 'held'
             WHEN b.queued_at IS NOT NULL THEN 'queued'
             ELSE 'new' END)::text AS state,
       count(*) AS batches,
       min(b.received_at)::timestamptz AS oldest_received_at
FROM ledgerq.batches b
WHERE b.finished_at IS NULL
GROUP BY 1
ORDER BY 1;

-- name: BatchRunSummary :one
-- The figures of one `ledgerq bench batches` run, read from its rows (its
-- service ids start with @prefix). A read-only report that no loop or API path
-- runs; percentile_disc picks real observed latencies.
SELECT count(*) AS inserted,
       count(*) FILTER (WHERE b.status = 'committed') AS committed,
       count(*) FILTER (WHERE b.status = 'invalid') AS invalid,
       count(*) FILTER (WHERE b.status = 'valid') AS valid,
       count(*) FILTER (WHERE b.finished_at IS NULL) AS unfinished,
       coalesce(sum(b.attempts), 0)::bigint AS submissions,
       coalesce((extract(epoch FROM max(b.finished_at) - min(b.received_at)) * 1e6)::bigint, 0)::bigint AS end_to_end_us,
       coalesce((extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY b.finished_at - b.received_at)
            FILTER (WHERE b.status = 'committed')) * 1e6)::bigint, 0)::bigint AS p50_us,
       coalesce((extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY b.finished_at - b.received_at)
            FILTER (WHERE b.status = 'committed')) * 1e6)::bigint, 0)::bigint AS p99_us,
       coalesce((extract(epoch FROM max(b.finished_at - b.received_at) FILTER (WHERE b.status = 'committed')) * 1e6)::bigint, 0)::bigint AS max_us
FROM ledgerq.batches b
WHERE starts_with(b.service_id, @prefix::text);
