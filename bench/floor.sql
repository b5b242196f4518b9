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
