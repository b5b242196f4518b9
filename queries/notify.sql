-- name: Notify :exec
-- Wakes the loops listening on @channel. Inside a transaction the notification
-- is delivered only when it commits.
SELECT pg_notify(@channel::text, @payload::text);
