-- name: SignRequestLockTasks :many
-- Write-ahead across signers: the send's tasks that are still waiting,
-- locked FOR SHARE until the transaction that records their requests ends,
-- so that a cancel (an UPDATE of the row) either ends before the requests
-- are recorded, and the send sees the task gone, or waits for them and then
-- sees them (TaskCancel).
SELECT t.id FROM ledgerq.wallet_tasks t
WHERE t.chain_id = @chain_id AND t.sender = @sender AND t.id = ANY(@ids::text[]) AND t.status = 0
ORDER BY t.id
FOR SHARE;

-- name: SignRequestRecord :many
-- Write-ahead across signers: records the requests of one send before a
-- signer outside the process is asked for them. A nonce already requested
-- keeps its first row; the nonces returned are those whose row holds other
-- content (another task, or another content hash): they must not be signed.
WITH u AS (
    SELECT unnest(@nonces::bigint[]) AS nonce, unnest(@task_ids::text[]) AS task_id,
           unnest(@content_hashes::bytea[]) AS content_hash, unnest(@gas_limits::bigint[]) AS gas_limit
), ins AS (
    INSERT INTO ledgerq.wallet_sign_requests (chain_id, sender, nonce, task_id, content_hash, gas_limit, requested_at)
    SELECT @chain_id, @sender, u.nonce, NULLIF(u.task_id, ''), u.content_hash, u.gas_limit, @now::timestamptz
    FROM u
    ON CONFLICT (chain_id, sender, nonce) DO NOTHING
    RETURNING nonce
)
SELECT u.nonce::bigint AS nonce
FROM u
LEFT JOIN ins ON ins.nonce = u.nonce
LEFT JOIN ledgerq.wallet_sign_requests r ON r.chain_id = @chain_id AND r.sender = @sender AND r.nonce = u.nonce
WHERE ins.nonce IS NULL
  AND (r.nonce IS NULL OR r.task_id IS DISTINCT FROM NULLIF(u.task_id, '') OR r.content_hash <> u.content_hash)
ORDER BY u.nonce;

-- name: SignRequestListPinned :many
-- Send: the wallet's requests at or above @from_nonce (the chain's nonce),
-- in nonce order: each nonce is pinned to its content.
SELECT * FROM ledgerq.wallet_sign_requests
WHERE chain_id = @chain_id AND sender = @sender AND nonce >= @from_nonce::bigint
ORDER BY nonce;

-- name: SignRequestDeleteBelow :execrows
-- The requests below the chain's nonce are dead: the chain moved past them.
DELETE FROM ledgerq.wallet_sign_requests
WHERE chain_id = @chain_id AND sender = @sender AND nonce < @below::bigint;

-- name: SignRequestDeleteAt :execrows
-- Write-ahead: the attempts at @nonces are stored (AttemptStoreMany), so
-- their requests are done.
DELETE FROM ledgerq.wallet_sign_requests
WHERE chain_id = @chain_id AND sender = @sender AND nonce = ANY(@nonces::bigint[]);

-- name: SignRequestTakeForNoop :one
-- No-op: a no-op's own request at @nonce is done when it is stored; the
-- count is of requests of a task at @nonce, which no no-op may take.
WITH done AS (
    DELETE FROM ledgerq.wallet_sign_requests d
    WHERE d.chain_id = @chain_id AND d.sender = @sender AND d.nonce = @nonce AND d.task_id IS NULL
)
SELECT count(*) FROM ledgerq.wallet_sign_requests r
WHERE r.chain_id = @chain_id AND r.sender = @sender AND r.nonce = @nonce AND r.task_id IS NOT NULL;

-- name: SignRequestCountOfTask :one
-- Cancel: a task whose transaction is being signed is not cancelled.
SELECT count(*) FROM ledgerq.wallet_sign_requests
WHERE chain_id = @chain_id AND sender = @sender AND task_id = @task_id;
