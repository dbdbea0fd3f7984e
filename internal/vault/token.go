package vault

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/singleflight"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/scope"
)

// Token returns a currently valid credential of the user's connection to
// provider, holding every scope in required: TokenFor without a decision.
func (s *Store) Token(ctx context.Context, user identity.User, provider, id string, required []string) (*Credential, error) {
	return s.TokenFor(ctx, user, provider, id, required, nil)
}

// TokenFor returns a currently valid credential of the user's connection to
// provider, holding every scope in required, if decide (when not nil)
// allows it on what the row holds: decide is asked before the credential is
// opened or refreshed, so a refused read costs no decryption and no call to
// the provider, and again after a refresh that changed what the connection
// holds. With decide, the required scopes are its to check.
//
// When the access token expires within the skew, Token refreshes it first, and
// the refresh token is used exactly once however many callers and replicas ask
// at the same moment: callers in this process share one refresh
// (singleflight); across processes the row's refresh lease (lease.go) lets
// one replica call the provider while the others wait or use the token that is
// still valid, and no database connection is held during the call. A token
// still valid is answered whenever its refresh cannot be made now (the
// provider fails, or another replica's refresh is in flight): the skew is a
// margin, not a deadline.
//
// Errors: ErrNotConnected; ErrReauthorizationRequired (the provider refused the
// grant; the row is marked reauthorization_required); ErrProviderUnavailable
// (retryable; the row is untouched); *MissingScopesError; ErrDecrypt; decide's.
func (s *Store) TokenFor(ctx context.Context, user identity.User, provider, id string, required []string, decide Decider) (*Credential, error) {
	if err := validate(user, provider); err != nil {
		return nil, err
	}
	r, cred, err := s.usable(ctx, user, provider, id, required, decide)
	if err != nil {
		return nil, err
	}
	if !s.needsRefresh(cred) {
		return cred, nil
	}
	// The shared refresh must not die with the first caller's request: it runs
	// on a context detached from any one caller, bounded by the lease.
	seen := r
	ch := s.flight.DoChan(s.org+"\x00"+r.id, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.leaseFor(provider)+time.Second)
		defer cancel()
		return s.refreshShared(rctx, user, provider, seen.id, func(r *row, c *Credential) bool {
			// Re-check after locking: another caller may have refreshed while
			// we waited. A token refreshed since we looked is used as long as
			// it is not expired, even if short-lived tokens fall within the
			// skew again.
			return s.needsRefresh(c) && !(r.ID == seen.id && r.RefreshedAt.After(seen.refreshedAt) && !s.expired(c))
		})
	})
	var res singleflight.Result
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res = <-ch:
	}
	if res.Err != nil {
		if errors.Is(res.Err, ErrProviderUnavailable) && !s.expired(cred) {
			s.logger.WarnContext(ctx, "vault: refresh failed; answering the token that is still valid",
				slog.String("provider", provider), slog.String("connection_id", r.id), slog.Any("error", res.Err))
			return cred, nil
		}
		return nil, res.Err
	}
	fresh := clone(res.Val.(*Credential))
	if decide != nil {
		// What comes back is what the client would now receive: the
		// provider's grant on refresh, or — when another write replaced the
		// credential meanwhile (a reconnect that put another account in
		// this connection) — another credential altogether. Decided again,
		// on what it is: a refresh is rare, its one SHA-256 costs nothing.
		if err := decide(Held{ID: r.id, Scopes: fresh.Scopes, Account: AccountHash(fresh.AccountID), Org: r.org, AppID: r.appID}); err != nil {
			return nil, err
		}
		return fresh, nil
	}
	if m := fresh.missing(required); len(m) > 0 {
		return nil, &MissingScopesError{Provider: provider, Missing: m}
	}
	return fresh, nil
}

// usable reads the user's connection to provider (from the cache when it can)
// and opens its credential, refusing a connection that is not active, or that
// decide refuses on what its row holds (without decide: that lacks a required
// scope): what Token and Narrowed both start from.
func (s *Store) usable(ctx context.Context, user identity.User, provider, id string, required []string, decide Decider) (tokenRow, *Credential, error) {
	r, err := s.loadForToken(ctx, user, provider, id)
	if err != nil {
		return r, nil, err
	}
	if err := usableStatus(r.status, provider); err != nil {
		return r, nil, err
	}
	if decide != nil && r.accountHash != nil {
		if err := decide(r.held()); err != nil {
			return r, nil, err
		}
	}
	cred, err := s.openCredential(r.id, user, provider, r.ciphertext)
	if err != nil {
		return r, nil, err
	}
	switch {
	case decide != nil && r.accountHash == nil:
		// A row from before account hashes were kept: its credential says
		// whose it is.
		if err := decide(Held{ID: r.id, Scopes: cred.Scopes, Account: AccountHash(cred.AccountID), Org: r.org, AppID: r.appID}); err != nil {
			return r, nil, err
		}
	case decide == nil:
		if m := cred.missing(required); len(m) > 0 {
			return r, nil, &MissingScopesError{Provider: provider, Missing: m}
		}
	}
	return r, cred, nil
}

