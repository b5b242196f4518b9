-- +goose Up
-- A narrow key for the hot row (issue 7). Every state change of a batch is a
-- non-HOT update, which adds an entry to the primary key's index: keyed by the
-- client's id (up to 256 characters, random), each entry was that wide and
-- landed in a random leaf page. ledgerq.batches is now keyed by seq, a bigint
-- from one sequence, so each entry is 8 bytes appended at the right edge. The
-- client's id moves to the write-once ledgerq.batch_payloads, where it is
-- unique (intake's idempotency, GET /v1/batches/{id}, Sawtooth's
-- batch_statuses read it there) and is written once; the hot row no longer
-- carries it at all. Both rows of a batch carry its seq: intake draws it from
-- the sequence before either row exists.
--
-- Grid's one-round serial rule still breaks a tie on created_at by id:
-- admission reads the tied batches' ids from batch_payloads (BatchAdmit).
CREATE SEQUENCE ledgerq.batch_seq AS bigint;
COMMENT ON SEQUENCE ledgerq.batch_seq IS 'Batch lane: the seq of each batch (ledgerq.batches.seq, ledgerq.batch_payloads.seq).';

DROP VIEW ledgerq.batch_overview;

-- The volatile default numbers the existing batches as the table is rewritten.
ALTER TABLE ledgerq.batches ADD COLUMN seq bigint NOT NULL DEFAULT nextval('ledgerq.batch_seq');
ALTER SEQUENCE ledgerq.batch_seq OWNED BY ledgerq.batches.seq;

-- batch_payloads is rebuilt rather than updated in place: an UPDATE of every
-- row would leave the table and its indexes twice their size. Every batch
-- gets its row, a batch written by hand without one (as an operator could)
-- with an empty payload: its id lives in batch_payloads from now on.
CREATE TABLE ledgerq.batch_payloads_keyed (
    id         text   NOT NULL,
    payload    bytea  NOT NULL,
    service_id text   NOT NULL,
    seq        bigint NOT NULL
);
INSERT INTO ledgerq.batch_payloads_keyed (id, payload, service_id, seq)
SELECT b.id, coalesce(p.payload, '\x'), coalesce(p.service_id, b.service_id), b.seq
FROM ledgerq.batches b LEFT JOIN ledgerq.batch_payloads p ON p.id = b.id;
DROP TABLE ledgerq.batch_payloads;
ALTER TABLE ledgerq.batch_payloads_keyed RENAME TO batch_payloads;

ALTER TABLE ledgerq.batches DROP CONSTRAINT batches_pkey;
ALTER TABLE ledgerq.batches ADD CONSTRAINT batches_pkey PRIMARY KEY (seq);
ALTER TABLE ledgerq.batch_payloads
    ADD CONSTRAINT batch_payloads_pkey PRIMARY KEY (id),
    ADD CONSTRAINT batch_payloads_seq_key UNIQUE (seq),
    ADD CONSTRAINT batch_payloads_seq_fkey FOREIGN KEY (seq) REFERENCES ledgerq.batches (seq) ON DELETE CASCADE,
    ADD CONSTRAINT batch_payloads_id_not_empty CHECK (id <> '' AND length(id) <= 256);
CREATE INDEX batch_payloads_service_id_id ON ledgerq.batch_payloads (service_id, id);

-- The indexes that ended in the id end in seq: batches_new_by_service still
-- serves admission's oldest-first walk (the tie on created_at is broken by
-- the id in batch_payloads), batches_queued the submitter's claim order.
DROP INDEX ledgerq.batches_new_by_service;
CREATE INDEX batches_new_by_service ON ledgerq.batches (service_id, created_at, seq)
    WHERE status IS NULL AND NOT submitted;
COMMENT ON INDEX ledgerq.batches_new_by_service IS
    'Never-sent batches of each service, oldest first: admission (which queues the oldest batch of each idle service) and the reconciliation scan read it.';
DROP INDEX ledgerq.batches_queued;
CREATE INDEX batches_queued ON ledgerq.batches (queued_at, created_at, seq)
    WHERE queued_at IS NOT NULL;
COMMENT ON INDEX ledgerq.batches_queued IS 'Queued batches, oldest first: the submitter''s claim.';

-- Also drops batches_id_not_empty, which batch_payloads_id_not_empty replaces.
ALTER TABLE ledgerq.batches DROP COLUMN id;

COMMENT ON TABLE ledgerq.batches IS 'Batch lane: the state of each signed ledger batch, keyed by seq; batches are sent one at a time per service_id in created_at order, ties broken by id (in batch_payloads).';
COMMENT ON COLUMN ledgerq.batches.seq IS 'The batch''s key (ledgerq.batch_seq): narrow and ever-growing, so the many updates of a batch append small entries to the primary key. The client''s id is ledgerq.batch_payloads.id of the same seq.';
COMMENT ON TABLE ledgerq.batch_payloads IS 'Batch lane: what a client handed in for each batch (its id, service and signed payload), written once when the batch is stored; deleted with its batch.';
COMMENT ON COLUMN ledgerq.batch_payloads.id IS 'Batch id, unique: for Sawtooth, the batch header_signature. Re-posting the same id with the same content is idempotent.';
COMMENT ON COLUMN ledgerq.batch_payloads.payload IS 'The signed batch as sent to the ledger (for Sawtooth, a serialized Batch protobuf message).';
COMMENT ON COLUMN ledgerq.batch_payloads.service_id IS 'The batch''s service (ledgerq.batches.service_id), copied at intake and never changed: listing a service''s batches reads this table''s index, not the hot one.';
COMMENT ON COLUMN ledgerq.batch_payloads.seq IS 'The batch (ledgerq.batches.seq).';

