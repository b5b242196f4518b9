-- +goose Up
-- Fewer indexes on the hot row (issue 7): every state change of a batch is a
-- non-HOT update, which inserts an entry into every index of ledgerq.batches
-- whose predicate the new row meets. Two of them held nothing the state
-- machine needs:
--   * batches_service_id_id (service_id, id) served only GET
--     /v1/batches?service_id=…; it moves to the write-once batch_payloads
--     table, which gains the service id (copied at intake, never updated);
--   * batches_unfinished (received_at) served only the depth a metrics scrape
--     reads; the depth now reads batches_new_by_service and
--     batches_active_by_service, which together cover every unfinished batch.
ALTER TABLE ledgerq.batch_payloads ADD COLUMN service_id text;
UPDATE ledgerq.batch_payloads p SET service_id = b.service_id FROM ledgerq.batches b WHERE b.id = p.id;
ALTER TABLE ledgerq.batch_payloads ALTER COLUMN service_id SET NOT NULL;
COMMENT ON COLUMN ledgerq.batch_payloads.service_id IS 'The batch''s service (ledgerq.batches.service_id), copied at intake and never changed: listing a service''s batches reads this table''s index, not the hot one.';
CREATE INDEX batch_payloads_service_id_id ON ledgerq.batch_payloads (service_id, id);
DROP INDEX ledgerq.batches_service_id_id;
DROP INDEX ledgerq.batches_unfinished;

-- +goose Down
CREATE INDEX batches_unfinished ON ledgerq.batches (received_at) WHERE finished_at IS NULL;
CREATE INDEX batches_service_id_id ON ledgerq.batches (service_id, id);
DROP INDEX ledgerq.batch_payloads_service_id_id;
ALTER TABLE ledgerq.batch_payloads DROP COLUMN service_id;
