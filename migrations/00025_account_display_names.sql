-- +goose Up
-- An account's display name is one rule (vault.Credential.DisplayName): the
-- provider's label for it, else the provider's own id for it (a provider
-- that names accounts only by an ID token's sub), else '' (an account
-- connectd made up: an API key). Rows stored before kept only the label:
-- '' for an account named only by its id. Set NULL, they are read again by
-- the vault's backfill (BackfillAccounts, the same as after 00018), which
-- opens each credential and stores its display name; until then they read
-- as '' as before.
UPDATE connections SET display_name = NULL WHERE display_name = '';

-- +goose Down
-- Nothing to undo: a name read again is the same rule's answer.
SELECT 1;
