-- +goose Up
-- The window of a refresh made for a provider's 401 (00026) holds back only
-- a 401 on the very token that refresh issued (issue 33, security review):
-- its SHA-256, so that one client provoking 401s on its own token cannot
-- hold back the refresh of another token of the connection (another
-- client's narrowed one, or the connection's own). NULL: none yet.
ALTER TABLE connections ADD COLUMN refused_refresh_token bytea;

-- +goose Down
ALTER TABLE connections DROP COLUMN refused_refresh_token;
