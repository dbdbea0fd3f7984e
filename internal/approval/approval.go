// Package approval owns per-request approval (issue 36): a proxied call
// that matches a request rule saying "ask" reaches the provider only once
// the user allowed it. What is asked is an elicitation of kind approval —
// the same link, long-poll, request_state, DELETE and expiry as a connect
// link (package elicitation) — and the exact call, kept here
// (approval_requests): the method, the path and query as sent, the SHA-256
// of the body and the body itself, sealed with the vault keyring and erased
// once the user decided. What the user allowed is a grant (approval_grants):
// for "this one request", bound to the client, the connection, the rule,
// the method, the path and the body's hash, used once across replicas (one
// UPDATE); for "requests matching this rule", bound to the client, the
// connection and the rule until a time the rule bounds.
package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/webhook"
)

// Channel is notified when grants are deleted (a user removed a client's
// access: the consents trigger of migration 00036); every replica's cache of
// standing grants is emptied.
const Channel = "connectd_approvals"

// Bounds.
const (
	// MaxBody is the largest body of a call that asks: it is read whole
	// (hashed, kept for the page) before anything is sent.
	MaxBody = 256 << 10
	// OnceFor is how long "this one request" may wait for its retry.
	OnceFor = 10 * time.Minute
	// standingCacheFor bounds how long a replica answers a standing grant
	// from memory (a deleted grant also empties the cache by notification).
	standingCacheFor = 30 * time.Second
	bodyPurpose      = "connectd/approval/body/v1"
)

// Decision is the user's answer.
type Decision string

// Decisions.
const (
	Once     Decision = "once"     // this one request
	Standing Decision = "standing" // requests matching the rule, for the rule's bound
	Denied   Decision = "denied"
)

// Errors.
var (
	// ErrNotOffered: a standing approval for a rule that offers none.
	ErrNotOffered = errors.New("approval: this rule lets the user allow only the one request")
	// ErrNotFound: no such approval request.
	ErrNotFound = errors.New("approval: no such request")
	// ErrAllowed: Ask found the call allowed (the user's answer to an
	// earlier link committed after the caller's Allowed): nothing was
	// asked or sent; Allowed again lets it through.
	ErrAllowed = errors.New("approval: the call was allowed meanwhile")
)

// Call is a proxied call under an ask rule, as the proxy sends it.
type Call struct {
	Org, ClientID string
	User          identity.User
	Provider      string
	ConnectionID  string
	Rule          clientauth.Rule
	// Method and Path are the call as the provider receives it: Path below
	// the API base in package proxy's Clean form, with "?" and the raw
	// query when there is one.
	Method, Path string
	Body         []byte
	BodyType     string // its Content-Type
}

// BodySHA256 is the hash that binds a grant to the body.
func (c *Call) BodySHA256() [32]byte { return sha256.Sum256(c.Body) }

// digest names the call among a user's approvals of a client (the
// elicitation's request digest, so asking again while it is pending
// answers the same link).
func (c *Call) digest() string {
	h := sha256.New()
	sum := c.BodySHA256()
	for _, p := range []string{c.Rule.Key(), c.Method, c.Path, string(sum[:])} {
		fmt.Fprintf(h, "%d:%s\x00", len(p), p)
	}
	return "approval:" + hex.EncodeToString(h.Sum(nil))[:64]
}

// Config holds the Store's dependencies.
type Config struct {
	Pool         *pgxpool.Pool
	Elicitations *elicitation.Store
	// Keyring seals bodies (under its own purpose).
	Keyring *keyring.Keyring
	// Webhooks enqueues approval.requested, .granted and .denied; nil: none.
	Webhooks *webhook.Service
	// TTL is how long an approval link waits for the user (the connect
	// links' TTL).
	TTL    time.Duration
	Logger *slog.Logger
	Now    func() time.Time
}

