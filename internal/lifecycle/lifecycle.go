package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/notice"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/webhook"
)

// ErrReplaced: the connection asked for by id was replaced (the user
// connected again) since the caller looked; nothing was deleted.
var ErrReplaced = errors.New("lifecycle: the connection was replaced")

// Owner ends connections. Webhooks may be nil (no events).
type Owner struct {
	Pool     *pgxpool.Pool
	Vault    *vault.Store
	Webhooks *webhook.Service
	Logger   *slog.Logger
}

// Actor is who ends a connection, as the audit trail and the events name
// them.
type Actor struct {
	// Audit is the audit rows' actor: "user", "client:<id>", "admin:<sub>",
	// "admin_key:<id>", "cli:<user>".
	Audit string
	// By is the events' "by": "user", "client" or "admin".
	By        string
	ClientID  string // the client that asked (unlink), for the audit rows
	RequestID string
	IP        string
	// Notice, when not nil, is what the user is told on their account page
	// about this end (a cut-off's revocation): Delete fills in the user, the
	// connection's provider, id and account name, and writes it in the
	// deleting transaction, so no connection ends without its notice.
	Notice *notice.Notice
}

// Ended is what Delete did.
type Ended struct {
	Deletion  *vault.Deletion
	Withdrawn []string // the clients whose approval went, sorted
}

// Delete is DeleteIn for the organization of o.Vault's handle: the default
// organization's as internal/server builds the owner (a caller holding a
// copy of the owner on another organization's handle ends that one's).
func (o *Owner) Delete(ctx context.Context, user identity.User, provider, id string, account []byte, a Actor) (*Ended, error) {
	return o.DeleteIn(ctx, o.Vault.Org(), user, provider, id, account, a)
}

// DeleteIn deletes the user's connection id at provider of organization
// org ("": the default one) — only while it is for the provider account
// account names when that is not nil (ErrReplaced otherwise: another
// account's credential replaced it since the caller decided) — with
// everything that goes with it in one transaction, then revokes it at the
// provider (with the app that obtained it) and audits the outcome.
// vault.ErrNotConnected when there is none, or it is another
// organization's: an actor of org never ends, or learns of, a connection
// of another.
func (o *Owner) DeleteIn(ctx context.Context, org string, user identity.User, provider, id string, account []byte, a Actor) (*Ended, error) {
	var withdrawn []string
	d, err := o.Vault.In(org).DeleteWith(ctx, user, provider, id, func(ctx context.Context, tx pgx.Tx, gone vault.Connection) error {
		// A row still without a hash was not stored again since the
		// caller decided (every store writes one).
		if account != nil && gone.AccountHash != nil && !bytes.Equal(gone.AccountHash, account) {
			return fmt.Errorf("%w: connection %s", ErrReplaced, gone.ID)
		}
		// The holders of the connection's organization alone (the row is
		// gone already: only the organization named tells whose they are).
		approvals, err := consent.HolderApprovalsIn(ctx, tx, gone.Org, user, provider, gone.ID)
		if err != nil {
			return err
		}
		if withdrawn, err = consent.Withdraw(ctx, tx, user, provider, gone.ID); err != nil {
			return err
		}
		for _, client := range withdrawn {
			if err := o.audit(ctx, tx, a, "consent.withdrawn", gone, client, nil); err != nil {
				return err
			}
		}
		if a.Notice != nil {
			n := *a.Notice
			n.User, n.Provider, n.ConnectionID, n.Account = user, gone.Provider, gone.ID,
				vault.AccountName(gone.DisplayName, gone.Label)
			if err := notice.Add(ctx, tx, n); err != nil {
				return err
			}
		}
		if err := o.audit(ctx, tx, a, "connection.revoked", gone, a.ClientID,
			map[string]any{"by": a.By, "consents_withdrawn": nonNil(withdrawn)}); err != nil {
			return err
		}
		if o.Webhooks == nil {
			return nil
		}
		gone.Status = vault.StatusRevoked
		return o.Webhooks.EmitAll(ctx, tx, webhook.ConnectionEvents(webhook.ConnectionRevoked, gone, approvals, nil,
			map[string]any{"by": a.By}))
	})
	if err != nil {
		return nil, err
	}
	// The provider's answer comes after the commit: its own row.
	if err := o.audit(ctx, nil, a, "connection.provider_revocation", d.Connection, a.ClientID,
		map[string]any{"outcome": string(d.Revocation)}); err != nil && o.Logger != nil {
		o.Logger.ErrorContext(ctx, "audit event not written", slog.String("kind", "connection.provider_revocation"),
			slog.Any("error", err))
	}
	return &Ended{Deletion: d, Withdrawn: withdrawn}, nil
}

// audit writes one row of a connection's end, in tx (nil: on its own).
func (o *Owner) audit(ctx context.Context, tx pgx.Tx, a Actor, kind string, c vault.Connection, client string,
	detail map[string]any) error {
	ev := audit.Event{Kind: kind, Actor: a.Audit, Issuer: c.User.Issuer, Subject: c.User.Subject, ClientID: client,
		Provider: c.Provider, Target: c.ID, RequestID: a.RequestID, IP: a.IP, Detail: detail, OrgID: c.Org}
	if tx != nil {
		return audit.Write(ctx, tx, ev)
	}
	return audit.Write(ctx, o.Pool, ev)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ReauthRequired is the vault's OnReauth (vault.Config.OnReauth): a
// connection the provider stopped honouring is reported, in the vault's
// marking transaction (which writes its connection.reauthorization_required
// audit row), to every client approved for it, each told only what it may
// see.
func (o *Owner) ReauthRequired(ctx context.Context, tx pgx.Tx, c vault.Connection, reason string) error {
	if o.Webhooks == nil {
		return nil
	}
	approvals, err := consent.HolderApprovalsIn(ctx, tx, c.Org, c.User, c.Provider, c.ID)
	if err != nil {
		return err
	}
	return o.Webhooks.EmitAll(ctx, tx, webhook.ConnectionEvents(webhook.ConnectionReauthRequired, c, approvals, nil,
		map[string]any{"reason": reason}))
}
