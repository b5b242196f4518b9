-- +goose Up
-- Batch lane: submit a batch inside the application's own transaction
-- (issue 42). ledgerq.submit_batch stores a batch as POST /v1/batches
-- stores it, so that it exists if and only if the calling transaction
-- commits. SQL cannot check secp256k1 signatures: a batch stored here is
-- marked unverified, and the batch submitter verifies it, with the API's
-- check, before it sends it (an invalid one ends invalid with the reason,
-- unsent). docs/enqueue.md is the guide.

-- Set only by submit_batch: the API verifies signatures before it stores.
ALTER TABLE ledgerq.batch_payloads ADD COLUMN unverified boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN ledgerq.batch_payloads.unverified IS 'Stored through ledgerq.submit_batch, whose signatures SQL cannot check: the submitter verifies the batch before sending it, and records it invalid with the reason, unsent, when it fails.';

-- --api-max-payload-bytes, which submit_batch applies as the API does.
ALTER TABLE ledgerq.settings DROP CONSTRAINT settings_name_known;
ALTER TABLE ledgerq.settings ADD CONSTRAINT settings_name_known CHECK (name IN ('wallet_max_fee_per_gas', 'api_max_payload_bytes'));
ALTER TABLE ledgerq.settings ADD CONSTRAINT settings_api_max_payload_bytes CHECK (name <> 'api_max_payload_bytes' OR value ~ '^[1-9][0-9]{0,9}$');
COMMENT ON TABLE ledgerq.settings IS 'Settings of the serve that started last, which SQL functions read: wallet_max_fee_per_gas (--wallet-max-fee-per-gas, the fee ceiling send_tx applies as the API does), api_max_payload_bytes (--api-max-payload-bytes, the largest batch submit_batch takes).';
-- The default of --api-max-payload-bytes (1 MiB), until a serve starts.
INSERT INTO ledgerq.settings (name, value, updated_at) VALUES ('api_max_payload_bytes', '1048576', now());

-- Which database roles may submit batches for which services.
CREATE TABLE ledgerq.enqueue_service_grants (
    role_name  text        NOT NULL,
    service_id text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),

    PRIMARY KEY (role_name, service_id),
    CONSTRAINT enqueue_service_grants_role_name_not_empty CHECK (role_name <> '' AND length(role_name) <= 63),
    CONSTRAINT enqueue_service_grants_service_id_not_empty CHECK (service_id <> '' AND length(service_id) <= 256)
);
COMMENT ON TABLE ledgerq.enqueue_service_grants IS 'Service scoping of ledgerq.submit_batch, like an API key''s service:NAME scopes: a session whose login role (session_user) is role_name, or a member of it, may submit batches for service_id (''*'': every service). Written by the operator with INSERT.';
COMMENT ON COLUMN ledgerq.enqueue_service_grants.role_name IS 'A database role: the login role itself, or a group role it is a member of.';
COMMENT ON COLUMN ledgerq.enqueue_service_grants.service_id IS 'The batch service (batches.service_id), or ''*'' for every service.';
COMMENT ON COLUMN ledgerq.enqueue_service_grants.created_at IS 'When the grant was written.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.batch_header_signature(p bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    n      int := octet_length(p);
    pos    int := 0;
    v      bigint;
    shift  int;
    b      int;
    wire   int;
    field  bigint;
    len    bigint;
    header bytea;
    sig    bytea;
