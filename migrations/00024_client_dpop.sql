-- +goose Up
-- DPoP (RFC 9449) on /v1 (issue 28, stretch): a client with dpop_required
-- proves every /v1 call (the proxy's included) with a DPoP proof signed by
-- one of its registered private_key_jwt keys, so a leaked client key alone
-- is worth nothing. A proof's jti is spent in client_assertions (as
-- "dpop:<jti>").
ALTER TABLE clients ADD COLUMN dpop_required boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE clients DROP COLUMN dpop_required;
