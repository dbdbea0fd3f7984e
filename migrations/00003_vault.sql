-- +goose Up
-- connections holds one linked third-party account per (issuer, subject,
-- provider), owned by internal/vault. ciphertext is the sealed credential set
-- (tokens, expiry, granted scopes, account id/label); its associated data binds
-- it to this row's id, issuer, subject and provider, so a ciphertext copied to
-- another row does not open. key_version repeats the version in the ciphertext
-- header so `connectd vault status` and `rewrap` can select rows by key without
-- decrypting. scopes and expires_at repeat non-secret parts of the sealed set
-- for listing; the sealed copy is authoritative.
CREATE TABLE connections (
    id           text        PRIMARY KEY,
    issuer       text        NOT NULL,
    subject      text        NOT NULL,
    provider     text        NOT NULL,
    status       text        NOT NULL DEFAULT 'active'
                 CHECK (status IN ('active', 'reauthorization_required', 'revoked')),
    key_version  integer     NOT NULL CHECK (key_version > 0),
    ciphertext   bytea       NOT NULL,
    scopes       text[]      NOT NULL DEFAULT '{}',
    expires_at   timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    refreshed_at timestamptz,
    CONSTRAINT connections_user_provider_key UNIQUE (issuer, subject, provider)
);

-- +goose Down
DROP TABLE connections;
