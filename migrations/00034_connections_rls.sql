-- +goose Up
-- Row-level security on connections (issue 34), the second line below the
-- vault's organization-scoped queries (internal/vault, rls.go): a statement
-- run with connectd.org set to an organization (set_config(..., true), local
-- to its transaction) sees, changes and writes that organization's rows
-- only, whatever its WHERE says; run with connectd.org unset (or '*'), as
-- every cross-organization pass and every other package does, it sees every
-- row. WITH CHECK is the USING expression: a row of another organization
-- cannot be written either. FORCE makes the table's owner (the role
-- connectd runs as, which ran the migrations) subject to it too; a
-- superuser or a role with BYPASSRLS is never subject to it, so connectd
-- must run as neither (docs/operations.md). Catalog changes only: no table
-- rewrite or scan; the instant's ACCESS EXCLUSIVE lock is bounded by
-- lock_timeout (on a timeout nothing changed: run it again).
SET LOCAL lock_timeout = '5s';
CREATE POLICY connections_org ON connections
    USING (org_id = current_setting('connectd.org', true)
        OR coalesce(current_setting('connectd.org', true), '') IN ('', '*'));
ALTER TABLE connections ENABLE ROW LEVEL SECURITY;
ALTER TABLE connections FORCE ROW LEVEL SECURITY;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE connections NO FORCE ROW LEVEL SECURITY;
ALTER TABLE connections DISABLE ROW LEVEL SECURITY;
DROP POLICY connections_org ON connections;
