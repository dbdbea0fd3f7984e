-- +goose Up
-- browser_sessions are the live browser sessions (end users' and admins'),
-- so that a session ends on the server: signing out or an admin's "end
-- sessions" sets ended_at, and a cookie whose row is ended or missing no
-- longer signs anyone in, wherever it was copied to. Only the SHA-256 of the
-- session id is stored, never the id. Rows are deleted once past expires_at
-- (the session's absolute lifetime), when the cookie is refused anyway.
-- Owned by internal/session.
CREATE TABLE browser_sessions (
    id_hash    bytea       PRIMARY KEY CHECK (length(id_hash) = 32),
    cookie     text        NOT NULL, -- the session cookie's name: end user's or admin's
    issuer     text        NOT NULL,
    subject    text        NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    ended_at   timestamptz
);

-- "End all sessions of a user" finds that user's live sessions.
CREATE INDEX browser_sessions_user_idx ON browser_sessions (issuer, subject) WHERE ended_at IS NULL;
-- The sweep deletes by age.
CREATE INDEX browser_sessions_expires_idx ON browser_sessions (expires_at);

-- +goose Down
DROP TABLE browser_sessions;