// Store is the approval requests and grants.
type Store struct {
	pool     *pgxpool.Pool
	els      *elicitation.Store
	keys     *keyring.Keyring
	webhooks *webhook.Service
	ttl      time.Duration
	logger   *slog.Logger
	now      func() time.Time
	standing *cache.Map[cache.Digest, time.Time]
}

// New returns the Store over cfg.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil || cfg.Elicitations == nil || cfg.Keyring == nil || cfg.Logger == nil || cfg.TTL <= 0 {
		return nil, errors.New("approval: Pool, Elicitations, Keyring, Logger and TTL are required")
	}
	s := &Store{pool: cfg.Pool, els: cfg.Elicitations, keys: cfg.Keyring.Purpose(bodyPurpose), webhooks: cfg.Webhooks,
		ttl: cfg.TTL, logger: cfg.Logger, now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	s.standing = cache.New[cache.Digest, time.Time](standingCacheFor, 100_000, s.now)
	return s, nil
}

// CacheSubscriber keeps the cache of standing grants fresh on every replica
// (add it to the process's hub); until its feed is live, standing grants are
// read from the database on every call.
func (s *Store) CacheSubscriber() cache.Subscriber { return cache.Subscribe(Channel, s.standing) }

const (
	// allowedSQL finds a standing grant for the rule or else uses the
	// oldest unused single grant for exactly this call: one round trip, and
	// a single grant is used once whatever replicas race for it (the row
	// lock; a racer skips it and is asked again).
	allowedSQL = `WITH standing AS (
		SELECT max(expires_at) AS until FROM approval_grants
		WHERE client_id = $1 AND connection_id = $2 AND rule = $3 AND NOT single_use AND used_at IS NULL AND expires_at > $4),
	used AS (
		UPDATE approval_grants SET used_at = $4
		WHERE id = (SELECT id FROM approval_grants
			WHERE client_id = $1 AND connection_id = $2 AND rule = $3 AND single_use AND used_at IS NULL AND expires_at > $4
				AND method = $5 AND path = $6 AND body_sha256 = $7
			ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
		AND (SELECT until FROM standing) IS NULL
		RETURNING id)
	SELECT (SELECT until FROM standing), (SELECT id FROM used)`
	// allowedNowSQL is allowedSQL without using anything up: whether a
	// grant would let the call through.
	allowedNowSQL = `SELECT EXISTS (SELECT 1 FROM approval_grants
		WHERE client_id = $1 AND connection_id = $2 AND rule = $3 AND used_at IS NULL AND expires_at > $4
			AND (NOT single_use OR method = $5 AND path = $6 AND body_sha256 = $7))`
	insertRequestSQL = `INSERT INTO approval_requests (elicitation_id, client_id, connection_id, rule, words, standing_max,
		method, path, body_sha256, body_size, body_type, body_sealed) VALUES ($1, $2, $3, $4, $5, make_interval(secs => $6),
		$7, $8, $9, $10, $11, $12)`
	selectRequestSQL = `SELECT client_id, connection_id, rule, words, extract(epoch FROM standing_max)::bigint, method, path,
		body_sha256, body_size, body_type, body_sealed, decision, decided_at FROM approval_requests WHERE elicitation_id = $1`
	decideSQL = `UPDATE approval_requests SET decision = $2, decided_at = $3, body_sealed = NULL
		WHERE elicitation_id = $1 AND decision = '' RETURNING client_id, connection_id, rule, extract(epoch FROM standing_max)::bigint,
		method, path, body_sha256`
	insertGrantSQL = `INSERT INTO approval_grants (client_id, connection_id, issuer, subject, provider, rule, single_use,
		method, path, body_sha256, elicitation_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`
	sweepGrantsSQL = `DELETE FROM approval_grants WHERE expires_at < $1 OR used_at < $1`
	// eraseBodiesSQL erases what an undecided approval kept once its link
	// is over (expired, or dismissed in the MCP client).
	eraseBodiesSQL = `UPDATE approval_requests r SET body_sealed = NULL FROM elicitations e
		WHERE e.id = r.elicitation_id AND r.body_sealed IS NOT NULL AND (e.status <> 'pending' OR e.expires_at <= $1)`
)

