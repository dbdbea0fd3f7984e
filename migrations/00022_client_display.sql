-- +goose Up
-- What the end-user pages show of an MCP server besides its name (issue
-- 27): its logo (an https image URL, shown as <img>, whose origin the page's
-- CSP img-src names) and its homepage. '' for none. Package mcpauth owns it.
ALTER TABLE clients
    ADD COLUMN logo_url text NOT NULL DEFAULT '',
    ADD COLUMN homepage text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE clients DROP COLUMN logo_url, DROP COLUMN homepage;
