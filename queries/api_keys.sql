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

-- name: ConsoleSessionDeleteEnded :execrows
-- Session retention (a login, and the monitor role's access retention): up
-- to @max sessions that expired (through console_sessions_expires_at) and up
-- to @max that were logged out (through console_sessions_ended) before
-- @before. Neither opens anything any more; a session that can still open
-- the console is never deleted. SKIP LOCKED: a row another round holds is
-- left for the next.
WITH expired AS (
    SELECT e.token_hash FROM ledgerq.console_sessions e
    WHERE e.expires_at < @before::timestamptz
    ORDER BY e.expires_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
), ended AS (
    SELECT o.token_hash FROM ledgerq.console_sessions o
    WHERE o.ended_at < @before::timestamptz
    ORDER BY o.ended_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
DELETE FROM ledgerq.console_sessions s
WHERE s.token_hash = ANY (ARRAY(SELECT expired.token_hash FROM expired UNION SELECT ended.token_hash FROM ended));

-- name: AuditInsert :exec
INSERT INTO ledgerq.audit_log (at, key_id, key_name, action, target, detail)
VALUES (@at::timestamptz, sqlc.narg(key_id), @key_name, @action, @target, @detail::jsonb);

-- name: AuditList :many
-- The newest actions first, by keyset (before @before_id when given).
SELECT * FROM ledgerq.audit_log
WHERE (sqlc.narg(before_id)::bigint IS NULL OR id < sqlc.narg(before_id)::bigint)
ORDER BY id DESC
LIMIT @max;

-- name: AuditDeleteOld :execrows
-- Audit retention: up to @max actions recorded before @before, oldest first,
-- through audit_log_at. SKIP LOCKED: a row another round holds is left for
-- the next.
DELETE FROM ledgerq.audit_log
WHERE id = ANY (ARRAY(
    SELECT o.id FROM ledgerq.audit_log o
    WHERE o.at < @before::timestamptz
    ORDER BY o.at, o.id
    LIMIT @max
    FOR UPDATE SKIP LOCKED
));
