package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/vault"
)

// Errors of the admin package; wrapped with context, test with errors.Is.
var (
	// ErrNotFound: no such connection (or key); also when a connection was
	// replaced by a new one while it was being revoked.
	ErrNotFound = errors.New("admin: not found")
	// ErrInvalid: a malformed filter, cursor, id or argument.
	ErrInvalid = errors.New("admin: invalid argument")
	// ErrNoVault: the Store has no vault, so it cannot revoke.
	ErrNoVault = errors.New("admin: no vault configured (CONNECTD_VAULT_KEYS)")
)

// WithdrawFunc deletes, within tx, every client's consent to the user's
// connection to provider and returns the ids of the clients that held one.
// cmd/connectd wires it to connect.WithdrawConsents: the consents table is
// the connect package's.
type WithdrawFunc func(ctx context.Context, tx pgx.Tx, user vault.UserRef, provider string) ([]string, error)

// StoreConfig holds a Store's dependencies.
type StoreConfig struct {
	Pool *pgxpool.Pool // required
	// Vault names accounts (opening only the account label) and deletes and
	// revokes connections. Nil: listing works, account labels are not shown
	// and Revoke fails with ErrNoVault.
	Vault *vault.Store
	// Withdraw withdraws consents inside a revocation; required by Revoke.
	Withdraw WithdrawFunc
	Now      func() time.Time // default time.Now
	Logger   *slog.Logger     // default: discard
}

// Store answers the admin questions and performs the admin actions; the pages,
// the JSON API and the CLI all go through it.
type Store struct {
	pool     *pgxpool.Pool
	vault    *vault.Store
	withdraw WithdrawFunc
	now      func() time.Time
	logger   *slog.Logger
}

// NewStore returns a Store over cfg.
func NewStore(cfg StoreConfig) (*Store, error) {
	if cfg.Pool == nil {
		return nil, errors.New("admin: StoreConfig.Pool is required")
	}
	st := &Store{pool: cfg.Pool, vault: cfg.Vault, withdraw: cfg.Withdraw, now: cfg.Now, logger: cfg.Logger}
	if st.now == nil {
		st.now = time.Now
	}
	if st.logger == nil {
		st.logger = slog.New(slog.DiscardHandler)
	}
	return st, nil
}

// Actor is who performs an admin action, as the audit trail records it.
type Actor struct {
	Name      string // "admin:<subject>" (a signed-in admin), "admin_key:<id>" (the API), "cli:<user>"
	RequestID string
	IP        string
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

const insertAudit = `INSERT INTO audit_events
	(kind, actor, issuer, subject, client_id, provider, target, request_id, ip, detail)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

// audit writes ev by actor with q, so it commits or rolls back with the change
// it records. ev never holds a secret.
func audit(ctx context.Context, q execer, ev Event, by Actor) error {
	detail := ev.Detail
	if detail == nil {
		detail = map[string]any{}
	}
	if _, err := q.Exec(ctx, insertAudit, ev.Kind, by.Name, ev.Issuer, ev.Subject, ev.ClientID, ev.Provider,
		ev.Target, by.RequestID, by.IP, detail); err != nil {
		return fmt.Errorf("admin: write audit event %s: %w", ev.Kind, err)
	}
	return nil
}

// Audit records ev on its own (admin sign-ins and refusals); a failure is
// returned for the caller to log.
func (st *Store) Audit(ctx context.Context, ev Event, by Actor) error {
	return audit(ctx, st.pool, ev, by)
}

// Revocation reports what Revoke did.
type Revocation struct {
	Connection Connection
	// Withdrawn lists the clients whose consent was withdrawn.
	Withdrawn []string
	// AtProvider is the outcome of revoking the credential at the provider:
	// "revoked", "not_supported", "failed" or "skipped" (see vault.Revocation).
	AtProvider string
}

// Revoke cuts access to the connection id in one action: in one transaction
// the vault deletes the row (the credentials), every client's consent is
// withdrawn, and the audit trail records both; then the vault revokes the
// credential at the provider (RFC 7009), whose outcome is audited too. MCP
// servers asking for the token afterwards get not_connected.
func (st *Store) Revoke(ctx context.Context, id string, by Actor) (*Revocation, error) {
	if st.vault == nil {
		return nil, ErrNoVault
	}
	if st.withdraw == nil {
		return nil, errors.New("admin: no WithdrawFunc configured")
	}
	c, err := st.connection(ctx, id)
	if err != nil {
		return nil, err
	}
	rev := &Revocation{Connection: *c}
	d, err := st.vault.DeleteWith(ctx, c.User, c.Provider, func(ctx context.Context, tx pgx.Tx, gone vault.Connection) error {
		if gone.ID != id {
			// Replaced since we looked (the user connected again): not ours to cut.
			return fmt.Errorf("%w: connection %s was replaced", ErrNotFound, id)
		}
		withdrawn, err := st.withdraw(ctx, tx, c.User, c.Provider)
		if err != nil {
			return err
		}
		rev.Withdrawn = withdrawn
		for _, client := range rev.Withdrawn {
			if err := audit(ctx, tx, Event{Kind: "consent.withdrawn", Issuer: c.User.Issuer, Subject: c.User.Subject,
				ClientID: client, Provider: c.Provider, Target: id}, by); err != nil {
				return err
			}
		}
		return audit(ctx, tx, Event{Kind: "connection.revoked", Issuer: c.User.Issuer, Subject: c.User.Subject,
			Provider: c.Provider, Target: id, Detail: map[string]any{"consents_withdrawn": nonNil(rev.Withdrawn)}}, by)
	})
	if errors.Is(err, vault.ErrNotConnected) {
		return nil, fmt.Errorf("%w: connection %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	rev.AtProvider = string(d.Revocation)
	if err := audit(ctx, st.pool, Event{Kind: "connection.provider_revocation", Issuer: c.User.Issuer,
		Subject: c.User.Subject, Provider: c.Provider, Target: id,
		Detail: map[string]any{"outcome": rev.AtProvider}}, by); err != nil {
		st.logger.ErrorContext(ctx, "audit event not written", slog.Any("error", err))
	}
	st.logger.InfoContext(ctx, "connection revoked by an admin", slog.String("connection_id", id),
		slog.String("provider", c.Provider), slog.String("actor", by.Name), slog.String("at_provider", rev.AtProvider),
		slog.Int("consents_withdrawn", len(rev.Withdrawn)))
	return rev, nil
}

// sweepAuditBatch deletes old audit rows a batch at a time; SKIP LOCKED lets
// every replica sweep at once without waiting on each other.
const sweepAuditBatch = `DELETE FROM audit_events WHERE id IN (
	SELECT id FROM audit_events WHERE occurred_at < $1 ORDER BY id LIMIT 5000 FOR UPDATE SKIP LOCKED)`

// SweepAudit deletes audit events older than retention and returns how many.
func (st *Store) SweepAudit(ctx context.Context, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, fmt.Errorf("%w: retention must be positive", ErrInvalid)
	}
	cutoff := st.now().Add(-retention)
	var total int64
	for {
		tag, err := st.pool.Exec(ctx, sweepAuditBatch, cutoff)
		if err != nil {
			return total, fmt.Errorf("admin: sweep audit events: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 5000 {
			return total, nil
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
