-- +goose Up
-- An approval (a consents row) is for the exact scope set the consent page
-- listed (scopes, no longer a union of requests) and for one provider
-- account: account_hash is the SHA-256 of "connectd/account/v1", a NUL and
-- the provider account id (the id itself is sealed in the connection's
-- credential and is not kept here in clear). A client receives a credential
-- only while its approval lists every scope the credential carries and names
-- the connection's account (internal/connect, consent.go).
-- Rows from before this migration name no account (NULL) and therefore
-- cover no credential: each client is asked once more, on the consent page
-- alone, with no new sign-in at the provider.
ALTER TABLE consents ADD COLUMN account_hash bytea CHECK (length(account_hash) = 32);

-- +goose Down
ALTER TABLE consents DROP COLUMN account_hash;
