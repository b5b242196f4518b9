-- +goose Up
-- One access model for every lane: an API key holds scopes (wallet:NAME,
-- service:ID or service:*, pool:write, read, admin) instead of wallet names
-- only; the console's sessions; the audit of what operators changed; and an
-- operator's hold on a wallet.

-- A scope list: one to 1000 scopes, each one of admin, read, pool:write,
-- service:* , service:ID (a batch service id: 1 to 256 characters, no
-- control character) or wallet:NAME (a wallet name as the API spells it).
CREATE FUNCTION ledgerq.api_key_scopes_valid(scopes text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT cardinality(scopes) BETWEEN 1 AND 1000
       AND array_ndims(scopes) = 1
       AND NOT EXISTS (
           SELECT 1 FROM unnest(scopes) AS s
           WHERE s IS NULL OR NOT (
               s IN ('admin', 'read', 'pool:write', 'service:*')
               OR s ~ '^wallet:[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'
               OR (s ~ '^service:.' AND length(s) <= length('service:') + 256 AND s !~ '[[:cntrl:]]')))
$$;

ALTER TABLE ledgerq.api_keys ADD COLUMN scopes text[];
UPDATE ledgerq.api_keys SET scopes = ARRAY(SELECT 'wallet:' || w FROM unnest(wallet_ids) AS w ORDER BY 1);
ALTER TABLE ledgerq.api_keys
    ALTER COLUMN scopes SET NOT NULL,
    ADD CONSTRAINT api_keys_scopes_valid CHECK (ledgerq.api_key_scopes_valid(scopes)),
    DROP CONSTRAINT api_keys_wallet_ids_valid,
    DROP COLUMN wallet_ids;

COMMENT ON TABLE ledgerq.api_keys IS 'API keys (ledgerq keys create): the SHA-256 of each key''s token, never the token; a key opens what its scopes allow.';
COMMENT ON COLUMN ledgerq.api_keys.scopes IS 'What the key opens: wallet:NAME (that wallet''s routes), service:ID or service:* (posting and reading batches of that service, or of any), pool:write (sending transactions to the builder lane''s pool), read (every read route, /metrics and the console), admin (everything, the console''s actions included).';

-- The console's sessions: a login with a key gives a session token in a
-- cookie; only its SHA-256 is stored. A session ends when it expires, at
-- logout, or when its key is revoked.
CREATE TABLE ledgerq.console_sessions (
    token_hash  bytea       PRIMARY KEY,
    key_id      text        NOT NULL REFERENCES ledgerq.api_keys (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    ended_at    timestamptz,

    CONSTRAINT console_sessions_token_hash_sha256 CHECK (octet_length(token_hash) = 32),
    CONSTRAINT console_sessions_expiry CHECK (expires_at > created_at),
    CONSTRAINT console_sessions_ended_after_created CHECK (ended_at IS NULL OR ended_at >= created_at),
    CONSTRAINT console_sessions_times_finite CHECK (isfinite(created_at) AND isfinite(expires_at) AND (ended_at IS NULL OR isfinite(ended_at)))
);

CREATE INDEX console_sessions_key_id ON ledgerq.console_sessions (key_id);
CREATE INDEX console_sessions_expires_at ON ledgerq.console_sessions (expires_at);

COMMENT ON TABLE ledgerq.console_sessions IS 'The console''s login sessions: the SHA-256 of the session cookie''s token, the key that logged in, and when the session expires or ended (logout). A revoked key''s sessions open nothing.';
COMMENT ON COLUMN ledgerq.console_sessions.token_hash IS 'SHA-256 of the session token the browser holds in an HttpOnly cookie.';
COMMENT ON COLUMN ledgerq.console_sessions.key_id IS 'The API key that logged in; its scopes are the session''s.';
COMMENT ON COLUMN ledgerq.console_sessions.created_at IS 'When the key logged in.';
COMMENT ON COLUMN ledgerq.console_sessions.expires_at IS 'The session opens nothing after this.';
COMMENT ON COLUMN ledgerq.console_sessions.ended_at IS 'When the session was logged out; NULL while it may be used.';

-- The audit of operators' actions (the console's and the API's changes
-- made for an operator): who, what, on what, when.
CREATE TABLE ledgerq.audit_log (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL,
    key_id     text,
    key_name   text        NOT NULL,
    action     text        NOT NULL,
    target     text        NOT NULL,
    detail     jsonb       NOT NULL DEFAULT '{}',

    CONSTRAINT audit_log_key_name_size CHECK (key_name <> '' AND length(key_name) <= 256),
    CONSTRAINT audit_log_action_format CHECK (action ~ '^[a-z_]+\.[a-z_]+$'),
    CONSTRAINT audit_log_target_size CHECK (target <> '' AND length(target) <= 600),
    CONSTRAINT audit_log_detail_object CHECK (jsonb_typeof(detail) = 'object'),
    CONSTRAINT audit_log_at_finite CHECK (isfinite(at))
);

CREATE INDEX audit_log_at ON ledgerq.audit_log (at DESC, id DESC);

COMMENT ON TABLE ledgerq.audit_log IS 'What operators changed through the console or the API''s operator routes: one row per action, written in the same transaction as the change. Never updated or deleted by ledgerq.';
COMMENT ON COLUMN ledgerq.audit_log.id IS 'The action''s number, in the order actions were recorded.';
COMMENT ON COLUMN ledgerq.audit_log.at IS 'When the action was taken.';
COMMENT ON COLUMN ledgerq.audit_log.key_id IS 'The API key that acted; NULL when the API was opened without keys (--insecure-open).';
COMMENT ON COLUMN ledgerq.audit_log.key_name IS 'The key''s name when it acted (anonymous with --insecure-open).';
COMMENT ON COLUMN ledgerq.audit_log.action IS 'What was done: task.cancel, webhook_delivery.retry, wallet.hold, wallet.release.';
COMMENT ON COLUMN ledgerq.audit_log.target IS 'What it was done to: wallet/NAME/task/ID, webhook_delivery/ID, wallet/NAME.';
COMMENT ON COLUMN ledgerq.audit_log.detail IS 'What the action found and changed, as a JSON object.';

-- An operator's hold on a wallet: while held, no new task is sent (those in
-- flight are still followed to the end: confirmed, bumped, sent again).
ALTER TABLE ledgerq.wallet_health
    ADD COLUMN held_at timestamptz,
    ADD COLUMN held_by text,
    ADD CONSTRAINT wallet_health_held CHECK ((held_at IS NULL) = (held_by IS NULL) AND (held_at IS NULL OR isfinite(held_at)) AND (held_by IS NULL OR (held_by <> '' AND length(held_by) <= 256)));

