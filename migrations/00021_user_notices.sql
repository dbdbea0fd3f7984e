-- +goose Up
-- What a user is told on /account about something done to their
-- connections by someone else (issue 25: an administrator cut off a
-- compromised client and revoked the connections it had read). A notice
-- outlives the connection it is about, so it names the connection by copy
-- (provider, id, the account's name), not by a foreign key. Package notice
-- owns it. Dismissed notices are deleted.
CREATE TABLE user_notices (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    issuer        text        NOT NULL,
    subject       text        NOT NULL,
    kind          text        NOT NULL,
    provider      text        NOT NULL,
    connection_id text        NOT NULL,
    account       text        NOT NULL DEFAULT '',
    client_id     text        NOT NULL,
    client_name   text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_notices_user_idx ON user_notices (issuer, subject, created_at);

-- +goose Down
DROP TABLE user_notices;