func usable(r *row) error { return usableStatus(r.Status, r.Provider) }

func usableStatus(st Status, provider string) error {
	switch st {
	case StatusActive:
		return nil
	case StatusReauthorizationRequired:
		return fmt.Errorf("%w: connection to %s", ErrReauthorizationRequired, provider)
	default:
		return fmt.Errorf("%w to %s (connection %s)", ErrNotConnected, provider, st)
	}
}

// needsRefresh: the token has a known expiry within the skew.
func (s *Store) needsRefresh(c *Credential) bool {
	return !c.Expiry.IsZero() && !s.now().Add(s.skew).Before(c.Expiry)
}

func (s *Store) expired(c *Credential) bool {
	return !c.Expiry.IsZero() && !s.now().Before(c.Expiry)
}

// clone copies a credential shared between singleflight callers.
func clone(c *Credential) *Credential {
	d := *c
	d.Scopes = slices.Clone(c.Scopes)
	return &d
}

// refreshShared refreshes the user's connection to provider when due (read
// under the row lock) says it still needs one, through the row's refresh
// lease (lease.go).
func (s *Store) refreshShared(ctx context.Context, user identity.User, provider, id string, due func(*row, *Credential) bool) (*Credential, error) {
	return s.refreshLeased(ctx, user, provider, id, due, false)
}

// refreshLeased is refreshShared; refusal says the refresh is for a
// provider's 401 (Refused): then it is made only outside the window of
// the connection's last such refresh, whose time it records.
func (s *Store) refreshLeased(ctx context.Context, user identity.User, provider, id string, due func(*row, *Credential) bool,
	refusal bool) (*Credential, error) {
	var (
		out    *Credential
		outErr error
	)
	op := leaseOp{op: "refresh", provider: provider, user: user, id: id, attrs: []any{slog.String("provider", provider)},
		failed: func(err error) { outErr = err }}
	op.plan = func(ctx context.Context, tx pgx.Tx, r *row, cred *Credential, lease leaseState) (providerCall, error) {
		out, outErr = nil, nil
		if err := usable(r); err != nil {
			outErr = err
			return nil, nil
		}
		if !due(r, cred) {
			out = cred
			return nil, nil
		}
		if refusal {
			if recent, err := s.refusedRecently(ctx, tx, r.ID, cred.AccessToken); err != nil || recent {
				out = cred // the provider refused a token refreshed for a 401 a moment ago: its answer stands
				return nil, err
			}
		}
		if cred.RefreshToken == "" || s.refresh == nil {
			if !s.expired(cred) {
				out = cred // still valid for a moment; nothing can refresh it
				return nil, nil
			}
			if s.refresh == nil {
				outErr = fmt.Errorf("vault: token of %s expired and refreshing is not configured", provider)
				return nil, nil
			}
			outErr = fmt.Errorf("%w: token of %s expired and there is no refresh token", ErrReauthorizationRequired, provider)
			return nil, s.markReauthAudited(ctx, tx, r, "expired_without_refresh_token")
		}
		if lease.elsewhere {
			if lease.waited >= leaseWaitValid && !s.expired(cred) {
				out = cred // another replica's refresh is slow; this token is still good
				return nil, nil
			}
			return nil, errLeased
		}
		// The app the row says obtained the grant, read under its lock: a
		// reconnect through another app ends this lease.
		app := r.App()
		return func(ctx context.Context, rt string) (*Refreshed, error) { return s.refresh(ctx, app, rt) }, nil
	}
	op.store = func(ctx context.Context, tx pgx.Tx, r *row, cred *Credential, ref *Refreshed) error {
		next := *cred
		next.AccessToken = ref.AccessToken
		if ref.TokenType != "" {
			next.TokenType = ref.TokenType
		}
		if ref.RefreshToken != "" {
			next.RefreshToken = ref.RefreshToken
		}
		next.Expiry = ref.Expiry
		if ref.Scopes != nil {
			next.Scopes = scope.Union(nil, ref.Scopes)
		}
		ct, err := s.seal(r.ID, user, provider, &next)
		if err != nil {
			return err
		}
		now := s.now().UTC()
		if _, err := tx.Exec(ctx, updateRefreshed, r.ID, int32(s.keys.Primary()), ct, nonNil(next.Scopes),
			nullTime(next.Expiry), now, connKey(s.org, user, provider, r.ID).Payload(), AccountHash(next.AccountID), next.DisplayName(),
			s.org); err != nil {
			return fmt.Errorf("vault: store refreshed token: %w", err)
		}
		if refusal {
			if err := s.markRefused(ctx, tx, r.ID, next.AccessToken); err != nil {
				return err
			}
		}
		s.auditIn(ctx, tx, "connection.refreshed", r, map[string]any{
			"new_refresh_token": ref.RefreshToken != "", "expires_at": nullTime(next.Expiry)})
		if err := s.recordHealth(ctx, tx, r.ID, nil); err != nil {
			return err
		}
		out = &next
		s.logger.InfoContext(ctx, "vault: token refreshed", slog.String("provider", provider), slog.String("connection_id", r.ID))
		return nil
	}
	// An answer dropped because the connection was replaced (or deleted)
	// during the call leaves nothing to answer: look again, at the new one.
	var err error
	for attempt := 0; attempt < 3 && err == nil && out == nil && outErr == nil; attempt++ {
		err = s.runLeased(ctx, op)
	}
	if err == nil && out == nil && outErr == nil {
		outErr = fmt.Errorf("%w: %s: the connection kept changing during the provider call", ErrProviderUnavailable, provider)
	}
	if err != nil {
		s.logger.ErrorContext(ctx, "vault: refresh failed", slog.String("provider", provider), slog.Any("error", err))
		return nil, err
	}
	if outErr != nil {
		return nil, outErr
	}
	return out, nil
}

