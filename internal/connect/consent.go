package connect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
)

// Consents: a user allowed a client to use their connection to a provider with
// some scopes. A client sees a connection only through a consent.
const (
	// Every replica's consent cache learns of the grant on commit ($7 is the
	// cache key; see consentcache.go). The "consent.granted" audit row ($8
	// elicitation, $9 request id, $10 address, $11 detail) is written by the
	// same statement: one round trip, and the row exists exactly when the
	// grant does.
	upsertConsent = `WITH changed AS (INSERT INTO consents (issuer, subject, client_id, provider, scopes, granted_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $6)
		ON CONFLICT (issuer, subject, provider, client_id) DO UPDATE
		SET scopes = (SELECT coalesce(array_agg(DISTINCT s ORDER BY s), '{}')
		              FROM unnest(consents.scopes || EXCLUDED.scopes) AS s),
		    updated_at = EXCLUDED.updated_at
		RETURNING 1),
	audited AS (
		INSERT INTO audit_events (kind, actor, issuer, subject, client_id, provider, target, request_id, ip, detail)
		VALUES ('consent.granted', 'user', $1, $2, $3, $4, $8, $9, $10, $11))
		SELECT pg_notify('` + consentChannel + `', $7) FROM changed`
	selectConsent = `SELECT scopes FROM consents
		WHERE issuer = $1 AND subject = $2 AND provider = $3 AND client_id = $4`
	selectConsentedProviders = `SELECT provider, scopes FROM consents
		WHERE issuer = $1 AND subject = $2 AND client_id = $3`
)

// errNoConsent: the user has not consented to this client for the provider.
var errNoConsent = errors.New("connect: no consent")

// grantConsent records the user's consent to e's client for e's provider and
// scopes (a union with any earlier grant), with its audit row. Only a
// completed elicitation grants consent (complete): a flow declined, failed or
// abandoned after Allow leaves none, so it cannot hand the client a
// connection the user already had.
func (s *Server) grantConsent(r *http.Request, q querier, e *Elicitation) error {
	ctx := r.Context()
	key := consentKey(vault.UserRef{Issuer: e.Issuer, Subject: e.Subject}, e.Provider)
	if _, err := q.Exec(ctx, upsertConsent, e.Issuer, e.Subject, e.ClientID, e.Provider, nonNil(e.Scopes), s.now(),
		key.Payload(), e.ID, web.RequestID(ctx), clientIP(r), map[string]any{"scopes": nonNil(e.Scopes)}); err != nil {
		return fmt.Errorf("connect: record consent: %w", err)
	}
	return nil
}

// consent returns the scopes the user consented to for client and provider, or
// errNoConsent.
func (s *Server) consent(ctx context.Context, u vault.UserRef, clientID, provider string) ([]string, error) {
	if s.consents != nil {
		return s.cachedConsent(ctx, u, clientID, provider)
	}
	var scopes []string
	err := s.pool.QueryRow(ctx, selectConsent, u.Issuer, u.Subject, provider, clientID).Scan(&scopes)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNoConsent
	}
	if err != nil {
		return nil, fmt.Errorf("connect: load consent: %w", err)
	}
	return scopes, nil
}

// consentedProviders maps each provider the user consented to for clientID to
// the consented scopes.
func (s *Server) consentedProviders(ctx context.Context, u vault.UserRef, clientID string) (map[string][]string, error) {
	rows, err := s.pool.Query(ctx, selectConsentedProviders, u.Issuer, u.Subject, clientID)
	if err != nil {
		return nil, fmt.Errorf("connect: list consents: %w", err)
	}
	out := map[string][]string{}
	for rows.Next() {
		var p string
		var sc []string
		if err := rows.Scan(&p, &sc); err != nil {
			rows.Close()
			return nil, fmt.Errorf("connect: list consents: %w", err)
		}
		out[p] = sc
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("connect: list consents: %w", err)
	}
	return out, nil
}

// missingScopes lists the scopes of want that have does not contain.
func missingScopes(want, have []string) []string {
	var out []string
	for _, s := range want {
		if !slices.Contains(have, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
