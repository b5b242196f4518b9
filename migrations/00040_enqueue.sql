-- +goose Up
-- Wallet lane: enqueue inside the application's own transaction (issue 42).
-- ledgerq.send_tx stores a send-tx task from SQL, validated as
-- POST /v1/wallets/{wallet}/send-tx validates it, so that the task exists if
-- and only if the calling transaction commits. It is called by roles granted
-- ledgerq_enqueue, which may call it and nothing else, for the wallets
-- enqueue_grants gives them. docs/enqueue.md is the guide.

-- Where SQL learns a wallet's chain and sender. The configuration's wallets
-- live in serve's memory (--wallet-keystore, --wallet-signer): serve writes
-- them here at start. The wallets added at run time are copied here by a
-- trigger on ledgerq.wallets, in the statement that changes them.
CREATE TABLE ledgerq.wallet_directory (
    wallet_id  text        PRIMARY KEY,
    chain_id   bigint      NOT NULL,
    sender     text        NOT NULL,
    source     text        NOT NULL,
    disabled   boolean     NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL,

    CONSTRAINT wallet_directory_wallet_id_format CHECK (wallet_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    CONSTRAINT wallet_directory_chain_id_positive CHECK (chain_id > 0),
    CONSTRAINT wallet_directory_sender_format CHECK (octet_length(sender) = 42 AND sender ~ '^0x[0-9a-f]+$'),
    CONSTRAINT wallet_directory_source_known CHECK (source IN ('config', 'runtime')),
    CONSTRAINT wallet_directory_updated_at_finite CHECK (isfinite(updated_at))
);
COMMENT ON TABLE ledgerq.wallet_directory IS 'Wallet lane: every wallet a send_tx may name, with its chain and sender: the configuration''s (written at serve start) and those added at run time (kept in step with ledgerq.wallets by its trigger).';
COMMENT ON COLUMN ledgerq.wallet_directory.wallet_id IS 'The wallet''s name (wallet_tasks.wallet_id).';
COMMENT ON COLUMN ledgerq.wallet_directory.chain_id IS 'The wallet''s chain id.';
COMMENT ON COLUMN ledgerq.wallet_directory.sender IS 'The wallet''s address, lower-case hex.';
COMMENT ON COLUMN ledgerq.wallet_directory.source IS 'config: from the configuration of the serve that started last (--wallet-keystore, --wallet-signer); runtime: from ledgerq.wallets (POST /v1/wallets).';
COMMENT ON COLUMN ledgerq.wallet_directory.disabled IS 'A runtime wallet disabled through the API: send_tx refuses it, as the API does (409).';
COMMENT ON COLUMN ledgerq.wallet_directory.updated_at IS 'When the row was last written.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.wallet_directory_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM ledgerq.wallet_directory WHERE wallet_id = OLD.name AND source = 'runtime';
        RETURN OLD;
    END IF;
    INSERT INTO ledgerq.wallet_directory (wallet_id, chain_id, sender, source, disabled, updated_at)
    VALUES (NEW.name, NEW.chain_id, NEW.address, 'runtime', NEW.disabled, NEW.updated_at)
    ON CONFLICT (wallet_id) DO UPDATE
    SET chain_id = EXCLUDED.chain_id, sender = EXCLUDED.sender, source = 'runtime',
        disabled = EXCLUDED.disabled, updated_at = EXCLUDED.updated_at;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.wallet_directory_follow() IS 'Keeps wallet_directory in step with ledgerq.wallets, in the statement that changes it.';
CREATE TRIGGER wallets_directory AFTER INSERT OR UPDATE OR DELETE ON ledgerq.wallets
    FOR EACH ROW EXECUTE FUNCTION ledgerq.wallet_directory_follow();
INSERT INTO ledgerq.wallet_directory (wallet_id, chain_id, sender, source, disabled, updated_at)
SELECT name, chain_id, address, 'runtime', disabled, updated_at FROM ledgerq.wallets;

-- Settings a serve writes at start for the SQL functions that share its
-- rules.
CREATE TABLE ledgerq.settings (
    name       text        PRIMARY KEY,
    value      text        NOT NULL,
    updated_at timestamptz NOT NULL,

    CONSTRAINT settings_name_known CHECK (name IN ('wallet_max_fee_per_gas')),
    CONSTRAINT settings_wallet_max_fee_per_gas CHECK (name <> 'wallet_max_fee_per_gas' OR value ~ '^[0-9]{1,78}$'),
    CONSTRAINT settings_updated_at_finite CHECK (isfinite(updated_at))
);
COMMENT ON TABLE ledgerq.settings IS 'Settings of the serve that started last, which SQL functions read: wallet_max_fee_per_gas (--wallet-max-fee-per-gas, the fee ceiling send_tx applies as the API does).';
COMMENT ON COLUMN ledgerq.settings.name IS 'The setting: wallet_max_fee_per_gas.';
COMMENT ON COLUMN ledgerq.settings.value IS 'Its value as text (wei, in decimal).';
COMMENT ON COLUMN ledgerq.settings.updated_at IS 'When a serve last wrote it.';
-- The default of --wallet-max-fee-per-gas (10000 gwei), until a serve starts.
INSERT INTO ledgerq.settings (name, value, updated_at) VALUES ('wallet_max_fee_per_gas', '10000000000000', now());

-- Which database roles may enqueue for which wallets.
CREATE TABLE ledgerq.enqueue_grants (
    role_name  text        NOT NULL,
    wallet_id  text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),

    PRIMARY KEY (role_name, wallet_id),
    CONSTRAINT enqueue_grants_role_name_not_empty CHECK (role_name <> '' AND length(role_name) <= 63),
    CONSTRAINT enqueue_grants_wallet_id_format CHECK (wallet_id = '*' OR wallet_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$')
);
COMMENT ON TABLE ledgerq.enqueue_grants IS 'Wallet scoping of ledgerq.send_tx, like an API key''s wallet:NAME scopes: a session whose login role (session_user) is role_name, or a member of it, may enqueue for wallet_id (''*'': every wallet). Written by the operator with INSERT.';
COMMENT ON COLUMN ledgerq.enqueue_grants.role_name IS 'A database role: the login role itself, or a group role it is a member of.';
COMMENT ON COLUMN ledgerq.enqueue_grants.wallet_id IS 'The wallet''s name, or ''*'' for every wallet.';
COMMENT ON COLUMN ledgerq.enqueue_grants.created_at IS 'When the grant was written.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.keccak256(p bytea) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    -- Keccak-f[1600] on 25 lanes of 64 bits (bigint, bitwise); rate 136
    -- bytes, Keccak's own padding (0x01 … 0x80, not SHA-3's 0x06).
    rc   bigint[] := ARRAY[
        x'0000000000000001'::bigint, x'0000000000008082'::bigint, x'800000000000808A'::bigint, x'8000000080008000'::bigint,
        x'000000000000808B'::bigint, x'0000000080000001'::bigint, x'8000000080008081'::bigint, x'8000000000008009'::bigint,
        x'000000000000008A'::bigint, x'0000000000000088'::bigint, x'0000000080008009'::bigint, x'000000008000000A'::bigint,
        x'000000008000808B'::bigint, x'800000000000008B'::bigint, x'8000000000008089'::bigint, x'8000000000008003'::bigint,
        x'8000000000008002'::bigint, x'8000000000000080'::bigint, x'000000000000800A'::bigint, x'800000008000000A'::bigint,
        x'8000000080008081'::bigint, x'8000000000008080'::bigint, x'0000000080000001'::bigint, x'8000000080008008'::bigint];
    rotc int[] := ARRAY[1, 3, 6, 10, 15, 21, 28, 36, 45, 55, 2, 14, 27, 41, 56, 8, 25, 43, 62, 18, 39, 61, 20, 44];
    piln int[] := ARRAY[10, 7, 11, 17, 18, 3, 5, 16, 8, 21, 24, 4, 15, 23, 19, 13, 12, 2, 20, 14, 22, 9, 6, 1];
    s    bigint[] := array_fill(0::bigint, ARRAY[25]);
    c    bigint[] := array_fill(0::bigint, ARRAY[5]);
    msg  bytea;
    d    bigint;
    t    bigint;
    bc   bigint;
    lane bigint;
    n    int;
    out  bytea := '\x'::bytea;