func (s *Store) markReauth(ctx context.Context, tx pgx.Tx, r *row, reason string) error {
	if _, err := tx.Exec(ctx, updateStatus, r.ID, string(StatusReauthorizationRequired), s.now().UTC(),
		connKey(s.org, r.User, r.Provider, r.ID).Payload(), s.org); err != nil {
		return fmt.Errorf("vault: mark reauthorization required: %w", err)
	}
	if s.onReauth != nil && r.Status != StatusReauthorizationRequired {
		c := r.Connection
		c.Status = StatusReauthorizationRequired
		if err := s.onReauth(ctx, tx, c, reason); err != nil {
			return fmt.Errorf("vault: mark reauthorization required: %w", err)
		}
	}
	return nil
}

const setHealth = `UPDATE connections SET health_checked_at = $2, last_error = $3 WHERE id = $1 AND org_id = $4`

// recordHealth notes, within tx, that a refresh of connection id reached the
// provider with outcome err (nil: success). Only an error class is kept.
func (s *Store) recordHealth(ctx context.Context, tx pgx.Tx, id string, err error) error {
	if _, xerr := tx.Exec(ctx, setHealth, id, s.now().UTC(), errorClass(err), s.org); xerr != nil {
		return fmt.Errorf("vault: record health: %w", xerr)
	}
	return nil
}

// errorClass names a refresh failure without a secret or a provider's own
// words.
func errorClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrReauthorizationRequired):
		return "invalid_grant"
	case errors.Is(err, ErrProviderUnavailable):
		return "provider_unavailable"
	}
	return "refresh_failed"
}

// Renew refreshes the user's connection to provider, whatever its access
// token's expiry, unless it was refreshed (or stored) after idleSince: the
// health job's call for providers whose refresh tokens lapse when unused.
// Like Token's refresh it runs once across replicas, under the row's lock,
// and a provider refusing the grant marks the connection
// reauthorization_required (OnReauth is told, once). It returns nil when
// there was nothing to do.
func (s *Store) Renew(ctx context.Context, user identity.User, provider, id string, idleSince time.Time) error {
	if err := validate(user, provider); err != nil {
		return err
	}
	// Like Token's shared refresh, it does not die with its caller (a job
	// stopped at shutdown): a rotated refresh token the provider already
	// issued must still be stored.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.leaseFor(provider)+time.Second)
	defer cancel()
	_, err := s.refreshShared(rctx, user, provider, id, func(r *row, cred *Credential) bool {
		// updated_at moves with every store and every refresh: when the
		// refresh token was last issued or used.
		return r.UpdatedAt.Before(idleSince) && cred.RefreshToken != ""
	})
	return err
}

