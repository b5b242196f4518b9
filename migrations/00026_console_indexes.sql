-- +goose Up
-- The operator console's reads of the webhook outbox, which is never
-- deleted and so grows with every event: the overview counts the given-up
-- deliveries on every refresh, and an endpoint's page lists its deliveries
-- newest first. Without these both read the whole table.

-- Given-up deliveries (a handful; the backlog has webhook_deliveries_due).
CREATE INDEX webhook_deliveries_given_up ON ledgerq.webhook_deliveries (gave_up_at)
    WHERE gave_up_at IS NOT NULL;

-- An endpoint's deliveries in the order its page reads them.
CREATE INDEX webhook_deliveries_endpoint ON ledgerq.webhook_deliveries (endpoint_id, created_at, id);

-- +goose Down
DROP INDEX ledgerq.webhook_deliveries_endpoint;
DROP INDEX ledgerq.webhook_deliveries_given_up;
