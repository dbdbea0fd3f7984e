-- +goose NO TRANSACTION
-- +goose Up
-- A connection's identity includes its organization (issue 34): the same
-- provider account connected through two organizations' apps is two
-- connections that never meet. The indexes are built CONCURRENTLY (writes to
-- connections go on meanwhile), the new one before the old is dropped, so the
-- uniqueness is never off; hence outside a transaction. Re-runnable: a failed
-- concurrent build leaves an invalid index that IF NOT EXISTS would keep, so
-- each is dropped first.
DROP INDEX CONCURRENTLY IF EXISTS connections_org_account_key;
CREATE UNIQUE INDEX CONCURRENTLY connections_org_account_key
    ON connections (org_id, issuer, subject, provider, account_hash);
DROP INDEX CONCURRENTLY IF EXISTS connections_org_legacy_key;
CREATE UNIQUE INDEX CONCURRENTLY connections_org_legacy_key
    ON connections (org_id, issuer, subject, provider) WHERE account_hash IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS connections_account_key;
DROP INDEX CONCURRENTLY IF EXISTS connections_legacy_key;

-- +goose Down
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS connections_account_key
    ON connections (issuer, subject, provider, account_hash);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS connections_legacy_key
    ON connections (issuer, subject, provider) WHERE account_hash IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS connections_org_legacy_key;
DROP INDEX CONCURRENTLY IF EXISTS connections_org_account_key;