CREATE VIEW ledgerq.batch_overview AS
SELECT
    b.service_id,
    coalesce(b.status::text, CASE WHEN b.submitted THEN 'held' WHEN b.queued_at IS NOT NULL THEN 'queued' ELSE 'new' END) AS state,
    count(*) AS batches,
    min(b.created_at) AS oldest_created_at,
    min(b.received_at) FILTER (WHERE b.finished_at IS NULL) AS oldest_waiting_received_at,
    (array_agg(p.id ORDER BY b.created_at, p.id) FILTER (WHERE b.finished_at IS NULL))[1] AS oldest_waiting_id
FROM ledgerq.batches b
LEFT JOIN ledgerq.batch_payloads p ON p.seq = b.seq
GROUP BY 1, 2;
COMMENT ON VIEW ledgerq.batch_overview IS 'Batch lane at a glance: batches per service and state (new, queued, held, or the status), and the oldest batch still waiting.';
COMMENT ON COLUMN ledgerq.batch_overview.service_id IS 'The service.';
COMMENT ON COLUMN ledgerq.batch_overview.state IS 'new (never sent, not queued), queued, held (submitter has it), or the batch status.';
COMMENT ON COLUMN ledgerq.batch_overview.batches IS 'Number of batches in this state.';
COMMENT ON COLUMN ledgerq.batch_overview.oldest_created_at IS 'Oldest created_at among them.';
COMMENT ON COLUMN ledgerq.batch_overview.oldest_waiting_received_at IS 'When the oldest non-terminal batch among them was received (NULL for terminal states).';
COMMENT ON COLUMN ledgerq.batch_overview.oldest_waiting_id IS 'Id of the oldest non-terminal batch among them.';

-- +goose Down
DROP VIEW ledgerq.batch_overview;

ALTER TABLE ledgerq.batches ADD COLUMN id text;
UPDATE ledgerq.batches b SET id = p.id FROM ledgerq.batch_payloads p WHERE p.seq = b.seq;
-- A batch row written by hand without its batch_payloads row has no id; it
-- is named after its seq.
UPDATE ledgerq.batches SET id = 'seq-' || seq WHERE id IS NULL;
ALTER TABLE ledgerq.batches ALTER COLUMN id SET NOT NULL;

ALTER TABLE ledgerq.batch_payloads DROP CONSTRAINT batch_payloads_seq_fkey;
ALTER TABLE ledgerq.batch_payloads DROP CONSTRAINT batch_payloads_id_not_empty;
ALTER TABLE ledgerq.batches DROP CONSTRAINT batches_pkey;
ALTER TABLE ledgerq.batches ADD CONSTRAINT batches_pkey PRIMARY KEY (id);
ALTER TABLE ledgerq.batches ADD CONSTRAINT batches_id_not_empty CHECK (id <> '' AND length(id) <= 256);
ALTER TABLE ledgerq.batch_payloads ADD CONSTRAINT batch_payloads_id_fkey FOREIGN KEY (id) REFERENCES ledgerq.batches (id) ON DELETE CASCADE;
ALTER TABLE ledgerq.batch_payloads DROP COLUMN seq;

DROP INDEX ledgerq.batches_new_by_service;
CREATE INDEX batches_new_by_service ON ledgerq.batches (service_id, created_at, id)
    WHERE status IS NULL AND NOT submitted;
DROP INDEX ledgerq.batches_queued;
CREATE INDEX batches_queued ON ledgerq.batches (queued_at, created_at, id)
    WHERE queued_at IS NOT NULL;

-- Also drops the sequence, which the column owns.
ALTER TABLE ledgerq.batches DROP COLUMN seq;

COMMENT ON TABLE ledgerq.batches IS 'Batch lane: signed ledger batches, sent one at a time per service_id in created_at order, ties broken by id.';
COMMENT ON COLUMN ledgerq.batches.id IS 'Batch id: for Sawtooth, the batch header_signature. Re-posting the same id with the same content is idempotent.';
COMMENT ON TABLE ledgerq.batch_payloads IS 'Batch lane: the signed payload of each batch, written once when the batch is stored; deleted with its batch.';
COMMENT ON COLUMN ledgerq.batch_payloads.id IS 'The batch (ledgerq.batches.id).';

CREATE VIEW ledgerq.batch_overview AS
SELECT
    service_id,
    coalesce(status::text, CASE WHEN submitted THEN 'held' WHEN queued_at IS NOT NULL THEN 'queued' ELSE 'new' END) AS state,
    count(*) AS batches,
    min(created_at) AS oldest_created_at,
    min(received_at) FILTER (WHERE finished_at IS NULL) AS oldest_waiting_received_at,
    (array_agg(id ORDER BY created_at, id) FILTER (WHERE finished_at IS NULL))[1] AS oldest_waiting_id
FROM ledgerq.batches
GROUP BY 1, 2;
COMMENT ON VIEW ledgerq.batch_overview IS 'Batch lane at a glance: batches per service and state (new, queued, held, or the status), and the oldest batch still waiting.';
COMMENT ON COLUMN ledgerq.batch_overview.service_id IS 'The service.';
COMMENT ON COLUMN ledgerq.batch_overview.state IS 'new (never sent, not queued), queued, held (submitter has it), or the batch status.';
COMMENT ON COLUMN ledgerq.batch_overview.batches IS 'Number of batches in this state.';
COMMENT ON COLUMN ledgerq.batch_overview.oldest_created_at IS 'Oldest created_at among them.';
COMMENT ON COLUMN ledgerq.batch_overview.oldest_waiting_received_at IS 'When the oldest non-terminal batch among them was received (NULL for terminal states).';
COMMENT ON COLUMN ledgerq.batch_overview.oldest_waiting_id IS 'Id of the oldest non-terminal batch among them.';
