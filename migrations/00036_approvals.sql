-- +goose Up
-- Per-request approval (issue 36, internal/approval). A proxied call that
-- matches a request rule saying "ask" waits for the user: connectd mints an
-- elicitation of kind 'approval' (the same link, long-poll, request_state and
-- expiry as a connect link) and keeps what is asked in approval_requests —
-- the exact method, path and query, the SHA-256 of the body and the body
-- itself, sealed with the vault keyring and erased once the user decided.
-- What the user allowed is an approval_grant: bound to the client, the
-- connection and the rule, and, for "this one request", to the method, the
-- path and the body's hash, used once (across replicas: one UPDATE).
ALTER TABLE elicitations ADD COLUMN kind text NOT NULL DEFAULT 'connect'
    CHECK (kind IN ('connect', 'approval'));

CREATE TABLE approval_requests (
    elicitation_id   text        PRIMARY KEY REFERENCES elicitations (id) ON DELETE CASCADE,
    client_id        text        NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    connection_id    text        NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
    rule             text        NOT NULL,
    words            text        NOT NULL,
    standing_max     interval    NOT NULL DEFAULT '0',
    method           text        NOT NULL,
    path             text        NOT NULL,
    body_sha256      bytea       NOT NULL CHECK (length(body_sha256) = 32),
    body_size        integer     NOT NULL DEFAULT 0,
    body_type        text        NOT NULL DEFAULT '',
    body_sealed      bytea,
    decision         text        NOT NULL DEFAULT ''
                     CHECK (decision IN ('', 'once', 'standing', 'denied')),
    decided_at       timestamptz
);
CREATE INDEX approval_requests_client_idx ON approval_requests (client_id);

CREATE TABLE approval_grants (
    id             bigserial   PRIMARY KEY,
    client_id      text        NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    connection_id  text        NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
    issuer         text        NOT NULL,
    subject        text        NOT NULL,
    provider       text        NOT NULL,
    rule           text        NOT NULL,
    single_use     boolean     NOT NULL,
    method         text        NOT NULL DEFAULT '',
    path           text        NOT NULL DEFAULT '',
    body_sha256    bytea,
    elicitation_id text        NOT NULL,
    created_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz,
    CHECK (single_use = (body_sha256 IS NOT NULL))
);
CREATE INDEX approval_grants_lookup_idx ON approval_grants (client_id, connection_id, rule) WHERE used_at IS NULL;
CREATE INDEX approval_grants_connection_idx ON approval_grants (connection_id);
CREATE INDEX approval_grants_expiry_idx ON approval_grants (expires_at);

-- A user who removes a client's access removes what they allowed it too:
-- a later consent never revives an approval given before.
-- +goose StatementBegin
CREATE FUNCTION approval_grants_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM approval_grants g WHERE g.client_id = OLD.client_id AND g.connection_id = OLD.connection_id;
    IF FOUND THEN
        PERFORM pg_notify('connectd_approvals', '*'); -- every replica's cache of standing approvals
    END IF;
    RETURN OLD;
END $$;
-- +goose StatementEnd
CREATE TRIGGER consents_forget_approvals AFTER DELETE ON consents
    FOR EACH ROW EXECUTE FUNCTION approval_grants_forget();

-- +goose Down
DROP TRIGGER consents_forget_approvals ON consents;
DROP FUNCTION approval_grants_forget();
DROP TABLE approval_grants;
DROP TABLE approval_requests;
ALTER TABLE elicitations DROP COLUMN kind;