BEGIN
    n := 136 - octet_length(p) % 136;
    msg := p || decode(repeat('00', n), 'hex');
    msg := set_byte(msg, octet_length(p), 1);
    msg := set_byte(msg, octet_length(msg) - 1, get_byte(msg, octet_length(msg) - 1) | 128);
    FOR blk IN 0 .. octet_length(msg) / 136 - 1 LOOP
        FOR i IN 0 .. 16 LOOP
            lane := 0;
            FOR k IN REVERSE 7 .. 0 LOOP
                lane := (lane << 8) | get_byte(msg, blk * 136 + i * 8 + k);
            END LOOP;
            s[i + 1] := s[i + 1] # lane;
        END LOOP;
        FOR r IN 1 .. 24 LOOP
            FOR x IN 0 .. 4 LOOP
                c[x + 1] := s[x + 1] # s[x + 6] # s[x + 11] # s[x + 16] # s[x + 21];
            END LOOP;
            FOR x IN 0 .. 4 LOOP
                t := c[(x + 1) % 5 + 1];
                d := c[(x + 4) % 5 + 1] # ((t << 1) | ((t >> 63) & 1));
                FOR y IN 0 .. 4 LOOP
                    s[x + 5 * y + 1] := s[x + 5 * y + 1] # d;
                END LOOP;
            END LOOP;
            t := s[2];
            FOR i IN 1 .. 24 LOOP
                bc := s[piln[i] + 1];
                s[piln[i] + 1] := (t << rotc[i]) | ((t >> (64 - rotc[i])) & ((1::bigint << rotc[i]) - 1));
                t := bc;
            END LOOP;
            FOR y IN 0 .. 4 LOOP
                FOR x IN 0 .. 4 LOOP
                    c[x + 1] := s[5 * y + x + 1];
                END LOOP;
                FOR x IN 0 .. 4 LOOP
                    s[5 * y + x + 1] := c[x + 1] # (~c[(x + 1) % 5 + 1] & c[(x + 2) % 5 + 1]);
                END LOOP;
            END LOOP;
            s[1] := s[1] # rc[r];
        END LOOP;
    END LOOP;
    FOR i IN 1 .. 4 LOOP
        FOR k IN 0 .. 7 LOOP
            out := out || decode(lpad(to_hex((s[i] >> (8 * k)) & 255), 2, '0'), 'hex');
        END LOOP;
    END LOOP;
    RETURN out;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.keccak256(bytea) IS 'Keccak-256 (Ethereum''s hash): send_tx checks a mixed-case address''s EIP-55 checksum with it, as the API does.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.eip55(p_lower text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    h   bytea := ledgerq.keccak256(convert_to(p_lower, 'UTF8'));
    out text := '0x';
    ch  text;
    nib int;
