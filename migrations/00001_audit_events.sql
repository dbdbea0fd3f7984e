-- +goose Up
-- audit_events is append-only: rows are inserted in the same transaction as the
-- change they record and only ever deleted by the retention sweep.
CREATE TABLE audit_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    kind        text        NOT NULL,
    actor       text        NOT NULL DEFAULT '',
    issuer      text        NOT NULL DEFAULT '',
    subject     text        NOT NULL DEFAULT '',
    client_id   text        NOT NULL DEFAULT '',
    provider    text        NOT NULL DEFAULT '',
    target      text        NOT NULL DEFAULT '',
    request_id  text        NOT NULL DEFAULT '',
    ip          text        NOT NULL DEFAULT '',
    detail      jsonb       NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX audit_events_occurred_at_idx ON audit_events (occurred_at);
CREATE INDEX audit_events_kind_idx ON audit_events (kind, occurred_at);

-- +goose Down
DROP TABLE audit_events;
