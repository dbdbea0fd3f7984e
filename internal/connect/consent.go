package connect

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/scope"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
)

// Approvals (the consents table): a user allowed a client to receive their
// connection to a provider. An approval names the exact scope set the consent
// page listed and the provider account it was given for; a client receives a
// credential only while its approval lists every scope the credential carries
// and names the connection's account (DESIGN invariant 6). Another client's
// step-up that widens the connection, or a reconnect with another account,
// leaves the other approvals short of it: those clients get consent_required
// until the user approves again, on the consent page alone.
const (
	// Every replica's consent cache learns of the grant on commit ($8 is the
	// cache key; see consentcache.go). The "consent.granted" audit row ($9
	// elicitation, $10 request id, $11 address, $12 detail) is written by the
	// same statement: one round trip, and the row exists exactly when the
	// grant does. A new approval replaces the client's earlier one: it is
	// what the page listed last.
	upsertConsent = `WITH changed AS (INSERT INTO consents (issuer, subject, client_id, provider, scopes, account_hash,
			granted_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
		ON CONFLICT (issuer, subject, provider, client_id) DO UPDATE
		SET scopes = EXCLUDED.scopes, account_hash = EXCLUDED.account_hash, updated_at = EXCLUDED.updated_at
		RETURNING 1),
	audited AS (
		INSERT INTO audit_events (kind, actor, issuer, subject, client_id, provider, target, request_id, ip, detail)
		VALUES ('consent.granted', 'user', $1, $2, $3, $4, $9, $10, $11, $12))
		SELECT pg_notify('` + consentChannel + `', $8) FROM changed`
	selectConsent = `SELECT scopes, account_hash FROM consents
		WHERE issuer = $1 AND subject = $2 AND provider = $3 AND client_id = $4`
	selectConsentedProviders = `SELECT provider, scopes, account_hash FROM consents
		WHERE issuer = $1 AND subject = $2 AND client_id = $3`
)

// errNoConsent: the user has not approved this client for the provider.
var errNoConsent = errors.New("connect: no consent")

// approval is what the user approved for one client and provider.
type approval struct {
	scopes  []string // exactly the scopes the consent page listed
	account []byte   // accountHash of the provider account; nil for approvals from before accounts were kept
}

// accountHash names a provider account in an approval without keeping its id
// in clear. An empty id (a provider that names no account) is an account too.
func accountHash(accountID string) []byte {
	h := sha256.Sum256([]byte("connectd/account/v1\x00" + accountID))
	return h[:]
}

// sameAccount reports whether the approval was given for cred's provider
// account.
func (a approval) sameAccount(cred *vault.Credential) bool {
	return a.account != nil && subtle.ConstantTimeCompare(a.account, accountHash(cred.AccountID)) == 1
}

// check returns nil when the approval covers cred: every scope it carries,
// and its provider account. Otherwise the consent_required error says what
// needs approving.
func (a approval) check(provider string, cred *vault.Credential) error {
	unapproved := scope.Missing(cred.Scopes, a.scopes)
	sameAccount := a.sameAccount(cred)
	if len(unapproved) == 0 && sameAccount {
		return nil
	}
	fields := map[string]any{"unapproved_scopes": nonNil(unapproved), "account_changed": !sameAccount}
	desc := fmt.Sprintf("the user has not approved this client for everything their %s connection now grants; "+
		"mint an elicitation (the user approves on the consent page, no new sign-in at the provider)", provider)
	return &web.Error{Status: http.StatusForbidden, Code: "consent_required", Description: desc, Fields: fields}
}

// grantConsent records, within q, that the user approved e's client for the
// scopes the page listed and the provider account now connected, with its
// audit row. Only a completed elicitation grants it (complete): a flow
// declined, failed or abandoned after Allow leaves the earlier approval as
// it was.
func (s *Server) grantConsent(r *http.Request, q querier, e *Elicitation, scopes []string, accountID string) error {
	ctx := r.Context()
	key := consentKey(vault.UserRef{Issuer: e.Issuer, Subject: e.Subject}, e.Provider)
	scopes = scope.Union(nil, scopes)
	if _, err := q.Exec(ctx, upsertConsent, e.Issuer, e.Subject, e.ClientID, e.Provider, nonNil(scopes),
		accountHash(accountID), s.now(), key.Payload(), e.ID, web.RequestID(ctx), clientIP(r),
		map[string]any{"scopes": nonNil(scopes), "requested": nonNil(e.Scopes)}); err != nil {
		return fmt.Errorf("connect: record consent: %w", err)
	}
	return nil
}

// consent returns what the user approved for client and provider, or
// errNoConsent.
func (s *Server) consent(ctx context.Context, u vault.UserRef, clientID, provider string) (approval, error) {
	if s.consents != nil {
		return s.cachedConsent(ctx, u, clientID, provider)
	}
	var a approval
	err := s.pool.QueryRow(ctx, selectConsent, u.Issuer, u.Subject, provider, clientID).Scan(&a.scopes, &a.account)
	if errors.Is(err, pgx.ErrNoRows) {
		return approval{}, errNoConsent
	}
	if err != nil {
		return approval{}, fmt.Errorf("connect: load consent: %w", err)
	}
	return a, nil
}

// consentedProviders maps each provider the user approved clientID for to the
// approval.
func (s *Server) consentedProviders(ctx context.Context, u vault.UserRef, clientID string) (map[string]approval, error) {
	rows, err := s.pool.Query(ctx, selectConsentedProviders, u.Issuer, u.Subject, clientID)
	if err != nil {
		return nil, fmt.Errorf("connect: list consents: %w", err)
	}
	out := map[string]approval{}
	for rows.Next() {
		var p string
		var a approval
		if err := rows.Scan(&p, &a.scopes, &a.account); err != nil {
			rows.Close()
			return nil, fmt.Errorf("connect: list consents: %w", err)
		}
		out[p] = a
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("connect: list consents: %w", err)
	}
	return out, nil
}
