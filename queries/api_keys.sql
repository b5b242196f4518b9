-- name: APIKeyInsert :one
-- ledgerq keys create: stores a new key by the hash of its token.
INSERT INTO ledgerq.api_keys (id, name, token_hash, scopes, created_at)
VALUES (@id, @name, @token_hash, @scopes::text[], @now::timestamptz)
RETURNING *;

-- name: APIKeyGetByTokenHash :one
-- Every secured route: the key a request's token opens, through
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

-- name: ConsoleSessionInsert :exec
-- The console's login: a new session of the key.
INSERT INTO ledgerq.console_sessions (token_hash, key_id, created_at, expires_at)
VALUES (@token_hash, @key_id, @now::timestamptz, @expires_at::timestamptz);

-- name: ConsoleSessionKey :one
-- Every console request: the key of a session that has not ended or
-- expired, whose key is not revoked.
SELECT k.* FROM ledgerq.console_sessions s
JOIN ledgerq.api_keys k ON k.id = s.key_id
WHERE s.token_hash = @token_hash AND s.ended_at IS NULL AND s.expires_at > @now::timestamptz
  AND k.revoked_at IS NULL;

-- name: ConsoleSessionEnd :execrows
-- The console's logout.
UPDATE ledgerq.console_sessions SET ended_at = @now::timestamptz
WHERE token_hash = @token_hash AND ended_at IS NULL;

-- name: ConsoleSessionDeleteExpired :execrows
-- Sessions expired or ended before @before are forgotten.
DELETE FROM ledgerq.console_sessions
WHERE expires_at < @before::timestamptz OR ended_at < @before::timestamptz;

-- name: AuditInsert :exec
INSERT INTO ledgerq.audit_log (at, key_id, key_name, action, target, detail)
VALUES (@at::timestamptz, sqlc.narg(key_id), @key_name, @action, @target, @detail::jsonb);

-- name: AuditList :many
-- The newest actions first, by keyset (before @before_id when given).
SELECT * FROM ledgerq.audit_log
WHERE (sqlc.narg(before_id)::bigint IS NULL OR id < sqlc.narg(before_id)::bigint)
ORDER BY id DESC
LIMIT @max;
