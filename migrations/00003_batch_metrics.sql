-- +goose Up
-- Metrics: the batch lane's depth per state and the age of its oldest waiting
-- batch are read from this index on every scrape (BatchDepthByState), so a
-- scrape costs the work waiting, never the terminal rows kept.
CREATE INDEX batches_unfinished ON ledgerq.batches (received_at)
    WHERE finished_at IS NULL;

-- +goose Down
DROP INDEX ledgerq.batches_unfinished;