// Allowed reports whether the user allowed c: a standing grant for its
// rule (from memory on a warm path), or an unused single grant for exactly
// this call, which it uses up.
func (s *Store) Allowed(ctx context.Context, c *Call) (bool, error) {
	key := cache.Key(c.ClientID, c.ConnectionID, c.Rule.Key())
	now := s.now()
	if until, ok := s.standing.Get(key); ok && now.Before(until) {
		return true, nil
	}
	gen := s.standing.Gen()
	sum := c.BodySHA256()
	var until *time.Time
	var used *int64
	if err := s.pool.QueryRow(ctx, allowedSQL, c.ClientID, c.ConnectionID, c.Rule.Key(), now, c.Method, c.Path,
		sum[:]).Scan(&until, &used); err != nil {
		return false, fmt.Errorf("approval: look up grants: %w", err)
	}
	if until != nil {
		s.standing.Put(key, *until, gen, *until)
		return true, nil
	}
	return used != nil, nil
}

// Ask returns the pending approval of c for its user: a new one (created),
// or the one already pending for exactly this call (elicitation.Store.Mint's
// idempotence). message is what the MCP client shows with the link.
//
// A new one is created only if no grant allows c, checked in its
// transaction after its row went in: the user's answer to an earlier link
// for exactly this call commits with that link's end, which the new row
// waited for (the pending request key is unique), so an answer given since
// the caller's Allowed is seen here and Ask returns ErrAllowed — no link,
// no approval.requested webhook (it was sent for links nobody would see).
// A standing grant given meanwhile on a link for another call is seen when
// committed before this check; one committed after it leaves this approval
// asked, as any answered later.
func (s *Store) Ask(r *http.Request, c *Call) (*elicitation.Elicitation, bool, error) {
	if len(c.Body) > MaxBody {
		return nil, false, fmt.Errorf("approval: body over %d bytes", MaxBody)
	}
	now := s.now().Truncate(time.Microsecond)
	e := &elicitation.Elicitation{ID: elicitation.NewID(), Kind: elicitation.KindApproval, ClientID: c.ClientID,
		Issuer: c.User.Issuer, Subject: c.User.Subject, Provider: c.Provider, Message: c.Rule.Words,
		RequestDigest: c.digest(), Account: c.ConnectionID, Status: elicitation.StatusPending, CreatedAt: now,
		ExpiresAt: now.Add(s.ttl)}
	sum := c.BodySHA256()
	e, created, err := s.els.Mint(r, e, s.ttl, func(tx pgx.Tx) error {
		var allowed bool
		if err := tx.QueryRow(r.Context(), allowedNowSQL, c.ClientID, c.ConnectionID, c.Rule.Key(), now, c.Method,
			c.Path, sum[:]).Scan(&allowed); err != nil {
			return err
		}
		if allowed {
			return ErrAllowed
		}
		var sealed []byte
		if len(c.Body) > 0 {
			var err error
			if sealed, err = s.keys.Seal(c.Body, bodyBinding(e.ID, sum)); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(r.Context(), insertRequestSQL, e.ID, c.ClientID, c.ConnectionID, c.Rule.Key(), c.Rule.Words,
			c.Rule.Standing.Seconds(), c.Method, c.Path, sum[:], len(c.Body), c.BodyType, sealed); err != nil {
			return err
		}
		return s.emit(r.Context(), tx, webhook.ApprovalRequested, c.Org, c.ClientID, c.User, map[string]any{
			"elicitation_id": e.ID, "provider": c.Provider, "connection_id": c.ConnectionID, "method": c.Method,
			"path": c.Path, "rule": c.Rule.Key(), "expires_at": e.ExpiresAt.UTC().Format(time.RFC3339)})
	})
	if err != nil {
		return nil, false, fmt.Errorf("approval: ask: %w", err)
	}
	return e, created, nil
}

func bodyBinding(id string, sum [32]byte) []byte {
	return keyring.Binding(bodyPurpose, id, hex.EncodeToString(sum[:]))
}

// Request is what an approval asks, for the page.
type Request struct {
	ClientID, ConnectionID string
	Rule                   string // "METHOD PATTERN"
	Words                  string
	Standing               time.Duration // the longest the user may allow such calls for; 0: none offered
	Method, Path           string
	BodySHA256             [32]byte
	BodySize               int
	BodyType               string
	// Body is the body as it will be sent; nil once decided (erased), or
	// when it could not be opened (BodyUnreadable).
	Body           []byte
	BodyUnreadable bool
	Decision       Decision // "" while undecided
	DecidedAt      time.Time
}

// Request loads what approval e asks.
func (s *Store) Request(ctx context.Context, e *elicitation.Elicitation) (*Request, error) {
	if e.Kind != elicitation.KindApproval {
		return nil, ErrNotFound
	}
	var q Request
	var standing int64
	var sum, sealed []byte
	var decided *time.Time
	err := s.pool.QueryRow(ctx, selectRequestSQL, e.ID).Scan(&q.ClientID, &q.ConnectionID, &q.Rule, &q.Words, &standing,
		&q.Method, &q.Path, &sum, &q.BodySize, &q.BodyType, &sealed, &q.Decision, &decided)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("approval: load request: %w", err)
	}
	q.Standing = time.Duration(standing) * time.Second
	copy(q.BodySHA256[:], sum)
	if decided != nil {
		q.DecidedAt = *decided
	}
	if len(sealed) > 0 {
		body, err := s.keys.Open(sealed, bodyBinding(e.ID, q.BodySHA256))
		if err != nil || sha256.Sum256(body) != q.BodySHA256 {
			s.logger.WarnContext(ctx, "approval: a request's body cannot be opened", slog.String("elicitation", e.ID),
				slog.Any("error", err))
			q.BodyUnreadable = true
		} else {
			q.Body = body
		}
	} else if q.BodySize > 0 && q.Decision == "" {
		q.BodyUnreadable = true
	}
	return &q, nil
}

