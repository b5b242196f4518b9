-- +goose Up
-- A dead holder lets go at once (issue 18): every ledgerq process holds a
-- session-level advisory lock, its liveness lock (class 1819372662, "lqlv"
-- in ASCII, and a random positive int4 of its own), on a connection of its
-- own, which PostgreSQL releases the moment that connection dies. A claim
-- records the id of its process's liveness lock; a claim whose recorded lock
-- is no longer held in pg_locks is taken over at once instead of when its
-- lease ends. A claim made while the process held no liveness lock records
-- NULL and waits for its lease, which stays the backstop for both.

-- The liveness locks held now, in this database: a claim whose recorded lock
-- is not here has lost its holder. One read of pg_locks, whatever the number
-- of claims checked against it.
CREATE VIEW ledgerq.liveness_locks AS
SELECT l.objid::bigint AS lock, l.pid
FROM pg_catalog.pg_locks l
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
  AND l.classid = 1819372662::oid
  AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database());
COMMENT ON VIEW ledgerq.liveness_locks IS 'Liveness locks held now in this database, one per live ledgerq process (session-level advisory locks of class 1819372662, two-key form): a claim whose recorded liveness_lock is missing here lost its holder.';
COMMENT ON COLUMN ledgerq.liveness_locks.lock IS 'The lock''s id (its second key), as recorded in the claims of the process that holds it.';
COMMENT ON COLUMN ledgerq.liveness_locks.pid IS 'The PostgreSQL backend of the process''s liveness connection (pg_stat_activity.pid).';

ALTER TABLE ledgerq.shards
    ADD COLUMN liveness_lock integer,
    -- Only a running shard has a holder.
    ADD CONSTRAINT shards_liveness_lock_only_running CHECK (
        liveness_lock IS NULL OR (state = 'running' AND liveness_lock > 0)
    );
COMMENT ON COLUMN ledgerq.shards.liveness_lock IS 'Liveness lock of the holder''s process (pg_locks: advisory, classid 1819372662, objid this, objsubid 2); once no session holds it the rescuer puts the shard back to pending without waiting for the lease. NULL: the lease alone.';

ALTER TABLE ledgerq.webhook_deliveries
    ADD COLUMN liveness_lock integer,
    -- Only a delivery in flight has a holder.
    ADD CONSTRAINT webhook_deliveries_liveness_lock_in_flight CHECK (
        liveness_lock IS NULL OR (delivered_at IS NULL AND gave_up_at IS NULL AND liveness_lock > 0)
    );
COMMENT ON COLUMN ledgerq.webhook_deliveries.liveness_lock IS 'Liveness lock of the process sending the delivery (pg_locks: advisory, classid 1819372662, objid this, objsubid 2), set by its claim and cleared when its outcome is recorded; once no session holds it the delivery is claimed again without waiting for its lease. NULL: not in flight, or the lease alone.';

-- Claim: deliveries in flight, whose holder may have died.
CREATE INDEX webhook_deliveries_in_flight ON ledgerq.webhook_deliveries (liveness_lock)
    WHERE liveness_lock IS NOT NULL AND delivered_at IS NULL AND gave_up_at IS NULL;

-- +goose Down
DROP VIEW ledgerq.liveness_locks;
DROP INDEX ledgerq.webhook_deliveries_in_flight;
ALTER TABLE ledgerq.webhook_deliveries
    DROP CONSTRAINT webhook_deliveries_liveness_lock_in_flight,
    DROP COLUMN liveness_lock;
ALTER TABLE ledgerq.shards
    DROP CONSTRAINT shards_liveness_lock_only_running,
    DROP COLUMN liveness_lock;