BEGIN
    FOR i IN 0 .. 39 LOOP
        ch := substr(p_lower, i + 1, 1);
        nib := CASE WHEN i % 2 = 0 THEN get_byte(h, i / 2) >> 4 ELSE get_byte(h, i / 2) & 15 END;
        out := out || CASE WHEN ch BETWEEN 'a' AND 'f' AND nib >= 8 THEN upper(ch) ELSE ch END;
    END LOOP;
    RETURN out;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.eip55(text) IS 'The EIP-55 checksummed form of 40 lower-case hex digits (without 0x).';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.uint_bytes(p numeric) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    v   numeric := p;
    out bytea := '\x'::bytea;
BEGIN
    -- Big-endian, no leading zero bytes, zero as no bytes: Go's
    -- big.Int.Bytes, which TaskRequestHash hashes.
    WHILE v > 0 LOOP
        out := decode(lpad(to_hex(mod(v, 256)::int), 2, '0'), 'hex') || out;
        v := div(v, 256);
    END LOOP;
    RETURN out;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.uint_bytes(numeric) IS 'A whole number''s big-endian bytes without leading zeros (Go''s big.Int.Bytes).';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.send_tx_field(p bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT int8send(octet_length(p)::bigint) || p
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.send_tx_field(bytea) IS 'One field of store.TaskRequestHash: its length (8 bytes, big-endian), then its bytes.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.go_duration(p_seconds bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    -- Go's time.Duration.String for whole seconds (1h0m0s, 1m30s, 5s), as
    -- the API's policy refusals write a window.
    SELECT CASE
        WHEN p_seconds >= 3600 THEN format('%sh%sm%ss', p_seconds / 3600, p_seconds % 3600 / 60, p_seconds % 60)
        WHEN p_seconds >= 60 THEN format('%sm%ss', p_seconds / 60, p_seconds % 60)
        ELSE format('%ss', p_seconds)
    END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.go_duration(bigint) IS 'Whole seconds written as Go''s time.Duration writes them (a policy refusal''s window).';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.send_tx(
    wallet text, to_address text,
    value numeric DEFAULT 0, data bytea DEFAULT '\x'::bytea,
    idempotency_key text DEFAULT NULL, gas_limit bigint DEFAULT NULL,
    max_fee_per_gas numeric DEFAULT NULL, max_priority_fee_per_gas numeric DEFAULT NULL,
    priority integer DEFAULT 0, preflight boolean DEFAULT true
) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    max_uint256 CONSTANT numeric := 2::numeric ^ 256 - 1;
    p_value     numeric := coalesce(value, 0);
    p_data      bytea := coalesce(data, '\x'::bytea);
    p_priority  integer := coalesce(priority, 0);
    p_preflight boolean := coalesce(preflight, true);
    ceiling     numeric;
    w_chain     bigint;
    w_sender    text;
    w_source    text;
    w_disabled  boolean;
    to_lower    text;
    hash        bytea;
    task_id     text;
    stored      record;
    refusal     jsonb;
    now_        timestamptz := clock_timestamp();
    id_bytes    bytea;
    shard_key   text;
    shard_state ledgerq.shard_state;
    shard_more  boolean;
    fld         record;
    msg         text;
BEGIN
    -- The wallet, and whether the caller may use it: an unknown wallet and
    -- one not granted are the same refusal, as the API's 404 is.
    SELECT d.chain_id, d.sender, d.source, d.disabled INTO w_chain, w_sender, w_source, w_disabled
    FROM ledgerq.wallet_directory d WHERE d.wallet_id = wallet;
    IF NOT FOUND OR NOT EXISTS (
        SELECT 1 FROM ledgerq.enqueue_grants g
        WHERE (g.wallet_id = wallet OR g.wallet_id = '*')
          AND (g.role_name = session_user::text
               OR (EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = g.role_name)
                   AND pg_catalog.pg_has_role(session_user, g.role_name, 'MEMBER')))
    ) THEN
        RAISE EXCEPTION 'wallet %: no such wallet, or role % may not enqueue for it (ledgerq.enqueue_grants)', wallet, session_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;

    -- The fields, in the order and with the words of the API's
    -- validateSendTx (internal/httpapi/wallets.go).
    IF to_address IS NULL OR to_address = '' THEN
        RAISE EXCEPTION 'field to: required (0x and 40 hex digits)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF to_address !~ '^0x[0-9a-fA-F]{40}$' THEN
        RAISE EXCEPTION 'field to: must be 0x and 40 hex digits' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    to_lower := lower(to_address);
    IF substr(to_address, 3) <> lower(substr(to_address, 3)) AND substr(to_address, 3) <> upper(substr(to_address, 3))
       AND ledgerq.eip55(substr(to_lower, 3)) <> to_address THEN
        RAISE EXCEPTION 'field to: mixed-case address with a wrong EIP-55 checksum (write it in one case, or as % if that is the one meant)',
            ledgerq.eip55(substr(to_lower, 3)) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_value = 'NaN'::numeric OR p_value < 0 OR p_value > max_uint256 OR p_value <> trunc(p_value) THEN
        RAISE EXCEPTION 'field value: must be a whole number of wei from 0 to 2^256-1, as a decimal string or 0x hex' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(p_data) > 131072 THEN
        RAISE EXCEPTION 'field data: larger than 131072 bytes' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF gas_limit IS NOT NULL AND (gas_limit < 21000 OR gas_limit > 9007199254740991) THEN
        RAISE EXCEPTION 'field gas_limit: must be from 21000 (a plain transfer) to 9007199254740991' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT s.value::numeric INTO ceiling FROM ledgerq.settings s WHERE s.name = 'wallet_max_fee_per_gas';
    FOR fld IN SELECT * FROM (VALUES (1, 'max_priority_fee_per_gas', max_priority_fee_per_gas), (2, 'max_fee_per_gas', max_fee_per_gas)) f(n, name, v) ORDER BY n LOOP
        CONTINUE WHEN fld.v IS NULL;
        IF fld.v = 'NaN'::numeric OR fld.v < 0 OR fld.v > max_uint256 OR fld.v <> trunc(fld.v) THEN
            RAISE EXCEPTION 'field %: must be a whole number of wei from 0 to 2^256-1, as a decimal string or 0x hex', fld.name USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF fld.v > ceiling THEN
            RAISE EXCEPTION 'field %: % wei per gas is above this server''s ceiling of % (--wallet-max-fee-per-gas)', fld.name, fld.v, ceiling USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF max_priority_fee_per_gas IS NOT NULL AND max_fee_per_gas IS NOT NULL AND max_priority_fee_per_gas > max_fee_per_gas THEN
        RAISE EXCEPTION 'field max_fee_per_gas: must be at least max_priority_fee_per_gas (%)', max_priority_fee_per_gas USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The API's checkIdempotencyKey (its header, here a field).
    IF idempotency_key IS NOT NULL AND (idempotency_key = '' OR length(idempotency_key) > 256) THEN
        RAISE EXCEPTION 'field idempotency_key: must be 1 to 256 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idempotency_key IS NOT NULL AND idempotency_key !~ '^[\x20-\x7e]*$' THEN
        RAISE EXCEPTION 'field idempotency_key: must be printable ASCII' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- A wallet added at run time is held (FOR SHARE) until the caller's
    -- commit, as the API's insert holds it, so that it cannot be removed
    -- while the task is stored; a disabled one takes no new task.
    IF w_source = 'runtime' THEN
        SELECT wl.disabled INTO w_disabled FROM ledgerq.wallets wl WHERE wl.name = wallet FOR SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'wallet %: no such wallet, or role % may not enqueue for it (ledgerq.enqueue_grants)', wallet, session_user
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF w_disabled AND NOT (idempotency_key IS NOT NULL AND EXISTS (
            SELECT 1 FROM ledgerq.wallet_tasks t WHERE t.wallet_id = wallet AND t.idempotency_key = send_tx.idempotency_key)) THEN
            RAISE EXCEPTION 'wallet "%" is disabled: it takes no new task', wallet USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
    END IF;

    -- store.TaskRequestHash: each field is its length (8 bytes, big-endian)
    -- and its bytes, so a key used over HTTP and over SQL with one body is
    -- one task.
    hash := ledgerq.send_tx_field(convert_to('ledgerq send-tx v1', 'UTF8'))
        || ledgerq.send_tx_field(int8send(w_chain))
        || ledgerq.send_tx_field(convert_to(w_sender, 'UTF8'))
        || ledgerq.send_tx_field(convert_to(to_lower, 'UTF8'))
        || ledgerq.send_tx_field(ledgerq.uint_bytes(p_value))
        || ledgerq.send_tx_field(p_data)
        || ledgerq.send_tx_field(CASE WHEN gas_limit IS NULL THEN '\x'::bytea ELSE int8send(gas_limit) END)
        || ledgerq.send_tx_field(int4send(p_priority));
    IF max_priority_fee_per_gas IS NOT NULL OR max_fee_per_gas IS NOT NULL THEN
        hash := hash || ledgerq.send_tx_field(convert_to('fees', 'UTF8'))
            || ledgerq.send_tx_field(CASE WHEN max_priority_fee_per_gas IS NULL THEN '\x'::bytea ELSE '\x01'::bytea || ledgerq.uint_bytes(max_priority_fee_per_gas) END)
            || ledgerq.send_tx_field(CASE WHEN max_fee_per_gas IS NULL THEN '\x'::bytea ELSE '\x01'::bytea || ledgerq.uint_bytes(max_fee_per_gas) END);
    END IF;
    IF NOT p_preflight THEN
        hash := hash || ledgerq.send_tx_field(convert_to('no preflight', 'UTF8'));
    END IF;
    hash := sha256(hash);

    -- The wallet's policy (ledgerq.wallet_policy_refusal locks its row; the
    -- insert below is a separate statement, so its snapshot is taken after
    -- the lock and sees the tasks of the intakes before it). A refusal is
    -- raised, so its record goes with the caller's transaction.
    refusal := ledgerq.wallet_policy_refusal(wallet, w_chain, w_sender, to_lower, p_value, p_data, idempotency_key, now_);
    IF refusal IS NOT NULL THEN
        msg := format('refused by the policy of wallet "%s": ', wallet) || CASE refusal ->> 'rule'
            WHEN 'recipient' THEN format('%s is not an allowed recipient', to_lower)
            WHEN 'contract' THEN format('%s is not an allowed contract', to_lower)
            WHEN 'selector' THEN format('function %s is not allowed on contract %s', refusal ->> 'selector', to_lower)
            WHEN 'max_value' THEN format('value %s wei is above the largest value per transaction, %s wei', refusal ->> 'requested', refusal ->> 'limit')
            WHEN 'value_window' THEN format('value %s wei would bring the value sent in %s to more than its cap, %s wei (%s used)',
                refusal ->> 'requested', ledgerq.go_duration((refusal ->> 'window_seconds')::bigint), refusal ->> 'limit', refusal ->> 'used')
            WHEN 'fee_window' THEN format('the fees of %s reached their cap, %s wei (%s used, counting transactions in flight at their worst case)',
                ledgerq.go_duration((refusal ->> 'window_seconds')::bigint), refusal ->> 'limit', refusal ->> 'used')
            ELSE refusal ->> 'rule' END;
        RAISE EXCEPTION '%', msg USING ERRCODE = 'raise_exception', DETAIL = refusal::text;
    END IF;

    -- A UUIDv7 of the statement's time (store.newUUIDv7).
    id_bytes := substring(int8send((extract(epoch FROM now_) * 1000)::bigint) FROM 3 FOR 6) || substring(uuid_send(gen_random_uuid()) FROM 7 FOR 10);
    id_bytes := set_byte(id_bytes, 6, (get_byte(id_bytes, 6) & 15) | 112);
    id_bytes := set_byte(id_bytes, 8, (get_byte(id_bytes, 8) & 63) | 128);
    task_id := encode(id_bytes, 'hex');
    task_id := substr(task_id, 1, 8) || '-' || substr(task_id, 9, 4) || '-' || substr(task_id, 13, 4) || '-' || substr(task_id, 17, 4) || '-' || substr(task_id, 21, 12);

    -- store.TaskInsert's statement (the policy was applied above). A
    -- conflict on the key waits for the transaction that holds it to end.
    INSERT INTO ledgerq.wallet_tasks (
        id, wallet_id, chain_id, sender, priority, status, to_address, value_wei, data, gas_limit,
        idempotency_key, request_hash, created_at, updated_at, tip_cap_wei, fee_cap_wei, call, preflight
    ) VALUES (
        task_id, wallet, w_chain, w_sender, p_priority, 0, to_lower, p_value, p_data, gas_limit,
        idempotency_key, hash, now_, now_, max_priority_fee_per_gas, max_fee_per_gas, NULL, p_preflight
    )
    ON CONFLICT ON CONSTRAINT wallet_tasks_idempotency_key_unique DO NOTHING;
    IF NOT FOUND THEN
        SELECT t.id, t.request_hash INTO stored FROM ledgerq.wallet_tasks t
        WHERE t.wallet_id = wallet AND t.idempotency_key = send_tx.idempotency_key;
        IF stored.request_hash <> hash THEN
            RAISE EXCEPTION 'idempotency key "%": wallet "%" already has task % under this key, stored from a different request',
                idempotency_key, wallet, stored.id USING ERRCODE = 'unique_violation';
        END IF;
        task_id := stored.id;
    END IF;

    -- The wallet's shard, scheduled as store.scheduleCommitted schedules it
    -- (queries/shards.sql ShardSchedule), in the caller's transaction: the
    -- shard becomes pending, and ledgerq_shards is notified, when the
    -- caller commits, and not at all when it rolls back. A shard pending,
    -- or running with more_work, needs nothing and takes no lock.
    shard_key := format('wallet:%s:%s', w_chain, w_sender);
    SELECT sh.state, sh.more_work INTO shard_state, shard_more FROM ledgerq.shards sh WHERE sh.key = shard_key;
    IF NOT FOUND OR NOT (shard_state = 'pending' OR (shard_state = 'running' AND shard_more)) THEN
        INSERT INTO ledgerq.shards AS s (key, state, scheduled_at, created_at, updated_at)
        VALUES (shard_key, 'pending', now_, now_, now_)
        ON CONFLICT (key) DO UPDATE
        SET state = CASE WHEN s.state = 'idle' THEN 'pending'::ledgerq.shard_state ELSE s.state END,
            scheduled_at = CASE WHEN s.state = 'idle' THEN now_ ELSE s.scheduled_at END,
            more_work = (s.state = 'running'),
            updated_at = now_
        WHERE s.state = 'idle' OR (s.state = 'running' AND NOT s.more_work)
        RETURNING s.state INTO shard_state;
        IF FOUND AND shard_state = 'pending' THEN
            PERFORM pg_notify('ledgerq_shards', '');
        END IF;
    END IF;
    RETURN task_id;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean) IS 'Stores a send-tx task of the wallet in the caller''s transaction, validated as POST /v1/wallets/{wallet}/send-tx validates it, and returns its id; the task exists, and its wallet''s shard is woken, when the caller commits. Refusals: 22023 (a field, "field NAME: …"), 23505 (the idempotency key holds another request), 42501 (no such wallet, or not granted in enqueue_grants), 55000 (the wallet is disabled), P0001 (the wallet''s policy; DETAIL is the refusal as JSON). docs/enqueue.md.';

