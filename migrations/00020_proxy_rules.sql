-- +goose Up
-- Request rules per client and provider for the proxy (issue 25): when a
-- client has rules at a provider, a proxied call matching none of them is
-- refused (proxy_not_allowed) before any provider call. Each rule is
-- "METHOD PATTERN" ("GET /repos/*/issues*"; "*" matches any run of
-- characters, slashes included; METHOD may be "*"). description is the
-- operator's words for the consent page ("reads your issues; cannot change
-- code").
CREATE TABLE client_proxy_rules (
    client_id   text   NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    provider    text   NOT NULL,
    rules       text[] NOT NULL CHECK (cardinality(rules) > 0),
    description text   NOT NULL DEFAULT '',
    PRIMARY KEY (client_id, provider)
);

-- +goose Down
DROP TABLE client_proxy_rules;
