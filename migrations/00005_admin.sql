-- +goose Up
-- admin_keys are the API keys of the admin JSON API (/admin/api/...), created
-- with `connectd admin keys create`. Only the SHA-256 of a key is stored, never
-- the key. A key works while revoked_at is null and expires_at (if set) is in
-- the future. Owned by internal/admin.
CREATE TABLE admin_keys (
    id           text        PRIMARY KEY,
    name         text        NOT NULL CHECK (name <> ''),
    key_hash     bytea       NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    created_by   text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    revoked_at   timestamptz,
    last_used_at timestamptz
);

-- The admin listing of linked accounts pages by keyset (created_at, id),
-- newest first, optionally narrowed to one user (by subject alone: the
-- unique index starts with the issuer), one provider or the connections that
-- need attention; these indexes keep every page an index range scan however
-- many rows there are. (A listing by client starts from consents_client_idx.)
CREATE INDEX connections_created_idx ON connections (created_at, id);
CREATE INDEX connections_subject_created_idx ON connections (subject, created_at, id);
CREATE INDEX connections_provider_created_idx ON connections (provider, created_at, id);
CREATE INDEX connections_unhealthy_created_idx ON connections (created_at, id) WHERE status <> 'active';

-- A connection's audit trail (admin detail page) is read by user and provider,
-- newest first.
CREATE INDEX audit_events_user_provider_idx ON audit_events (issuer, subject, provider, id);
-- Security events (refusals) are few among many rows: the admin counts and
-- lists them over a window from this partial index.
CREATE INDEX audit_events_security_idx ON audit_events (occurred_at) WHERE kind LIKE 'security.%';

-- +goose Down
DROP INDEX audit_events_security_idx;
DROP INDEX audit_events_user_provider_idx;
DROP INDEX connections_unhealthy_created_idx;
DROP INDEX connections_provider_created_idx;
DROP INDEX connections_subject_created_idx;
DROP INDEX connections_created_idx;
DROP TABLE admin_keys;