// Decide records the user's decision on pending approval e, for which page
// the user saw what q shows: a grant (Once, Standing) and e completed, or e
// declined (Denied, reason user_denied); the audit row, the client's
// webhook event and the long-polls' wake-up go with it, in one
// transaction. It reports false, writing nothing, when e was no longer
// pending (decided elsewhere, expired): the first answer wins.
func (s *Store) Decide(r *http.Request, e *elicitation.Elicitation, org string, d Decision) (bool, error) {
	ctx := r.Context()
	if e.Kind != elicitation.KindApproval {
		return false, ErrNotFound
	}
	now := s.now()
	var ok bool
	var until time.Time
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var clientID, connID, rule, method, path string
		var standing int64
		var sum []byte
		err := tx.QueryRow(ctx, decideSQL, e.ID, d, now).Scan(&clientID, &connID, &rule, &standing, &method, &path, &sum)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // decided already
		}
		if err != nil {
			return err
		}
		if d == Standing && standing <= 0 {
			return ErrNotOffered
		}
		st, reason := elicitation.StatusCompleted, ""
		if d == Denied {
			st, reason = elicitation.StatusDeclined, "user_denied"
		}
		if ok, err = s.els.SettleWith(r, tx, e, st, reason); err != nil || !ok {
			return err
		}
		data := map[string]any{"elicitation_id": e.ID, "provider": e.Provider, "connection_id": connID,
			"method": method, "path": path, "rule": rule}
		user := identity.User{Issuer: e.Issuer, Subject: e.Subject}
		if d == Denied {
			return s.emit(ctx, tx, webhook.ApprovalDenied, org, clientID, user, data)
		}
		single := d == Once
		until = now.Add(OnceFor)
		var bodySum []byte
		if single {
			bodySum = sum
		} else {
			until = now.Add(time.Duration(standing) * time.Second)
			method, path = "", ""
		}
		if _, err := tx.Exec(ctx, insertGrantSQL, clientID, connID, e.Issuer, e.Subject, e.Provider, rule, single, method,
			path, bodySum, e.ID, now, until); err != nil {
			return err
		}
		data["decision"] = string(d)
		data["expires_at"] = until.UTC().Format(time.RFC3339)
		return s.emit(ctx, tx, webhook.ApprovalGranted, org, clientID, user, data)
	})
	if err != nil {
		if errors.Is(err, ErrNotOffered) {
			return false, err
		}
		return false, fmt.Errorf("approval: decide: %w", err)
	}
	if ok && d == Denied {
		s.els.Finished(elicitation.StatusDeclined)
	} else if ok {
		s.els.Finished(elicitation.StatusCompleted)
	}
	return ok, nil
}

