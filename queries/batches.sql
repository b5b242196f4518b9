-- name: BatchInsertMany :many
-- Intake: stores every batch of one request, its state row in batches and
-- what the client handed in (id, service, payload) in batch_payloads, in one
-- statement. Both rows carry the seq drawn here. The id is unique in
-- batch_payloads, so that insert comes first: ON CONFLICT makes a re-post of
-- a known id a no-op (no seq, no state row); the caller compares the stored
-- batches (BatchGetMany) to decide between "same batch" and conflict.
-- Rows are inserted in id order, whatever the order of the request: an
-- insert waits for another transaction's uncommitted row with the same id
-- (a client's retry still in flight elsewhere), and two requests holding
-- ids the other wants, in different orders, would deadlock. (The foreign key
-- from batch_payloads to batches is checked at the end of the statement, when
-- both rows exist.)
WITH u AS (
    SELECT unnest(@ids::text[]) AS id, unnest(@service_ids::text[]) AS service_id,
           unnest(@payloads::bytea[]) AS payload, unnest(@created_ats::timestamptz[]) AS created_at
),
pay AS (
    INSERT INTO ledgerq.batch_payloads (seq, id, service_id, payload)
    SELECT nextval('ledgerq.batch_seq'), u.id, u.service_id, u.payload FROM u
    ORDER BY u.id
    ON CONFLICT (id) DO NOTHING
    RETURNING seq, id
),
ins AS (
    INSERT INTO ledgerq.batches (seq, service_id, created_at, received_at, updated_at)
    SELECT pay.seq, u.service_id, u.created_at, @now::timestamptz, @now::timestamptz
    FROM pay JOIN u ON u.id = pay.id
    RETURNING *
)
SELECT pay.id, ins.* FROM ins JOIN pay ON pay.seq = ins.seq;

-- name: BatchGetMany :many
-- The stored batches among @ids, with their payloads (intake compares them):
-- through batch_payloads' unique id, then the state row by seq.
SELECT p.id, sqlc.embed(b), p.payload
FROM ledgerq.batch_payloads p JOIN ledgerq.batches b ON b.seq = p.seq
WHERE p.id = ANY(@ids::text[]);

-- name: BatchGet :one
SELECT p.id, sqlc.embed(b)
FROM ledgerq.batch_payloads p JOIN ledgerq.batches b ON b.seq = p.seq
WHERE p.id = @id;

-- name: BatchList :many
-- Keyset pagination by id, through batch_payloads' unique id; the status
-- filter is optional. The store runs it with a generic plan
-- (GenericPlansForTx first): planned for a given status, the planner took
-- that status's share from the table's statistics, which lag behind a burst
-- (a backlog committed within seconds reads as a rare status), and read
-- every batch of the status, probed its payload and sorted them all, for one
-- page. The filter is a CASE, whose share a generic plan does not take from
-- those statistics either: a page walks the ids in order, probes each state
-- row by seq, and stops when it is full.
SELECT p.id, sqlc.embed(b)
FROM ledgerq.batch_payloads p JOIN ledgerq.batches b ON b.seq = p.seq
WHERE CASE WHEN sqlc.narg(status)::ledgerq.batch_status IS NULL THEN true
           ELSE b.status = sqlc.narg(status)::ledgerq.batch_status END
  AND p.id > @after
ORDER BY p.id
LIMIT @max;

-- name: BatchListByService :many
-- One service's batches, keyset pagination by id, through the write-once
-- batch_payloads (service_id, id) index; the status filter is optional.
SELECT p.id, sqlc.embed(b)
FROM ledgerq.batch_payloads p JOIN ledgerq.batches b ON b.seq = p.seq
WHERE p.service_id = @service_id
  AND (sqlc.narg(status)::ledgerq.batch_status IS NULL OR b.status = sqlc.narg(status)::ledgerq.batch_status)
  AND p.id > @after
ORDER BY p.id
LIMIT @max;

-- name: BatchServiceLock :exec
-- Serialises admission per service: one transaction-scoped advisory lock per
-- service, taken in key order so that two transactions never wait on each
-- other in a cycle. Every statement that may admit a batch (BatchAdmit) runs
-- after this one in the same transaction, so it sees the other admissions of
-- the service committed (READ COMMITTED: a new snapshot per statement).
SELECT pg_advisory_xact_lock(1818585457, k)::text
FROM (SELECT DISTINCT hashtext(s) AS k FROM unnest(@service_ids::text[]) AS s) keys
ORDER BY k;

-- name: BatchServiceLockForIntake :many
-- Intake's admission locks, the same advisory locks as BatchServiceLock,
-- taken in key order, with the mode chosen per service by a probe of
-- batches_active_by_service in this statement's snapshot:
--   busy -> shared. Intake admits nothing into a busy service, so intakes
--           of one busy service do not wait for each other; the transaction
--           that frees the service takes the lock exclusively, so it waits
--           for them and its admission sees their batches.
--   idle -> exclusive, under which the intake admits (BatchAdmit).
-- A service that was freed between this probe and the lock is found by
-- BatchServiceFilterIdle after the lock, and admitted after the commit.
-- Services whose keys collide share a lock, exclusive if any of them is idle.
SELECT keys.service_ids::text[] AS service_ids, keys.busy::bool AS busy,
       (CASE WHEN keys.busy THEN pg_advisory_xact_lock_shared(1818585457, keys.k)
             ELSE pg_advisory_xact_lock(1818585457, keys.k) END)::text AS locked
FROM (
    SELECT hashtext(d.s) AS k, array_agg(d.s ORDER BY d.s) AS service_ids,
           bool_and((SELECT 1 FROM ledgerq.batches a
                     WHERE a.service_id = d.s
                       AND (a.status IN ('pending', 'unknown', 'delayed')
                            OR (a.status IS NULL AND (a.submitted OR a.queued_at IS NOT NULL)))
                     LIMIT 1) IS NOT NULL) AS busy
    FROM (SELECT DISTINCT s FROM unnest(@service_ids::text[]) AS s) d
    GROUP BY 1
) keys
ORDER BY keys.k;

-- name: BatchServiceFilterIdle :many
-- The services among @service_ids with no active batch, in this statement's
-- snapshot: one probe of batches_active_by_service each.
SELECT d.s::text AS service_id
FROM (SELECT DISTINCT s FROM unnest(@service_ids::text[]) AS s) d
WHERE (SELECT 1 FROM ledgerq.batches a
       WHERE a.service_id = d.s
         AND (a.status IN ('pending', 'unknown', 'delayed')
              OR (a.status IS NULL AND (a.submitted OR a.queued_at IS NOT NULL)))
       LIMIT 1) IS NULL
ORDER BY 1;

-- name: BatchAdmit :many
-- Admission, for the given services only: a service
-- with no active batch (queued, held, pending, unknown or delayed) gets its
-- oldest never-sent batch queued, created_at order, ties broken by id; or,
-- with @claim, claimed at once for a submitter of the caller's process, as
-- BatchClaimQueued claims (held, with a lease, attempts + 1), and returned
-- with its id and payload: a monitor that frees a service hands the next
-- batch to its submitter without a write and a claim between. Runs
-- in the transaction that freed the services, after BatchServiceLock, so its
-- cost is the services it is given, never all of them: each service is one
-- probe of batches_active_by_service and one of batches_new_by_service
-- (LATERAL and scalar subqueries with LIMIT, so the planner cannot turn them
-- into a scan of every active or new batch), which reads the two oldest
-- never-sent batches. Only when those two were created at the same time are
-- the batches created then read again, whose ids (in batch_payloads, one
-- probe each: the hot row has no id) break the tie. The rows are reached
-- through the primary key (the guards are a CASE, which no partial index can
-- answer).
-- Like every statement of the lane that waits for row locks, it locks its
-- rows first in primary-key order (the locked CTE): an UPDATE alone locks
-- them in whatever order its plan visits them (heap order for a bitmap scan),
-- and two statements locking shared rows in different orders deadlock.
WITH next AS (
    SELECT CASE WHEN f.second_at IS DISTINCT FROM f.first_at THEN f.first_seq
                ELSE (SELECT n.seq FROM ledgerq.batches n
                      WHERE n.service_id = svc.service_id AND n.status IS NULL AND NOT n.submitted
                        AND n.created_at = f.first_at
                      ORDER BY (SELECT p.id FROM ledgerq.batch_payloads p WHERE p.seq = n.seq)
                      LIMIT 1) END AS seq
    FROM (SELECT DISTINCT s AS service_id FROM unnest(@service_ids::text[]) AS s) svc,
    LATERAL (
        SELECT (array_agg(o.seq ORDER BY o.created_at, o.seq))[1] AS first_seq,
               (array_agg(o.created_at ORDER BY o.created_at, o.seq))[1] AS first_at,
               (array_agg(o.created_at ORDER BY o.created_at, o.seq))[2] AS second_at,
               (SELECT 1 FROM ledgerq.batches a
                WHERE a.service_id = svc.service_id
                  AND (a.status IN ('pending', 'unknown', 'delayed')
                       OR (a.status IS NULL AND (a.submitted OR a.queued_at IS NOT NULL)))
                LIMIT 1) AS busy
        FROM (SELECT o.seq, o.created_at FROM ledgerq.batches o
              WHERE o.service_id = svc.service_id AND o.status IS NULL AND NOT o.submitted
              ORDER BY o.created_at, o.seq
              LIMIT 2) o
    ) f
    -- A service with no never-sent batch has no first_seq.
    WHERE f.busy IS NULL AND f.first_seq IS NOT NULL
),
locked AS (
    SELECT l.seq FROM ledgerq.batches l
    WHERE l.seq = ANY (ARRAY(SELECT next.seq FROM next))
      AND CASE WHEN l.status IS NULL THEN NOT l.submitted AND l.queued_at IS NULL ELSE false END
    ORDER BY l.seq
    FOR NO KEY UPDATE
),
admitted AS (
    UPDATE ledgerq.batches b
    SET queued_at = CASE WHEN @claim::bool THEN NULL ELSE @now::timestamptz END,
        submitted = @claim::bool,
        claim_expires_at = CASE WHEN @claim::bool THEN @lease_expires_at::timestamptz END,
        attempts = b.attempts + CASE WHEN @claim::bool THEN 1 ELSE 0 END,
        last_submitted_at = CASE WHEN @claim::bool THEN @now::timestamptz ELSE b.last_submitted_at END,
        updated_at = @now::timestamptz
    WHERE b.seq = ANY (ARRAY(SELECT locked.seq FROM locked))
    RETURNING b.seq, b.service_id, b.attempts
)
-- The id and payload only for a claim: without it the probe is not run.
SELECT a.seq, a.service_id, a.attempts,
    coalesce(p.id, '')::text AS id, coalesce(p.payload, ''::bytea)::bytea AS payload,
    coalesce(p.unverified, false)::bool AS unverified
FROM admitted a
LEFT JOIN LATERAL (SELECT x.id, x.payload, x.unverified FROM ledgerq.batch_payloads x
                   WHERE @claim::bool AND x.seq = a.seq LIMIT 1) p ON true;

-- name: BatchServiceListIdle :many
-- Queuer reconciliation (the recovery path, not the hot path): services that
-- have a never-sent batch and no active one, which no transaction admitted
-- (rows written by an operator's SQL, or by an older ledgerq). A loose index
-- scan: one probe per service with never-sent batches. The queuer runs it
-- rarely and hands the result to BatchServiceLock and BatchAdmit.
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
)
SELECT s.service_id::text AS service_id FROM services s
WHERE s.service_id IS NOT NULL
  -- A scalar probe per service (as in BatchAdmit): NOT EXISTS would let the
  -- planner hash every active batch.
  AND (SELECT 1 FROM ledgerq.batches a
       WHERE a.service_id = s.service_id
         AND (a.status IN ('pending', 'unknown', 'delayed')
              OR (a.status IS NULL AND (a.submitted OR a.queued_at IS NOT NULL)))
       LIMIT 1) IS NULL
LIMIT @max;

-- name: BatchQueueRetries :many
-- Queuer round, the retries: every unknown batch, and every delayed
-- batch whose last attempt is outside the delay window (window x
-- 2^(attempts-1), capped), is queued again. Reads only the batches_retry index.
-- The rows are locked first, in primary-key order (the index walks them in
-- last_submitted_at order, which other statements do not share), and
-- locking re-checks each row's guard on its latest version, so a concurrent
-- round cannot queue a batch the submitter claimed in the meantime.
WITH due AS (
    SELECT r.seq FROM ledgerq.batches r
    WHERE r.status IN ('unknown', 'delayed') AND NOT r.submitted AND r.queued_at IS NULL
      AND (r.status = 'unknown'
           OR r.last_submitted_at <= sqlc.arg(now)::timestamptz - make_interval(0, 0, 0, 0, 0, 0,
                least(sqlc.arg(delay_window_secs)::float8 * power(2, least(greatest(r.attempts - 1, 0), 40)),
                      sqlc.arg(delay_cap_secs)::float8)))
),
locked AS (
    SELECT l.seq FROM ledgerq.batches l
    WHERE l.seq = ANY (ARRAY(SELECT due.seq FROM due))
      AND NOT l.submitted AND l.queued_at IS NULL AND l.status IN ('unknown', 'delayed')
    ORDER BY l.seq
    FOR NO KEY UPDATE
)
UPDATE ledgerq.batches b
SET queued_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE b.seq = ANY (ARRAY(SELECT locked.seq FROM locked))
RETURNING b.seq, b.service_id, b.status;

-- name: BatchClaimQueued :many
-- Submitter claim: takes up to @max queued batches, oldest first, that no other
-- submitter holds (SKIP LOCKED), and marks them held with a lease
-- (submitted = true guards against re-queuing while the submitter has them).
-- attempts is incremented here and is the fencing token of the outcome update.
-- Every claim updates its rows through the primary key (= ANY (ARRAY(…))):
-- joined to the CTE instead, the planner may hash the CTE and scan the whole
-- table for it. The id and payload come from batch_payloads, one probe of its
-- seq per claimed row (a LATERAL with LIMIT, which the planner cannot turn
-- into a join by hash either).
WITH claimable AS (
    SELECT q.seq FROM ledgerq.batches q
    WHERE q.queued_at IS NOT NULL
    ORDER BY q.queued_at, q.created_at, q.seq
    LIMIT @max
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE ledgerq.batches b
    SET submitted = true,
        queued_at = NULL,
        claim_expires_at = @lease_expires_at::timestamptz,
        attempts = b.attempts + 1,
        last_submitted_at = @now::timestamptz,
        updated_at = @now::timestamptz
    WHERE b.seq = ANY (ARRAY(SELECT claimable.seq FROM claimable))
    RETURNING b.seq, b.service_id, b.attempts
)
SELECT c.seq, c.service_id, c.attempts,
    coalesce(p.id, '')::text AS id, coalesce(p.payload, ''::bytea)::bytea AS payload,
    coalesce(p.unverified, false)::bool AS unverified
FROM claimed c
LEFT JOIN LATERAL (SELECT x.id, x.payload, x.unverified FROM ledgerq.batch_payloads x WHERE x.seq = c.seq LIMIT 1) p ON true;

-- name: BatchRecordSubmitMany :many
-- Submitter outcomes of one round, in one statement. Each row applies only
-- while the claim that sent it (same attempt) still holds the batch:
--   accepted -> pending, first check at @next_check_at;
--   delayed  -> delayed, submitted = false (a transient failure; the queuer
--               retries it after the delay window);
--   rejected -> invalid (the ledger refused the batch itself).
-- The rows are locked first, in primary-key order, whatever the order of
-- @seqs: a monitor that took over an expired lease records the same batches,
-- and two statements locking shared rows in different orders deadlock.
-- Locking re-checks the fence on each row's latest version.
WITH o AS (
    SELECT unnest(@seqs::int8[]) AS seq, unnest(@attempts::int4[]) AS attempts,
           unnest(@results::text[]) AS result, unnest(@reasons::text[]) AS reason
),
held AS (
    -- Rows are reached by primary key: the claim guard is a CASE, which no
    -- partial index can answer, so the plan never scans every held batch.
    SELECT h.seq, o.result, o.reason
    FROM ledgerq.batches h JOIN o ON o.seq = h.seq AND o.attempts = h.attempts
    WHERE h.seq = ANY(@seqs::int8[])
      AND CASE WHEN h.claim_expires_at IS NULL THEN false ELSE true END
      AND o.result IN ('accepted', 'delayed', 'rejected')
    ORDER BY h.seq
    FOR NO KEY UPDATE OF h
)
UPDATE ledgerq.batches b
SET status = (CASE held.result WHEN 'accepted' THEN 'pending' WHEN 'delayed' THEN 'delayed' ELSE 'invalid' END)::ledgerq.batch_status,
    submitted = (held.result <> 'delayed'),
    claim_expires_at = NULL,
    next_check_at = CASE WHEN held.result = 'accepted' THEN @next_check_at::timestamptz END,
    last_error = CASE WHEN held.result = 'accepted' THEN NULL ELSE held.reason END,
    finished_at = CASE WHEN held.result = 'rejected' THEN @now::timestamptz END,
    updated_at = @now::timestamptz
FROM held
-- Joined on seq alone: the planner reaches each row by its primary key from
-- the locked rows (or, on a table small enough, hashes them). An added
-- `b.seq = ANY (ARRAY(SELECT held.seq FROM held))` looked like a guard and
-- was a trap: expecting one locked row, the planner chose an inner index
-- scan on that list, run once per row, a thousand buffers a row at 500 rows.
WHERE b.seq = held.seq
RETURNING b.seq, b.service_id, held.result::text AS result;

-- name: BatchPayloadMarkVerified :execrows
-- Clears unverified on the batches of @seqs whose signatures this process
-- checked (ledgerq.submit_batch stores them unchecked), so that sending one
-- again (delayed, unknown) does not check it again. It runs in the
-- transaction that records the outcome of the attempt that checked them,
-- after that record, and is fenced as it is: a row changes only while that
-- attempt (@attempts) is still the batch's latest. A batch whose check
-- failed is never in @seqs. The batches' rows are already locked by the
-- record, and only this statement updates batch_payloads' rows of batches
-- in flight, so its lock order cannot form a cycle.
WITH v AS (
    SELECT unnest(@seqs::int8[]) AS seq, unnest(@attempts::int4[]) AS attempts
)
UPDATE ledgerq.batch_payloads p
SET unverified = false
FROM v JOIN ledgerq.batches b ON b.seq = v.seq AND b.attempts = v.attempts
WHERE p.seq = v.seq AND p.unverified;

-- name: BatchClaimPendingForCheck :many
-- Monitor claim: pending batches due for a status check. Moving next_check_at
-- forward in the claiming statement keeps other monitors off them. The id the
-- ledger knows the batch by is one probe of batch_payloads' seq per row.
WITH due AS (
    SELECT p.seq FROM ledgerq.batches p
    WHERE p.status = 'pending' AND p.next_check_at <= @now::timestamptz
    ORDER BY p.next_check_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
UPDATE ledgerq.batches b
SET next_check_at = @next_check_at::timestamptz, updated_at = @now::timestamptz
WHERE b.seq = ANY (ARRAY(SELECT due.seq FROM due))
RETURNING b.seq, b.service_id, b.attempts,
    coalesce((SELECT x.id FROM ledgerq.batch_payloads x WHERE x.seq = b.seq), '')::text AS id;

-- name: BatchClaimExpiredHeld :many
-- Monitor claim: batches a submitter claimed but never answered for (it died
-- mid-send). The monitor takes over the lease while it asks the ledger.
WITH expired AS (
    SELECT h.seq FROM ledgerq.batches h
    WHERE h.claim_expires_at IS NOT NULL AND h.claim_expires_at <= @now::timestamptz
    ORDER BY h.claim_expires_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
UPDATE ledgerq.batches b
SET claim_expires_at = @lease_expires_at::timestamptz, updated_at = @now::timestamptz
WHERE b.seq = ANY (ARRAY(SELECT expired.seq FROM expired))
RETURNING b.seq, b.service_id, b.attempts,
    coalesce((SELECT x.id FROM ledgerq.batch_payloads x WHERE x.seq = b.seq), '')::text AS id;

-- name: BatchRecordStatusMany :many
-- Monitor outcomes of one round, in one statement, each conditional on the
-- attempt it checked, for a pending batch or an expired held one:
--   PENDING   -> pending, next check at @next_check_at (a held batch the
--               ledger has after all, or a pending one asked about again);
--   COMMITTED -> committed, INVALID -> invalid (terminal);
--   UNKNOWN   -> unknown with submitted = false (the ledger may not have it),
--               and queued at once, so the submitter sends it again.
-- The rows are locked first, in primary-key order, whatever the order of
-- @seqs: the submitter of an expired lease, or another monitor, may record
-- the same batches, and two statements locking shared rows in different
-- orders deadlock. Locking re-checks the guard on each row's latest version.
WITH o AS (
    SELECT unnest(@seqs::int8[]) AS seq, unnest(@attempts::int4[]) AS attempts,
           unnest(@statuses::text[]) AS status, unnest(@reasons::text[]) AS reason
),
checked AS (
    -- Rows are reached by primary key: the guard is a CASE, which no partial
    -- index can answer, so the plan never scans every batch in flight.
    SELECT c.seq, o.status, o.reason
    FROM ledgerq.batches c JOIN o ON o.seq = c.seq AND o.attempts = c.attempts
    WHERE c.seq = ANY(@seqs::int8[])
      AND CASE WHEN c.status = 'pending' THEN true ELSE c.claim_expires_at IS NOT NULL END
      AND o.status IN ('pending', 'unknown', 'committed', 'valid', 'invalid')
    ORDER BY c.seq
    FOR NO KEY UPDATE OF c
)
UPDATE ledgerq.batches b
SET status = checked.status::ledgerq.batch_status,
    submitted = (checked.status <> 'unknown'),
    claim_expires_at = NULL,
    queued_at = CASE WHEN checked.status = 'unknown' THEN @now::timestamptz END,
    next_check_at = CASE WHEN checked.status = 'pending' THEN @next_check_at::timestamptz END,
    last_error = CASE WHEN checked.status = 'pending' THEN NULL ELSE nullif(checked.reason, '') END,
    finished_at = CASE WHEN checked.status IN ('committed', 'valid', 'invalid') THEN @now::timestamptz END,
    updated_at = @now::timestamptz
FROM checked
-- Joined on seq alone, as in BatchRecordSubmitMany.
WHERE b.seq = checked.seq
RETURNING b.seq, b.service_id, b.status::text AS status;

-- name: BatchWakeIfQueued :exec
-- Wakes the loops on @channel (NOTIFY) when batches of @service_ids were
-- queued at @now, by this transaction: one probe of batches_queued. Lets a
-- transaction sent in one round trip wake the submitters only when it
-- queued something.
SELECT pg_notify(@channel::text, '')
WHERE EXISTS (SELECT 1 FROM ledgerq.batches q
              WHERE q.queued_at = @now::timestamptz AND q.service_id = ANY(@service_ids::text[]));

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
-- batches never sent (batches_new_by_service) and the active ones
-- (batches_active_by_service, less the queued batches the first part
-- counted), which together are every unfinished batch: its cost grows with
-- the work waiting, not with the terminal rows kept.
SELECT w.state::text AS state, count(*) AS batches, min(w.received_at)::timestamptz AS oldest_received_at
FROM (
    SELECT (CASE WHEN n.queued_at IS NOT NULL THEN 'queued' ELSE 'new' END) AS state, n.received_at
    FROM ledgerq.batches n
    WHERE n.status IS NULL AND NOT n.submitted
    UNION ALL
    SELECT (CASE WHEN a.status IS NOT NULL THEN a.status::text ELSE 'held' END), a.received_at
    FROM ledgerq.batches a
    WHERE (a.status IN ('pending', 'unknown', 'delayed')
           OR (a.status IS NULL AND (a.submitted OR a.queued_at IS NOT NULL)))
      AND NOT (a.status IS NULL AND NOT a.submitted)
) w
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

-- name: BatchSeedFinished :execrows
-- Bench only (`ledgerq bench batches --backlog-finished N`): N committed
-- batches with payloads of @payload_bytes bytes, finished at @at, ids and
-- service ids starting with @prefix, as a long-running lane leaves behind. No
-- loop or API path runs it.
WITH g AS (
    SELECT nextval('ledgerq.batch_seq') AS seq, g FROM generate_series(1, @n::int) g
),
ins AS (
    INSERT INTO ledgerq.batches (seq, service_id, created_at, submitted, status, attempts,
        last_submitted_at, finished_at, received_at, updated_at)
    SELECT g.seq, @prefix::text || (g.g % 1000), @at::timestamptz, true, 'committed', 1,
        @at::timestamptz, @at::timestamptz, @at::timestamptz, @at::timestamptz
    FROM g
)
INSERT INTO ledgerq.batch_payloads (seq, id, service_id, payload)
SELECT g.seq, @prefix::text || g.g, @prefix::text || (g.g % 1000), decode(repeat('00', @payload_bytes::int), 'hex') FROM g;

-- name: BatchDeleteFinished :execrows
-- Retention: deletes up to @max terminal batches whose finished_at
-- is before @cutoff, oldest first. finished_at is set exactly for the terminal
-- statuses committed, valid and invalid (CHECK batches_finished_iff_terminal),
-- so a batch still waiting or at the ledger is never deleted, whatever its age.
-- The CTE walks the partial index batches_finished and stops after @max rows,
-- so a round costs what it deletes, not the rows kept or the work waiting; SKIP
-- LOCKED lets concurrent retention rounds (one per process) share the backlog
-- instead of waiting on each other's locks. The seqs reach the DELETE as one
-- array, so each row is found through the primary key: joined instead (USING,
-- IN), the planner hashes the whole table once @max is a few hundred. The
-- DELETE from ledgerq.batches is the whole operation: rows that belong to a
-- batch (batch_payloads, say) must reference it ON DELETE CASCADE, never be
-- deleted by a second statement here.
WITH finished AS (
    SELECT f.seq FROM ledgerq.batches f
    WHERE f.finished_at IS NOT NULL AND f.finished_at < @cutoff::timestamptz
    ORDER BY f.finished_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
DELETE FROM ledgerq.batches b
WHERE b.seq = ANY (ARRAY(SELECT finished.seq FROM finished));

-- name: BatchListByServiceInOrder :many
-- One service's batches in the order they are sent (created_at, then id),
-- for the console; keyset pagination after (@after_created_at, @after_id).
SELECT p.id, sqlc.embed(b)
FROM ledgerq.batch_payloads p JOIN ledgerq.batches b ON b.seq = p.seq
WHERE p.service_id = @service_id
  AND (b.created_at, p.id) > (@after_created_at::timestamptz, @after_id::text)
ORDER BY b.created_at, p.id
LIMIT @max;

-- name: BatchFinishedPerMinute :many
-- The console's charts: batches that reached a terminal status since
-- @since, per minute and outcome (committed, which counts valid too, or
-- invalid), with the 50th and 99th percentile of the seconds from received
-- to final, through batches_finished.
SELECT date_bin('1 minute', finished_at, @since::timestamptz)::timestamptz AS minute,
       (CASE WHEN status = 'invalid' THEN 'invalid' ELSE 'committed' END)::text AS state,
       count(*)::bigint AS items,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - received_at)))::float8 AS p50_seconds,
       (percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - received_at)))::float8 AS p99_seconds