// RefusedRefreshWindow is how long after a refresh made for a provider's
// 401 (Refused, NarrowedRefused) a 401 on the token that refresh issued
// makes no other: the provider refused a token just refreshed, and that is
// its answer. A client that provokes 401s (an endpoint that answers 401
// whatever the token) so costs the user at most one refresh a window, not
// one a call: it cannot rotate the tokens other clients read, nor spend the
// provider's refresh budget. A 401 on another token of the connection
// (another client's narrowed one, or the connection's own) is refreshed as
// usual, so no client holds back another's refresh. The time and the
// token's SHA-256 are in Postgres (connections.refused_refresh_at,
// refused_refresh_token), so the window holds across replicas.
const RefusedRefreshWindow = 5 * time.Minute

const (
	selectRefusedRecently = `SELECT coalesce(refused_refresh_at > $2 AND refused_refresh_token = $3, false)
		FROM connections WHERE id = $1 AND org_id = $4`
	updateRefusedRefresh = `UPDATE connections SET refused_refresh_at = $2, refused_refresh_token = $3
		WHERE id = $1 AND org_id = $4`
)

// refusedRecently reports, within tx (the row locked), whether refused, a
// token of connection id the provider refused, was issued by a refresh for
// a 401 within RefusedRefreshWindow.
func (s *Store) refusedRecently(ctx context.Context, tx pgx.Tx, id, refused string) (bool, error) {
	var recent bool
	if err := tx.QueryRow(ctx, selectRefusedRecently, id, s.now().Add(-RefusedRefreshWindow).UTC(),
		refusedDigest(refused), s.org).Scan(&recent); err != nil {
		return false, fmt.Errorf("vault: read the last refresh for a 401: %w", err)
	}
	if recent {
		s.logger.InfoContext(ctx, "vault: the provider refused a token within the window of a refresh for a 401; "+
			"its answer stands", slog.String("connection_id", id))
	}
	return recent, nil
}

// refusedDigest names a token in refused_refresh_token without keeping it.
func refusedDigest(token string) []byte {
	h := sha256.Sum256([]byte("connectd/refused-refresh/v1\x00" + token))
	return h[:]
}

// markRefused records, within tx, that connection id was refreshed for a
// 401 now, and the access token that refresh issued.
func (s *Store) markRefused(ctx context.Context, tx pgx.Tx, id, issued string) error {
	if _, err := tx.Exec(ctx, updateRefusedRefresh, id, s.now().UTC(), refusedDigest(issued), s.org); err != nil {
		return fmt.Errorf("vault: record the refresh for a 401: %w", err)
	}
	return nil
}

// Refused is told that the provider refused (401) refused, the access
// token of the user's connection to provider, although it had not expired
// (revoked at the provider, say): the connection is refreshed, once across
// replicas under the row's lock, unless its token is already another one
// (a call here or on another replica refreshed it since) or it was
// refreshed for a 401 within RefusedRefreshWindow (then nothing changes:
// the caller finds the token it had, and the provider's answer stands).
// This replica's cached copy is dropped either way, so the next Token
// reads what is stored. Errors are Token's (ErrReauthorizationRequired
// when the provider refuses the grant too: the connection is marked).
func (s *Store) Refused(ctx context.Context, user identity.User, provider, id, refused string) error {
	if err := validate(user, provider); err != nil {
		return err
	}
	if refused == "" {
		return fmt.Errorf("%w: which token was refused?", ErrInvalid)
	}
	defer s.forget(user, provider, id)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.leaseFor(provider)+time.Second)
	defer cancel()
	_, err := s.refreshLeased(rctx, user, provider, id, func(_ *row, cred *Credential) bool {
		return cred.RefreshToken != "" && subtle.ConstantTimeCompare([]byte(cred.AccessToken), []byte(refused)) == 1
	}, true)
	return err
}

const selectIdle = `SELECT id, issuer, subject, org_id FROM connections
	WHERE provider = $1 AND status = 'active' AND updated_at < $2 AND org_id = $4
	ORDER BY updated_at LIMIT $3`

// Ref names one connection: its id, its user (at a provider the caller
// knows) and its organization.
type Ref struct {
	ID   string
	User identity.User
	Org  string
}

// Idle lists (at most limit) active connections of the handle's
// organization to provider not refreshed or stored since idleSince, the
// longest idle first.
func (s *Store) Idle(ctx context.Context, provider string, idleSince time.Time, limit int) ([]Ref, error) {
	rows, err := s.db().Query(ctx, selectIdle, provider, idleSince, limit, s.org)
	if err != nil {
		return nil, fmt.Errorf("vault: idle connections: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Ref, error) {
		var c Ref
		err := r.Scan(&c.ID, &c.User.Issuer, &c.User.Subject, &c.Org)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("vault: idle connections: %w", err)
	}
	return out, nil
}
