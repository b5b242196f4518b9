-- +goose NO TRANSACTION
-- +goose Up
-- Retention (the batch lane's retention rule, BatchDeleteFinished): terminal
-- batches, oldest first. Waiting batches are not in this index, so a retention
-- round reads only the rows it deletes, never the table.
--
-- The index is built CONCURRENTLY (hence NO TRANSACTION): when this migration
-- first runs, the table holds every terminal batch ever stored, and a plain
-- CREATE INDEX would block the lane's writes for the whole build. A build that
-- fails leaves an invalid index behind; the DROP makes a retry start clean
-- (concurrent migrators are serialised by goose's advisory lock).
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.batches_finished;
CREATE INDEX CONCURRENTLY batches_finished ON ledgerq.batches (finished_at)
    WHERE finished_at IS NOT NULL;
COMMENT ON INDEX ledgerq.batches_finished IS 'Retention: terminal batches (committed, valid, invalid) by finished_at; BatchDeleteFinished deletes the oldest through it.';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.batches_finished;
