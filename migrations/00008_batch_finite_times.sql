-- +goose Up
-- Every time of a batch is a real instant (issue 8): 'infinity' and
-- '-infinity', which an operator's SQL could write, cannot be read back by
-- the API (any finite year reads: the API writes years beyond 0000-9999 in
-- ISO 8601's expanded form).
ALTER TABLE ledgerq.batches ADD CONSTRAINT batches_times_finite CHECK (
    isfinite(created_at) AND isfinite(received_at) AND isfinite(updated_at)
    AND (queued_at IS NULL OR isfinite(queued_at))
    AND (claim_expires_at IS NULL OR isfinite(claim_expires_at))
    AND (last_submitted_at IS NULL OR isfinite(last_submitted_at))
    AND (next_check_at IS NULL OR isfinite(next_check_at))
    AND (finished_at IS NULL OR isfinite(finished_at))
);

-- +goose Down
ALTER TABLE ledgerq.batches DROP CONSTRAINT batches_times_finite;
