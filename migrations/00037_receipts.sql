-- +goose Up
-- Access receipts (issue 36, internal/receipt): what each user sees on
-- /account of who used their connections for what. One row per identical
-- uses (user, connection, client, kind, method, template, status) and
-- minute, with their count and first and last time, written in batches off
-- the request path. Ids, a method, a path's template and a status: never a
-- credential, a query string or a body. No foreign key to connections: a
-- receipt outlives its connection (the user's download still has it) until
-- CONNECTD_RECEIPTS_RETENTION, and a batch never fails for a connection
-- deleted meanwhile.
CREATE TABLE receipts (
    org_id        text        NOT NULL,
    issuer        text        NOT NULL,
    subject       text        NOT NULL,
    provider      text        NOT NULL,
    connection_id text        NOT NULL,
    client_id     text        NOT NULL,
    kind          text        NOT NULL,
    method        text        NOT NULL,
    template      text        NOT NULL,
    status        integer     NOT NULL,
    bucket        timestamptz NOT NULL, -- the minute of the uses
    count         bigint      NOT NULL CHECK (count > 0),
    first_at      timestamptz NOT NULL,
    last_at       timestamptz NOT NULL
);
CREATE UNIQUE INDEX receipts_key ON receipts
    (issuer, subject, connection_id, client_id, kind, method, template, status, bucket);
CREATE INDEX receipts_connection ON receipts (issuer, subject, connection_id, last_at DESC);
CREATE INDEX receipts_last_at ON receipts (last_at);

-- When each client last used each connection (proxied calls and token
-- reads): "Last used" on /account, one row per (user, connection, client).
CREATE TABLE receipt_last_uses (
    issuer        text        NOT NULL,
    subject       text        NOT NULL,
    connection_id text        NOT NULL,
    client_id     text        NOT NULL,
    org_id        text        NOT NULL,
    provider      text        NOT NULL,
    last_at       timestamptz NOT NULL,
    PRIMARY KEY (issuer, subject, connection_id, client_id)
);
CREATE INDEX receipt_last_uses_last_at ON receipt_last_uses (last_at);

-- "Last used" stays what it was before the upgrade: the last token read
-- and proxied call the audit trail has (sampled: to within its hour) of
-- each connection that still exists.
INSERT INTO receipt_last_uses (issuer, subject, connection_id, client_id, org_id, provider, last_at)
SELECT a.issuer, a.subject, a.target, a.client_id, c.org_id, c.provider, max(a.occurred_at)
FROM audit_events a JOIN connections c ON c.id = a.target
WHERE a.kind IN ('token.read', 'proxy.call') AND a.client_id <> '' AND a.issuer = c.issuer AND a.subject = c.subject
GROUP BY a.issuer, a.subject, a.target, a.client_id, c.org_id, c.provider;

-- +goose Down
DROP TABLE receipt_last_uses;
DROP TABLE receipts;
