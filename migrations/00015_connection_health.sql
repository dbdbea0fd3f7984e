-- +goose Up
-- A connection's health, kept by internal/vault: when a refresh (on demand,
-- or by the health job for providers whose refresh tokens lapse when unused)
-- last reached the provider, and what went wrong then — an error class
-- (provider_unavailable, refresh_failed, invalid_grant), never a token or a
-- provider's message. '' after a success.
ALTER TABLE connections ADD COLUMN health_checked_at timestamptz;
ALTER TABLE connections ADD COLUMN last_error text NOT NULL DEFAULT '';
-- The health job's listing: active connections of a provider by when their
-- refresh token was last issued or used (updated_at moves with every store
-- and refresh).
CREATE INDEX connections_provider_activity_idx ON connections (provider, updated_at)
    WHERE status = 'active';

-- +goose Down
DROP INDEX connections_provider_activity_idx;
ALTER TABLE connections DROP COLUMN last_error;
ALTER TABLE connections DROP COLUMN health_checked_at;
