-- +goose Up
-- Signed webhooks (internal/webhook). An endpoint is an HTTPS URL of one MCP
-- server (client) with its signing secret ("whsec_…", Standard Webhooks),
-- sealed under the vault keyring's webhook-secret purpose key with the
-- endpoint id as associated data; key_version repeats the ciphertext's key
-- version for `connectd vault status`. events lists the event types it wants
-- (empty: all).
CREATE TABLE webhook_endpoints (
    id          text        PRIMARY KEY,
    client_id   text        NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    url         text        NOT NULL,
    key_version integer     NOT NULL CHECK (key_version > 0),
    secret      bytea       NOT NULL,
    events      text[]      NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL,
    CONSTRAINT webhook_endpoints_client_url_key UNIQUE (client_id, url)
);

-- A delivery is one event for one endpoint, inserted with its River job in
-- the transaction of the change it reports. id is the webhook-id header, the
-- same on every attempt and redelivery, so receivers can deduplicate;
-- payload is exactly the bytes that are signed and sent. It names ids and
-- names, never a credential.
CREATE TABLE webhook_deliveries (
    id              text        PRIMARY KEY,
    endpoint_id     text        NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_type      text        NOT NULL,
    payload         bytea       NOT NULL,
    created_at      timestamptz NOT NULL,
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    delivered_at    timestamptz
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC);
CREATE INDEX webhook_deliveries_created_idx ON webhook_deliveries (created_at);

-- Every attempt of a delivery: when, the HTTP status (NULL: no answer) and
-- what went wrong, without a secret.
CREATE TABLE webhook_attempts (
    delivery_id text        NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt     integer     NOT NULL CHECK (attempt > 0),
    at          timestamptz NOT NULL,
    status_code integer,
    error       text        NOT NULL DEFAULT '',
    duration_ms integer     NOT NULL,
    PRIMARY KEY (delivery_id, attempt)
);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
