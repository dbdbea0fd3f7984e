package connect

import (
	"context"
	"log/slog"
	"net/http"

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

// writeAudit writes ev as it is, with the request id and peer address given.
func (s *Server) writeAudit(ctx context.Context, ev auditEvent, requestID, ip string) error {
	detail := ev.Detail
	if detail == nil {
		detail = map[string]any{}
	}
	_, err := s.pool.Exec(ctx, insertAudit, ev.Kind, ev.Actor, ev.Issuer, ev.Subject, ev.ClientID, ev.Provider, ev.Target,
		requestID, ip, detail)
	return err
}

// audit writes ev on its own (the actor defaults to the client when the event
// names no user, else the user). A failure is logged, never shown to the user:
// the action it records has already happened.
func (s *Server) audit(r *http.Request, ev auditEvent) {
	// The change it records has happened: a client hanging up now must not
	// cost its audit row.
	ctx := context.WithoutCancel(r.Context())
	if ev.Actor == "" {
		ev.Actor = "user"
		if ev.ClientID != "" && ev.Subject == "" {
			ev.Actor = "client:" + ev.ClientID
		}
	}
	if err := s.writeAudit(ctx, ev, web.RequestID(ctx), clientIP(r)); err != nil {
		s.logger.ErrorContext(ctx, "audit event not written", slog.String("kind", ev.Kind), slog.Any("error", err))
	}
}

// clientIP is the client's address as web.RequestContext resolved it
// (trusted proxies' X-Forwarded-For believed, nobody else's).
func clientIP(r *http.Request) string { return web.ClientAddr(r) }
