package elicitation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/internal/webhook"
)

// Config holds every dependency of the Store.
type Config struct {
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Hub is the process's notification listener: New subscribes the
	// long-poll wake-ups to it.
	Hub *cache.Hub
	// Webhooks enqueues the event of an elicitation that ends, in the
	// transaction that ends it; nil: none are sent.
	Webhooks *webhook.Service
	// OnFlow, when set, is called once for every elicitation that reaches a
	// final status on this replica (completed, declined, failed, expired),
	// for metrics.
	OnFlow func(status Status)
	Now    func() time.Time // default time.Now
}

// Store is the elicitations table and what goes with it: the long-poll
// wake-ups of its notifications, the ended events, the sweep.
type Store struct {
	pool     *pgxpool.Pool
	logger   *slog.Logger
	webhooks *webhook.Service
	onFlow   func(Status)
	now      func() time.Time
	wakeups  *Wakeups
}

// New returns the Store over cfg's dependencies.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil || cfg.Logger == nil || cfg.Hub == nil {
		return nil, errors.New("elicitation: Pool, Logger and Hub are required")
	}
	s := &Store{pool: cfg.Pool, logger: cfg.Logger, webhooks: cfg.Webhooks, onFlow: cfg.OnFlow, now: cfg.Now,
		wakeups: NewWakeups()}
	if s.now == nil {
		s.now = time.Now
	}
	if s.onFlow == nil {
		s.onFlow = func(Status) {}
	}
	cfg.Hub.Add(s.wakeups.subscriber())
	return s, nil
}

// Finished reports an elicitation that reached st on this replica
// (Config.OnFlow), once its change is committed.
func (s *Store) Finished(st Status) { s.onFlow(st) }

// Subscribe returns a channel signalled when elicitation id may have
// changed on any replica, and a function to unsubscribe.
func (s *Store) Subscribe(id string) (<-chan struct{}, func()) { return s.wakeups.Subscribe(id) }

// Status is an elicitation's state as MCP servers see it.
type Status string

// Elicitation states.
const (
	StatusPending   Status = "pending"
	StatusCompleted Status = "completed"
	StatusDeclined  Status = "declined"
	StatusExpired   Status = "expired"
	StatusFailed    Status = "failed"
)

// Elicitation is one connect request: a client asking for a user's provider
// credentials with some scopes.
type Elicitation struct {
	ID            string
	ClientID      string
	Issuer        string
	Subject       string
	Provider      string
	Scopes        []string
	Message       string
	RequestDigest string
	// Account is which of the user's accounts at the provider the request
	// is for: a connection id, AccountNew, or "" (the user's choice).
	Account string
	// Kind is what the user is asked: to connect (KindConnect) or to
	// approve one proxied call (KindApproval, package approval; Account is
	// then the connection the call is for).
	Kind        Kind
	Status      Status
	Reason      string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	CompletedAt time.Time
}

// Kind is what an elicitation asks of the user.
type Kind string

// Elicitation kinds.
const (
	KindConnect  Kind = "connect"
	KindApproval Kind = "approval"
)

// AccountNew, as an elicitation's account, asks for another account at the
// provider.
const AccountNew = "new"

// ErrNotFound: no such elicitation, or it is not the caller's to see.
var ErrNotFound = errors.New("connect: elicitation not found")

// Effective reports the status with expiry applied: a pending elicitation past
// its expiry is expired even before the sweeper marks it.
func (e *Elicitation) Effective(now time.Time) Status {
	if e.Status == StatusPending && !now.Before(e.ExpiresAt) {
		return StatusExpired
	}
	return e.Status
}

// idBytes is the entropy of elicitation ids: 192 bits, base64url → 32 chars.
const idBytes = 24

