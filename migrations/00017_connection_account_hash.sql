-- +goose Up
-- The provider account a connection is for, as vault.AccountHash of its id
-- (the same hash approvals keep): the release decision compares the two
-- without opening the sealed credential. Written on every store and refresh;
-- NULL on rows from before this migration until their next one (the
-- decision then opens the credential, as before).
ALTER TABLE connections ADD COLUMN account_hash bytea;

-- +goose Down
ALTER TABLE connections DROP COLUMN account_hash;
