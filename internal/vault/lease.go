package vault

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/jackc/pgx/v5"
)

// A call that presents a connection's refresh token to its provider (a
// refresh, a narrowed token) must happen once across all replicas — a
// rotating refresh token presented twice kills the grant — and must never
// hold a pooled database connection while the provider takes its time: a
// hanging provider would drain the pool and stall every other request. So it
// runs in three steps (lease.go):
//
//  1. plan, in a short transaction under the row lock: re-check whether the
//     call is still needed (another caller or replica may have made it), and
//     take the row's refresh lease (refresh_lease, refresh_lease_until on the
//     database's clock). A lease held by someone else means wait, or use the
//     token that is still valid;
//  2. the call, holding nothing, bounded by ProviderTimeout — on a context no
//     caller can cancel, because an answer dropped after the provider rotated
//     the refresh token is the credential lost;
//  3. store, in a short transaction under the row lock, only while the lease
//     is still ours (a reconnect or a deletion meanwhile ends it: the answer
//     belongs to a grant that is gone). A store that fails is retried until
//     the lease would lapse.
//
// A holder that dies (a killed replica) or loses its answer leaves the lease
// to lapse; whoever takes it next knows the last call's outcome is unknown,
// presents the refresh token it has — the previous one, if the provider did
// rotate — and, should the provider refuse it, marks the connection
// reauthorization_required for refresh_answer_lost. A provider with a reuse
// grace window (ReuseGrace) accepts that token again for a while; there,
// a call whose answer never came back is also retried once at once.

// errLeased: another holder's call is in flight; wait for it.
var errLeased = errors.New("vault: a refresh is in flight elsewhere")

// ErrOutcomeUnknown marks a provider call that was sent and got no usable
// answer (a timeout, a reset, a body that does not parse): the provider may
// have acted on it, rotating the refresh token. A RefreshFunc wraps it into
// such failures (beside ErrProviderUnavailable).
var ErrOutcomeUnknown = errors.New("vault: the provider call's outcome is unknown")

// leaseMargin is how much longer a lease lasts than the provider calls it
// covers: the time left to store their answer, retrying a database that
// fails meanwhile. It is also how long after its deadline a dead holder's
// lease keeps others out, so it is short.
const leaseMargin = 15 * time.Second

// leaseWaitMax bounds how long a caller waits for another holder (at most
// the provider timeout, which a live holder's call never outlasts): past
// it, 503 provider_unavailable (retry later) rather than a request held open
// while a slow provider, or a replica that died mid-call, keeps the lease.
const leaseWaitMax = 10 * time.Second

// leasePoll is how often a caller waiting for another holder looks again.
const leasePoll = 100 * time.Millisecond

// leaseWaitValid is how long a caller waits for another replica's refresh
// before it settles for the token that is still valid: long enough for a
// healthy provider to answer (so callers get the fresh token), short enough
// that a slow one costs them little.
const leaseWaitValid = 2 * time.Second

// providerCall is one call presenting refreshToken.
type providerCall func(ctx context.Context, refreshToken string) (*Refreshed, error)

// leaseState is what plan learns about the row's lease.
type leaseState struct {
	// elsewhere: another holder's lease is in force.
	elsewhere bool
	// left: how long it has to run (when elsewhere).
	left time.Duration
	// doubt: the last call's outcome is unknown (its holder died or lost
	// the answer, or it timed out).
	doubt bool
	// waited: how long this caller has waited for other holders so far.
	waited time.Duration
}

// leaseOp is one leased provider call: what runs under the lock before it
// and after it.
type leaseOp struct {
	op       string // "refresh", "narrow": logs and audit
	provider string
	user     identity.User
	id       string // the connection ("": the user's only one at provider)
	attrs    []any
	// plan runs under the row lock in step 1. It returns the call to make
	// with the refresh token cred holds, or nil when none is needed (it
	// then keeps its own result). With lease.elsewhere set it must not ask
	// for a call: it uses what is still valid, or returns errLeased to wait.
	plan func(ctx context.Context, tx pgx.Tx, r *row, cred *Credential, lease leaseState) (providerCall, error)
	// store runs under the row lock in step 3 with the provider's answer,
	// while the lease is still ours.
	store func(ctx context.Context, tx pgx.Tx, r *row, cred *Credential, ref *Refreshed) error
	// failed is told of a failed call (the answer to give the callers).
	failed func(err error)
}

