-- +goose Up
-- Wallet lane webhooks (engine-core's EOA executor's webhooks, issue 11): a
-- wallet's submitted, confirmed, failed and replaced events, told to the
-- endpoints its owner registered. The outbox is webhook_deliveries: one row per
-- (event, endpoint), inserted in the same transaction as the task's state
-- change, so an event exists exactly when its change committed; a loop
-- (internal/webhook) then POSTs each row, signed with the Standard Webhooks
-- scheme, until it is delivered or given up.

CREATE TABLE ledgerq.webhook_endpoints (
    id          text        PRIMARY KEY,
    wallet_id   text        NOT NULL,
    url         text        NOT NULL,
    secret      text        NOT NULL,
    event_types text[]      NOT NULL DEFAULT ARRAY['submitted', 'confirmed', 'failed', 'replaced'],
    enabled     boolean     NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,

    CONSTRAINT webhook_endpoints_id_format CHECK (id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
    CONSTRAINT webhook_endpoints_wallet_id_not_empty CHECK (wallet_id <> '' AND length(wallet_id) <= 256),
    CONSTRAINT webhook_endpoints_url_http CHECK (url ~ '^https?://[^[:space:]]+$' AND length(url) <= 2048),
    -- Standard Webhooks: whsec_ and the base64 of 24 to 64 random bytes.
    CONSTRAINT webhook_endpoints_secret_format CHECK (secret ~ '^whsec_[A-Za-z0-9+/]{32,88}={0,2}$'),
    -- One or more of the four events, no NULLs, one dimension.
    CONSTRAINT webhook_endpoints_event_types_valid CHECK (
        cardinality(event_types) >= 1
        AND array_ndims(event_types) = 1
        AND array_position(event_types, NULL) IS NULL
        AND event_types <@ ARRAY['submitted', 'confirmed', 'failed', 'replaced']
    ),
    CONSTRAINT webhook_endpoints_times_finite CHECK (isfinite(created_at) AND isfinite(updated_at))
);

COMMENT ON TABLE ledgerq.webhook_endpoints IS 'Webhook endpoints: URLs told about one wallet''s task events; a wallet may have several.';
COMMENT ON COLUMN ledgerq.webhook_endpoints.id IS 'Endpoint id: a UUIDv7, lower-case text.';
COMMENT ON COLUMN ledgerq.webhook_endpoints.wallet_id IS 'Name of the wallet whose task events the endpoint receives (wallet_tasks.wallet_id).';
COMMENT ON COLUMN ledgerq.webhook_endpoints.url IS 'Where events are POSTed (http or https).';
COMMENT ON COLUMN ledgerq.webhook_endpoints.secret IS 'Standard Webhooks signing secret (whsec_ + base64). A SHARED secret: the receiver holds the same value to verify webhook-signature, so it is stored as it is (not hashed) and must be treated like a credential.';
COMMENT ON COLUMN ledgerq.webhook_endpoints.event_types IS 'Events the endpoint is subscribed to: any of submitted, confirmed, failed, replaced (default all).';
COMMENT ON COLUMN ledgerq.webhook_endpoints.enabled IS 'A disabled endpoint gets no new events, and its pending deliveries wait until it is enabled again.';
COMMENT ON COLUMN ledgerq.webhook_endpoints.created_at IS 'When the endpoint was registered.';
COMMENT ON COLUMN ledgerq.webhook_endpoints.updated_at IS 'Last change to the row.';

-- Emit, inside every task transition: the wallet's endpoints.
CREATE INDEX webhook_endpoints_wallet ON ledgerq.webhook_endpoints (wallet_id);

CREATE TABLE ledgerq.webhook_deliveries (
    id              text        PRIMARY KEY DEFAULT ('msg_' || replace(gen_random_uuid()::text, '-', '')),
    endpoint_id     text        NOT NULL REFERENCES ledgerq.webhook_endpoints (id) ON DELETE CASCADE,
    event_type      text        NOT NULL,
    task_id         text        NOT NULL,
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_attempt_at timestamptz,
    delivered_at    timestamptz,
    gave_up_at      timestamptz,
    last_status     integer,
    last_error      text,

    CONSTRAINT webhook_deliveries_event_type_valid CHECK (event_type IN ('submitted', 'confirmed', 'failed', 'replaced')),
    CONSTRAINT webhook_deliveries_payload_object CHECK (jsonb_typeof(payload) = 'object'),
    CONSTRAINT webhook_deliveries_attempts_not_negative CHECK (attempts >= 0),
    -- An attempt was made before anything is known of it.
    CONSTRAINT webhook_deliveries_attempted CHECK ((attempts = 0) = (last_attempt_at IS NULL)),
    -- Delivered and given up are final and exclusive; giving up says why.
    CONSTRAINT webhook_deliveries_one_end CHECK (delivered_at IS NULL OR gave_up_at IS NULL),
    CONSTRAINT webhook_deliveries_gave_up_says_why CHECK (gave_up_at IS NULL OR (last_error IS NOT NULL AND last_error <> '')),
    CONSTRAINT webhook_deliveries_delivered_2xx CHECK (delivered_at IS NULL OR last_status BETWEEN 200 AND 299),
    CONSTRAINT webhook_deliveries_times_finite CHECK (
        isfinite(created_at) AND isfinite(next_attempt_at)
        AND (last_attempt_at IS NULL OR isfinite(last_attempt_at))
        AND (delivered_at IS NULL OR isfinite(delivered_at))
        AND (gave_up_at IS NULL OR isfinite(gave_up_at))
    )
);

COMMENT ON TABLE ledgerq.webhook_deliveries IS 'Webhook outbox: one row per (event, endpoint), written in the transaction of the task change it tells about, then delivered with retries and backoff.';
COMMENT ON COLUMN ledgerq.webhook_deliveries.id IS 'The webhook-id header: stable across redeliveries, so a receiver counts the event once.';
COMMENT ON COLUMN ledgerq.webhook_deliveries.endpoint_id IS 'The endpoint it goes to; deleted with it.';
COMMENT ON COLUMN ledgerq.webhook_deliveries.event_type IS 'submitted, confirmed, failed or replaced.';
COMMENT ON COLUMN ledgerq.webhook_deliveries.task_id IS 'The task the event is about (no foreign key: a delivery may outlive the task''s retention).';
COMMENT ON COLUMN ledgerq.webhook_deliveries.payload IS 'The event''s data object, as of the change; the body is {"type":"task.<event_type>","timestamp":<created_at>,"data":<payload>}.';
COMMENT ON COLUMN ledgerq.webhook_deliveries.created_at IS 'When the event happened (the change''s now); the body''s timestamp.';
COMMENT ON COLUMN ledgerq.webhook_deliveries.attempts IS 'POSTs started so far (counted when claimed, so a send cut short by a crash counts).';
COMMENT ON COLUMN ledgerq.webhook_deliveries.next_attempt_at IS 'When the row is due: the retry time after a failure, or the lease end while a deliverer holds it (a deliverer that died is succeeded after it).';
COMMENT ON COLUMN ledgerq.webhook_deliveries.last_attempt_at IS 'When the last POST was started.';
COMMENT ON COLUMN ledgerq.webhook_deliveries.delivered_at IS 'When an endpoint answered 2xx: final.';
COMMENT ON COLUMN ledgerq.webhook_deliveries.gave_up_at IS 'When the give-up limit of attempts was reached: final; last_error says why.';
COMMENT ON COLUMN ledgerq.webhook_deliveries.last_status IS 'HTTP status of the last answer; NULL when there was none (transport error, timeout).';
COMMENT ON COLUMN ledgerq.webhook_deliveries.last_error IS 'Why the last attempt failed (status and start of the body, or the transport error), for operators.';

-- Claim: pending rows, earliest due first.
CREATE INDEX webhook_deliveries_due ON ledgerq.webhook_deliveries (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;

-- +goose Down
DROP TABLE ledgerq.webhook_deliveries;
DROP TABLE ledgerq.webhook_endpoints;
