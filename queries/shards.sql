-- name: ShardSchedule :one
-- Scheduling: idle -> pending atomically, the row inserted if the
-- key is new; on pending it changes nothing (the WHERE of DO UPDATE writes no
-- row, so none is returned); on running it sets more_work, so that the
-- release puts the shard back in the queue (katana lost this wake-up when it
-- landed between the last collect and the release). Returns the state the
-- shard is in afterwards: pending means it entered the queue now.
INSERT INTO ledgerq.shards AS s (key, state, scheduled_at, created_at, updated_at)
VALUES (@key, 'pending', @now::timestamptz, @now::timestamptz, @now::timestamptz)
ON CONFLICT (key) DO UPDATE
SET state = CASE WHEN s.state = 'idle' THEN 'pending'::ledgerq.shard_state ELSE s.state END,
    scheduled_at = CASE WHEN s.state = 'idle' THEN @now::timestamptz ELSE s.scheduled_at END,
    more_work = (s.state = 'running'),
    updated_at = @now::timestamptz
WHERE s.state = 'idle' OR (s.state = 'running' AND NOT s.more_work)
RETURNING s.state;

-- name: ShardClaim :one
-- Claim: the oldest pending shard (FIFO by
-- scheduled_at, ties by key) whose kind this process has a job for and whose
-- backoff has passed, that no other worker is claiming (SKIP LOCKED), becomes
-- running under @owner with a lease. run is incremented: it is the claim's
-- fencing token. @liveness_lock is the claiming process's liveness lock, NULL
-- when it holds none (the lease alone then frees the shard if it dies).
WITH next AS (
    SELECT p.key FROM ledgerq.shards p
    WHERE p.state = 'pending' AND p.scheduled_at <= @now::timestamptz
      AND split_part(p.key, ':', 1) = ANY(@kinds::text[])
    ORDER BY p.scheduled_at, p.key
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE ledgerq.shards s
SET state = 'running',
    scheduled_at = NULL,
    owner = @owner::text,
    run = s.run + 1,
    claimed_at = @now::timestamptz,
    lease_expires_at = @lease_expires_at::timestamptz,
    liveness_lock = sqlc.narg(liveness_lock)::integer,
    updated_at = @now::timestamptz
WHERE s.key = ANY (ARRAY(SELECT next.key FROM next))
RETURNING s.key, s.run, s.failures;

-- name: ShardExtendLease :one
-- A long run keeps its shard: the lease moves to @lease_expires_at while the
-- same claim (owner and run) still holds the shard. No row: it was rescued.
UPDATE ledgerq.shards s
SET lease_expires_at = @lease_expires_at::timestamptz, updated_at = @now::timestamptz
WHERE s.key = @key AND s.state = 'running' AND s.owner = @owner::text AND s.run = @run
RETURNING s.key;

-- name: ShardRelease :one
-- Release, after a run, in one UPDATE that checks the claim (owner and
-- run): back to pending, at the back of the queue (@scheduled_at), when the
-- job left work (@work_left: the quantum ran out, shutdown, or a failed run,
-- whose @scheduled_at is its backoff) or a schedule() landed meanwhile
-- (more_work); otherwise idle. A failed run (@failed) records its error and
-- counts one more consecutive failure, unless the ledger was unavailable
-- (@unavailable: no failure of the work), which keeps the count as it was.
-- A release by a claim the rescuer took over matches no row and changes
-- nothing.
UPDATE ledgerq.shards s
SET state = CASE WHEN @work_left::boolean OR s.more_work THEN 'pending' ELSE 'idle' END::ledgerq.shard_state,
    scheduled_at = CASE WHEN @work_left::boolean OR s.more_work
                        THEN greatest(@scheduled_at::timestamptz, @now::timestamptz) END,
    owner = NULL,
    claimed_at = NULL,
    lease_expires_at = NULL,
    liveness_lock = NULL,
    more_work = false,
    failures = CASE WHEN @failed::boolean AND @unavailable::boolean THEN s.failures
                    WHEN @failed::boolean THEN s.failures + 1
                    ELSE 0 END,
    last_error = CASE WHEN @failed::boolean THEN @error::text ELSE s.last_error END,
    last_released_at = @now::timestamptz,
    updated_at = @now::timestamptz
WHERE s.key = @key AND s.state = 'running' AND s.owner = @owner::text AND s.run = @run
RETURNING s.state;

-- name: ShardRescue :many
-- Monitor claim: running shards whose holder is gone go back to pending at
-- once, so another worker runs them. A holder is gone when its process's
-- liveness lock, recorded by the claim, is no longer held (the process died
-- or lost its connection: a dead holder lets go at once), or when the lease
-- expired (the worker hung, or the claim recorded no liveness lock: the
-- lease is the backstop). The held locks are read once per statement, so
-- the cost is one read of pg_locks and of the running shards. The late
-- release, lease extension or fenced commit of the old claim then matches
-- nothing: owner is cleared here and the next claim gets a new run.
WITH live AS MATERIALIZED (
    SELECT l.lock FROM ledgerq.liveness_locks l
),
gone AS (
    SELECT r.key, r.lease_expires_at > @now::timestamptz AS holder_died
    FROM ledgerq.shards r
    WHERE r.state = 'running'
      AND (r.lease_expires_at <= @now::timestamptz
           -- IS NOT NULL: NULL NOT IN (no rows) is true.
           OR (r.liveness_lock IS NOT NULL AND r.liveness_lock::bigint NOT IN (SELECT live.lock FROM live)))
    ORDER BY r.lease_expires_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
UPDATE ledgerq.shards s
SET state = 'pending',
    scheduled_at = @now::timestamptz,
    owner = NULL,
    claimed_at = NULL,
    lease_expires_at = NULL,
    liveness_lock = NULL,
    more_work = false,
    rescues = s.rescues + 1,
    updated_at = @now::timestamptz
WHERE s.key = ANY (ARRAY(SELECT gone.key FROM gone))
RETURNING s.key, s.run,
    (s.key = ANY (ARRAY(SELECT gone.key FROM gone WHERE gone.holder_died)))::boolean AS holder_died;

-- name: ShardHeld :one
-- Fence of a job's commit: run inside the job's transaction before it writes,
-- it returns the row only while the same claim (owner and run) holds the
-- shard, and locks it FOR KEY SHARE until that transaction ends. The rescuer
-- selects FOR UPDATE (SKIP LOCKED), which that lock blocks, so it cannot take
-- the shard over between this check and the commit. schedule()'s update
-- (more_work) is a no-key update, which that lock lets through: a client
-- storing work for the shard does not wait for the run's commit.
SELECT s.key FROM ledgerq.shards s
WHERE s.key = @key AND s.state = 'running' AND s.owner = @owner::text AND s.run = @run
FOR KEY SHARE;

-- name: ShardGet :one
SELECT * FROM ledgerq.shards WHERE key = @key;

-- name: ShardCountByState :many
-- Shards per state, for metrics and tests.
SELECT state::text AS state, count(*) AS shards
FROM ledgerq.shards
GROUP BY 1
ORDER BY 1;

-- name: ShardCountPastLease :one
-- The console's health panel: running shards whose lease has passed (their
-- worker stopped renewing; the rescuer frees them), through
-- shards_running_lease.
SELECT count(*)::bigint AS shards, min(lease_expires_at) AS oldest
FROM ledgerq.shards
WHERE state = 'running' AND lease_expires_at < @now::timestamptz;
