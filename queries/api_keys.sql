-- name: APIKeyInsert :one
-- ledgerq keys create: stores a new key by the hash of its token.
INSERT INTO ledgerq.api_keys (id, name, token_hash, wallet_ids, created_at)
VALUES (@id, @name, @token_hash, @wallet_ids::text[], @now::timestamptz)
RETURNING *;

-- name: APIKeyGetByTokenHash :one
-- Every wallet route: the key a request's token opens, through
-- api_keys_token_hash_unique. A revoked key opens nothing.
SELECT * FROM ledgerq.api_keys
WHERE token_hash = @token_hash AND revoked_at IS NULL;

-- name: APIKeyGet :one
SELECT * FROM ledgerq.api_keys WHERE id = @id;

-- name: APIKeyList :many
-- ledgerq keys list: every key, oldest first (UUIDv7 ids sort by creation).
SELECT * FROM ledgerq.api_keys
WHERE (@include_revoked::boolean OR revoked_at IS NULL)
ORDER BY id;

-- name: APIKeyRevoke :one
-- ledgerq keys revoke: conditional on not yet revoked, so the first
-- revocation's time is kept.
UPDATE ledgerq.api_keys
SET revoked_at = @now::timestamptz
WHERE id = @id AND revoked_at IS NULL
RETURNING *;