const (
	// clock_timestamp(), not now() (the transaction's start): time spent
	// waiting for the row lock must not shorten a lease or lengthen one
	// another holder left.
	selectLease = `SELECT refresh_lease <> '' AND refresh_lease_until > clock_timestamp(),
		coalesce(extract(epoch FROM refresh_lease_until - clock_timestamp()), 0)::float8,
		(refresh_lease <> '' AND refresh_lease_until <= clock_timestamp()) OR refresh_doubt_at IS NOT NULL
		FROM connections WHERE id = $1 AND org_id = $2`
	takeLease = `UPDATE connections SET refresh_lease = $2,
		refresh_lease_until = clock_timestamp() + $3 * interval '1 millisecond' WHERE id = $1 AND org_id = $4`
	leaseHeld = `SELECT EXISTS (SELECT 1 FROM connections WHERE id = $1 AND refresh_lease = $2 AND org_id = $3)`
	// endLease gives the lease back; doubt ($3) records an unknown
	// outcome, a success ($4) clears the record.
	endLease = `UPDATE connections SET refresh_lease = '', refresh_lease_until = NULL,
		refresh_doubt_at = CASE WHEN $3 THEN now() WHEN $4 THEN NULL ELSE refresh_doubt_at END
		WHERE id = $1 AND refresh_lease = $2 AND org_id = $5`
)

func newLeaseID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// leaseFor is how long a lease lasts: the provider calls it covers (two at
// a provider with a reuse grace, which may be retried) and the margin.
func (s *Store) leaseFor(provider string) time.Duration {
	calls := time.Duration(1)
	if s.reuseGrace(provider) > 0 {
		calls = 2
	}
	return calls*s.providerTimeout + leaseMargin
}

// runLeased runs op: plan, call, store, as the comment above says. Its
// context is detached from any caller by the caller (Token, Narrowed,
// Renew); it still carries the request's database deadlines, so each short
// transaction is bounded.
func (s *Store) runLeased(ctx context.Context, op leaseOp) error {
	start := time.Now()
	for {
		waited := time.Since(start)
		call, id, rt, lease, connID, app, err := s.planLeased(ctx, op, waited)
		switch {
		case errors.Is(err, errLeased):
			if waited >= min(s.providerTimeout, leaseWaitMax) {
				return fmt.Errorf("%w: %s: a refresh is in flight elsewhere (%s left of its lease)", ErrProviderUnavailable,
					op.provider, lease.left.Round(time.Second))
			}
			wait := min(leasePoll, max(lease.left, 10*time.Millisecond))
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: %s: waiting for a refresh in flight: %w", ErrProviderUnavailable, op.provider, ctx.Err())
			case <-time.After(wait):
			}
			continue
		case err != nil:
			return err
		case call == nil:
			return nil
		}
		// The lease is ours from now: the call and the store get the whole
		// of it, whatever waiting for another holder took.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.leaseFor(op.provider))
		defer cancel()
		return s.callLeased(cctx, op, call, connID, app, id, rt, lease)
	}
}

// planLeased is step 1.
// app is the one the connection was obtained with, as its locked row says.
func (s *Store) planLeased(ctx context.Context, op leaseOp, waited time.Duration) (call providerCall, id, rt string, lease leaseState,
	connID string, app App, err error) {
	lease.waited = waited
	err = s.begin(ctx, func(tx pgx.Tx) error {
		r, err := s.load(ctx, tx, op.user, op.provider, op.id, true)
		if err != nil {
			return err
		}
		connID, app = r.ID, r.App()
		cred, err := s.open(r)
		if err != nil {
			return err
		}
		var left float64
		if err := tx.QueryRow(ctx, selectLease, r.ID, s.org).Scan(&lease.elsewhere, &left, &lease.doubt); err != nil {
			return fmt.Errorf("vault: read refresh lease: %w", err)
		}
		lease.left = time.Duration(left * float64(time.Second))
		if call, err = op.plan(ctx, tx, r, cred, lease); err != nil || call == nil {
			return err
		}
		if lease.elsewhere {
			call = nil
			return errLeased
		}
		id, rt = newLeaseID(), cred.RefreshToken
		if _, err := tx.Exec(ctx, takeLease, r.ID, id, s.leaseFor(op.provider).Milliseconds(), s.org); err != nil {
			return fmt.Errorf("vault: take refresh lease: %w", err)
		}
		return nil
	})
	s.forget(op.user, op.provider, connID)
	return call, id, rt, lease, connID, app, err
}

