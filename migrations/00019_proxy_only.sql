-- +goose Up
-- A client registered proxy-only (issue 25) never receives a credential:
-- its token read is refused (token_release_disabled) and it calls providers
-- through connectd's proxy, which attaches the credential itself. An
-- operator can switch a client to proxy-only, and back, at any time.
ALTER TABLE clients ADD COLUMN proxy_only boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE clients DROP COLUMN proxy_only;
