-- +goose Up
-- Lean rows (the batch lane's tables): a batch's payload is written once, in
-- its own table, and never again. Every state change of a batch rewrites its
-- row in ledgerq.batches; without the payload that row is a few hundred bytes,
-- not a few kilobytes, so each change writes that much less WAL.
CREATE TABLE ledgerq.batch_payloads (
    id      text  PRIMARY KEY REFERENCES ledgerq.batches (id) ON DELETE CASCADE,
    payload bytea NOT NULL
);
COMMENT ON TABLE ledgerq.batch_payloads IS 'Batch lane: the signed payload of each batch, written once when the batch is stored; deleted with its batch.';
COMMENT ON COLUMN ledgerq.batch_payloads.id IS 'The batch (ledgerq.batches.id).';
COMMENT ON COLUMN ledgerq.batch_payloads.payload IS 'The signed batch as sent to the ledger (for Sawtooth, a serialized Batch protobuf message).';
INSERT INTO ledgerq.batch_payloads (id, payload) SELECT id, payload FROM ledgerq.batches;
ALTER TABLE ledgerq.batches DROP COLUMN payload;

-- +goose Down
ALTER TABLE ledgerq.batches ADD COLUMN payload bytea;
UPDATE ledgerq.batches b SET payload = p.payload FROM ledgerq.batch_payloads p WHERE p.id = b.id;
UPDATE ledgerq.batches SET payload = '\x' WHERE payload IS NULL;
ALTER TABLE ledgerq.batches ALTER COLUMN payload SET NOT NULL;
COMMENT ON COLUMN ledgerq.batches.payload IS 'The signed batch as sent to the ledger (for Sawtooth, a serialized Batch protobuf message).';
DROP TABLE ledgerq.batch_payloads;
