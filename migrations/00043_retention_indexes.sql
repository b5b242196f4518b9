-- +goose NO TRANSACTION
-- +goose Up
-- Retention for the tables that grew forever (bundles, pool transactions,
-- webhook deliveries, the audit, the console's sessions) and the console's
-- per-minute charts: each retention round deletes the oldest finished rows
-- through an index on the time it reads, and each chart reads the minutes
-- it draws through one, so neither reads a table whose size is its history.
--
-- Built CONCURRENTLY (hence NO TRANSACTION): when this migration first runs
-- these tables hold every row ever stored, and a plain CREATE INDEX would
-- block the lanes' writes for the whole build. A build that fails leaves an
-- invalid index behind; each DROP makes a retry start clean (concurrent
-- migrators are serialised by goose's advisory lock).

-- Builder lane retention (BundleDeleteFinished) and the console's bundle
-- chart (BundleEndedPerMinute): finalized bundles by when they became final,
-- dropped ones by when they were dropped (their last change).
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.bundles_finalized;
CREATE INDEX CONCURRENTLY bundles_finalized ON ledgerq.bundles (finalized_at) WHERE state = 'finalized';
COMMENT ON INDEX ledgerq.bundles_finalized IS 'Finalized bundles by finalized_at: builder lane retention (BundleDeleteFinished) and the console''s bundle chart.';
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.bundles_dropped;
CREATE INDEX CONCURRENTLY bundles_dropped ON ledgerq.bundles (updated_at) WHERE state = 'dropped';
COMMENT ON INDEX ledgerq.bundles_dropped IS 'Dropped bundles by updated_at (when they were dropped): builder lane retention (BundleDeleteFinished) and the console''s bundle chart.';

-- Builder lane retention (PoolTxDeleteFinished): transactions that will
-- never be bundled (replaced, dropped) by their last change.
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.pool_txs_ended;
CREATE INDEX CONCURRENTLY pool_txs_ended ON ledgerq.pool_txs (updated_at) WHERE state IN ('replaced', 'dropped');
COMMENT ON INDEX ledgerq.pool_txs_ended IS 'Replaced and dropped pool transactions by updated_at: builder lane retention (PoolTxDeleteFinished).';

-- Webhook retention (WebhookDeliveryDeleteEnded): deliveries that ended
-- (delivered or given up) by when they ended.
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.webhook_deliveries_ended;
CREATE INDEX CONCURRENTLY webhook_deliveries_ended ON ledgerq.webhook_deliveries ((coalesce(delivered_at, gave_up_at)))
    WHERE delivered_at IS NOT NULL OR gave_up_at IS NOT NULL;
COMMENT ON INDEX ledgerq.webhook_deliveries_ended IS 'Delivered and given-up webhook deliveries by when they ended: webhook retention (WebhookDeliveryDeleteEnded).';

-- Console session retention (ConsoleSessionDeleteEnded, and the login's
-- ConsoleSessionDeleteExpired): logged-out sessions by when they ended
-- (expired ones have console_sessions_expires_at).
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.console_sessions_ended;
CREATE INDEX CONCURRENTLY console_sessions_ended ON ledgerq.console_sessions (ended_at) WHERE ended_at IS NOT NULL;
COMMENT ON INDEX ledgerq.console_sessions_ended IS 'Logged-out console sessions by ended_at: session retention.';

-- The console's mined-attempts chart (AttemptMinedPerMinute).
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.tx_attempts_mined_at;
CREATE INDEX CONCURRENTLY tx_attempts_mined_at ON ledgerq.tx_attempts (mined_at) WHERE mined_at IS NOT NULL;
COMMENT ON INDEX ledgerq.tx_attempts_mined_at IS 'Mined and confirmed attempts by mined_at: the console''s mined-attempts chart.';

COMMENT ON TABLE ledgerq.pool_txs IS 'Builder lane transaction pool: one row per transaction received, kept in every state until the builder lane retention deletes it (replaced and dropped ones, and included ones with their finalized bundle, builder-retention-age after they ended).';
COMMENT ON TABLE ledgerq.bundles IS 'Builder lane bundles: one row per EVM block cut from the pool, kept in every state until the builder lane retention deletes it (finalized and dropped ones builder-retention-age after they ended; a chain''s newest finalized bundle is kept). A dropped number is cut again as a new row.';
COMMENT ON TABLE ledgerq.audit_log IS 'What operators changed through the console or the API''s operator routes: one row per action, written in the same transaction as the change. Never updated; deleted by the monitor role audit-retention-age after it was written.';
COMMENT ON TABLE ledgerq.webhook_deliveries IS 'Webhook outbox: one row per (event, endpoint), written in the transaction of the task change it tells about, then delivered with retries and backoff; deleted by the monitor role wallet-webhook-retention-age after it was delivered or given up.';

-- +goose Down
COMMENT ON TABLE ledgerq.webhook_deliveries IS 'Webhook outbox: one row per (event, endpoint), written in the transaction of the task change it tells about, then delivered with retries and backoff.';
COMMENT ON TABLE ledgerq.audit_log IS 'What operators changed through the console or the API''s operator routes: one row per action, written in the same transaction as the change. Never updated or deleted by ledgerq.';
COMMENT ON TABLE ledgerq.bundles IS 'Builder lane bundles: one row per EVM block cut from the pool, kept in every state. A dropped number is cut again as a new row.';
COMMENT ON TABLE ledgerq.pool_txs IS 'Builder lane transaction pool: one row per transaction received, kept in every state (nothing is deleted silently).';
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.tx_attempts_mined_at;
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.console_sessions_ended;
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.webhook_deliveries_ended;
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.pool_txs_ended;
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.bundles_dropped;
DROP INDEX CONCURRENTLY IF EXISTS ledgerq.bundles_finalized;
