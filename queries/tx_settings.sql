-- name: LockTimeoutForTx :exec
-- The statements after it in the same transaction wait for a lock at most
-- @timeout (lock_timeout, for this transaction only); a longer wait fails
-- the transaction with lock_not_available (55P03). The grouped pool intake
-- sends it first, so that a sender locked elsewhere holds up only its own
-- intake, which then runs alone. The batch lane's claims set the same, in
-- ClaimSettingsForTx, so that a claim never waits long for a row (see
-- claimLockTimeout in internal/store).
SELECT set_config('lock_timeout', @timeout::text, true);

-- name: ClaimSettingsForTx :exec
-- The batch lane's claims send it first, in the same transaction:
-- lock_timeout as LockTimeoutForTx sets it, and generic plans. A claim's
-- LIMIT is a parameter, and PostgreSQL, finding no generic plan cheaper than
-- one planned for each LIMIT, would plan the claim again on every call,
-- which cost more than running it (0.23 ms against 0.04 ms when the
-- submitter polls an empty queue). The generic plans walk the same indexes.
SELECT set_config('lock_timeout', @lock_timeout::text, true),
       set_config('plan_cache_mode', 'force_generic_plan', true);

-- name: GenericPlansForTx :exec
-- The statements after it in the same transaction run with generic plans
-- (plan_cache_mode, for this transaction only): BatchList sends it first,
-- BatchRecordStatuses before its last statement, the wake-up.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true);