-- The role that may call send_tx and nothing else. Roles belong to the
-- cluster, not the database: another database of the cluster (another
-- ledgerq, a test's) may have made it already, or be making it now.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ledgerq_enqueue') THEN
        CREATE ROLE ledgerq_enqueue NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    -- Made meanwhile by a migration of another database.
    NULL;
END
$$;
-- +goose StatementEnd
-- Functions are executable by PUBLIC unless revoked: send_tx only through
-- the role, and its helpers by no caller of the role.
REVOKE ALL ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean) FROM PUBLIC;
GRANT USAGE ON SCHEMA ledgerq TO ledgerq_enqueue;
GRANT EXECUTE ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean) TO ledgerq_enqueue;

-- +goose Down
REVOKE ALL ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean) FROM ledgerq_enqueue;
REVOKE USAGE ON SCHEMA ledgerq FROM ledgerq_enqueue;
-- The role goes with the last database that uses it: while another
-- database of the cluster grants it anything, DROP ROLE fails
-- (dependent_objects_still_exist) and the role stays for that one.
-- +goose StatementBegin
DO $$
BEGIN
    DROP ROLE IF EXISTS ledgerq_enqueue;
EXCEPTION WHEN dependent_objects_still_exist THEN
    RAISE NOTICE 'role ledgerq_enqueue is kept: another database of the cluster still grants it privileges';
END
$$;
-- +goose StatementEnd
DROP FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean);
DROP FUNCTION ledgerq.go_duration(bigint);
DROP FUNCTION ledgerq.send_tx_field(bytea);
DROP FUNCTION ledgerq.uint_bytes(numeric);
DROP FUNCTION ledgerq.eip55(text);
DROP FUNCTION ledgerq.keccak256(bytea);
DROP TABLE ledgerq.enqueue_grants;
DROP TABLE ledgerq.settings;
DROP TRIGGER wallets_directory ON ledgerq.wallets;
DROP FUNCTION ledgerq.wallet_directory_follow();
DROP TABLE ledgerq.wallet_directory;
