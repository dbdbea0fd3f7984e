package vault

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/scope"
)

// Narrowed tokens (table narrowed_tokens): at a provider that honours "scope"
// on the refresh-token grant (RFC 6749 §6), an access token limited to a
// subset of the connection's grant, sealed and kept per (connection, scope
// set) so that a client approved for less than the connection grants
// receives only that. They are fetched with the connection's refresh token,
// under the connection row's lock, exactly like the connection's own token
// (token.go), because a rotating refresh token presented twice kills the
// whole grant.

// ErrCannotNarrow: no access token limited to the asked scopes can be had:
// the connection has no refresh token, scoped refresh is not configured, or
// the provider refused the subset (invalid_scope) or answered with more than
// was asked (it ignores "scope"). The connection itself is untouched (a
// rotated refresh token is still stored).
var ErrCannotNarrow = errors.New("vault: the provider cannot narrow this token")

// ErrAccountChanged: the connection is now to another provider account than
// the one the caller expected (a reconnect raced the call).
var ErrAccountChanged = errors.New("vault: the connection is to another provider account")

// RefreshScopedFunc asks the provider for an access token limited to scopes,
// with a refresh-token grant carrying "scope". Errors are classified as for
// RefreshFunc; one wrapping ErrCannotNarrow says the provider refused the
// subset (invalid_scope). Errors must not contain secrets.
// app is the provider app the connection was obtained with.
type RefreshScopedFunc func(ctx context.Context, app App, refreshToken string, scopes []string) (*Refreshed, error)

// narrowedKeys is the Keyring.Purpose label (and the associated data's
// purpose) of narrowed tokens.
const narrowedKeys = "connectd/vault/narrowed-token/v1"

const (
	// narrowed_tokens has no organization of its own: its statements are
	// scoped through the connection's.
	selectNarrowed = `SELECT n.ciphertext, n.refreshed_at FROM narrowed_tokens n
		JOIN connections c ON c.id = n.connection_id AND c.org_id = $3
		WHERE n.connection_id = $1 AND n.scope_key = $2`
	upsertNarrowed = `INSERT INTO narrowed_tokens
		(connection_id, scope_key, scopes, key_version, ciphertext, expires_at, refreshed_at)
		SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM connections WHERE id = $1 AND org_id = $8)
		ON CONFLICT (connection_id, scope_key) DO UPDATE
		SET scopes = EXCLUDED.scopes, key_version = EXCLUDED.key_version, ciphertext = EXCLUDED.ciphertext,
		    expires_at = EXCLUDED.expires_at, refreshed_at = EXCLUDED.refreshed_at`
	// deleteNarrowedOf runs whenever a connection's credential is replaced
	// (Put): tokens narrowed from the old grant must not outlive it.
	deleteNarrowedOf = `DELETE FROM narrowed_tokens n USING connections c
		WHERE n.connection_id = $1 AND c.id = n.connection_id AND c.org_id = $2`
	// updateRotated stores a refresh token the provider rotated while
	// narrowing; the connection's access token stays as it was.
	updateRotated = `WITH changed AS (UPDATE connections SET key_version = $2, ciphertext = $3, updated_at = $4
		WHERE id = $1 AND org_id = $6 RETURNING 1)
		` + notifyChangedSQL + `$5) FROM changed`
)

// scopeSet returns scopes sorted and without duplicates or empty strings,
// and its key in narrowed_tokens.
func scopeSet(scopes []string) ([]string, string) {
	set := slices.Compact(slices.Sorted(slices.Values(slices.DeleteFunc(slices.Clone(scopes),
		func(s string) bool { return s == "" }))))
	h := sha256.Sum256([]byte("connectd/scopes/v1\x00" + strings.Join(set, "\x00")))
	return set, hex.EncodeToString(h[:])
}

func narrowedBinding(connID, key string) []byte { return keyring.Binding(narrowedKeys, connID, key) }

// loadNarrowed reads and opens the narrowed token of (connID, key): nil when
// there is none or it does not open (a key since removed; it is fetched
// again), with the time it was stored.
func (s *Store) loadNarrowed(ctx context.Context, q querier, connID, key string) (*Credential, time.Time, error) {
	var (
		ct []byte
		at time.Time
	)
	err := q.QueryRow(ctx, selectNarrowed, connID, key, s.org).Scan(&ct, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("vault: read narrowed token: %w", err)
	}
	pt, err := s.narrowKeys.Open(ct, narrowedBinding(connID, key))
	if err != nil {
		s.logger.WarnContext(ctx, "vault: a narrowed token does not open; fetching it again",
			slog.String("connection_id", connID), slog.Any("error", err))
		return nil, at, nil
	}
	c, err := decodeCredential(pt)
	clear(pt)
	if err != nil {
		return nil, at, nil
	}
	return c, at, nil
}