func (s *Store) emit(ctx context.Context, tx pgx.Tx, typ, org, clientID string, u identity.User, data map[string]any) error {
	if s.webhooks == nil {
		return nil
	}
	return s.webhooks.Emit(ctx, tx, webhook.RequestApprovalEvent(typ, org, clientID, u, data))
}

// Sweep deletes grants that expired or were used more than a day ago and
// erases the bodies of approvals whose link is over; internal/server runs
// it in the database sweep job.
func (s *Store) Sweep(ctx context.Context) error {
	now := s.now()
	if _, err := s.pool.Exec(ctx, sweepGrantsSQL, now.Add(-24*time.Hour)); err != nil {
		return fmt.Errorf("approval: sweep grants: %w", err)
	}
	if _, err := s.pool.Exec(ctx, eraseBodiesSQL, now); err != nil {
		return fmt.Errorf("approval: erase bodies: %w", err)
	}
	return nil
}

// Summary is one approval as an admin lists it: never the body.
type Summary struct {
	ElicitationID      string
	Issuer, Subject    string
	Provider, ConnID   string
	Rule, Words        string
	Method, Path       string
	Status             elicitation.Status
	Reason             string
	Decision           Decision
	CreatedAt, Expires time.Time
	DecidedAt          time.Time
}

const listForClientSQL = `SELECT e.id, e.issuer, e.subject, e.provider, r.connection_id, r.rule, r.words, r.method, r.path,
	CASE WHEN e.status = 'pending' AND e.expires_at <= $3 THEN 'expired' ELSE e.status END, e.reason, r.decision,
	e.created_at, e.expires_at,
	CASE WHEN e.status IN ('completed', 'declined') THEN coalesce(r.decided_at, e.completed_at) END
	FROM approval_requests r JOIN elicitations e ON e.id = r.elicitation_id
	WHERE r.client_id = $1 ORDER BY e.created_at DESC LIMIT $2`

// ForClient lists client clientID's most recent approvals (pending ones
// among them), newest first, at most limit.
func (s *Store) ForClient(ctx context.Context, clientID string, limit int) ([]Summary, error) {
	rows, err := s.pool.Query(ctx, listForClientSQL, clientID, limit, s.now())
	if err != nil {
		return nil, fmt.Errorf("approval: list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Summary, error) {
		var a Summary
		var decided *time.Time
		err := row.Scan(&a.ElicitationID, &a.Issuer, &a.Subject, &a.Provider, &a.ConnID, &a.Rule, &a.Words, &a.Method,
			&a.Path, &a.Status, &a.Reason, &a.Decision, &a.CreatedAt, &a.Expires, &decided)
		if decided != nil {
			a.DecidedAt = *decided
		}
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("approval: list: %w", err)
	}
	return out, nil
}