// callLeased is steps 2 and 3.
func (s *Store) callLeased(ctx context.Context, op leaseOp, call providerCall, connID string, app App, id, rt string, lease leaseState) error {
	attrs := append(op.attrs, slog.String("op", op.op), slog.String("connection_id", connID))
	ref, err, timedOut := s.callOnce(ctx, op.provider, call, rt)
	retried := false
	if errors.Is(err, ErrOutcomeUnknown) && s.reuseGrace(op.provider) > 0 && !timedOut {
		// The provider may have rotated the refresh token and its answer
		// never came back (a broken connection, a body that does not
		// parse); within its reuse grace the same token is good once more.
		// Not after a timeout: the same slow provider would only make the
		// caller wait twice, and the next refresh, within the grace, will
		// present the same token anyway.
		s.logger.WarnContext(ctx, "vault: provider call's outcome unknown; retrying once within the provider's reuse grace",
			append(attrs, slog.Any("error", err))...)
		ref, err, _ = s.callOnce(ctx, op.provider, call, rt)
		retried = true
	}
	doubt := errors.Is(err, ErrOutcomeUnknown)
	if err == nil && (ref == nil || ref.AccessToken == "") {
		err, doubt = fmt.Errorf("%w: %s %s: provider returned no access token", ErrProviderUnavailable, op.op, op.provider), true
	}
	reason := "invalid_grant"
	if lease.doubt || retried {
		reason = "refresh_answer_lost"
	}
	if err != nil {
		switch {
		case errors.Is(err, ErrReauthorizationRequired):
			s.logger.WarnContext(ctx, "vault: provider refused the refresh token; reauthorization required",
				append(attrs, slog.String("reason", reason), slog.Any("error", err))...)
		default:
			s.logger.WarnContext(ctx, "vault: provider call failed; connection left untouched",
				append(attrs, slog.Bool("outcome_unknown", doubt), slog.Any("error", err))...)
		}
		op.failed(fmt.Errorf("vault: %s %s: %w", op.op, op.provider, err))
	}
	// Step 3, retried while the lease lasts: losing it now loses a refresh
	// token the provider may already have rotated.
	deadline := time.Now().Add(s.leaseFor(op.provider) - s.providerTimeout)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		serr := s.finishLeased(ctx, op, connID, app, id, ref, err, reason, doubt)
		if serr == nil {
			return nil
		}
		if time.Now().Add(backoff).After(deadline) || ctx.Err() != nil {
			if err == nil {
				s.logger.ErrorContext(ctx, "vault: the provider's answer could not be stored; "+
					"the next refresh presents the previous refresh token", append(attrs, slog.Any("error", serr))...)
			}
			return serr
		}
		s.logger.WarnContext(ctx, "vault: storing the provider's answer failed; retrying", append(attrs, slog.Any("error", serr))...)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
}

// callOnce makes one call, bounded by the provider timeout; timedOut says
// the timeout ended it.
func (s *Store) callOnce(ctx context.Context, provider string, call providerCall, rt string) (*Refreshed, error, bool) {
	pctx, cancel := context.WithTimeout(ctx, s.providerTimeout)
	defer cancel()
	start := time.Now()
	ref, err := call(pctx, rt)
	// The HTTP client's own timeout is the same budget and may fire first:
	// a call that failed after (nearly) the whole budget timed out.
	return ref, err, err != nil && (pctx.Err() != nil || time.Since(start) >= s.providerTimeout*9/10)
}

// finishLeased is one try of step 3: with the lease still ours, store the
// answer (or the failure) and give the lease back.
func (s *Store) finishLeased(ctx context.Context, op leaseOp, connID string, app App, id string, ref *Refreshed, callErr error,
	reason string, doubt bool) error {
	deleted := false
	err := s.begin(ctx, func(tx pgx.Tx) error {
		deleted = false
		r, err := s.load(ctx, tx, op.user, op.provider, connID, true)
		if errors.Is(err, ErrNotConnected) {
			deleted = true
			return nil // deleted meanwhile: nothing to store
		}
		if err != nil {
			return err
		}
		var ours bool
		if err := tx.QueryRow(ctx, leaseHeld, connID, id, s.org).Scan(&ours); err != nil {
			return fmt.Errorf("vault: read refresh lease: %w", err)
		}
		if !ours || r.ID != connID {
			// Reconnected (or deleted and connected again) meanwhile: the
			// answer is of a grant that was replaced.
			s.logger.InfoContext(ctx, "vault: connection replaced during a provider call; its answer is dropped",
				append(op.attrs, slog.String("connection_id", connID))...)
			return nil
		}
		switch {
		case errors.Is(callErr, ErrReauthorizationRequired):
			if err := s.markReauthAudited(ctx, tx, r, reason); err != nil {
				return err
			}
			if err := s.recordHealth(ctx, tx, r.ID, callErr); err != nil {
				return err
			}
		case callErr != nil:
			if err := s.recordHealth(ctx, tx, r.ID, callErr); err != nil {
				return err
			}
		default:
			cred, err := s.open(r)
			if err != nil {
				return err
			}
			if err := op.store(ctx, tx, r, cred, ref); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, endLease, r.ID, id, doubt && callErr != nil, callErr == nil, s.org); err != nil {
			return fmt.Errorf("vault: end refresh lease: %w", err)
		}
		return nil
	})
	s.forget(op.user, op.provider, connID)
	if err == nil && deleted && callErr == nil && ref != nil && s.revoke != nil {
		// The tokens the provider just issued belong to a connection that
		// was deleted (and revoked) during the call: nobody will ever use
		// them, so they go too. (Not for a connection replaced by a
		// reconnect: at some providers revoking any token of the app
		// revokes the user's new grant with it.)
		if rerr := s.revoke(ctx, app, &Credential{AccessToken: ref.AccessToken, RefreshToken: ref.RefreshToken}); rerr != nil &&
			!errors.Is(rerr, ErrRevocationNotSupported) {
			s.logger.WarnContext(ctx, "vault: revoking the dropped answer's tokens failed", append(op.attrs, slog.Any("error", rerr))...)
		}
	}
	return err
}
