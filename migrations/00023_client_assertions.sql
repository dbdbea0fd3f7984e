-- +goose Up
-- private_key_jwt (issue 28): a client may authenticate with RFC 7523 client
-- assertions signed by a key it keeps, registered as a JWKS URL (fetched
-- through egress, cached, a new key found by publishing it) or as public keys
-- (a JWK Set, normalised from PEM or JWK at registration). At most one of the
-- two.
ALTER TABLE clients
    ADD COLUMN jwks_url text,
    ADD COLUMN jwks     jsonb,
    ADD CONSTRAINT clients_one_key_source CHECK (jwks_url IS NULL OR jwks IS NULL);

-- Each assertion's jti is used once per client, on every replica: the insert
-- of (client, jti) decides (ON CONFLICT DO NOTHING). A row is kept until its
-- assertion has expired, then swept.
CREATE TABLE client_assertions (
    client_id  text        NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    jti        text        NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (client_id, jti)
);
CREATE INDEX client_assertions_expires_at ON client_assertions (expires_at);

-- +goose Down
DROP TABLE client_assertions;
ALTER TABLE clients DROP CONSTRAINT clients_one_key_source, DROP COLUMN jwks, DROP COLUMN jwks_url;
