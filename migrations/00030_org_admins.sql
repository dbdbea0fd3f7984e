-- +goose Up
-- Admins with roles, per organization (issue 34), owned by package admin.
-- org_admins assigns a role in one organization to an identity (issuer URL,
-- subject) that signs in at /admin; the deployment's operators (the admin
-- Policy) need no row. Roles, least first: viewer (read-only), security
-- (+ revoke, cut-off), admin (+ clients, webhooks), owner (+ the
-- organization's admins).
CREATE TABLE org_admins (
    org_id     text        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    issuer     text        NOT NULL CHECK (issuer <> ''),
    subject    text        NOT NULL CHECK (subject <> ''),
    role       text        NOT NULL CHECK (role IN ('owner', 'admin', 'security', 'viewer')),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text        NOT NULL,
    PRIMARY KEY (org_id, issuer, subject)
);
-- Every admin request looks an identity's memberships up.
CREATE INDEX org_admins_identity_idx ON org_admins (issuer, subject);

-- org_admin_claims gives a role in an organization to whoever signs in at
-- issuer with an ID token whose claim holds value (a group mapping).
CREATE TABLE org_admin_claims (
    org_id     text        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    issuer     text        NOT NULL CHECK (issuer <> ''),
    claim      text        NOT NULL CHECK (claim <> ''),
    value      text        NOT NULL CHECK (value <> ''),
    role       text        NOT NULL CHECK (role IN ('owner', 'admin', 'security', 'viewer')),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text        NOT NULL,
    PRIMARY KEY (org_id, issuer, claim, value)
);
CREATE INDEX org_admin_claims_issuer_idx ON org_admin_claims (issuer);

-- admin_signins records, per identity, whether its latest admin sign-in was
-- admitted by the deployment's Policy (operator) or only by a membership.
-- A Policy claim is in the ID token alone, so a request cannot re-check it;
-- without this row an organization's admin at the admin issuer would pass
-- the per-request re-check of a claim-only Policy as an operator. matched
-- lists the claim mappings ([{"org", "claim", "value"}]) the sign-in's ID
-- token met: a request's roles are those of the mappings still in
-- org_admin_claims among them.
CREATE TABLE admin_signins (
    issuer       text        NOT NULL,
    subject      text        NOT NULL,
    operator     boolean     NOT NULL,
    matched      jsonb       NOT NULL DEFAULT '[]',
    signed_in_at timestamptz NOT NULL,
    PRIMARY KEY (issuer, subject)
);

-- An admin key's role in its organization (00028 gave it org_id); a key with
-- no organization is an operator key and has no role. The table is small:
-- the CHECK is validated at once.
ALTER TABLE admin_keys ADD COLUMN role text CHECK (role IN ('owner', 'admin', 'security', 'viewer'));
ALTER TABLE admin_keys ADD CONSTRAINT admin_keys_org_role_check CHECK ((org_id IS NULL) = (role IS NULL));

-- +goose Down
ALTER TABLE admin_keys DROP CONSTRAINT admin_keys_org_role_check;
ALTER TABLE admin_keys DROP COLUMN role;
DROP TABLE admin_signins;
DROP TABLE org_admin_claims;
DROP TABLE org_admins;
