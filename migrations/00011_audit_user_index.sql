-- +goose Up
-- A user's own trail: the account page reads when each MCP server last read
-- the user's token (the sampled token.read rows), and admins filter events by
-- user. Both look up (issuer, subject), then kind, newest first.
CREATE INDEX audit_events_user_idx ON audit_events (issuer, subject, kind, occurred_at);

-- +goose Down
DROP INDEX audit_events_user_idx;
