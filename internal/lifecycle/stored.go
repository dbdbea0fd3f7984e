package lifecycle

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/webhook"
)

// Stored reports what a put did to the connection — created, or its
// scopes or account changed — to every client approved for it, read within
// tx (so an approval granted in the same transaction counts). It is the
// vault's PutWith callback's last step (the vault writes the put's audit
// row in the same transaction).
func (o *Owner) Stored(ctx context.Context, tx pgx.Tx, c vault.Connection, ch vault.Change) error {
	typ := webhook.ConnectionScopesChanged
	extra := map[string]any{}
	var old []string
	switch {
	case ch.Created:
		typ = webhook.ConnectionCreated
	case ch.AccountChanged || !sameSet(ch.Scopes, ch.OldScopes):
		old = nonNil(ch.OldScopes)
		extra["account_changed"] = ch.AccountChanged
	default:
		return nil // the same grant again (a re-authorization that changed nothing)
	}
	approvals, err := consent.HolderApprovalsIn(ctx, tx, c.Org, c.User, c.Provider, c.ID)
	if err != nil {
		return err
	}
	return o.emitAll(ctx, tx, webhook.ConnectionEvents(typ, c, approvals, old, extra))
}

// Withdraw withdraws one client's approval of the user's connection (the
// user's "Remove access"), with its consent.withdrawn audit row (package
// consent writes it) and the client's webhook event, by by ("user"), in one
// transaction. consent.ErrNotGiven when there was none.
func (o *Owner) Withdraw(ctx context.Context, w consent.Withdrawal, by string) error {
	return pgx.BeginFunc(ctx, o.Pool, func(tx pgx.Tx) error {
		if err := consent.WithdrawClient(ctx, tx, w); err != nil {
			return err
		}
		return o.emit(ctx, tx, webhook.ApprovalEvent(w.ClientID, w.User, w.Provider, w.ConnectionID, by))
	})
}

// emit enqueues ev within tx, the transaction of the change it reports.
func (o *Owner) emit(ctx context.Context, tx pgx.Tx, ev webhook.Event) error {
	if o.Webhooks == nil {
		return nil
	}
	return o.Webhooks.Emit(ctx, tx, ev)
}

// emitAll enqueues evs within tx.
func (o *Owner) emitAll(ctx context.Context, tx pgx.Tx, evs []webhook.Event) error {
	if o.Webhooks == nil {
		return nil
	}
	return o.Webhooks.EmitAll(ctx, tx, evs)
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]bool, len(a))
	for _, x := range a {
		seen[x] = true
	}
	for _, x := range b {
		if !seen[x] {
			return false
		}
	}
	return true
}
