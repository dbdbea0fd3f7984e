-- +goose Up
-- clients are the MCP servers allowed to call the /v1 API. resources are the
-- RFC 8707 resource URIs their users' access tokens must carry in `aud`;
-- providers limit which third-party providers the client may ask for (empty:
-- none yet). Owned by internal/mcpauth.
CREATE TABLE clients (
    id           text        PRIMARY KEY,
    name         text        NOT NULL CHECK (name <> ''),
    resources    text[]      NOT NULL CHECK (cardinality(resources) > 0),
    providers    text[]      NOT NULL DEFAULT '{}',
    disabled     boolean     NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz
);

-- client_keys holds only the SHA-256 of each secret key, never the key. A key
-- with expires_at set keeps working until then (the overlap after a rotation).
CREATE TABLE client_keys (
    key_hash   bytea       PRIMARY KEY CHECK (length(key_hash) = 32),
    client_id  text        NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz
);
CREATE INDEX client_keys_client_id_idx ON client_keys (client_id);

-- login_states are the pending browser logins at an MCP authorization server:
-- keyed by the SHA-256 of the OAuth state, bound to the browser by the SHA-256
-- of the secret in its state-binding cookie, consumed exactly once.
CREATE TABLE login_states (
    state_hash   bytea       PRIMARY KEY CHECK (length(state_hash) = 32),
    binding_hash bytea       NOT NULL CHECK (length(binding_hash) = 32),
    issuer       text        NOT NULL,
    return_to    text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX login_states_expires_at_idx ON login_states (expires_at);

-- +goose Down
DROP TABLE login_states;
DROP TABLE client_keys;
DROP TABLE clients;
