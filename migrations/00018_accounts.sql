-- +goose Up
-- Several accounts at one provider (issue 24): a connection is per (user,
-- provider, provider account). account_hash (vault.AccountHash of the
-- provider's account id, 00017) tells two accounts apart; a row from before
-- 00017 has none yet and is the user's one account at that provider (at
-- most one such row: connections_legacy_key) until the vault next writes it
-- or its backfill (internal/vault, BackfillAccounts) opens it.
--   display_name  what the provider calls the account (login, email,
--                 workspace), kept in clear so listings need not open the
--                 sealed credential; NULL until the vault has read it
--   label         the user's own name for the connection ("work"); ''
--                 when none
ALTER TABLE connections DROP CONSTRAINT connections_user_provider_key;
ALTER TABLE connections ADD COLUMN display_name text;
ALTER TABLE connections ADD COLUMN label text NOT NULL DEFAULT '';
CREATE UNIQUE INDEX connections_account_key ON connections (issuer, subject, provider, account_hash);
CREATE UNIQUE INDEX connections_legacy_key ON connections (issuer, subject, provider) WHERE account_hash IS NULL;
CREATE INDEX connections_unread_idx ON connections (id) WHERE display_name IS NULL;

-- An approval is for one connection: a client may be approved for several
-- of a user's accounts at one provider. Every approval of today is for the
-- user's one connection at its provider; one whose connection is gone
-- covers nothing and goes.
ALTER TABLE consents ADD COLUMN connection_id text;
UPDATE consents c SET connection_id = cn.id FROM connections cn
    WHERE cn.issuer = c.issuer AND cn.subject = c.subject AND cn.provider = c.provider;
DELETE FROM consents WHERE connection_id IS NULL;
ALTER TABLE consents ALTER COLUMN connection_id SET NOT NULL;
ALTER TABLE consents ADD CONSTRAINT consents_connection_id_check CHECK (connection_id <> '');
ALTER TABLE consents DROP CONSTRAINT consents_pkey;
ALTER TABLE consents ADD PRIMARY KEY (issuer, subject, provider, client_id, connection_id);
CREATE INDEX consents_connection_idx ON consents (connection_id);

-- Which account a connect request is for: a connection id (reauthorize or
-- step up that one), 'new' (another account), or '' (the user's choice).
ALTER TABLE elicitations ADD COLUMN account text NOT NULL DEFAULT '';

-- +goose Down
-- Only while every user has at most one connection per provider.
ALTER TABLE elicitations DROP COLUMN account;
DROP INDEX consents_connection_idx;
ALTER TABLE consents DROP CONSTRAINT consents_pkey;
ALTER TABLE consents ADD PRIMARY KEY (issuer, subject, provider, client_id);
ALTER TABLE consents DROP CONSTRAINT consents_connection_id_check;
ALTER TABLE consents DROP COLUMN connection_id;
DROP INDEX connections_unread_idx;
DROP INDEX connections_legacy_key;
DROP INDEX connections_account_key;
ALTER TABLE connections DROP COLUMN label;
ALTER TABLE connections DROP COLUMN display_name;
ALTER TABLE connections ADD CONSTRAINT connections_user_provider_key UNIQUE (issuer, subject, provider);
