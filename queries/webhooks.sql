-- name: WebhookEndpointLockWallet :exec
-- Serialises the registrations of one wallet's endpoints: a
-- transaction-scoped advisory lock on the wallet's name, taken before
-- WebhookEndpointInsert in the same transaction, so that the count the
-- insert checks includes every endpoint registered before it (READ
-- COMMITTED: a new snapshot per statement) and two registrations cannot
-- pass the cap together. Wallets whose names' hashes collide share a lock.
SELECT pg_advisory_xact_lock(2003330416, hashtext(@wallet_id::text))::text;

-- name: WebhookEndpointInsert :one
-- The wallet's new endpoint, unless it has @max_endpoints already: then no
-- row. Runs after WebhookEndpointLockWallet (the cap's count is exact
-- under it); the count goes through webhook_endpoints_wallet.
INSERT INTO ledgerq.webhook_endpoints (id, wallet_id, url, secret, event_types, enabled, created_at, updated_at)
SELECT @id::text, @wallet_id::text, @url::text, @secret::text, @event_types::text[], @enabled::boolean, @now::timestamptz, @now::timestamptz
WHERE (SELECT count(*) FROM ledgerq.webhook_endpoints x WHERE x.wallet_id = @wallet_id::text) < @max_endpoints::bigint
RETURNING *;

-- name: WebhookEndpointList :many
-- A wallet's endpoints in id (creation) order, through webhook_endpoints_wallet.
SELECT * FROM ledgerq.webhook_endpoints WHERE wallet_id = @wallet_id ORDER BY id;

-- name: WebhookEndpointDelete :execrows
-- An endpoint of another wallet is not found: "missing" and "not yours" are
-- one. Its pending deliveries go with it (ON DELETE CASCADE).
DELETE FROM ledgerq.webhook_endpoints WHERE id = @id AND wallet_id = @wallet_id;

-- name: WebhookDeliveryEmit :execrows
-- Outbox: runs inside the transaction of the task changes it
-- tells about, so the rows commit or roll back with them. One row per event
-- and enabled endpoint of the event's wallet subscribed to its type, in one
-- set-based statement; the arrays are parallel, one element per event. Due
-- at once. Endpoints through webhook_endpoints_wallet.
WITH ev AS (
    SELECT unnest(@wallet_ids::text[]) AS wallet_id, unnest(@event_types::text[]) AS event_type,
           unnest(@task_ids::text[]) AS task_id, unnest(@payloads::text[]) AS payload,
           generate_subscripts(@wallet_ids::text[], 1) AS n
)
INSERT INTO ledgerq.webhook_deliveries (endpoint_id, event_type, task_id, payload, created_at, next_attempt_at)
SELECT e.id, ev.event_type, ev.task_id, ev.payload::jsonb, @now::timestamptz, @now::timestamptz
FROM ev
JOIN ledgerq.webhook_endpoints e ON e.wallet_id = ev.wallet_id
WHERE e.enabled AND ev.event_type = ANY (e.event_types)
ORDER BY ev.n, e.id;

-- name: WebhookDeliveryClaim :many
-- Delivery claim: up to @max pending deliveries, SKIP LOCKED so
-- concurrent deliverers take disjoint rows. Claiming counts the attempt and
-- leases the row by moving next_attempt_at to @lease_until, in this one
-- statement: the POST happens after it commits (no transaction is held
-- across it). A row whose deliverer dies before recording the outcome is
-- claimed again with the same id: at once when the liveness lock its claim
-- recorded is no longer held (a dead holder lets go at once), else after the
-- lease. So the claim takes, first, the in-flight rows of dead deliverers
-- (orphaned: the few rows of webhook_deliveries_in_flight, checked against
-- one read of pg_locks), then the rows due at @now, earliest first (due:
-- through webhook_deliveries_due, which is read no further than @now). Rows
-- of disabled endpoints wait. @liveness_lock is the claiming process's
-- liveness lock (NULL: none).
WITH live AS MATERIALIZED (
    SELECT l.lock FROM ledgerq.liveness_locks l
),
orphaned AS (
    SELECT d.id, d.next_attempt_at FROM ledgerq.webhook_deliveries d
    WHERE d.liveness_lock IS NOT NULL AND d.delivered_at IS NULL AND d.gave_up_at IS NULL
      AND d.next_attempt_at > @now::timestamptz
      AND d.liveness_lock::bigint NOT IN (SELECT live.lock FROM live)
      AND EXISTS (SELECT 1 FROM ledgerq.webhook_endpoints x WHERE x.id = d.endpoint_id AND x.enabled)
    ORDER BY d.next_attempt_at, d.id
    LIMIT @max
    FOR UPDATE OF d SKIP LOCKED
),
due AS (
    SELECT d.id, d.next_attempt_at FROM ledgerq.webhook_deliveries d
    WHERE d.delivered_at IS NULL AND d.gave_up_at IS NULL AND d.next_attempt_at <= @now::timestamptz
      AND EXISTS (SELECT 1 FROM ledgerq.webhook_endpoints x WHERE x.id = d.endpoint_id AND x.enabled)
    ORDER BY d.next_attempt_at, d.id
    LIMIT @max
    FOR UPDATE OF d SKIP LOCKED
),
claimed AS (
    SELECT c.id FROM (
        SELECT orphaned.id, 0 AS pass, orphaned.next_attempt_at FROM orphaned
        UNION ALL
        SELECT due.id, 1 AS pass, due.next_attempt_at FROM due
    ) c
    ORDER BY c.pass, c.next_attempt_at, c.id
    LIMIT @max
)
UPDATE ledgerq.webhook_deliveries d
SET attempts = d.attempts + 1, last_attempt_at = @now::timestamptz, next_attempt_at = @lease_until::timestamptz,
    liveness_lock = sqlc.narg(liveness_lock)::integer
