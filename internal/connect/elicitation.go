package connect

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/web"
)

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
	Account     string
	Status      Status
	Reason      string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	CompletedAt time.Time
}

// ErrNotFound: no such elicitation, or it is not the caller's to see.
var ErrNotFound = errors.New("connect: elicitation not found")

// effective reports the status with expiry applied: a pending elicitation past
// its expiry is expired even before the sweeper marks it.
func (e *Elicitation) effective(now time.Time) Status {
	if e.Status == StatusPending && !now.Before(e.ExpiresAt) {
		return StatusExpired
	}
	return e.Status
}

// idBytes is the entropy of elicitation ids: 192 bits, base64url → 32 chars.
const idBytes = 24

func newElicitationID() string {
	b := make([]byte, idBytes)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// validElicitationID checks the shape of an id before it touches the database.
func validElicitationID(id string) bool {
	if len(id) != base64.RawURLEncoding.EncodedLen(idBytes) {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !isBase64URL(id[i]) { // the decoder alone would skip CR and LF
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
		 request_key, account)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10, $13, $14)
		ON CONFLICT (request_key) WHERE status = 'pending' DO NOTHING
		RETURNING id, client_id, issuer, subject, provider)
		` + audit.Insert + `
		SELECT 'elicitation.minted', 'user', issuer, subject, client_id, provider, id, $11, $12, '{}'::jsonb FROM minted`
	selectElicitation = `SELECT id, client_id, issuer, subject, provider, scopes, message, request_digest,
		status, reason, created_at, expires_at, completed_at, account FROM elicitations WHERE id = $1`
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

// insertMinted stores a new elicitation and its "elicitation.minted" audit
// row in one statement: the mint path costs one round trip and one commit,
// and the audit row exists exactly when the elicitation does. It reports
// false, storing nothing, when a pending elicitation has the same request key.
func (s *Server) insertMinted(r *http.Request, e *Elicitation, key []byte) (bool, error) {
	ctx := r.Context()
	tag, err := s.pool.Exec(ctx, insertMintedElicitation, e.ID, e.ClientID, e.Issuer, e.Subject, e.Provider,
		nonNil(e.Scopes), e.Message, e.RequestDigest, e.CreatedAt, e.ExpiresAt, web.RequestID(ctx), clientIP(r), key, e.Account)
	if err != nil {
		return false, fmt.Errorf("connect: insert elicitation: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// requestKey names what an elicitation is minted for: the client, the user,
// the provider, the scope set (in any order) and the request digest.
func requestKey(e *Elicitation) []byte {
	set := slices.Sorted(slices.Values(e.Scopes))
	h := sha256.New()
	for _, part := range append([]string{"connectd/mint/v2", e.ClientID, e.Issuer, e.Subject, e.Provider,
		e.RequestDigest, e.Account}, set...) {
		fmt.Fprintf(h, "%d:%s\x00", len(part), part)
	}
	return h.Sum(nil)
}

// pendingFor returns the pending elicitation minted for the same request as
// key; ErrNotFound when there is none.
func (s *Server) pendingFor(ctx context.Context, key []byte) (*Elicitation, error) {
	var id string
	err := s.pool.QueryRow(ctx, selectPendingByKey, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("connect: find pending elicitation: %w", err)
	}
	return s.elicitation(ctx, s.pool, id) // ErrNotFound when swept meanwhile
}

func (s *Server) elicitation(ctx context.Context, q pgxQueryer, id string) (*Elicitation, error) {
	var e Elicitation
	var completed *time.Time
	err := q.QueryRow(ctx, selectElicitation, id).Scan(&e.ID, &e.ClientID, &e.Issuer, &e.Subject, &e.Provider,
		&e.Scopes, &e.Message, &e.RequestDigest, &e.Status, &e.Reason, &e.CreatedAt, &e.ExpiresAt, &completed, &e.Account)
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

// settle records the outcome of a pending elicitation with its audit row
// ("elicitation.<status>", detail.reason when given) in one statement and
// notifies waiters. It reports false, and writes nothing, when e was no
// longer pending (or had expired): the first outcome wins.
//
// The client's webhook event is enqueued in the same transaction.
func (s *Server) settle(r *http.Request, e *Elicitation, st Status, reason string) (bool, error) {
	var ok bool
	err := pgx.BeginFunc(r.Context(), s.pool, func(tx pgx.Tx) error {
		var err error
		if ok, err = s.settleWith(r, tx, e, st, reason); err != nil || !ok {
			return err
		}
		return s.emitEnded(r.Context(), tx, e, st, reason)
	})
	if err != nil {
		return false, err
	}
	if ok {
		s.onFlow(st)
	}
	return ok, nil
}

// querier is what both a pool and a transaction offer for the writes here.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// settleWith is settle with q (a transaction, to settle together with other
// writes); the caller reports the outcome to onFlow once it is committed.
func (s *Server) settleWith(r *http.Request, q querier, e *Elicitation, st Status, reason string) (bool, error) {
	ctx := r.Context()
	detail := map[string]any{}
	if reason != "" {
		detail["reason"] = reason
	}
	rows, err := q.Query(ctx, finishElicitation, e.ID, st, reason, s.now(), "elicitation."+string(st),
		web.RequestID(ctx), clientIP(r), detail)
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

// pgxQueryer is what both a pool and a transaction offer for single-row reads.
type pgxQueryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
