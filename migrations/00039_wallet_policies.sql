-- +goose Up
-- Wallet lane: policies per wallet (issue 41, item 4). A wallet with a row in
-- wallet_policies may only send to the recipients and contracts (and the
-- contracts' function selectors) its policy allows, at most its largest value
-- per transaction, and within its value and fee caps per rolling window. The
-- rules are checked by ledgerq.wallet_policy_refusal in the transaction that
-- stores the task, under the policy row's lock, so that concurrent intakes in
-- every process see each other's tasks; a wallet without a row is refused
-- nothing, and its intake stays one statement (TaskInsert does not store a
-- task whose wallet has a policy: that one goes through the function).

-- +goose StatementBegin
CREATE FUNCTION ledgerq.wallet_policy_wei_ok(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN t ~ '^[0-9]+$' AND octet_length(t) <= 78 THEN t::numeric < 2::numeric ^ 256 ELSE false END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.wallet_policy_wei_ok(text) IS 'An amount of a wallet policy: wei, a decimal string below 2^256.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.wallet_policy_shape_ok(p jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    e   jsonb;
    k   text;
    v   jsonb;
    s   text;
    sv  jsonb;
BEGIN
    -- The stored form, as store.WalletPolicy writes it: only these keys;
    -- recipients an array of lower-case addresses; contracts an object from
    -- a lower-case address to null (any function) or an object from a
    -- selector (0x and 8 hex digits) to its signature ("" when given as a
    -- selector); amounts decimal strings of wei below 2^256; caps arrays of
    -- {"seconds": 1 to 366 days, "max": wei}. Lengths are compared apart
    -- from the regular expressions, which count no digits (migration 00029).
    IF jsonb_typeof(p) IS DISTINCT FROM 'object'
       OR p - ARRAY['recipients', 'contracts', 'max_value_per_tx', 'value_caps', 'fee_caps'] <> '{}'::jsonb THEN
        RETURN false;
    END IF;
    IF p ? 'recipients' THEN
        IF jsonb_typeof(p -> 'recipients') <> 'array' THEN
            RETURN false;
        END IF;
        FOR e IN SELECT jsonb_array_elements(p -> 'recipients') LOOP
            IF jsonb_typeof(e) <> 'string' OR octet_length(e #>> '{}') <> 42 OR (e #>> '{}') !~ '^0x[0-9a-f]+$' THEN
                RETURN false;
            END IF;
        END LOOP;
    END IF;
    IF p ? 'contracts' THEN
        IF jsonb_typeof(p -> 'contracts') <> 'object' THEN
            RETURN false;
        END IF;
        FOR k, v IN SELECT * FROM jsonb_each(p -> 'contracts') LOOP
            IF octet_length(k) <> 42 OR k !~ '^0x[0-9a-f]+$' OR jsonb_typeof(v) NOT IN ('null', 'object') THEN
                RETURN false;
            END IF;
            IF jsonb_typeof(v) = 'object' THEN
                FOR s, sv IN SELECT * FROM jsonb_each(v) LOOP
                    IF octet_length(s) <> 10 OR s !~ '^0x[0-9a-f]+$' OR jsonb_typeof(sv) <> 'string' THEN
                        RETURN false;
                    END IF;
                END LOOP;
            END IF;
        END LOOP;
    END IF;
    IF p ? 'max_value_per_tx' AND NOT (jsonb_typeof(p -> 'max_value_per_tx') = 'string' AND ledgerq.wallet_policy_wei_ok(p ->> 'max_value_per_tx')) THEN
        RETURN false;
    END IF;
    FOREACH k IN ARRAY ARRAY['value_caps', 'fee_caps'] LOOP
        IF p ? k THEN
            IF jsonb_typeof(p -> k) <> 'array' THEN
                RETURN false;
            END IF;
            FOR e IN SELECT jsonb_array_elements(p -> k) LOOP
                IF jsonb_typeof(e) <> 'object' THEN
                    RETURN false;
                END IF;
                IF e - ARRAY['seconds', 'max'] <> '{}'::jsonb
                   OR jsonb_typeof(e -> 'seconds') IS DISTINCT FROM 'number' OR jsonb_typeof(e -> 'max') IS DISTINCT FROM 'string' THEN
                    RETURN false;
                END IF;
                IF (e ->> 'seconds')::numeric NOT BETWEEN 1 AND 31622400 OR (e ->> 'seconds')::numeric <> trunc((e ->> 'seconds')::numeric)
                   OR NOT ledgerq.wallet_policy_wei_ok(e ->> 'max') THEN
                    RETURN false;
                END IF;
            END LOOP;
        END IF;
    END LOOP;
    RETURN true;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.wallet_policy_shape_ok(jsonb) IS 'wallet_policies.policy''s shape: the CHECK wallet_policies_policy_shape.';

CREATE TABLE ledgerq.wallet_policies (
    wallet_id  text        PRIMARY KEY,
    policy     jsonb       NOT NULL,
    source     text        NOT NULL,
    updated_by text        NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,

    CONSTRAINT wallet_policies_wallet_id_not_empty CHECK (wallet_id <> '' AND length(wallet_id) <= 256),
    CONSTRAINT wallet_policies_source_known CHECK (source IN ('config', 'api')),
    CONSTRAINT wallet_policies_times_finite CHECK (isfinite(created_at) AND isfinite(updated_at)),
    -- The stored form (ledgerq.wallet_policy_shape_ok).
    CONSTRAINT wallet_policies_policy_shape CHECK (ledgerq.wallet_policy_shape_ok(policy))
);

COMMENT ON TABLE ledgerq.wallet_policies IS 'Wallet lane: what a wallet may send (recipients, contracts and their functions, the largest value per transaction, value and fee caps per rolling window), checked by ledgerq.wallet_policy_refusal when a task is stored; a wallet without a row is unrestricted.';
COMMENT ON COLUMN ledgerq.wallet_policies.wallet_id IS 'The wallet''s name (wallet_tasks.wallet_id).';
COMMENT ON COLUMN ledgerq.wallet_policies.policy IS 'The policy: {"recipients": [address], "contracts": {address: null (any function) | {selector: signature}}, "max_value_per_tx": wei, "value_caps": [{"seconds", "max"}], "fee_caps": [{"seconds", "max"}]}; a key left out is no rule. Addresses lower-case, amounts decimal strings of wei.';
COMMENT ON COLUMN ledgerq.wallet_policies.source IS 'config: written from --wallet-policy at serve start (the API refuses to change it, 409); api: set with PUT /v1/wallets/{wallet}/policy.';
COMMENT ON COLUMN ledgerq.wallet_policies.updated_by IS 'Who set it: the API key''s name, or "config".';
COMMENT ON COLUMN ledgerq.wallet_policies.created_at IS 'When the wallet first had a policy.';
COMMENT ON COLUMN ledgerq.wallet_policies.updated_at IS 'When the policy was last set.';

CREATE TABLE ledgerq.wallet_policy_refusals (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    wallet_id   text        NOT NULL,
    at          timestamptz NOT NULL,
    rule        text        NOT NULL,
    to_address  text        NOT NULL,
    value_wei   numeric(78, 0) NOT NULL,
    detail      jsonb       NOT NULL,

    CONSTRAINT wallet_policy_refusals_rule_known CHECK (rule IN ('recipient', 'contract', 'selector', 'max_value', 'value_window', 'fee_window')),
    CONSTRAINT wallet_policy_refusals_at_finite CHECK (isfinite(at))
);
COMMENT ON TABLE ledgerq.wallet_policy_refusals IS 'Wallet lane: every task a wallet''s policy refused, with the rule and its figures; kept as long as finished tasks (--wallet-retention-age).';
COMMENT ON COLUMN ledgerq.wallet_policy_refusals.id IS 'Surrogate key, in the order refusals were recorded.';
COMMENT ON COLUMN ledgerq.wallet_policy_refusals.wallet_id IS 'The wallet whose policy refused the task.';
COMMENT ON COLUMN ledgerq.wallet_policy_refusals.at IS 'When it was refused.';
COMMENT ON COLUMN ledgerq.wallet_policy_refusals.rule IS 'The rule: recipient, contract, selector, max_value, value_window or fee_window.';
COMMENT ON COLUMN ledgerq.wallet_policy_refusals.to_address IS 'The refused task''s recipient.';
COMMENT ON COLUMN ledgerq.wallet_policy_refusals.value_wei IS 'The refused task''s value.';
COMMENT ON COLUMN ledgerq.wallet_policy_refusals.detail IS 'The refusal as the API answered it: rule, limit, used, requested, window_seconds, selector.';
CREATE INDEX wallet_policy_refusals_wallet ON ledgerq.wallet_policy_refusals (wallet_id, at);
-- Retention: the oldest refusals first, through this.
CREATE INDEX wallet_policy_refusals_at ON ledgerq.wallet_policy_refusals (at);

-- A value window's sum: a wallet's tasks created since a time, through this.
CREATE INDEX wallet_tasks_wallet_created ON ledgerq.wallet_tasks (wallet_id, created_at);

-- Fees the chain charged: the receipt's gas used and effective gas price,
-- kept when an attempt is recorded mined or confirmed (NULL before this
-- migration, or when a receipt was not at hand: fee caps then count the
-- attempt's worst case, gas limit x max fee).
ALTER TABLE ledgerq.tx_attempts
    ADD COLUMN gas_used bigint,
    ADD COLUMN effective_gas_price_wei numeric(78, 0);
INSERT INTO ledgerq.row_rules (table_name, rule_name, expression) VALUES
    ('tx_attempts', 'tx_attempts_gas_used_range', '(gas_used IS NULL OR gas_used >= 0) AND (effective_gas_price_wei IS NULL OR (effective_gas_price_wei >= 0 AND effective_gas_price_wei < 2::numeric ^ 256))');
SELECT ledgerq.row_rules_apply('tx_attempts');
COMMENT ON COLUMN ledgerq.tx_attempts.gas_used IS 'The receipt''s gas used, kept when the attempt was recorded mined or confirmed; NULL when unknown.';
COMMENT ON COLUMN ledgerq.tx_attempts.effective_gas_price_wei IS 'The receipt''s effective gas price (wei per gas); with gas_used, the fee the chain charged.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.wallet_value_spent(p_wallet text, p_since timestamptz) RETURNS numeric
LANGUAGE sql STABLE AS $$
    -- The value of the wallet's tasks created after p_since that are
    -- waiting, executing or done and not reverted: a task that ends in
    -- error (refused, cancelled, failing) or reverts gives its value back.
    SELECT coalesce(sum(t.value_wei), 0) FROM ledgerq.wallet_tasks t
    WHERE t.wallet_id = p_wallet AND t.created_at > p_since
      AND t.status IN (0, 1, 3) AND NOT t.reverted
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.wallet_value_spent(text, timestamptz) IS 'A value cap''s use: the value of the wallet''s tasks created after the time that are waiting, executing, or done and not reverted.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.wallet_fees_spent(p_chain_id bigint, p_sender text, p_since timestamptz) RETURNS numeric
LANGUAGE sql STABLE AS $$
    -- Fees paid by the address's transactions mined after p_since (gas used
    -- x effective price; the worst case when the receipt's figures were not
    -- kept), plus the worst case (gas limit x max fee) of those in flight.
    SELECT coalesce(sum(CASE
        WHEN a.state IN ('signed', 'sent') THEN a.gas_limit * a.max_fee_per_gas
        ELSE coalesce(a.gas_used * a.effective_gas_price_wei, a.gas_limit * a.max_fee_per_gas)
    END), 0)
    FROM ledgerq.tx_attempts a
    WHERE a.chain_id = p_chain_id AND a.sender = p_sender
      AND (a.state IN ('signed', 'sent')
           OR (a.state IN ('mined', 'confirmed') AND coalesce(a.mined_at, a.confirmed_at, a.updated_at) > p_since))
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.wallet_fees_spent(bigint, text, timestamptz) IS 'A fee cap''s use: fees of the address''s transactions mined after the time, plus the worst case of those in flight.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.wallet_policy_refusal(
    p_wallet text, p_chain_id bigint, p_sender text, p_to text, p_value numeric, p_data bytea,
    p_idempotency_key text, p_now timestamptz
) RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    pol      jsonb;
    allowed  jsonb;
    sel      text;
    cap      jsonb;
    lim      numeric;
    used     numeric;
    refusal  jsonb;
BEGIN
    -- The policy row's lock serialises the wallet's intakes: each statement
    -- below runs on a snapshot taken after the lock was granted, so it sees
    -- every task stored by the intakes that held it before.
    SELECT p.policy INTO pol FROM ledgerq.wallet_policies p WHERE p.wallet_id = p_wallet FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- A replay of a stored task is answered as stored, whatever the policy
    -- says now.
    IF p_idempotency_key IS NOT NULL AND EXISTS (
        SELECT 1 FROM ledgerq.wallet_tasks t WHERE t.wallet_id = p_wallet AND t.idempotency_key = p_idempotency_key
    ) THEN
        RETURN NULL;
    END IF;
    IF octet_length(p_data) >= 4 THEN
        sel := '0x' || encode(substring(p_data FROM 1 FOR 4), 'hex');
    END IF;
    IF pol ? 'recipients' OR pol ? 'contracts' THEN
        allowed := pol -> 'contracts' -> p_to;
        IF octet_length(p_data) = 0 THEN
            -- A plain transfer: to a listed recipient, or to a contract
            -- allowed whole.
            IF NOT (coalesce(pol -> 'recipients' ? p_to, false)
                    OR (allowed IS NOT NULL AND jsonb_typeof(allowed) = 'null')) THEN
                refusal := jsonb_build_object('rule', 'recipient');
            END IF;
        ELSIF allowed IS NULL THEN
            refusal := jsonb_build_object('rule', 'contract');
        ELSIF jsonb_typeof(allowed) = 'object' AND (sel IS NULL OR NOT allowed ? sel) THEN
            refusal := jsonb_build_object('rule', 'selector', 'selector', coalesce(sel, '0x' || encode(p_data, 'hex')));
        END IF;
    END IF;
    IF refusal IS NULL AND pol ? 'max_value_per_tx' AND p_value > (pol ->> 'max_value_per_tx')::numeric THEN
        refusal := jsonb_build_object('rule', 'max_value', 'limit', pol ->> 'max_value_per_tx', 'requested', p_value::text);
    END IF;
    IF refusal IS NULL THEN
        FOR cap IN SELECT jsonb_array_elements(coalesce(pol -> 'value_caps', '[]'::jsonb)) LOOP
            lim := (cap ->> 'max')::numeric;
            used := ledgerq.wallet_value_spent(p_wallet, p_now - make_interval(secs => (cap ->> 'seconds')::bigint));
            IF used + p_value > lim THEN
                refusal := jsonb_build_object('rule', 'value_window', 'limit', lim::text, 'used', used::text,
                    'requested', p_value::text, 'window_seconds', (cap ->> 'seconds')::bigint);
                EXIT;
            END IF;
        END LOOP;
    END IF;
    IF refusal IS NULL THEN
        FOR cap IN SELECT jsonb_array_elements(coalesce(pol -> 'fee_caps', '[]'::jsonb)) LOOP
            lim := (cap ->> 'max')::numeric;
            used := ledgerq.wallet_fees_spent(p_chain_id, p_sender, p_now - make_interval(secs => (cap ->> 'seconds')::bigint));
            -- What a task will cost is known only when it is signed: the
            -- cap stops new tasks once reached.
            IF used >= lim THEN
                refusal := jsonb_build_object('rule', 'fee_window', 'limit', lim::text, 'used', used::text,
                    'window_seconds', (cap ->> 'seconds')::bigint);
                EXIT;
            END IF;
        END LOOP;
    END IF;
    IF refusal IS NOT NULL THEN
        INSERT INTO ledgerq.wallet_policy_refusals (wallet_id, at, rule, to_address, value_wei, detail)
        VALUES (p_wallet, p_now, refusal ->> 'rule', p_to, p_value, refusal);
    END IF;
    RETURN refusal;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.wallet_policy_refusal(text, bigint, text, text, numeric, bytea, text, timestamptz) IS 'A wallet''s policy applied to a task about to be stored: locks the policy row (FOR UPDATE) and returns NULL (allowed, no policy, or a replay of a stored task under the idempotency key) or the refusal {"rule", "limit", "used", "requested", "window_seconds", "selector"}, recorded in wallet_policy_refusals. Call it, then insert, in one transaction.';

-- +goose Down
DROP FUNCTION ledgerq.wallet_policy_refusal(text, bigint, text, text, numeric, bytea, text, timestamptz);
DROP FUNCTION ledgerq.wallet_fees_spent(bigint, text, timestamptz);
DROP FUNCTION ledgerq.wallet_value_spent(text, timestamptz);
DELETE FROM ledgerq.row_rules WHERE table_name = 'tx_attempts' AND rule_name = 'tx_attempts_gas_used_range';
SELECT ledgerq.row_rules_apply('tx_attempts');
ALTER TABLE ledgerq.tx_attempts DROP COLUMN effective_gas_price_wei, DROP COLUMN gas_used;
DROP INDEX ledgerq.wallet_tasks_wallet_created;
DROP TABLE ledgerq.wallet_policy_refusals;
DROP TABLE ledgerq.wallet_policies;
DROP FUNCTION ledgerq.wallet_policy_shape_ok(jsonb);
DROP FUNCTION ledgerq.wallet_policy_wei_ok(text);
