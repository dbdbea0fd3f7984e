package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/lifecycle"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/notice"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/internal/webhook"
)

// Errors of the admin package; wrapped with context, test with errors.Is.
var (
	// ErrNotFound: no such connection (or key); also when a connection was
	// replaced by a new one while it was being revoked.
	ErrNotFound = fmt.Errorf("admin: %w", problem.ErrNotFound)
	// ErrInvalid: a malformed filter, cursor, id or argument.
	ErrInvalid = fmt.Errorf("admin: %w", problem.ErrInvalid)
	// ErrNoVault: the Store has no vault, so it cannot revoke.
	ErrNoVault error = &web.Error{Status: http.StatusServiceUnavailable, Code: "vault_unavailable",
		Description: "this connectd has no vault keys (CONNECTD_VAULT_KEYS), so it cannot revoke"}
)

// StoreConfig holds a Store's dependencies.
type StoreConfig struct {
	Pool *pgxpool.Pool // required
	// Vault names accounts (opening only the account label) and deletes and
	// revokes connections. Nil: listing works, account labels are not shown
	// and Revoke fails with ErrNoVault.
	Vault *vault.Store
	// Webhooks enqueues a revocation's connection.revoked events in its
	// transaction (nil: none; the CLI without River passes none).
	Webhooks *webhook.Service
	Now      func() time.Time // default time.Now
	Logger   *slog.Logger     // default: discard
	// RevokeParallel and RevokeBudget bound a cut-off's revocations: so
	// many at a time (default 8), none started after the budget (default
	// 20 s) — the rest are reported failed, to revoke again.
	RevokeParallel int
	RevokeBudget   time.Duration
	// Lifecycle is the process's one owner of a connection's end
	// (internal/server builds it once); nil: one of Pool, Vault, Webhooks
	// and Logger (the CLI).
	Lifecycle *lifecycle.Owner
	// Issuers says which organization owns an issuer (package org's own
	// issuers, through the verifier: mcpauth.Verifier.LookupIn; "" for the
	// deployment's). An organization's issuer speaks for its admins only:
	// a role in another organization is neither granted at it nor counted.
	// Nil: no organization has issuers of its own (the CLI without them
	// configured), every issuer is the deployment's.
	Issuers IssuerLookup
}

// IssuerLookup finds a trusted issuer by id or URL and the organization
// that owns it ("" for the deployment's); ok is false for an issuer
// connectd does not trust.
type IssuerLookup interface {
	LookupIn(ctx context.Context, idOrURL string) (is mcpauth.Issuer, org string, ok bool, err error)
}

// Store answers the admin questions and performs the admin actions; the pages,
// the JSON API and the CLI all go through it.
type Store struct {
	pool     *pgxpool.Pool
	vault    *vault.Store
	webhooks *webhook.Service
	now      func() time.Time
	logger   *slog.Logger
	// A cut-off's revocations: at most parallel at a time, none started
	// after budget.
	revokeParallel int
	revokeBudget   time.Duration
	// StoreConfig.Lifecycle (nil: one made for each revocation).
	lifecycle *lifecycle.Owner
	issuers   IssuerLookup // nil: every issuer is the deployment's
}

// NewStore returns a Store over cfg.
func NewStore(cfg StoreConfig) (*Store, error) {
	if cfg.Pool == nil {
		return nil, errors.New("admin: StoreConfig.Pool is required")
	}
	st := &Store{pool: cfg.Pool, vault: cfg.Vault, webhooks: cfg.Webhooks, now: cfg.Now, logger: cfg.Logger,
		revokeParallel: cfg.RevokeParallel, revokeBudget: cfg.RevokeBudget, lifecycle: cfg.Lifecycle, issuers: cfg.Issuers}
	if st.revokeParallel <= 0 {
		st.revokeParallel = defaultRevokeParallel
	}
	if st.revokeBudget <= 0 {
		st.revokeBudget = defaultRevokeBudget
	}
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
	// Org is the organization the actor acts for, and Role its role there;
	// Org "" is the deployment's operators (the Policy's admins, operator
	// keys, the CLI), who act on every organization. Every Store action
	// checks that the object it names is Org's, answering ErrNotFound when
	// it is not, as for an object that does not exist.
	Org  string
	Role Role
	// noRole: the row is not an admin's action (a refused sign-in, a
	// sign-out): no detail.role.
	noRole bool
}

