-- name: LockTimeoutForTx :exec
-- The statements after it in the same transaction wait for a lock at most
-- @timeout (lock_timeout, for this transaction only); a longer wait fails
-- the transaction with lock_not_available (55P03). The grouped pool intake
-- sends it first, so that a sender locked elsewhere holds up only its own
-- intake, which then runs alone; the batch lane's claims send it first, so
-- that a claim never waits long for a row (see claimLockTimeout).
SELECT set_config('lock_timeout', @timeout::text, true);
