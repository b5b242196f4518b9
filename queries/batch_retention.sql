-- name: BatchDeleteFinished :execrows
-- Retention (DESIGN §5): deletes up to @max terminal batches whose finished_at
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