// actsFor reports whether a may act on org's objects.
func (a Actor) actsFor(org string) bool { return a.Org == "" || a.Org == org }

// roleName is the role the audit trail records: an operator's is "operator".
func (a Actor) roleName() string {
	if a.Org == "" {
		return "operator"
	}
	return string(a.Role)
}

// writeAudit writes ev by actor with q, so it commits or rolls back with the change
// it records. ev never holds a secret. The row is the organization's of the
// object (ev.Org), else the actor's; detail.role is the actor's role.
func writeAudit(ctx context.Context, q audit.Execer, ev Event, by Actor) error {
	org := ev.Org
	if org == "" {
		org = by.Org
	}
	detail := make(map[string]any, len(ev.Detail)+1)
	for k, v := range ev.Detail {
		detail[k] = v
	}
	if !by.noRole {
		detail["role"] = by.roleName()
	}
	return audit.Write(ctx, q, audit.Event{Kind: ev.Kind, Actor: by.Name, Issuer: ev.Issuer, Subject: ev.Subject,
		ClientID: ev.ClientID, Provider: ev.Provider, Target: ev.Target, RequestID: by.RequestID, IP: by.IP,
		Detail: detail, OrgID: org})
}

// Audit records ev on its own (admin sign-ins and refusals); a failure is
// returned for the caller to log.
func (st *Store) Audit(ctx context.Context, ev Event, by Actor) error {
	return writeAudit(ctx, st.pool, ev, by)
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
	return st.revoke(ctx, id, by, &notice.Notice{Kind: notice.KindAdminRevoked}) // the user is told on /account
}

// revoke is Revoke, with the notice that tells the user why.
func (st *Store) revoke(ctx context.Context, id string, by Actor, why *notice.Notice) (*Revocation, error) {
	if st.vault == nil {
		return nil, ErrNoVault
	}
	c, err := st.connection(ctx, by.Org, id)
	if err != nil {
		return nil, err
	}
	rev := &Revocation{Connection: *c}
	// The one owner of a connection's end: approvals withdrawn, audit rows
	// and events in the deleting transaction, the provider's answer after.
	owner := st.lifecycle
	if owner == nil {
		owner = &lifecycle.Owner{Pool: st.pool, Vault: st.vault, Webhooks: st.webhooks, Logger: st.logger}
	}
	// The admin's browser going away after the commit must not cost the
	// provider's revocation or its audit row.
	ended, err := owner.DeleteIn(context.WithoutCancel(ctx), c.Org, c.User, c.Provider, id, nil,
		lifecycle.Actor{Audit: by.Name, By: "admin", RequestID: by.RequestID, IP: by.IP, Notice: why})
	if errors.Is(err, vault.ErrNotConnected) || errors.Is(err, lifecycle.ErrReplaced) {
		return nil, fmt.Errorf("connection %s: %w", id, problem.Detail(ErrNotFound, "no such connection"))
	}
	if err != nil {
		return nil, err
	}
	rev.Withdrawn, rev.AtProvider = nonNil(ended.Withdrawn), string(ended.Deletion.Revocation)
	// Package lifecycle's rows record the end itself; this one records the
	// admin action, in the connection's organization, with the actor's role.
	st.auditAfter(context.WithoutCancel(ctx), Event{Kind: "admin.connection_revoked", Org: c.Org, Issuer: c.User.Issuer,
		Subject: c.User.Subject, Provider: c.Provider, Target: id, Detail: map[string]any{"at_provider": rev.AtProvider,
			"consents_withdrawn": len(rev.Withdrawn)}}, by)
	st.logger.InfoContext(ctx, "connection revoked by an admin", slog.String("connection_id", id),
		slog.String("provider", c.Provider), slog.String("actor", by.Name), slog.String("at_provider", rev.AtProvider),
		slog.Int("consents_withdrawn", len(rev.Withdrawn)))
	return rev, nil
}

// SweepAudit deletes audit events older than retention and returns how many.
func (st *Store) SweepAudit(ctx context.Context, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, problem.Detail(ErrInvalid, "retention must be positive")
	}
	return audit.Sweep(ctx, st.pool, st.now().Add(-retention))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
