-- +goose Up
-- An organization's own trusted issuers (issue 34), owned by package org:
-- its MCP authorization servers, whose user tokens its MCP servers (clients)
-- accept and at which its users' browsers may sign in. id is unique across
-- the deployment (an issuer id, as CONNECTD_ISSUERS's: /login?issuer=id),
-- url too (a token's iss names one issuer, so one organization). The login
-- client secret is sealed with the vault keyring (purpose
-- connectd/org/issuer-secret/v1, bound to id, org, url and client id) and
-- write-only. No deployment issuer may share an id or URL: the store checks
-- that, the database cannot (CONNECTD_ISSUERS is configuration).
CREATE TABLE org_issuers (
    id              text        PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_-]{0,31}$'),
    org_id          text        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    url             text        NOT NULL UNIQUE CHECK (url <> ''),
    jwks_url        text        NOT NULL DEFAULT '',
    allow_plain_jwt boolean     NOT NULL DEFAULT false,
    login           boolean     NOT NULL DEFAULT false,
    client_id       text        NOT NULL DEFAULT '',
    key_version     integer     CHECK (key_version > 0),
    client_secret   bytea,
    scopes          text[]      NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT org_issuers_secret_check CHECK ((client_secret IS NULL) = (key_version IS NULL)),
    CONSTRAINT org_issuers_login_check CHECK (NOT login OR client_id <> '')
);
CREATE INDEX org_issuers_org_idx ON org_issuers (org_id);

-- Whether the organization's MCP servers still accept the deployment's
-- issuers (CONNECTD_ISSUERS) besides its own: the operator's choice. The
-- default organization always does. A constant default: no table rewrite.
ALTER TABLE organizations ADD COLUMN deployment_issuers boolean NOT NULL DEFAULT true;
ALTER TABLE organizations ADD CONSTRAINT organizations_default_deployment_issuers_check
    CHECK (id <> 'default' OR deployment_issuers);

-- +goose Down
ALTER TABLE organizations DROP CONSTRAINT organizations_default_deployment_issuers_check;
ALTER TABLE organizations DROP COLUMN deployment_issuers;
DROP TABLE org_issuers;
