package vault

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/reqid"
)

// The vault records the outcome of refreshes in the shared audit trail
// itself, in the refresh transaction, so it needs no callback into the
// packages that use it. The row names the connection and its user, never a
// token.

// auditIn writes an audit row for r inside tx, under a savepoint: a failed
// audit insert is logged and rolled back alone, and never costs the change
// it records (a rotated refresh token must not be lost to it).
func (s *Store) auditIn(ctx context.Context, tx pgx.Tx, kind string, r *row, detail map[string]any) {
	err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
		return audit.Write(ctx, sp, audit.Event{Kind: kind, Actor: "vault", Issuer: r.User.Issuer,
			Subject: r.User.Subject, Provider: r.Provider, Target: r.ID, RequestID: reqid.From(ctx), Detail: detail,
			OrgID: r.Org})
	})
	if err != nil {
		s.logger.ErrorContext(ctx, "vault: audit event not written", slog.String("kind", kind),
			slog.String("connection_id", r.ID), slog.Any("error", err))
	}
}

// markReauthAudited marks r reauthorization_required and records why.
func (s *Store) markReauthAudited(ctx context.Context, tx pgx.Tx, r *row, reason string) error {
	if err := s.markReauth(ctx, tx, r, reason); err != nil {
		return err
	}
	s.auditIn(ctx, tx, "connection.reauthorization_required", r, map[string]any{"reason": reason})
	return nil
}