FROM claimed, ledgerq.webhook_endpoints e
WHERE d.id = claimed.id AND e.id = d.endpoint_id
RETURNING d.id, d.endpoint_id, d.event_type, d.task_id, d.payload, d.created_at, d.attempts, e.url, e.secret;

-- name: WebhookDeliveryMarkDelivered :execrows
-- The endpoint answered 2xx. Not conditional on the attempt: a late success
-- of a deliverer whose lease ran out is still a delivery.
UPDATE ledgerq.webhook_deliveries
SET delivered_at = @now::timestamptz, last_status = @status, liveness_lock = NULL
WHERE id = @id AND delivered_at IS NULL AND gave_up_at IS NULL;

-- name: WebhookDeliveryMarkFailed :execrows
-- The attempt failed: schedule the next one, or give up (@gave_up_at set).
-- Conditional on the attempt number the claim returned, so only the holder of
-- the current lease decides what comes next.
UPDATE ledgerq.webhook_deliveries
SET last_status = sqlc.narg(status), last_error = @error::text, next_attempt_at = @next_attempt_at::timestamptz,
    gave_up_at = sqlc.narg(gave_up_at), liveness_lock = NULL
WHERE id = @id AND attempts = @attempts AND delivered_at IS NULL AND gave_up_at IS NULL;

-- name: WebhookDeliveryGet :one
SELECT * FROM ledgerq.webhook_deliveries WHERE id = @id;

-- name: WebhookDeliveryRetry :one
-- An operator sends a given-up delivery again: its attempts start over
-- (the last status and error stay until the next attempt), due now.
UPDATE ledgerq.webhook_deliveries
SET gave_up_at = NULL, attempts = 0, last_attempt_at = NULL, next_attempt_at = @now::timestamptz
WHERE id = @id AND gave_up_at IS NOT NULL
RETURNING id, endpoint_id, last_status, last_error;

-- name: WebhookDeliveryCounts :one
-- The console's health panel: deliveries still to be made (the backlog,
-- with its oldest) and those given up.
-- Each part reads its own partial index (webhook_deliveries_due,
-- webhook_deliveries_given_up), never the delivered rows, which are most
-- of the table (kept for --wallet-webhook-retention-age).
SELECT (SELECT count(*) FROM ledgerq.webhook_deliveries b
        WHERE b.delivered_at IS NULL AND b.gave_up_at IS NULL)::bigint AS backlog,
       (SELECT min(b.created_at) FROM ledgerq.webhook_deliveries b
        WHERE b.delivered_at IS NULL AND b.gave_up_at IS NULL) AS oldest_backlog,
       (SELECT count(*) FROM ledgerq.webhook_deliveries g WHERE g.gave_up_at IS NOT NULL)::bigint AS given_up;

-- name: WebhookDeliveryListByEndpoint :many
-- The console's endpoint page: an endpoint's deliveries, newest first;
-- keyset pagination before (@before_created_at, @before_id).
SELECT * FROM ledgerq.webhook_deliveries
WHERE endpoint_id = @endpoint_id
  AND (created_at, id) < (@before_created_at::timestamptz, @before_id::text)
ORDER BY created_at DESC, id DESC
LIMIT @max;

-- name: WebhookDeliveryDeleteEnded :execrows
-- Webhook retention: up to @max deliveries that ended (delivered, or given
-- up) before @before, oldest first, through webhook_deliveries_ended. A
-- delivery still due or being retried has neither time and is never
-- deleted. SKIP LOCKED: a row a deliverer or an operator's retry holds is
-- left for the next round.
WITH ended AS (
    SELECT e.id FROM ledgerq.webhook_deliveries e
    WHERE (e.delivered_at IS NOT NULL OR e.gave_up_at IS NOT NULL)
      AND coalesce(e.delivered_at, e.gave_up_at) < @before::timestamptz
    ORDER BY coalesce(e.delivered_at, e.gave_up_at)
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
DELETE FROM ledgerq.webhook_deliveries d
WHERE d.id = ANY (ARRAY(SELECT ended.id FROM ended));