// Narrowed returns a currently valid access token of the user's connection
// to provider limited to scopes (a subset of what the connection grants),
// for a client approved for no more than that. The token is kept sealed per
// connection and scope set; when it expires within the skew a new one is
// fetched with the connection's refresh token, once across all replicas (the
// connection row's lock, as Token does), and a refresh token the provider
// rotates meanwhile is stored in the connection in the same transaction.
// The returned credential has no refresh token; its AccountID is the
// provider account it was cut from.
//
// account is the provider account the caller's approval names: a token is
// handed out only if it was cut from that account's grant, checked again
// under the row lock, so a reconnect with another account racing the call
// cannot slip another account's token through (ErrAccountChanged).
//
// Errors: ErrInvalid (no scopes); ErrNotConnected; ErrReauthorizationRequired
// (invalid_grant: the connection is marked); ErrProviderUnavailable;
// *MissingScopesError (the connection lacks some of scopes); ErrCannotNarrow;
// ErrAccountChanged.
func (s *Store) Narrowed(ctx context.Context, user identity.User, provider, id string, scopes []string, account string) (*Credential, error) {
	return s.narrowed(ctx, user, provider, id, scopes, account, "")
}

// NarrowedRefused is Narrowed after the provider refused (401) the
// narrowed token refused although it had not expired: a stored token is
// used only if it is another one (a call here or on another replica
// fetched it since), else a new one is fetched, once across replicas,
// unless the connection was refreshed for a 401 within
// RefusedRefreshWindow (then refused is answered again: the provider's
// answer stands); the connection's own access token is left alone. The
// errors are Narrowed's.
func (s *Store) NarrowedRefused(ctx context.Context, user identity.User, provider, id string, scopes []string, account,
	refused string) (*Credential, error) {
	if refused == "" {
		return nil, fmt.Errorf("%w: which token was refused?", ErrInvalid)
	}
	return s.narrowed(ctx, user, provider, id, scopes, account, refused)
}

// narrowed is Narrowed, where a stored token that is refused is never used
// ("": none was).
func (s *Store) narrowed(ctx context.Context, user identity.User, provider, id string, scopes []string, account,
	refused string) (*Credential, error) {
	if err := validate(user, provider); err != nil {
		return nil, err
	}
	set, key := scopeSet(scopes)
	if len(set) == 0 {
		return nil, fmt.Errorf("%w: a narrowed token needs scopes", ErrInvalid)
	}
	r, _, err := s.usable(ctx, user, provider, id, set, nil)
	if err != nil {
		return nil, err
	}
	n, seen, err := s.loadNarrowed(ctx, s.db(), r.id, key)
	if err != nil {
		return nil, err
	}
	if n != nil && n.AccountID == account && !s.needsRefresh(n) && !isRefused(n, refused) {
		return n, nil
	}
	if isRefused(n, refused) {
		seen = time.Time{} // any other token stored since will do, even one near its expiry
	}
	// As in Token: one fetch per process (singleflight, on a context no
	// single caller can cancel), then the row lock across processes.
	flight := "narrow\x00" + s.org + "\x00" + r.id + "\x00" + key
	if refused != "" {
		flight += "\x00refused\x00" + tokenDigest(refused)
	}
	ch := s.flight.DoChan(flight, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.leaseFor(provider)+time.Second)
		defer cancel()
		return s.narrowLeased(rctx, user, provider, r.id, set, key, seen, refused)
	})
	// The flight is shared by callers that may expect different accounts:
	// each checks what it got.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		n := res.Val.(*Credential)
		if n.AccountID != account {
			return nil, fmt.Errorf("%w: the %s connection is now to another provider account", ErrAccountChanged, provider)
		}
		return clone(n), nil
	}
}

