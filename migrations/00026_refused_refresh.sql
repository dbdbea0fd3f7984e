-- +goose Up
-- A provider's 401 makes at most one refresh of a connection within
-- vault.RefusedRefreshWindow (issue 33): the time of the last such refresh,
-- across replicas. NULL: none yet.
ALTER TABLE connections ADD COLUMN refused_refresh_at timestamptz;

-- +goose Down
ALTER TABLE connections DROP COLUMN refused_refresh_at;