FROM ledgerq.batches
WHERE finished_at >= @since::timestamptz AND status IS NOT NULL
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: BatchLastFinishedAt :one
-- When the batch ledger last gave a batch its final status (through
-- batches_finished): the console's sign of life of that ledger.
SELECT max(finished_at) AS at FROM ledgerq.batches;

-- name: BatchReleaseClaims :execrows
-- A stopping process gives back the batches claimed for it and never sent
-- (handed to its submitter by its monitor): each is queued again at once,
-- while that claim (same attempt) still holds it. The attempt stays
-- counted: attempts only grow, so each claim's fence is its own. The rows are locked first, in primary-key order, as every statement
-- of the lane that waits for row locks does.
WITH o AS (
    SELECT unnest(@seqs::int8[]) AS seq, unnest(@attempts::int4[]) AS attempts
),
held AS (
    SELECT h.seq
    FROM ledgerq.batches h JOIN o ON o.seq = h.seq AND o.attempts = h.attempts
    WHERE h.seq = ANY(@seqs::int8[])
      AND CASE WHEN h.status IS NULL THEN h.claim_expires_at IS NOT NULL ELSE false END
    ORDER BY h.seq
    FOR NO KEY UPDATE OF h
)
UPDATE ledgerq.batches b
SET submitted = false, claim_expires_at = NULL, queued_at = @now::timestamptz,
    updated_at = @now::timestamptz
FROM held
WHERE b.seq = held.seq;
