package connect

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/vault"
)

// What the admin side needs from the connect flow's tables. The admin package
// must not import connect; cmd/connectd hands it these as function values.

// withdrawConsentsReturning deletes and announces in one statement ($4 is
// the consent cache key): notified runs once if any row went, and is
// evaluated through the count, as Postgres skips a SELECT CTE nobody reads.
const withdrawConsentsReturning = `WITH gone AS (DELETE FROM consents WHERE issuer = $1 AND subject = $2 AND provider = $3
	RETURNING client_id),
	notified AS (SELECT pg_notify('` + consentChannel + `', $4) FROM (SELECT 1 FROM gone LIMIT 1) AS one)
	SELECT client_id FROM gone, (SELECT count(*) FROM notified) AS n`

// WithdrawConsents deletes, within tx, every client's consent to the user's
// connection to provider and returns the ids of the clients that held one
// (sorted). Every replica's consent cache learns of it on commit. An admin revocation runs it inside the vault's deleting
// transaction, so consents and credentials go together.
func WithdrawConsents(ctx context.Context, tx pgx.Tx, u vault.UserRef, provider string) ([]string, error) {
	rows, err := tx.Query(ctx, withdrawConsentsReturning, u.Issuer, u.Subject, provider,
		consentKey(u, provider).Payload())
	if err != nil {
		return nil, fmt.Errorf("connect: withdraw consents: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("connect: withdraw consents: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// Vault returns the credential store the Server uses, so other parts of the
// same process (the admin pages) share it rather than build a second one.
func (s *Server) Vault() *vault.Store { return s.vault }
