-- +goose Up
-- Batch lane admission (Grid's one-round serial rule): a service's next batch
-- is admitted in the transaction that frees the service (insert into an idle
-- service, a final status, a rejection), so no round scans every service.
-- Admission asks "does this service have an active batch?"; active now includes
-- a queued batch that no submitter holds yet, so the index answers it alone.
DROP INDEX ledgerq.batches_active_by_service;
CREATE INDEX batches_active_by_service ON ledgerq.batches (service_id)
    WHERE status IN ('pending', 'unknown', 'delayed')
       OR (status IS NULL AND (submitted OR queued_at IS NOT NULL));
COMMENT ON INDEX ledgerq.batches_active_by_service IS
    'Services with an active batch: queued, held, pending, unknown or delayed. At most one per service; admission reads it.';

-- +goose Down
DROP INDEX ledgerq.batches_active_by_service;
CREATE INDEX batches_active_by_service ON ledgerq.batches (service_id)
    WHERE status IN ('pending', 'unknown', 'delayed') OR (submitted AND status IS NULL);
