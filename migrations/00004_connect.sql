-- +goose Up
-- elicitations are the connect requests MCP servers mint, owned by
-- internal/connect. The id is the opaque handle in the connect URL (≥128 random
-- bits); it authenticates nothing: every use is checked against the calling
-- client and user, or the signed-in browser user.
CREATE TABLE elicitations (
    id             text        PRIMARY KEY,
    client_id      text        NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    issuer         text        NOT NULL,
    subject        text        NOT NULL,
    provider       text        NOT NULL,
    scopes         text[]      NOT NULL DEFAULT '{}',
    message        text        NOT NULL,
    request_digest text        NOT NULL DEFAULT '',
    status         text        NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'completed', 'declined', 'expired', 'failed')),
    reason         text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    completed_at   timestamptz
);
CREATE INDEX elicitations_pending_expiry_idx ON elicitations (expires_at) WHERE status = 'pending';
CREATE INDEX elicitations_user_idx ON elicitations (issuer, subject, created_at);

-- consents record that a user allowed a client (MCP server) to use their
-- connection to a provider with these scopes. A client sees a connection only
-- through a consent.
CREATE TABLE consents (
    issuer     text        NOT NULL,
    subject    text        NOT NULL,
    client_id  text        NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    provider   text        NOT NULL,
    scopes     text[]      NOT NULL DEFAULT '{}',
    granted_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (issuer, subject, provider, client_id)
);
CREATE INDEX consents_client_idx ON consents (client_id);

-- oauth_states are pending provider authorizations, created only after consent:
-- keyed by the SHA-256 of the state, bound to the browser session (hash of its
-- session id) and to the elicitation, single-use, ≤10 minutes. The PKCE verifier
-- is sealed by the vault keyring.
CREATE TABLE oauth_states (
    state_hash      bytea       PRIMARY KEY CHECK (length(state_hash) = 32),
    elicitation_id  text        NOT NULL REFERENCES elicitations (id) ON DELETE CASCADE,
    session_hash    bytea       NOT NULL CHECK (length(session_hash) = 32),
    verifier_sealed bytea       NOT NULL,
    scopes          text[]      NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL
);
CREATE INDEX oauth_states_expires_at_idx ON oauth_states (expires_at);

-- request_state_uses makes each sealed request_state single-use: resolving one
-- inserts its id; a second insert of the same id is a replay.
CREATE TABLE request_state_uses (
    id         bytea       PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX request_state_uses_expires_at_idx ON request_state_uses (expires_at);

-- +goose Down
DROP TABLE request_state_uses;
DROP TABLE oauth_states;
DROP TABLE consents;
DROP TABLE elicitations;
