// Package consent owns the users' approvals (table consents): a user allowed
// a client to receive their connection to a provider. An approval names the
// exact scope set the consent page listed and the provider account it was
// given for; a client receives a credential only while its approval lists
// every scope the credential carries and names the connection's account
// (DESIGN invariant 6). Another client's step-up that widens the connection,
// or a reconnect with another account, leaves the other approvals short of
// it: those clients get consent_required until the user approves again, on
// the consent page alone.
//
// An approval is of one connection and one client, and both belong to one
// organization (issue 34): an approval is granted only for a connection of
// the client's organization, checked by the granting statement itself, and
// every read joins the connection and the client and drops an approval
// whose two organizations differ (one an older replica might have written),
// so none is found through a client of another organization.
//
// The connect flow grants approvals and reads them (through a cache every
// replica keeps fresh, see Store); the connect API and an admin revocation
// withdraw them. Each grant and withdrawal is one statement inside the
// caller's transaction, with its audit row or cache notification.
//
// It must never import connect or admin, and never keep a provider account
// id in clear (AccountHash).
package consent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/scope"
	"github.com/connectd/connectd/internal/vault"
)

// ErrNotGiven: the user has not approved this client for the provider.
var ErrNotGiven = errors.New("consent: not given")

// Approval is what the user approved for one client and provider.
type Approval struct {
	Scopes  []string // exactly the scopes the consent page listed
	Account []byte   // AccountHash of the provider account; nil for approvals from before accounts were kept
	// ConnectionID is the connection approved: one of the user's accounts
	// at the provider.
	ConnectionID string
}

// AccountHash names a provider account in an approval without keeping its id
// in clear: vault.AccountHash, the one rule, which the connections table
// keeps too.
func AccountHash(accountID string) []byte { return vault.AccountHash(accountID) }

const (
	// Every replica's consent cache learns of the grant on commit ($8 is the
	// cache key; see Store). The "consent.granted" audit row ($9
	// elicitation, $10 request id, $11 address, $12 detail) is written by the
	// same statement: one round trip, and the row exists exactly when the
	// grant does. A new approval replaces the client's earlier one: it is
	// what the page listed last. It is written only for the user's
	// connection $13 at the provider, of the client's own organization:
	// otherwise nothing is written, announced or audited.
	upsertConsent = `WITH changed AS (INSERT INTO consents (issuer, subject, client_id, provider, scopes, account_hash,
			granted_at, updated_at, connection_id)
		SELECT $1, $2, $3, $4, $5::text[], $6::bytea, $7::timestamptz, $7::timestamptz, $13
		WHERE EXISTS (SELECT 1 FROM connections cn JOIN clients cl ON cl.org_id = cn.org_id
			WHERE cn.id = $13 AND cn.issuer = $1 AND cn.subject = $2 AND cn.provider = $4 AND cl.id = $3)
		ON CONFLICT (issuer, subject, provider, client_id, connection_id) DO UPDATE
		SET scopes = EXCLUDED.scopes, account_hash = EXCLUDED.account_hash, updated_at = EXCLUDED.updated_at
		RETURNING 1),
	audited AS (` + audit.Insert + `
		SELECT 'consent.granted', 'user', $1, $2, $3, $4, $9::text, $10::text, $11::text, $12::jsonb FROM changed)
		SELECT pg_notify('` + Channel + `', $8) FROM changed`
	// withdrawConsents deletes and announces in one statement ($4 is the
	// cache key): notified runs once if any row went, and is evaluated
	// through the count, as Postgres skips a SELECT CTE nobody reads.
	withdrawConsents = `WITH gone AS (DELETE FROM consents WHERE issuer = $1 AND subject = $2 AND provider = $3
		AND connection_id = $5
	RETURNING client_id),
	notified AS (SELECT pg_notify('` + Channel + `', $4) FROM (SELECT 1 FROM gone LIMIT 1) AS one)
	SELECT client_id FROM gone, (SELECT count(*) FROM notified) AS n`
)

