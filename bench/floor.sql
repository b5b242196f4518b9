-- The wallet lane's floor: the rows a send-tx task writes in PostgreSQL, and
-- nothing else: no ledgerq process, no HTTP, no signing, no chain, no reads
-- but the claim. bench/floor.sh loads this into a database migrated by
-- ledgerq (the lane's real tables, indexes and row rules) and drives the two
-- functions with pgbench; what it measures is a ceiling on the lane's
-- throughput on that machine, whatever the code around the rows does.
--
-- ledgerq_floor_intake(s): one task of wallet s stored, as POST send-tx
-- stores it (one autocommit INSERT with an idempotency key).
CREATE OR REPLACE FUNCTION ledgerq_floor_intake(s int) RETURNS void LANGUAGE sql AS $$
INSERT INTO ledgerq.wallet_tasks (id, wallet_id, chain_id, sender, priority, status, to_address, value_wei, data,
    idempotency_key, request_hash, created_at, updated_at)
SELECT u::text, 'floor-' || s, 1337, '0x' || lpad(to_hex(s), 40, '0'), 0, 0, '0x' || repeat('ab', 20), 1, '\x'::bytea,
    u::text, sha256(u::text::bytea), now(), now()
FROM gen_random_uuid() u;
$$;

-- ledgerq_floor_cycle(s, budget): one round of wallet s over up to budget
-- waiting tasks, every row change the lane makes for them, in one
-- transaction (the lane needs three, with the chain between them): the
-- claim in queue order, the nonces taken, an attempt stored per task, the
-- tasks started, the attempts sent, then confirmed with their tasks done.
-- Returns the tasks it moved.
CREATE OR REPLACE FUNCTION ledgerq_floor_cycle(s int, budget int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    snd text := '0x' || lpad(to_hex(s), 40, '0');
    ids text[];
    hashes text[];
    base bigint;
    n int;
BEGIN
    SELECT array_agg(id) INTO ids FROM (
        SELECT id FROM ledgerq.wallet_tasks WHERE chain_id = 1337 AND sender = snd AND status = 0
        ORDER BY priority DESC, created_at, id LIMIT budget FOR UPDATE SKIP LOCKED) t;
    n := coalesce(cardinality(ids), 0);
    IF n = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO ledgerq.wallet_nonces AS w (chain_id, sender, next_nonce, created_at, updated_at)
    VALUES (1337, snd, n, now(), now())
    ON CONFLICT (chain_id, sender) DO UPDATE SET next_nonce = w.next_nonce + n, updated_at = now()
    RETURNING next_nonce - n INTO base;
    SELECT array_agg('0x' || encode(sha256(i::bytea), 'hex')) INTO hashes FROM unnest(ids) i;
    INSERT INTO ledgerq.tx_attempts (chain_id, tx_hash, task_id, sender, nonce, raw, gas_limit, max_fee_per_gas,
        max_priority_fee_per_gas, state, created_at, updated_at)
    SELECT 1337, h, i, snd, base + k - 1, decode(repeat('f8', 110), 'hex'), 21000, 2000000000, 1000000000,
        'signed', now(), now()
    FROM unnest(ids, hashes) WITH ORDINALITY AS x(i, h, k);
    UPDATE ledgerq.wallet_tasks SET status = 1, started_at = now(), updated_at = now() WHERE id = ANY (ids);
    UPDATE ledgerq.tx_attempts SET state = 'sent', sent_at = now(), updated_at = now()
    WHERE chain_id = 1337 AND tx_hash = ANY (hashes);
    WITH a AS (
        UPDATE ledgerq.tx_attempts SET state = 'confirmed', confirmed_at = now(), updated_at = now(),
            mined_block = 1, mined_block_hash = '0x' || repeat('cd', 32), mined_at = now()
        WHERE chain_id = 1337 AND tx_hash = ANY (hashes)
        RETURNING task_id, tx_hash)
    UPDATE ledgerq.wallet_tasks w SET status = 3, tx_hash = a.tx_hash, finished_at = now(), updated_at = now()
    FROM a WHERE w.id = a.task_id;
    RETURN n;
END $$;

-- The builder lane's floor: the rows eth_sendRawTransaction stores for a
-- transaction through /rpc (store.PoolAdd, grouped as pool_group.go groups
-- intakes of several senders into one database transaction), and nothing
-- else: no decoding, no chain reads, no bundles.
--
-- ledgerq_floor_pool_setup(): the chain's row, counted (base 0), and its 16
-- admission slots, as the first intake that grows the pool leaves them.
CREATE OR REPLACE FUNCTION ledgerq_floor_pool_setup() RETURNS void LANGUAGE sql AS $$
INSERT INTO ledgerq.pool_chains (chain_id, created_at, pending_base, queued_base) VALUES (1337, now(), 0, 0)
ON CONFLICT (chain_id) DO NOTHING;
INSERT INTO ledgerq.pool_admission_slots (chain_id, slot) SELECT 1337, g FROM generate_series(0, 15) g
ON CONFLICT (chain_id, slot) DO NOTHING;
$$;

CREATE SEQUENCE IF NOT EXISTS ledgerq_floor_pool_seq MINVALUE 0 START 0;

-- ledgerq_floor_pool_group(senders, per_sender, n): one group of n intakes,
-- in one transaction, with the statements the grouped intake runs: for each
-- intake, in sender order, its sender's lock (PoolSenderLock), the row of its
-- hash (PoolTxGet, none) and the sender's live transactions
-- (PoolSenderLive); then each row (PoolTxInsert, pending) and next nonce
-- (PoolSenderSetNext); then the group's admission slots (PoolSlotTakeMany),
-- the bound (PoolAdmissionBound) and the bundle queuers' wake-up. The
-- intakes are numbered by a sequence; as `ledgerq bench builder` sends,
-- senders at a time each get one transaction in nonce order, per_sender
-- each, then the next senders. Returns the transactions stored.
CREATE OR REPLACE FUNCTION ledgerq_floor_pool_group(senders int, per_sender int, n int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    snd text[];
    nonces bigint[];
    hashes text[];
    base bigint;
    start int := floor(random() * 16)::int;
BEGIN
    SELECT array_agg(sender ORDER BY sender), array_agg(nonce ORDER BY sender), array_agg(hash ORDER BY sender)
    INTO snd, nonces, hashes
    FROM (
        SELECT '0x' || lpad(to_hex(k / (senders * per_sender) * senders + k % senders), 40, '0') AS sender,
            (k % (senders * per_sender)) / senders AS nonce,
            '0x' || encode(sha256(('floor-pool-' || k)::bytea), 'hex') AS hash
        FROM (SELECT nextval('ledgerq_floor_pool_seq') AS k FROM generate_series(1, n)) g) t;
    FOR j IN 1 .. n LOOP
        INSERT INTO ledgerq.pool_senders AS s (chain_id, sender, chain_nonce, next_nonce, created_at, updated_at)
        VALUES (1337, snd[j], 0, 0, now(), now())
        ON CONFLICT (chain_id, sender) DO UPDATE
        SET chain_nonce = GREATEST(s.chain_nonce, EXCLUDED.chain_nonce), updated_at = EXCLUDED.updated_at
        RETURNING s.chain_nonce INTO base;
        PERFORM * FROM ledgerq.pool_txs WHERE chain_id = 1337 AND tx_hash = hashes[j];
        PERFORM * FROM (
            SELECT tx_hash, nonce, state, gas_fee_cap, gas_tip_cap, gas, value_wei
            FROM ledgerq.pool_txs w
            WHERE w.chain_id = 1337 AND w.sender = snd[j] AND w.state IN ('pending', 'queued')
            UNION ALL
            SELECT tx_hash, nonce, state, gas_fee_cap, gas_tip_cap, gas, value_wei
            FROM ledgerq.pool_txs x
            WHERE x.chain_id = 1337 AND x.sender = snd[j] AND x.state = 'included' AND x.nonce >= base
            ORDER BY nonce) l;
    END LOOP;
    FOR j IN 1 .. n LOOP
        INSERT INTO ledgerq.pool_txs (chain_id, tx_hash, sender, nonce, tx_type, to_address, gas_fee_cap, gas_tip_cap,
            gas, value_wei, raw, state, received_at, expires_at, updated_at)
        VALUES (1337, hashes[j], snd[j], nonces[j], 2, '0x' || repeat('ab', 20), 2000000000, 1000000000, 21000, 1,
            decode(repeat('f8', 114), 'hex'), 'pending', now(), now() + interval '1 hour', now())
        ON CONFLICT (chain_id, tx_hash) DO NOTHING;
        UPDATE ledgerq.pool_senders SET next_nonce = nonces[j] + 1, updated_at = now()
        WHERE chain_id = 1337 AND sender = snd[j];
    END LOOP;
    WITH free AS (
        SELECT f.slot FROM ledgerq.pool_admission_slots f
        WHERE f.chain_id = 1337
        ORDER BY (f.slot + 16 - start) % 16
        LIMIT n
        FOR UPDATE SKIP LOCKED
    ),
    ranked AS (
        SELECT free.slot, row_number() OVER (ORDER BY (free.slot + 16 - start) % 16) AS k FROM free
    )
    UPDATE ledgerq.pool_admission_slots s
    SET pending_growth = s.pending_growth + 1
    FROM ranked r
    WHERE s.chain_id = 1337 AND s.slot = r.slot;
    PERFORM c.pending_base, c.queued_base, g.pending, g.queued
    FROM ledgerq.pool_chains c,
         (SELECT coalesce(sum(s.pending_growth), 0)::bigint AS pending, coalesce(sum(s.queued_growth), 0)::bigint AS queued
          FROM ledgerq.pool_admission_slots s WHERE s.chain_id = 1337) g
    WHERE c.chain_id = 1337;
    PERFORM pg_notify('ledgerq_bundle_queuer', '');
    RETURN n;
END $$;

-- The batch lane's floor: the rows a batch writes from its intake to its
-- commit, and nothing else: no HTTP, no signature checks, no ledger.
--
-- ledgerq_floor_batch_intake(services, size, payload_bytes): size batches of
-- random services out of services stored as BatchInsertMany stores a
-- request's (its payload row and its state row, each with a seq drawn from
-- batch_seq, one statement), autocommit. Returns the batches stored.
CREATE OR REPLACE FUNCTION ledgerq_floor_batch_intake(services int, size int, payload_bytes int) RETURNS int LANGUAGE sql AS $$
WITH u AS (
    SELECT encode(sha512(gen_random_uuid()::text::bytea), 'hex') AS id,
        'floor-' || (1 + floor(random() * services)::int) AS service_id,
        decode(repeat('0a', payload_bytes), 'hex') AS payload
    FROM generate_series(1, size)
),
pay AS (
    INSERT INTO ledgerq.batch_payloads (seq, id, service_id, payload)
    SELECT nextval('ledgerq.batch_seq'), u.id, u.service_id, u.payload FROM u
    ORDER BY u.id
    ON CONFLICT (id) DO NOTHING
    RETURNING seq, id
),
ins AS (
    INSERT INTO ledgerq.batches (seq, service_id, created_at, received_at, updated_at)
    SELECT pay.seq, u.service_id, now(), now(), now()
    FROM pay JOIN u ON u.id = pay.id
    RETURNING seq
)
SELECT count(*)::int FROM ins;
$$;

-- ledgerq_floor_batch_claim(services): the oldest never-sent batch of each
-- of services claimed (held, with a lease, attempts + 1) and its id and
-- payload read, as the submitter's claim, or the monitor's admission that
-- hands a freed service's next batch to it, does. Returns the batches
-- claimed.
CREATE OR REPLACE FUNCTION ledgerq_floor_batch_claim(services text[]) RETURNS int LANGUAGE sql AS $$
WITH next AS (
    SELECT (SELECT n.seq FROM ledgerq.batches n
            WHERE n.service_id = s AND n.status IS NULL AND NOT n.submitted
            ORDER BY n.created_at, n.seq LIMIT 1) AS seq
    FROM unnest(services) s
),
claimed AS (
    UPDATE ledgerq.batches b
    SET submitted = true, claim_expires_at = now() + interval '1 minute', attempts = b.attempts + 1,
        last_submitted_at = now(), updated_at = now()
    WHERE b.seq = ANY (ARRAY(SELECT next.seq FROM next WHERE next.seq IS NOT NULL))
    RETURNING b.seq
)
SELECT count(p.payload)::int FROM claimed c
LEFT JOIN LATERAL (SELECT x.id, x.payload FROM ledgerq.batch_payloads x WHERE x.seq = c.seq LIMIT 1) p ON true;
$$;

-- ledgerq_floor_batch_cycle(budget): one round of the monitor over up to
-- budget held batches, oldest lease first, in one transaction: each
-- committed (the ledger's answer for a batch the monitor followed in memory
-- from its submitter, as the lane records it: the accepted batch is not
-- written pending first), each service freed locked (its advisory lock, in
-- key order) and its next batch claimed. Returns the batches committed.
CREATE OR REPLACE FUNCTION ledgerq_floor_batch_cycle(budget int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    freed text[];
BEGIN
    WITH held AS (
        SELECT h.seq FROM ledgerq.batches h
        WHERE h.claim_expires_at IS NOT NULL
        ORDER BY h.claim_expires_at
        LIMIT budget
        FOR UPDATE SKIP LOCKED
    ),
    done AS (
        UPDATE ledgerq.batches b
        SET status = 'committed', claim_expires_at = NULL, finished_at = now(), updated_at = now()
        WHERE b.seq = ANY (ARRAY(SELECT held.seq FROM held))
        RETURNING b.service_id
    )
    SELECT array_agg(service_id) INTO freed FROM done;
    IF freed IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM pg_advisory_xact_lock(1818585457, k)
    FROM (SELECT DISTINCT hashtext(s) AS k FROM unnest(freed) AS s) keys
    ORDER BY k;
    PERFORM ledgerq_floor_batch_claim(freed);
    RETURN cardinality(freed);
END $$;
