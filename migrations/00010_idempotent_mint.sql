-- +goose Up
-- request_key names what an elicitation was minted for: the SHA-256 of the
-- client, the user (issuer, subject), the provider, the sorted scope set and
-- the request digest. While one is pending, minting the same request answers
-- it again (same id, URL and expiry) instead of minting another link, and
-- the unique index makes two concurrent mints, on any replicas, yield one
-- (internal/connect, api.go). A pending elicitation too close to its expiry
-- to be handed out again is detached (request_key NULL): it stays usable
-- until it expires, and the next mint gets a fresh link.
ALTER TABLE elicitations ADD COLUMN request_key bytea CHECK (length(request_key) = 32);
CREATE UNIQUE INDEX elicitations_pending_request_key ON elicitations (request_key) WHERE status = 'pending';

-- +goose Down
DROP INDEX elicitations_pending_request_key;
ALTER TABLE elicitations DROP COLUMN request_key;