// narrowLeased fetches the narrowed token of (connection, set) through the
// connection row's refresh lease (lease.go): the scoped refresh presents the
// connection's refresh token like any refresh. seen is when the narrowed
// token the caller found stale was stored (zero: none); refused, the token
// the provider refused, is never used ("": none was).
func (s *Store) narrowLeased(ctx context.Context, user identity.User, provider, id string, set []string, key string,
	seen time.Time, refused string) (*Credential, error) {
	var (
		out     *Credential
		outErr  error
		refusal bool // the fetch is for a 401 on the stored token
	)
	attrs := []any{slog.String("provider", provider), slog.Any("scopes", set)}
	op := leaseOp{op: "narrow", provider: provider, user: user, id: id, attrs: attrs, failed: func(err error) { outErr = err }}
	op.plan = func(ctx context.Context, tx pgx.Tx, r *row, cred *Credential, lease leaseState) (providerCall, error) {
		out, outErr = nil, nil
		if err := usable(r); err != nil {
			outErr = err
			return nil, nil
		}
		if m := cred.missing(set); len(m) > 0 {
			outErr = &MissingScopesError{Provider: provider, Missing: m}
			return nil, nil
		}
		// Re-check after locking: another caller (or replica) may have
		// fetched it while we waited; one stored since we looked is used
		// as long as it has not expired.
		n, at, err := s.loadNarrowed(ctx, tx, r.ID, key)
		if err != nil {
			return nil, err
		}
		if n != nil && n.AccountID == cred.AccountID && !isRefused(n, refused) &&
			(!s.needsRefresh(n) || (at.After(seen) && !s.expired(n))) {
			out = n
			return nil, nil
		}
		// For a 401 on the stored token: none on a token a fetch for a 401
		// issued within RefusedRefreshWindow.
		if refusal = isRefused(n, refused); refusal {
			if recent, err := s.refusedRecently(ctx, tx, r.ID, n.AccessToken); err != nil || recent {
				out = n // the provider's answer stands
				return nil, err
			}
		}
		if cred.RefreshToken == "" || s.refreshScoped == nil {
			outErr = fmt.Errorf("%w: no refresh token, or scoped refresh is not configured", ErrCannotNarrow)
			return nil, nil
		}
		if lease.elsewhere {
			if lease.waited >= leaseWaitValid && n != nil && n.AccountID == cred.AccountID && !isRefused(n, refused) && !s.expired(n) {
				out = n
				return nil, nil
			}
			return nil, errLeased
		}
		app := r.App() // as the locked row says
		return func(ctx context.Context, rt string) (*Refreshed, error) {
			return s.refreshScoped(ctx, app, rt, set)
		}, nil
	}
	op.store = func(ctx context.Context, tx pgx.Tx, r *row, cred *Credential, ref *Refreshed) error {
		now := s.now().UTC()
		rotated := false
		if ref.RefreshToken != "" && ref.RefreshToken != cred.RefreshToken {
			// The old refresh token is spent: the new one is stored now,
			// whatever becomes of the access token.
			next := *cred
			next.RefreshToken = ref.RefreshToken
			ct, err := s.seal(r.ID, user, provider, &next)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, updateRotated, r.ID, int32(s.keys.Primary()), ct, now,
				connKey(s.org, user, provider, r.ID).Payload(), s.org); err != nil {
				return fmt.Errorf("vault: store rotated refresh token: %w", err)
			}
			rotated = true
		}
		granted := set
		if ref.Scopes != nil {
			// RFC 6749 §5.1: an answer that names scopes says what the token
			// carries. More than was asked is a provider that ignores
			// "scope": that token must not reach the client.
			if extra := scope.Missing(ref.Scopes, set); len(extra) > 0 {
				s.logger.ErrorContext(ctx, "vault: the provider answered a scoped refresh with more than was asked; "+
					"it does not narrow tokens (check narrow_on_refresh)", append(attrs, slog.Any("extra", extra))...)
				outErr = fmt.Errorf("%w: %s answered with scopes beyond those asked", ErrCannotNarrow, provider)
				return nil
			}
			granted, _ = scopeSet(ref.Scopes)
		}
		nt := &Credential{AccessToken: ref.AccessToken, TokenType: ref.TokenType, Expiry: ref.Expiry, Scopes: granted,
			AccountID: cred.AccountID}
		if nt.TokenType == "" {
			nt.TokenType = cred.TokenType
		}
		pt := nt.encode()
		ct, err := s.narrowKeys.Seal(pt, narrowedBinding(r.ID, key))
		clear(pt)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, upsertNarrowed, r.ID, key, set, int32(s.narrowKeys.Primary()), ct,
			nullTime(nt.Expiry), now, s.org); err != nil {
			return fmt.Errorf("vault: store narrowed token: %w", err)
		}
		if refusal {
			if err := s.markRefused(ctx, tx, r.ID, nt.AccessToken); err != nil {
				return err
			}
		}
		s.auditIn(ctx, tx, "connection.narrowed", r, map[string]any{"scopes": granted,
			"new_refresh_token": rotated, "expires_at": nullTime(nt.Expiry)})
		out = nt
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
		s.logger.ErrorContext(ctx, "vault: narrowing failed", append(attrs, slog.Any("error", err))...)
		return nil, err
	}
	if outErr != nil {
		return nil, outErr
	}
	return out, nil
}

// isRefused reports whether n is the token the provider refused.
func isRefused(n *Credential, refused string) bool {
	return n != nil && refused != "" && subtle.ConstantTimeCompare([]byte(n.AccessToken), []byte(refused)) == 1
}

// tokenDigest names a token in a singleflight key without holding it.
func tokenDigest(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:8])
}
