-- +goose Up
-- narrowed_tokens holds, per connection and scope set, an access token the
-- provider limited to that subset of the connection's grant (a refresh-token
-- grant with "scope", RFC 6749 §6), owned by internal/vault. A client that
-- was approved for less than the connection grants receives one of these
-- instead of the connection's own token, at providers that can narrow.
-- scope_key is the hex SHA-256 of the sorted scope set (scopes lists it, for
-- reading); ciphertext is the sealed token (its associated data binds it to
-- connection_id and scope_key); key_version repeats the ciphertext's. A row
-- goes with its connection (ON DELETE CASCADE) and whenever the connection's
-- credential is replaced: it never outlives or widens past the connection.
CREATE TABLE narrowed_tokens (
    connection_id text        NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
    scope_key     text        NOT NULL CHECK (length(scope_key) = 64),
    scopes        text[]      NOT NULL,
    key_version   integer     NOT NULL CHECK (key_version > 0),
    ciphertext    bytea       NOT NULL,
    expires_at    timestamptz,
    refreshed_at  timestamptz NOT NULL,
    PRIMARY KEY (connection_id, scope_key)
);

-- oauth_states.approve_scopes is what the consent page listed for the client
-- when it differs from what the provider is asked for (scopes): at a provider
-- that narrows tokens the page lists only what the client will receive, while
-- the authorization still asks for the whole connection (incremental
-- authorization). NULL: the same as scopes.
ALTER TABLE oauth_states ADD COLUMN approve_scopes text[];

-- +goose Down
ALTER TABLE oauth_states DROP COLUMN approve_scopes;
DROP TABLE narrowed_tokens;