COMMENT ON COLUMN ledgerq.wallet_health.held_at IS 'When an operator held the wallet (no new task is sent while held; transactions in flight are still followed). NULL when not held.';
COMMENT ON COLUMN ledgerq.wallet_health.held_by IS 'The name of the key that held the wallet.';

-- +goose Down
ALTER TABLE ledgerq.wallet_health DROP CONSTRAINT wallet_health_held, DROP COLUMN held_at, DROP COLUMN held_by;
DROP TABLE ledgerq.audit_log;
DROP TABLE ledgerq.console_sessions;
ALTER TABLE ledgerq.api_keys ADD COLUMN wallet_ids text[];
-- Keys with no wallet scope (service, pool, read, admin) cannot be said in
-- the old model: they are revoked, and keep a placeholder wallet.
UPDATE ledgerq.api_keys SET
    wallet_ids = coalesce(nullif(ARRAY(SELECT substr(s, 8) FROM unnest(scopes) AS s WHERE s LIKE 'wallet:%' ORDER BY 1), '{}'), ARRAY['none']),
    revoked_at = CASE WHEN EXISTS (SELECT 1 FROM unnest(scopes) AS s WHERE s NOT LIKE 'wallet:%') THEN coalesce(revoked_at, now()) ELSE revoked_at END;
ALTER TABLE ledgerq.api_keys
    ALTER COLUMN wallet_ids SET NOT NULL,
    ADD CONSTRAINT api_keys_wallet_ids_valid CHECK (
        cardinality(wallet_ids) BETWEEN 1 AND 1000
        AND array_ndims(wallet_ids) = 1
        AND array_position(wallet_ids, NULL) IS NULL
        AND cardinality(string_to_array(array_to_string(wallet_ids, ' '), ' ')) = cardinality(wallet_ids)
        AND array_to_string(wallet_ids, ' ') ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}( [A-Za-z0-9][A-Za-z0-9_.-]{0,63})*$'
    ),
    DROP CONSTRAINT api_keys_scopes_valid,
    DROP COLUMN scopes;
DROP FUNCTION ledgerq.api_key_scopes_valid(text[]);
COMMENT ON TABLE ledgerq.api_keys IS 'API keys (ledgerq keys create): the SHA-256 of each key''s token, never the token; a key opens the routes of the wallets it is scoped to.';
COMMENT ON COLUMN ledgerq.api_keys.wallet_ids IS 'Names of the wallets the key may use (wallet_tasks.wallet_id); any other wallet answers 404 to it, as a missing one does.';