// Grant is an approval being recorded: what the consent page listed, for
// the provider account now connected, by the elicitation that completed.
type Grant struct {
	User         identity.User
	ClientID     string
	Provider     string
	Scopes       []string // the scopes the page listed
	Requested    []string // the scopes the elicitation asked for (audit detail)
	AccountID    string
	ConnectionID string // the connection approved
	Elicitation  string // the audit row's target
	At           time.Time
	RequestID    string
	IP           string
}

// Record stores g with q (the caller's transaction), replacing the client's
// earlier approval, with its "consent.granted" audit row. It stores nothing
// and returns an error wrapping vault.ErrNotConnected unless g.ConnectionID
// is the user's connection at g.Provider in the client's organization.
func Record(ctx context.Context, q audit.Execer, g Grant) error {
	scopes := scope.Union(nil, g.Scopes) // never nil
	tag, err := q.Exec(ctx, upsertConsent, g.User.Issuer, g.User.Subject, g.ClientID, g.Provider, scopes,
		AccountHash(g.AccountID), g.At, key(g.User, g.Provider).Payload(), g.Elicitation, g.RequestID, g.IP,
		map[string]any{"scopes": scopes, "requested": append([]string{}, g.Requested...), "connection_id": g.ConnectionID},
		g.ConnectionID)
	if err != nil {
		return fmt.Errorf("consent: record: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("consent: record: connection %s: %w to %s", g.ConnectionID, vault.ErrNotConnected, g.Provider)
	}
	return nil
}

// Withdraw deletes, within tx, every client's consent to the user's
// connection connID at provider and returns the ids of the clients that held one
// (sorted). Every replica's consent cache learns of it on commit. Unlinking
// and an admin revocation run it inside the vault's deleting transaction, so
// consents and credentials go together.
func Withdraw(ctx context.Context, tx pgx.Tx, u identity.User, provider, connID string) ([]string, error) {
	rows, err := tx.Query(ctx, withdrawConsents, u.Issuer, u.Subject, provider, key(u, provider).Payload(), connID)
	if err != nil {
		return nil, fmt.Errorf("consent: withdraw: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("consent: withdraw: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// withdrawOne deletes one client's approval, announces it and writes its
// "consent.withdrawn" audit row, in one statement ($5 is the cache key; $6
// actor, $7 request id, $8 address, $9 detail). It returns a row only when
// an approval went.
const withdrawOne = `WITH gone AS (DELETE FROM consents
		WHERE issuer = $1 AND subject = $2 AND provider = $3 AND client_id = $4 AND ($10 = '' OR connection_id = $10)
		RETURNING connection_id),
	audited AS (` + audit.Insert + `
		SELECT 'consent.withdrawn', $6, $1, $2, $4, $3, gone.connection_id, $7, $8, $9 FROM gone)
	SELECT pg_notify('` + Channel + `', $5) FROM gone`

// Withdrawal is one client's approval being taken back, by whom (the audit
// actor: "user", "admin:<sub>", …).
type Withdrawal struct {
	User     identity.User
	ClientID string
	Provider string
	// ConnectionID is the connection whose approval goes; "" takes every
	// approval of the client at the provider.
	ConnectionID string
	Actor        string
	RequestID    string
	IP           string
}

// WithdrawClient deletes one client's approval of the user's connection to
// a provider, with its "consent.withdrawn" audit row, in one statement; the
// connection and the other clients' approvals stay. Every replica's cache
// learns of it on commit. It returns ErrNotGiven when there was none.
func WithdrawClient(ctx context.Context, q audit.Querier, w Withdrawal) error {
	rows, err := q.Query(ctx, withdrawOne, w.User.Issuer, w.User.Subject, w.Provider, w.ClientID,
		key(w.User, w.Provider).Payload(), w.Actor, w.RequestID, w.IP, map[string]any{"by": w.Actor}, w.ConnectionID)
	if err != nil {
		return fmt.Errorf("consent: withdraw: %w", err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("consent: withdraw: %w", err)
	}
	if n == 0 {
		return ErrNotGiven
	}
	return nil
}
