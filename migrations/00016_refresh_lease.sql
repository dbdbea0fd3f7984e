-- +goose Up
-- A refresh in flight (internal/vault). The replica that presents a
-- connection's refresh token to the provider first takes a lease on the row
-- in a short transaction, makes the call holding no database connection, and
-- stores the answer in a second short transaction, only while the lease is
-- still its own: refresh-once across replicas without a pooled connection
-- (and a row lock) held for as long as a provider takes to answer.
--   refresh_lease        who holds it ('' when nobody does)
--   refresh_lease_until  when it lapses (the database's clock): a holder that
--                        died, or lost its answer, is taken over after this
--   refresh_doubt_at     set when a call's outcome was unknown (sent, and no
--                        answer came back): the provider may have rotated the
--                        refresh token, so a later invalid_grant is reported
--                        as refresh_answer_lost rather than as a plain refusal
ALTER TABLE connections ADD COLUMN refresh_lease text NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN refresh_lease_until timestamptz;
ALTER TABLE connections ADD COLUMN refresh_doubt_at timestamptz;

-- +goose Down
ALTER TABLE connections DROP COLUMN refresh_doubt_at;
ALTER TABLE connections DROP COLUMN refresh_lease_until;
ALTER TABLE connections DROP COLUMN refresh_lease;
