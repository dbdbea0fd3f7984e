package connect

import (
	"context"
	"github.com/connectd/connectd/internal/elicitation"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/webhook"
)

// emit enqueues ev within tx, the transaction of the change it reports.
func (s *Server) emit(ctx context.Context, tx pgx.Tx, ev webhook.Event) error {
	if s.webhooks == nil {
		return nil
	}
	return s.webhooks.Emit(ctx, tx, ev)
}

// emitStored reports what a put did to the connection — created, or its
// scopes or account changed — to every client approved for it, read within
// tx (so an approval granted in the same transaction counts).
func (s *Server) emitStored(ctx context.Context, tx pgx.Tx, c vault.Connection, ch vault.Change) error {
	typ := webhook.ConnectionScopesChanged
	extra := map[string]any{}
	var old []string
	switch {
	case ch.Created:
		typ = webhook.ConnectionCreated
	case ch.AccountChanged || !sameSet(ch.Scopes, ch.OldScopes):
		old = elicitation.NonNil(ch.OldScopes)
		extra["account_changed"] = ch.AccountChanged
	default:
		return nil // the same grant again (a re-authorization that changed nothing)
	}
	approvals, err := consent.HolderApprovals(ctx, tx, c.User, c.Provider, c.ID)
	if err != nil {
		return err
	}
	return s.emitAll(ctx, tx, webhook.ConnectionEvents(typ, c, approvals, old, extra))
}

// emitAll enqueues evs within tx.
func (s *Server) emitAll(ctx context.Context, tx pgx.Tx, evs []webhook.Event) error {
	if s.webhooks == nil {
		return nil
	}
	return s.webhooks.EmitAll(ctx, tx, evs)
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
