-- name: LivenessTryLock :one
-- Takes a process's liveness lock for this session if no other session holds
-- it (ledgerq.liveness_locks lists the held ones): the session's end, however
-- it comes (process killed, connection cut, backend terminated), releases
-- it, so the claims that record @id are taken over at once. Never waits: a
-- taken id is a collision, and the caller draws another.
SELECT pg_try_advisory_lock(@class::integer, @id::integer) AS locked;
