-- +goose Up
-- Every audit row is its organization's (issue 34): a row written without
-- an organization (org_id left at its default) that names a client is the
-- client's organization's, and one that names only a connection (its
-- target) is the connection's. One rule for every writer — audit.Write, the
-- statements that write their row in a CTE beside the change (elicitations,
-- consents) and the sampled audit's batches — so an organization's admins
-- see its token reads, approvals, refreshes and refusals. A writer that
-- knows the organization (the vault, lifecycle, admin) names it itself.
-- +goose StatementBegin
CREATE FUNCTION audit_events_org() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER audit_events_org BEFORE INSERT ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_org();

-- +goose Down
DROP TRIGGER audit_events_org ON audit_events;
DROP FUNCTION audit_events_org();