BEGIN
    -- The top level of a serialized Sawtooth Batch (header = 1,
    -- header_signature = 2, transactions = 3, trace = 4): the fields
    -- sawtooth.ParseBatch checks, with its words. Transactions are
    -- skipped, not decoded: the submitter's verification decodes them.
    IF n = 0 THEN
        RAISE EXCEPTION 'field batch: malformed batch: empty payload' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WHILE pos < n LOOP
        FOR part IN 1 .. 2 LOOP
            -- part 1: the tag; part 2: a length (wire type 2) or a varint value.
            EXIT WHEN part = 2 AND wire NOT IN (0, 2);
            v := 0; shift := 0;
            LOOP
                IF pos >= n OR shift > 63 THEN
                    RAISE EXCEPTION 'field batch: malformed batch: decoding batch: truncated or overlong varint at byte %', pos
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
                b := get_byte(p, pos);
                pos := pos + 1;
                v := v | ((b & 127)::bigint << shift);
                shift := shift + 7;
                EXIT WHEN b < 128;
            END LOOP;
            IF part = 1 THEN
                wire := (v & 7)::int;
                field := v >> 3;
                IF field = 0 OR wire NOT IN (0, 1, 2, 5) THEN
                    RAISE EXCEPTION 'field batch: malformed batch: decoding batch: invalid field number % or wire type % at byte %', field, wire, pos
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
            END IF;
        END LOOP;
        len := CASE wire WHEN 1 THEN 8 WHEN 5 THEN 4 WHEN 2 THEN v ELSE 0 END;
        IF len < 0 OR len > n - pos THEN
            RAISE EXCEPTION 'field batch: malformed batch: decoding batch: field % runs past the end', field
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF wire = 2 AND field = 1 THEN
            header := substring(p FROM pos + 1 FOR len::int);
        ELSIF wire = 2 AND field = 2 THEN
            sig := substring(p FROM pos + 1 FOR len::int);
        END IF;
        pos := pos + len::int;
    END LOOP;
    IF sig IS NULL OR octet_length(sig) = 0 THEN
        RAISE EXCEPTION 'field batch: malformed batch: header_signature is missing' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(sig) <> 128 OR encode(sig, 'escape') !~ '^[0-9a-f]{128}$' THEN
        RAISE EXCEPTION 'field batch: malformed batch: header_signature is not 128 lower case hex characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF header IS NULL OR octet_length(header) = 0 THEN
        RAISE EXCEPTION 'field batch: malformed batch: header is missing' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN convert_from(sig, 'UTF8');
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.batch_header_signature(bytea) IS 'The header_signature (the batch id) of a serialized Sawtooth Batch, after the structural checks of sawtooth.ParseBatch on its top level; raises 22023 naming the problem.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.submit_batch(service_id text, batch bytea) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    max_bytes int;
    batch_id  text;
    new_seq   bigint;
    stored    record;
    now_      timestamptz := clock_timestamp();
