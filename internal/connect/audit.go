package connect

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/connectd/connectd/internal/web"
)

// auditEvent is one row of the append-only audit trail. It never holds a
// secret: no token, code, state, verifier, cookie or key.
type auditEvent struct {
	Kind     string
	Actor    string // "user", "client:<id>", "admin:<sub>"; defaults from the other fields
	Issuer   string
	Subject  string
	ClientID string
	Provider string
	Target   string // elicitation or connection id
	Detail   map[string]any
}

const insertAudit = `INSERT INTO audit_events
	(kind, actor, issuer, subject, client_id, provider, target, request_id, ip, detail)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// auditIn writes ev with q, so it commits or rolls back with the change it
// records.
func (s *Server) auditIn(ctx context.Context, q execer, r *http.Request, ev auditEvent) error {
	actor := ev.Actor
	if actor == "" {
		if ev.ClientID != "" && ev.Subject == "" {
			actor = "client:" + ev.ClientID
		} else {
			actor = "user"
		}
	}
	ev.Actor = actor
	return s.writeAudit(ctx, q, ev, web.RequestID(ctx), clientIP(r))
}

// writeAudit writes ev as it is, with the request id and peer address given.
func (s *Server) writeAudit(ctx context.Context, q execer, ev auditEvent, requestID, ip string) error {
	detail := ev.Detail
	if detail == nil {
		detail = map[string]any{}
	}
	_, err := q.Exec(ctx, insertAudit, ev.Kind, ev.Actor, ev.Issuer, ev.Subject, ev.ClientID, ev.Provider, ev.Target,
		requestID, ip, detail)
	return err
}

// audit writes ev on its own. A failure is logged, never shown to the user:
// the action it records has already happened.
func (s *Server) audit(r *http.Request, ev auditEvent) {
	// The change it records has happened: a client hanging up now must not
	// cost its audit row.
	ctx := context.WithoutCancel(r.Context())
	if err := s.auditIn(ctx, s.pool, r, ev); err != nil {
		s.logger.ErrorContext(ctx, "audit event not written", slog.String("kind", ev.Kind), slog.Any("error", err))
	}
}

// clientIP is the client's address as web.RequestContext resolved it
// (trusted proxies' X-Forwarded-For believed, nobody else's).
func clientIP(r *http.Request) string { return web.ClientAddr(r) }