// NewID returns a fresh elicitation id.
func NewID() string {
	b := make([]byte, idBytes)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ValidID checks the shape of an id before it touches the database.
func ValidID(id string) bool {
	if len(id) != base64.RawURLEncoding.EncodedLen(idBytes) {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !IsBase64URL(id[i]) { // the decoder alone would skip CR and LF
			return false
		}
	}
	_, err := base64.RawURLEncoding.Strict().DecodeString(id)
	return err == nil
}

const (
	// insertMintedElicitation inserts nothing when a pending elicitation
	// has the same request key ($13): the caller answers that one instead.
	insertMintedElicitation = `WITH minted AS (INSERT INTO elicitations
		(id, client_id, issuer, subject, provider, scopes, message, request_digest, status, created_at, expires_at,
		 request_key, account, kind)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10, $13, $14, $15)
		ON CONFLICT (request_key) WHERE status = 'pending' DO NOTHING
		RETURNING id, client_id, issuer, subject, provider, kind)
		` + audit.Insert + `
		SELECT CASE kind WHEN 'approval' THEN 'approval.requested' ELSE 'elicitation.minted' END,
			'user', issuer, subject, client_id, provider, id, $11, $12, '{}'::jsonb FROM minted`
	selectElicitation = `SELECT id, client_id, issuer, subject, provider, scopes, message, request_digest,
		status, reason, created_at, expires_at, completed_at, account, kind FROM elicitations WHERE id = $1`
	selectPendingByKey = `SELECT id FROM elicitations WHERE request_key = $1 AND status = 'pending'`
	// detachElicitation takes a pending elicitation out of idempotent
	// minting (it stays usable until it expires).
	detachElicitation = `UPDATE elicitations SET request_key = NULL WHERE id = $1 AND request_key = $2`
	// finishElicitation moves a pending, unexpired elicitation to a final
	// state, writes its audit row ($5 kind, $6 request id, $7 address, $8
	// detail) and wakes long-polls on every replica (NOTIFY is delivered on
	// commit): one statement, so one round trip and an implicit transaction.
	finishElicitation = `WITH done AS (
		UPDATE elicitations SET status = $2, reason = $3, completed_at = $4
		WHERE id = $1 AND status = 'pending' AND expires_at > $4
		RETURNING id, client_id, issuer, subject, provider),
	audited AS (` + audit.Insert + `
		SELECT $5, 'user', issuer, subject, client_id, provider, id, $6, $7, $8 FROM done)
		SELECT pg_notify('` + notifyChannel + `', id) FROM done`
	expireElicitations = `UPDATE elicitations SET status = 'expired', completed_at = expires_at
		WHERE id IN (SELECT id FROM elicitations WHERE status = 'pending' AND expires_at <= $1
			ORDER BY expires_at LIMIT 1000 FOR UPDATE SKIP LOCKED)
		RETURNING id, client_id, issuer, subject, provider, scopes`
	deleteOldElicitations = `DELETE FROM elicitations WHERE status <> 'pending' AND expires_at < $1`
)

// InsertMinted stores a new elicitation and its "elicitation.minted" audit
// row in one statement: the mint path costs one round trip and one commit,
// and the audit row exists exactly when the elicitation does. It reports
// false, storing nothing, when a pending elicitation has the same request key.
func (s *Store) InsertMinted(r *http.Request, e *Elicitation, key []byte) (bool, error) {
	return s.insertWith(r, s.pool, e, key)
}

func (s *Store) insertWith(r *http.Request, q Querier, e *Elicitation, key []byte) (bool, error) {
	ctx := r.Context()
	tag, err := q.Exec(ctx, insertMintedElicitation, e.ID, e.ClientID, e.Issuer, e.Subject, e.Provider,
		NonNil(e.Scopes), e.Message, e.RequestDigest, e.CreatedAt, e.ExpiresAt, web.RequestID(ctx), web.ClientAddr(r), key, e.Account,
		e.kind())
	if err != nil {
		return false, fmt.Errorf("connect: insert elicitation: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// kind is e's kind, KindConnect when unset.
func (e *Elicitation) kind() Kind {
	if e.Kind == "" {
		return KindConnect
	}
	return e.Kind
}

// Mint stores e, or finds the pending elicitation minted for the same
// request (RequestKey) and returns that one instead: created reports which.
// While an elicitation for the same request is pending and has at least a
// third of ttl left it is answered again — a client that retries, or loops,
// shows the user the link they may already have opened. The insert goes
// first (one round trip in the common case); the unique index on the
// pending request key makes concurrent mints on any replicas yield one. A
// pending one nearer its expiry is detached (it stays usable until it
// expires) and a fresh one minted.
//
// with, when set, runs in the transaction that stores a new e (what goes
// with it: an approval's request); nil stores e in one statement.
func (s *Store) Mint(r *http.Request, e *Elicitation, ttl time.Duration, with func(tx pgx.Tx) error) (*Elicitation, bool, error) {
	key := RequestKey(e)
	now := e.CreatedAt
	for attempt := 0; attempt < 3; attempt++ {
		created, err := s.insert(r, e, key, with)
		if err != nil {
			return nil, false, err
		}
		if created {
			return e, true, nil
		}
		prev, err := s.PendingFor(r.Context(), key)
		if errors.Is(err, ErrNotFound) {
			continue // settled meanwhile: insert again
		}
		if err != nil {
			return nil, false, err
		}
		if prev.ExpiresAt.Sub(now) >= ttl/3 {
			return prev, false, nil
		}
		if err := s.Detach(r.Context(), prev.ID, key); err != nil {
			return nil, false, err
		}
	}
	return nil, false, fmt.Errorf("connect: mint: the pending elicitation for this request kept changing")
}

// insert is InsertMinted, with with in the same transaction when set.
func (s *Store) insert(r *http.Request, e *Elicitation, key []byte, with func(tx pgx.Tx) error) (bool, error) {
	if with == nil {
		return s.InsertMinted(r, e, key)
	}
	var created bool
	err := pgx.BeginFunc(r.Context(), s.pool, func(tx pgx.Tx) error {
		var err error
		if created, err = s.insertWith(r, tx, e, key); err != nil || !created {
			return err
		}
		return with(tx)
	})
	if err != nil {
		return false, fmt.Errorf("connect: insert elicitation: %w", err)
	}
	return created, nil
}

// RequestKey names what an elicitation is minted for: the client, the user,
// the provider, the scope set (in any order) and the request digest — and,
// for an approval, that it is one (no connect link is ever answered for an
// approval, or the other way round).
func RequestKey(e *Elicitation) []byte {
	set := slices.Sorted(slices.Values(e.Scopes))
	h := sha256.New()
	domain := "connectd/mint/v2"
	if e.kind() == KindApproval {
		domain = "connectd/approval/v1"
	}
	for _, part := range append([]string{domain, e.ClientID, e.Issuer, e.Subject, e.Provider,
		e.RequestDigest, e.Account}, set...) {
		fmt.Fprintf(h, "%d:%s\x00", len(part), part)
	}
	return h.Sum(nil)
}

// PendingFor returns the pending elicitation minted for the same request as
// key; ErrNotFound when there is none.
func (s *Store) PendingFor(ctx context.Context, key []byte) (*Elicitation, error) {
	var id string
	err := s.pool.QueryRow(ctx, selectPendingByKey, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("connect: find pending elicitation: %w", err)
	}
	return s.Get(ctx, id) // ErrNotFound when swept meanwhile
}

// Detach takes pending elicitation id out of idempotent minting under key
// (it stays usable until it expires).
func (s *Store) Detach(ctx context.Context, id string, key []byte) error {
	if _, err := s.pool.Exec(ctx, detachElicitation, id, key); err != nil {
		return fmt.Errorf("connect: detach elicitation: %w", err)
	}
	return nil
}

// chooseAccount sets the request's account once, before the user is sent to
// the provider (the callback's target must be what the page offered).
const chooseAccount = `UPDATE elicitations SET account = $2 WHERE id = $1 AND status = 'pending' AND account = ''
	AND NOT EXISTS (SELECT 1 FROM oauth_states WHERE elicitation_id = $1)`

// ChooseAccount sets pending elicitation id's account to choice, once and
// only before a provider round trip started for it.
func (s *Store) ChooseAccount(ctx context.Context, id, choice string) error {
	if _, err := s.pool.Exec(ctx, chooseAccount, id, choice); err != nil {
		return fmt.Errorf("connect: choose account: %w", err)
	}
	return nil
}

// Get loads elicitation id; ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, id string) (*Elicitation, error) {
	var e Elicitation
	var completed *time.Time
	// A read: once more on a live connection if its own died under it.
	err := db.Read(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, selectElicitation, id).Scan(&e.ID, &e.ClientID, &e.Issuer, &e.Subject, &e.Provider,
			&e.Scopes, &e.Message, &e.RequestDigest, &e.Status, &e.Reason, &e.CreatedAt, &e.ExpiresAt, &completed, &e.Account, &e.Kind)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("connect: load elicitation: %w", err)
	}
	if completed != nil {
		e.CompletedAt = *completed
	}
	return &e, nil
}

// Settle records the outcome of a pending elicitation with its audit row
// ("elicitation.<status>", detail.reason when given) in one statement and
// notifies waiters. It reports false, and writes nothing, when e was no
// longer pending (or had expired): the first outcome wins.
//
// The client's webhook event is enqueued in the same transaction.
func (s *Store) Settle(r *http.Request, e *Elicitation, st Status, reason string) (bool, error) {
	var ok bool
	err := pgx.BeginFunc(r.Context(), s.pool, func(tx pgx.Tx) error {
		var err error
		if ok, err = s.SettleWith(r, tx, e, st, reason); err != nil || !ok {
			return err
		}
		return s.EmitEnded(r.Context(), tx, e, st, reason)
	})
	if err != nil {
		return false, err
	}
	if ok {
		s.onFlow(st)
	}
	return ok, nil
}

// Querier is what both a pool and a transaction offer for the writes here.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// SettleWith is Settle with q (a transaction, to settle together with other
// writes); the caller reports the outcome to Finished once it is committed.
func (s *Store) SettleWith(r *http.Request, q Querier, e *Elicitation, st Status, reason string) (bool, error) {
	ctx := r.Context()
	detail := map[string]any{}
	if reason != "" {
		detail["reason"] = reason
	}
	rows, err := q.Query(ctx, finishElicitation, e.ID, st, reason, s.now(), AuditKind(e, st),
		web.RequestID(ctx), web.ClientAddr(r), detail)
	if err != nil {
		return false, fmt.Errorf("connect: finish elicitation: %w", err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("connect: finish elicitation: %w", err)
	}
	return n == 1, nil
}

// AuditKind is the audit row's kind for e ending st: "elicitation.<st>", and
// for an approval "approval.granted", "approval.denied" (the user's No, or
// the MCP client's: the reason says which) or "approval.expired".
func AuditKind(e *Elicitation, st Status) string {
	if e.kind() != KindApproval {
		return "elicitation." + string(st)
	}
	switch st {
	case StatusCompleted:
		return "approval.granted"
	case StatusDeclined:
		return "approval.denied"
	}
	return "approval." + string(st)
}

// EmitEnded reports an elicitation that ended to the client that minted it,
// within tx, the transaction that ended it.
func (s *Store) EmitEnded(ctx context.Context, tx pgx.Tx, e *Elicitation, st Status, reason string) error {
	if s.webhooks == nil {
		return nil
	}
	return s.webhooks.Emit(ctx, tx, webhook.ElicitationEvent(string(st), e.ID, e.ClientID,
		identity.User{Issuer: e.Issuer, Subject: e.Subject}, e.Provider, e.Scopes, reason))
}

// IsBase64URL reports whether c is of the base64url alphabet (no padding):
// ids and sealed handles are checked with it before a decoder, which would
// skip CR and LF.
func IsBase64URL(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// HasControl reports whether s holds a control character other than a
// newline or tab: text an elicitation carries (its message) and what a user
// types into its forms (an API key) may not.
func HasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			return true
		}
	}
	return false
}

// NonNil is s, or an empty list for nil: a list column or JSON field is
// never NULL.
func NonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