BEGIN
    -- The fields, in the order and with the words of the API's
    -- validateBatch (internal/httpapi/batches.go); the id is the batch's
    -- header_signature, as the API requires it to be.
    IF service_id IS NULL OR service_id = '' THEN
        RAISE EXCEPTION 'field service_id: required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(service_id) > 256 THEN
        RAISE EXCEPTION 'field service_id: longer than 256 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF batch IS NULL OR octet_length(batch) = 0 THEN
        RAISE EXCEPTION 'field batch: required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT s.value::int INTO max_bytes FROM ledgerq.settings s WHERE s.name = 'api_max_payload_bytes';
    IF octet_length(batch) > max_bytes THEN
        RAISE EXCEPTION 'field batch: larger than % bytes', max_bytes USING ERRCODE = 'invalid_parameter_value';
    END IF;
    batch_id := ledgerq.batch_header_signature(batch);

    -- Whether the caller may use the service, as the API's service scopes.
    IF NOT EXISTS (
        SELECT 1 FROM ledgerq.enqueue_service_grants g
        WHERE (g.service_id = submit_batch.service_id OR g.service_id = '*')
          AND (g.role_name = session_user::text
               OR (EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = g.role_name)
                   AND pg_catalog.pg_has_role(session_user, g.role_name, 'MEMBER')))
    ) THEN
        RAISE EXCEPTION 'service %: role % may not submit batches for it (ledgerq.enqueue_service_grants)', service_id, session_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;

    -- Admission's lock on the service (queries/batches.sql
    -- BatchServiceLock), exclusive, until the caller's commit: admission
    -- below, and that of the transaction which frees the service, each see
    -- the other's batches.
    PERFORM pg_advisory_xact_lock(1818585457, hashtext(submit_batch.service_id));

    -- store.BatchInsert's statement (BatchInsertMany) for one batch. A
    -- known id waits for the transaction that stored it, and is answered
    -- as the API answers a re-post: the same batch, or a conflict.
    WITH pay AS (
        INSERT INTO ledgerq.batch_payloads (seq, id, service_id, payload, unverified)
        VALUES (nextval('ledgerq.batch_seq'), batch_id, submit_batch.service_id, batch, true)
        ON CONFLICT (id) DO NOTHING
        RETURNING seq
    ), ins AS (
        INSERT INTO ledgerq.batches (seq, service_id, created_at, received_at, updated_at)
        SELECT pay.seq, submit_batch.service_id, now_, now_, now_ FROM pay
        RETURNING seq
    )
    SELECT ins.seq INTO new_seq FROM ins;
    IF new_seq IS NULL THEN
        SELECT p.service_id, p.payload INTO stored FROM ledgerq.batch_payloads p WHERE p.id = batch_id;
        IF stored.service_id <> submit_batch.service_id THEN
            RAISE EXCEPTION 'batch "%" already exists with a different service_id', batch_id USING ERRCODE = 'unique_violation';
        END IF;
        IF stored.payload <> batch THEN
            RAISE EXCEPTION 'batch "%" already exists with a different payload', batch_id USING ERRCODE = 'unique_violation';
        END IF;
        RETURN batch_id;
    END IF;

    -- Admission (BatchAdmit) under the lock: a service with no active
    -- batch gets its oldest never-sent batch queued, created_at order,
    -- ties broken by id, and the submitters are woken when the caller
    -- commits.
    UPDATE ledgerq.batches b SET queued_at = now_, updated_at = now_
    WHERE b.seq = (
        SELECT o.seq FROM ledgerq.batches o JOIN ledgerq.batch_payloads op ON op.seq = o.seq
        WHERE o.service_id = submit_batch.service_id AND o.status IS NULL AND NOT o.submitted
        ORDER BY o.created_at, op.id LIMIT 1)
      AND b.status IS NULL AND NOT b.submitted AND b.queued_at IS NULL
      AND NOT EXISTS (
        SELECT 1 FROM ledgerq.batches a
        WHERE a.service_id = submit_batch.service_id
          AND (a.status IN ('pending', 'unknown', 'delayed')
               OR (a.status IS NULL AND (a.submitted OR a.queued_at IS NOT NULL))));
    IF FOUND THEN
        PERFORM pg_notify('ledgerq_batch_submitter', '');
    END IF;
    RETURN batch_id;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.submit_batch(text, bytea) IS 'Stores a signed Sawtooth batch of the service in the caller''s transaction, checked as POST /v1/batches checks it except for its signatures (the submitter verifies those before sending, and records a batch that fails invalid), and returns its id (its header_signature); the batch exists, and its service''s lane is woken, when the caller commits. Refusals: 22023 (a field, "field NAME: …"), 23505 (the id is stored with another service or payload), 42501 (the service is not granted in enqueue_service_grants). docs/enqueue.md.';

REVOKE ALL ON FUNCTION ledgerq.submit_batch(text, bytea) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.batch_header_signature(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledgerq.submit_batch(text, bytea) TO ledgerq_enqueue;

-- +goose Down
REVOKE ALL ON FUNCTION ledgerq.submit_batch(text, bytea) FROM ledgerq_enqueue;
DROP FUNCTION ledgerq.submit_batch(text, bytea);
DROP FUNCTION ledgerq.batch_header_signature(bytea);
DROP TABLE ledgerq.enqueue_service_grants;
DELETE FROM ledgerq.settings WHERE name = 'api_max_payload_bytes';
ALTER TABLE ledgerq.settings DROP CONSTRAINT settings_api_max_payload_bytes;
ALTER TABLE ledgerq.settings DROP CONSTRAINT settings_name_known;
ALTER TABLE ledgerq.settings ADD CONSTRAINT settings_name_known CHECK (name IN ('wallet_max_fee_per_gas'));
COMMENT ON TABLE ledgerq.settings IS 'Settings of the serve that started last, which SQL functions read: wallet_max_fee_per_gas (--wallet-max-fee-per-gas, the fee ceiling send_tx applies as the API does).';
ALTER TABLE ledgerq.batch_payloads DROP COLUMN unverified;
