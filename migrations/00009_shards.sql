-- +goose Up
-- Shards: katana's execution-shard scheduler (docs/design.md, "Shards"), kept in
-- PostgreSQL so that any number of processes share one FIFO queue of shards.

CREATE TYPE ledgerq.shard_state AS ENUM ('idle', 'pending', 'running');
COMMENT ON TYPE ledgerq.shard_state IS 'Shard state: idle (dormant), pending (in the queue), running (a worker holds it under a lease).';

CREATE TABLE ledgerq.shards (
    key              text                NOT NULL PRIMARY KEY,
    state            ledgerq.shard_state NOT NULL,
    scheduled_at     timestamptz,
    owner            text,
    run              bigint              NOT NULL DEFAULT 0,
    claimed_at       timestamptz,
    lease_expires_at timestamptz,
    more_work        boolean             NOT NULL DEFAULT false,
    failures         integer             NOT NULL DEFAULT 0,
    last_error       text,
    rescues          bigint              NOT NULL DEFAULT 0,
    last_released_at timestamptz,
    created_at       timestamptz         NOT NULL,
    updated_at       timestamptz         NOT NULL,

    -- The prefix up to the first ':' names the job kind (wallet:<chain>:<address>).
    CONSTRAINT shards_key_has_kind CHECK (length(key) <= 256 AND split_part(key, ':', 1) <> '' AND position(':' IN key) > 0),
    CONSTRAINT shards_counters_not_negative CHECK (run >= 0 AND failures >= 0 AND rescues >= 0),
    -- A pending shard has its place in the queue; no other state has one.
    CONSTRAINT shards_queued_iff_pending CHECK ((scheduled_at IS NOT NULL) = (state = 'pending')),
    -- Owner, claim time and lease exist exactly while a worker runs the shard.
    CONSTRAINT shards_lease_iff_running CHECK (
        (owner IS NOT NULL) = (state = 'running')
        AND (claimed_at IS NOT NULL) = (state = 'running')
        AND (lease_expires_at IS NOT NULL) = (state = 'running')
    ),
    CONSTRAINT shards_owner_not_empty CHECK (owner IS NULL OR (owner <> '' AND length(owner) <= 256)),
    -- A running shard was claimed, so its run number counts that claim.
    CONSTRAINT shards_running_was_claimed CHECK (state <> 'running' OR run > 0),
    -- more_work records a schedule() that landed while the shard ran; only a
    -- running shard can have one, and its release clears it.
    CONSTRAINT shards_more_work_only_running CHECK (NOT more_work OR state = 'running'),
    CONSTRAINT shards_times_finite CHECK (
        isfinite(created_at) AND isfinite(updated_at)
        AND (scheduled_at IS NULL OR isfinite(scheduled_at))
        AND (claimed_at IS NULL OR isfinite(claimed_at))
        AND (lease_expires_at IS NULL OR isfinite(lease_expires_at))
        AND (last_released_at IS NULL OR isfinite(last_released_at))
    )
);

COMMENT ON TABLE ledgerq.shards IS 'Shard scheduler: one row per key whose work one worker at a time runs, claimed oldest pending first under a lease.';
COMMENT ON COLUMN ledgerq.shards.key IS 'Shard key, <kind>:<rest> (wallet:<chain>:<address>); the kind picks the job that runs it.';
COMMENT ON COLUMN ledgerq.shards.state IS 'idle: no work known; pending: waiting in the queue; running: a worker holds it (owner, lease).';
COMMENT ON COLUMN ledgerq.shards.scheduled_at IS 'Queue position of a pending shard: claims take the oldest first (FIFO). After a failed run it is in the future (backoff) and the shard is not claimed before it.';
COMMENT ON COLUMN ledgerq.shards.owner IS 'The worker running the shard (process and worker); with run, the fence of its commits, lease extensions and release.';
COMMENT ON COLUMN ledgerq.shards.run IS 'Number of claims so far; the claim''s number is its fencing token, so a worker whose lease was rescued changes nothing even if its owner name comes back.';
COMMENT ON COLUMN ledgerq.shards.claimed_at IS 'When the current run started.';
COMMENT ON COLUMN ledgerq.shards.lease_expires_at IS 'End of the running worker''s lease; extended while the run lasts. A running shard past it is put back to pending by the rescuer.';
COMMENT ON COLUMN ledgerq.shards.more_work IS 'A schedule() landed while the shard ran: its release puts it back to pending even if the job found no work left (closes katana''s lost wake-up).';
COMMENT ON COLUMN ledgerq.shards.failures IS 'Consecutive runs that ended in an error; the backoff before the next claim grows with it, and a successful run resets it.';
COMMENT ON COLUMN ledgerq.shards.last_error IS 'Error of the last failed run (kept after later successes, for operators).';
COMMENT ON COLUMN ledgerq.shards.rescues IS 'How often a run''s lease expired and the rescuer put the shard back to pending.';
COMMENT ON COLUMN ledgerq.shards.last_released_at IS 'When the last run ended with a release.';
COMMENT ON COLUMN ledgerq.shards.created_at IS 'When the shard was first scheduled.';
COMMENT ON COLUMN ledgerq.shards.updated_at IS 'Last change to the row.';

-- Claim: the oldest pending shard first.
CREATE INDEX shards_pending ON ledgerq.shards (scheduled_at, key) WHERE state = 'pending';
-- Rescue: running shards by lease end.
CREATE INDEX shards_running_lease ON ledgerq.shards (lease_expires_at) WHERE state = 'running';

CREATE VIEW ledgerq.shard_overview AS
SELECT
    split_part(key, ':', 1) AS kind,
    state::text AS state,
    count(*) AS shards,
    min(scheduled_at) AS oldest_scheduled_at,
    count(*) FILTER (WHERE state = 'running' AND lease_expires_at < now()) AS expired_leases,
    count(*) FILTER (WHERE failures > 0) AS failing,
    sum(rescues) AS rescues
FROM ledgerq.shards
GROUP BY 1, 2;
COMMENT ON VIEW ledgerq.shard_overview IS 'Shards at a glance: per job kind and state, how many, the oldest queued, expired leases waiting for the rescuer, shards whose last run failed.';
COMMENT ON COLUMN ledgerq.shard_overview.kind IS 'Job kind: the key''s prefix before the first colon.';
COMMENT ON COLUMN ledgerq.shard_overview.state IS 'idle, pending or running.';
COMMENT ON COLUMN ledgerq.shard_overview.shards IS 'Number of shards of this kind in this state.';
COMMENT ON COLUMN ledgerq.shard_overview.oldest_scheduled_at IS 'Queue position of the oldest pending shard (NULL for other states).';
COMMENT ON COLUMN ledgerq.shard_overview.expired_leases IS 'Running shards whose lease has passed (by the database clock): their worker is gone or stuck.';
COMMENT ON COLUMN ledgerq.shard_overview.failing IS 'Shards whose last run ended in an error.';
COMMENT ON COLUMN ledgerq.shard_overview.rescues IS 'Leases rescued over the life of these shards.';

-- +goose Down
DROP VIEW ledgerq.shard_overview;
DROP TABLE ledgerq.shards;
DROP TYPE ledgerq.shard_state;
