-- +goose Up
-- Batch lane: Hyperledger Grid's one-round serial queuer (docs/design.md,
-- "The batch lane").

CREATE TYPE ledgerq.batch_status AS ENUM (
    'pending', 'unknown', 'delayed', 'committed', 'valid', 'invalid'
);
COMMENT ON TYPE ledgerq.batch_status IS 'Batch status. NULL in batches.status: not sent yet.';

CREATE TABLE ledgerq.batches (
    id                text        PRIMARY KEY,
    service_id        text        NOT NULL,
    payload           bytea       NOT NULL,
    created_at        timestamptz NOT NULL,
    submitted         boolean     NOT NULL DEFAULT false,
    status            ledgerq.batch_status,
    queued_at         timestamptz,
    claim_expires_at  timestamptz,
    attempts          integer     NOT NULL DEFAULT 0,
    last_submitted_at timestamptz,
    next_check_at     timestamptz,
    last_error        text,
    received_at       timestamptz NOT NULL,
    finished_at       timestamptz,
    updated_at        timestamptz NOT NULL,

    CONSTRAINT batches_id_not_empty CHECK (id <> '' AND length(id) <= 256),
    CONSTRAINT batches_service_id_not_empty CHECK (service_id <> '' AND length(service_id) <= 256),
    CONSTRAINT batches_attempts_not_negative CHECK (attempts >= 0),
    -- A pending batch is at the ledger: the submitter sent it, so submitted is
    -- true.
    CONSTRAINT batches_pending_is_submitted CHECK (status IS DISTINCT FROM 'pending' OR submitted),
    -- The claim lease exists exactly while the submitter holds the batch: submitted
    -- with no status yet, or a retry of an unknown or delayed batch.
    CONSTRAINT batches_lease_iff_held CHECK (
        (claim_expires_at IS NOT NULL) =
        (submitted AND (status IS NULL OR status IN ('unknown', 'delayed')))
    ),
    -- Only a batch waiting for the submitter can be queued.
    CONSTRAINT batches_queued_only_when_waiting CHECK (
        queued_at IS NULL
        OR (NOT submitted AND (status IS NULL OR status IN ('unknown', 'delayed')))
    ),
    -- A batch has been tried before it can be delayed, unknown or pending.
    CONSTRAINT batches_sent_states_have_attempts CHECK (
        status IS NULL OR status IN ('valid', 'invalid', 'committed') OR (attempts > 0 AND last_submitted_at IS NOT NULL)
    ),
    -- finished_at is set exactly for terminal statuses.
    CONSTRAINT batches_finished_iff_terminal CHECK (
        (finished_at IS NOT NULL) = (status IS NOT NULL AND status IN ('committed', 'valid', 'invalid'))
    ),
    -- The monitor follows a pending batch on a schedule.
    CONSTRAINT batches_pending_has_check_time CHECK (status IS DISTINCT FROM 'pending' OR next_check_at IS NOT NULL)
);

COMMENT ON TABLE ledgerq.batches IS 'Batch lane: signed ledger batches, sent one at a time per service_id in created_at order, ties broken by id.';
COMMENT ON COLUMN ledgerq.batches.id IS 'Batch id: for Sawtooth, the batch header_signature. Re-posting the same id with the same content is idempotent.';
COMMENT ON COLUMN ledgerq.batches.service_id IS 'Ordering key: at most one batch per service_id is at the ledger at a time.';
COMMENT ON COLUMN ledgerq.batches.payload IS 'The signed batch as sent to the ledger (for Sawtooth, a serialized Batch protobuf message).';
COMMENT ON COLUMN ledgerq.batches.created_at IS 'Client-given creation time; batches of one service go out in this order, ties broken by id.';
COMMENT ON COLUMN ledgerq.batches.submitted IS 'Submitted flag: true while the submitter holds the batch (status NULL, unknown or delayed, with a claim lease) and once it has reached the ledger (pending and after).';
COMMENT ON COLUMN ledgerq.batches.status IS 'Batch status (batch_status); NULL is None (never sent). committed, valid and invalid are terminal.';
COMMENT ON COLUMN ledgerq.batches.queued_at IS 'Set by the queuer when the batch is admitted (queued now); cleared when the submitter claims it.';
COMMENT ON COLUMN ledgerq.batches.claim_expires_at IS 'Submitter claim lease. A held batch whose lease passed is checked with the ledger by the monitor (its submitter died mid-send).';
COMMENT ON COLUMN ledgerq.batches.attempts IS 'Number of submission attempts; also the fencing token for the submitter''s outcome update.';
COMMENT ON COLUMN ledgerq.batches.last_submitted_at IS 'When the last submission attempt started; the delay window of a delayed batch counts from here.';
COMMENT ON COLUMN ledgerq.batches.next_check_at IS 'When the monitor next asks the ledger about this pending batch.';
COMMENT ON COLUMN ledgerq.batches.last_error IS 'Last failure: the transient error of a delayed batch, or the ledger''s reason for an invalid one.';
COMMENT ON COLUMN ledgerq.batches.received_at IS 'When ledgerq stored the batch.';
COMMENT ON COLUMN ledgerq.batches.finished_at IS 'When the batch reached a terminal status (committed, valid, invalid).';
COMMENT ON COLUMN ledgerq.batches.updated_at IS 'Last change to the row.';

-- Queuer, step 6: the oldest never-sent batch of each service. Terminal and sent
-- rows are not in this index, so a round never walks them.
CREATE INDEX batches_new_by_service ON ledgerq.batches (service_id, created_at, id)
    WHERE status IS NULL AND NOT submitted;
-- Queuer, step 5: services with a batch in flight (pending, unknown, delayed,
-- or held).
CREATE INDEX batches_active_by_service ON ledgerq.batches (service_id)
    WHERE status IN ('pending', 'unknown', 'delayed') OR (submitted AND status IS NULL);
-- Queuer, steps 3 and 4: unknown and delayed batches waiting to be queued again.
CREATE INDEX batches_retry ON ledgerq.batches (last_submitted_at)
    WHERE status IN ('unknown', 'delayed') AND NOT submitted AND queued_at IS NULL;
-- Submitter: queued batches, oldest first.
CREATE INDEX batches_queued ON ledgerq.batches (queued_at, created_at, id)
    WHERE queued_at IS NOT NULL;
-- Monitor: pending batches due for a status check.
CREATE INDEX batches_pending_check ON ledgerq.batches (next_check_at)
    WHERE status = 'pending';
-- Monitor: held batches whose claim lease may have expired.
CREATE INDEX batches_held_lease ON ledgerq.batches (claim_expires_at)
    WHERE claim_expires_at IS NOT NULL;
-- API: list a service's batches by id (keyset pagination).
CREATE INDEX batches_service_id_id ON ledgerq.batches (service_id, id);

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

-- +goose Down
DROP VIEW ledgerq.batch_overview;
DROP TABLE ledgerq.batches;
DROP TYPE ledgerq.batch_status;
