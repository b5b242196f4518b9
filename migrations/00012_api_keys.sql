-- +goose Up
-- API keys (docs/design.md, the wallet lane's access rule): a client reaches a
-- wallet's routes only with a key scoped to that wallet. A key is a
-- high-entropy random token (lq_ and 32 random bytes, base64url) that ledgerq
-- shows once, when it is created; only its SHA-256 is stored, so the table (and
-- its backups) hold nothing that opens the API.

CREATE TABLE ledgerq.api_keys (
    id          text        PRIMARY KEY,
    name        text        NOT NULL,
    token_hash  bytea       NOT NULL,
    wallet_ids  text[]      NOT NULL,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz,

    CONSTRAINT api_keys_id_format CHECK (id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
    CONSTRAINT api_keys_name_size CHECK (name <> '' AND length(name) <= 256),
    CONSTRAINT api_keys_token_hash_sha256 CHECK (octet_length(token_hash) = 32),
    -- One to 1000 wallet names, each as the API and wallet_tasks.wallet_id
    -- spell them (internal/wallet.ValidID), no NULLs, one dimension. Joined
    -- by spaces, which no name holds, they must split back into as many
    -- names as there are elements, each a valid one.
    CONSTRAINT api_keys_wallet_ids_valid CHECK (
        cardinality(wallet_ids) BETWEEN 1 AND 1000
        AND array_ndims(wallet_ids) = 1
        AND array_position(wallet_ids, NULL) IS NULL
        AND cardinality(string_to_array(array_to_string(wallet_ids, ' '), ' ')) = cardinality(wallet_ids)
        AND array_to_string(wallet_ids, ' ') ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}( [A-Za-z0-9][A-Za-z0-9_.-]{0,63})*$'
    ),
    CONSTRAINT api_keys_revoked_after_created CHECK (revoked_at IS NULL OR revoked_at >= created_at),
    CONSTRAINT api_keys_times_finite CHECK (isfinite(created_at) AND (revoked_at IS NULL OR isfinite(revoked_at))),
    -- Every request looks its key up by the token's hash.
    CONSTRAINT api_keys_token_hash_unique UNIQUE (token_hash)
);

COMMENT ON TABLE ledgerq.api_keys IS 'API keys (ledgerq keys create): the SHA-256 of each key''s token, never the token; a key opens the routes of the wallets it is scoped to.';
COMMENT ON COLUMN ledgerq.api_keys.id IS 'Key id: a UUIDv7, lower-case text; shown by ledgerq keys list and taken by ledgerq keys revoke. Not secret.';
COMMENT ON COLUMN ledgerq.api_keys.name IS 'Operator''s name for the key (who or what uses it).';
COMMENT ON COLUMN ledgerq.api_keys.token_hash IS 'SHA-256 of the token (lq_…) the client sends as Authorization: Bearer or X-API-Key; the token itself is shown once, at creation, and not stored.';
COMMENT ON COLUMN ledgerq.api_keys.wallet_ids IS 'Names of the wallets the key may use (wallet_tasks.wallet_id); any other wallet answers 404 to it, as a missing one does.';
COMMENT ON COLUMN ledgerq.api_keys.created_at IS 'When the key was created.';
COMMENT ON COLUMN ledgerq.api_keys.revoked_at IS 'When the key was revoked; a revoked key is refused (401) from then on. NULL while it is valid.';

-- +goose Down
DROP TABLE ledgerq.api_keys;
