-- +goose Up
-- Organizations (issue 34), the expand step: every table an organization owns
-- gains org_id with the constant default 'default', which Postgres stores in
-- the catalog without rewriting the table (no backfill pass, no long lock), so
-- every existing row is the default organization's the moment this commits and
-- replicas still running the code before it keep working. The foreign keys
-- are added NOT VALID and validated after (VALIDATE takes no lock that blocks
-- reads or writes). The contract step, dropping the defaults once every
-- replica writes org_id itself, is a later migration.
CREATE TABLE organizations (
    id          text        PRIMARY KEY CHECK (id ~ '^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$'),
    name        text        NOT NULL CHECK (name <> '' AND length(name) <= 100),
    brand_color text        NOT NULL DEFAULT '' CHECK (brand_color = '' OR brand_color ~ '^#[0-9a-f]{6}$'),
    logo_url    text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO organizations (id, name) VALUES ('default', 'Default');

-- provider_apps: an organization's own OAuth app at a provider of the catalog
-- (its client id, and its client secret sealed with the vault keyring; the
-- secret is write-only). A new client id is a new app (a new id): refresh
-- tokens issued to the old one cannot be refreshed with it.
CREATE TABLE provider_apps (
    id          text        PRIMARY KEY,
    org_id      text        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    provider    text        NOT NULL CHECK (provider <> ''),
    client_id   text        NOT NULL CHECK (client_id <> ''),
    key_version integer     CHECK (key_version > 0),
    secret      bytea,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT provider_apps_secret_check CHECK ((secret IS NULL) = (key_version IS NULL)),
    CONSTRAINT provider_apps_org_provider_key UNIQUE (org_id, provider)
);

ALTER TABLE clients ADD COLUMN org_id text NOT NULL DEFAULT 'default';
ALTER TABLE clients ADD CONSTRAINT clients_org_id_fkey
    FOREIGN KEY (org_id) REFERENCES organizations (id) NOT VALID;
ALTER TABLE clients VALIDATE CONSTRAINT clients_org_id_fkey;
CREATE INDEX clients_org_idx ON clients (org_id);

-- A connection belongs to the organization whose app obtained it; app_id is
-- that app (provider_apps.id), NULL for the deployment's shared app.
ALTER TABLE connections ADD COLUMN org_id text NOT NULL DEFAULT 'default';
ALTER TABLE connections ADD COLUMN app_id text;
ALTER TABLE connections ADD CONSTRAINT connections_org_id_fkey
    FOREIGN KEY (org_id) REFERENCES organizations (id) NOT VALID;
ALTER TABLE connections VALIDATE CONSTRAINT connections_org_id_fkey;

-- An admin key is an organization's (NULL: the deployment's operators').
ALTER TABLE admin_keys ADD COLUMN org_id text REFERENCES organizations (id) ON DELETE CASCADE;

-- The audit trail is per organization; existing rows are the default one's.
ALTER TABLE audit_events ADD COLUMN org_id text NOT NULL DEFAULT 'default';

-- +goose Down
ALTER TABLE audit_events DROP COLUMN org_id;
ALTER TABLE admin_keys DROP COLUMN org_id;
ALTER TABLE connections DROP CONSTRAINT connections_org_id_fkey;
ALTER TABLE connections DROP COLUMN app_id;
ALTER TABLE connections DROP COLUMN org_id;
DROP INDEX clients_org_idx;
ALTER TABLE clients DROP CONSTRAINT clients_org_id_fkey;
ALTER TABLE clients DROP COLUMN org_id;
DROP TABLE provider_apps;
DROP TABLE organizations;
