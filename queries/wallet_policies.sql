-- name: WalletPolicyGet :one
SELECT * FROM ledgerq.wallet_policies WHERE wallet_id = @wallet_id;

-- name: WalletPolicyList :many
SELECT * FROM ledgerq.wallet_policies ORDER BY wallet_id;

-- name: WalletPolicyPutAPI :one
-- PUT /v1/wallets/{wallet}/policy: sets the wallet's policy unless the
-- configuration set it (no row then: the API answers 409).
INSERT INTO ledgerq.wallet_policies AS w (wallet_id, policy, source, updated_by, created_at, updated_at)
VALUES (@wallet_id, @policy::jsonb, 'api', @updated_by, @now::timestamptz, @now::timestamptz)
ON CONFLICT (wallet_id) DO UPDATE
SET policy = excluded.policy, updated_by = excluded.updated_by, updated_at = excluded.updated_at
WHERE w.source = 'api'
RETURNING *;

-- name: WalletPolicyDeleteAPI :one
-- DELETE /v1/wallets/{wallet}/policy: a policy the configuration set stays.
DELETE FROM ledgerq.wallet_policies WHERE wallet_id = @wallet_id AND source = 'api'
RETURNING *;

-- name: WalletPolicyPutConfig :exec
-- Serve start: the configuration's policy of a wallet replaces whatever the
-- wallet had (the configuration wins over the API).
INSERT INTO ledgerq.wallet_policies AS w (wallet_id, policy, source, updated_by, created_at, updated_at)
VALUES (@wallet_id, @policy::jsonb, 'config', 'config', @now::timestamptz, @now::timestamptz)
ON CONFLICT (wallet_id) DO UPDATE
SET policy = excluded.policy, source = 'config', updated_by = 'config', updated_at = excluded.updated_at
WHERE w.policy IS DISTINCT FROM excluded.policy OR w.source <> 'config';

-- name: WalletPolicyDeleteConfigExcept :execrows
-- Serve start: a policy the configuration set and no longer sets is gone.
DELETE FROM ledgerq.wallet_policies
WHERE source = 'config' AND wallet_id <> ALL (@wallet_ids::text[]);

-- name: WalletPolicyRefusal :one
-- Intake of a task of a wallet with a policy: locks the policy row and
-- returns the refusal (NULL: the task may be stored), in the transaction
-- that then stores it (TaskInsert with @policy_checked).
SELECT ledgerq.wallet_policy_refusal(
    @wallet_id::text, @chain_id::bigint, @sender::text, @to_address::text, @value_wei::numeric, @data::bytea,
    sqlc.narg(idempotency_key)::text, @now::timestamptz
)::jsonb AS refusal;

-- name: WalletPolicyValueSpent :one
SELECT ledgerq.wallet_value_spent(@wallet_id::text, @since::timestamptz)::numeric AS spent;

-- name: WalletPolicyFeesSpent :one
SELECT ledgerq.wallet_fees_spent(@chain_id::bigint, @sender::text, @since::timestamptz)::numeric AS spent;

-- name: WalletPolicyRefusalList :many
-- The wallet's latest refusals, newest first, through
-- wallet_policy_refusals_wallet.
SELECT * FROM ledgerq.wallet_policy_refusals WHERE wallet_id = @wallet_id
ORDER BY at DESC, id DESC
LIMIT @max;

-- name: WalletPolicyRefusalInsert :exec
-- A refusal decided outside ledgerq.wallet_policy_refusal (a speed-up whose
-- fees would pass a fee cap).
INSERT INTO ledgerq.wallet_policy_refusals (wallet_id, at, rule, to_address, value_wei, detail)
VALUES (@wallet_id, @at::timestamptz, @rule, @to_address, @value_wei, @detail::jsonb);

-- name: WalletPolicyRefusalDeleteOld :execrows
-- Retention: up to @max refusals recorded before @before, oldest first,
-- through wallet_policy_refusals_at.
DELETE FROM ledgerq.wallet_policy_refusals WHERE id IN (
    SELECT id FROM ledgerq.wallet_policy_refusals
    WHERE at < @before::timestamptz
    ORDER BY at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
);
