-- +goose Up
-- A resource URI belongs to one client only (DESIGN invariant 14): a user
-- token is accepted for the client whose resources name its `aud`, so a second
-- client registering the first one's resource would accept the first one's
-- tokens — token passthrough by registration.
--
-- clients.resources is a text[], and neither a UNIQUE constraint nor an
-- exclusion constraint can look inside an array without extensions. So
-- client_resources holds one row per (client, resource), keyed by the
-- resource, and a trigger keeps it equal to clients.resources on every insert
-- and every change of resources, whoever writes (mcpauth, the previous
-- release's code during a rolling upgrade, an operator with psql). The array
-- stays the column that code reads: this migration only adds.
--
-- The key is the resource without trailing slashes: `aud` is compared byte
-- for byte, so "https://a.example/mcp/" would not accept tokens for
-- "https://a.example/mcp", but two registrations that differ only by a
-- trailing slash name the same MCP server and are refused as well.
--
-- Disabled clients keep their resources: a disabled client can be enabled
-- again, and then it must not share them. Rotating a client's key does not
-- touch its resources. Owned by internal/mcpauth.
CREATE TABLE client_resources (
    resource_key text PRIMARY KEY,
    resource     text NOT NULL,
    client_id    text NOT NULL REFERENCES clients (id) ON DELETE CASCADE
);
CREATE INDEX client_resources_client_id_idx ON client_resources (client_id);

-- +goose StatementBegin
CREATE FUNCTION client_resource_key(resource text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT rtrim(resource, '/') $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION clients_index_resources() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM client_resources WHERE client_id = OLD.id;
    END IF;
    -- A resource another client holds (or this one lists twice) violates
    -- client_resources_pkey, and the whole write fails.
    INSERT INTO client_resources (resource_key, resource, client_id)
        SELECT client_resource_key(r), r, NEW.id FROM unnest(NEW.resources) AS r;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER clients_resources_unique AFTER INSERT OR UPDATE OF resources ON clients
    FOR EACH ROW EXECUTE FUNCTION clients_index_resources();

-- Existing duplicates cannot be resolved here (which client is the rightful
-- owner is the operator's call), so the migration stops and names them.
-- +goose StatementBegin
DO $$
DECLARE
    dup text;
BEGIN
    SELECT string_agg(format('%s (clients %s)', k, ids), '; ' ORDER BY k) INTO dup
    FROM (SELECT client_resource_key(r) AS k, string_agg(DISTINCT c.id, ', ') AS ids
          FROM clients c, unnest(c.resources) AS r
          GROUP BY 1 HAVING count(*) > 1) d;
    IF dup IS NOT NULL THEN
        RAISE EXCEPTION 'connectd: resource URIs registered more than once: %', dup
            USING HINT = 'Keep each resource on one client: remove it from the others '
                '(UPDATE clients SET resources = array_remove(resources, ''URI'') WHERE id = ''ID'', '
                'or DELETE FROM clients WHERE id = ''ID'' for a client left without resources), '
                'then run the migration again. See docs/identity.md.';
    END IF;
END
$$;
-- +goose StatementEnd

INSERT INTO client_resources (resource_key, resource, client_id)
    SELECT client_resource_key(r), r, c.id FROM clients c, unnest(c.resources) AS r;

-- +goose Down
DROP TRIGGER clients_resources_unique ON clients;
DROP FUNCTION clients_index_resources();
DROP FUNCTION client_resource_key(text);
DROP TABLE client_resources;
