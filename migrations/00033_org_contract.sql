-- +goose Up
-- Organizations (issue 34), the contract step: every replica now writes
-- org_id itself (the code of migration 00028 and after), so the constant
-- defaults the expand step (00028) gave clients, connections and
-- audit_events go. A writer that forgets the organization of a client or a
-- connection then fails (not_null_violation on org_id) instead of writing
-- into the default organization. Dropping a default changes the catalog
-- only: no table is rewritten or scanned. Each ALTER still takes its table's
-- ACCESS EXCLUSIVE lock for an instant; lock_timeout keeps it from queueing
-- behind a long transaction (and every query from queueing behind it): if it
-- times out, nothing changed, run it again.
SET LOCAL lock_timeout = '5s';
ALTER TABLE clients ALTER COLUMN org_id DROP DEFAULT;
ALTER TABLE connections ALTER COLUMN org_id DROP DEFAULT;

-- audit_events keeps one rule for its writers (00031's trigger): a row
-- written without an organization is its client's organization's, else its
-- connection's, else the default one's. Without the default, "without an
-- organization" is NULL (the writers that put their row in a CTE beside the
-- change, audit.Insert, name no org_id), as well as 'default' (what
-- audit.Write stores for an event whose writer gave none); the BEFORE INSERT
-- trigger fills it before NOT NULL is checked, so such a row is never
-- refused and never stays without an organization.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_events_org() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.org_id IS NULL OR NEW.org_id = 'default' THEN
        NEW.org_id := NULL;
        IF NEW.client_id <> '' THEN
            SELECT c.org_id INTO NEW.org_id FROM clients c WHERE c.id = NEW.client_id;
        ELSIF NEW.target LIKE 'cn\_%' THEN
            SELECT c.org_id INTO NEW.org_id FROM connections c WHERE c.id = NEW.target;
        END IF;
        NEW.org_id := coalesce(NEW.org_id, 'default');
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
ALTER TABLE audit_events ALTER COLUMN org_id DROP DEFAULT;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE audit_events ALTER COLUMN org_id SET DEFAULT 'default';
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_events_org() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.org_id = 'default' THEN
        IF NEW.client_id <> '' THEN
            SELECT c.org_id INTO NEW.org_id FROM clients c WHERE c.id = NEW.client_id;
        ELSIF NEW.target LIKE 'cn\_%' THEN
            SELECT c.org_id INTO NEW.org_id FROM connections c WHERE c.id = NEW.target;
        END IF;
        NEW.org_id := coalesce(NEW.org_id, 'default');
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
ALTER TABLE connections ALTER COLUMN org_id SET DEFAULT 'default';
ALTER TABLE clients ALTER COLUMN org_id SET DEFAULT 'default';
