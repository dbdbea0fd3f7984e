package elicitation

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/web"
)

// writeAudit writes ev as it is, with the request id and peer address given.
func (s *Store) writeAudit(ctx context.Context, ev audit.Event, requestID, ip string) error {
	ev.RequestID, ev.IP = requestID, ip
	return audit.Write(ctx, s.pool, ev)
}

// Audit writes ev, of a request to either surface (a security refusal of
// the flow or of the API), on its own (the actor defaults to the client when the event
// names no user, else the user). A failure is logged, never shown to the user:
// the action it records has already happened.
func (s *Store) Audit(r *http.Request, ev audit.Event) {
	// The change it records has happened: a client hanging up now must not
	// cost its audit row.
	ctx := context.WithoutCancel(r.Context())
	if ev.Actor == "" {
		ev.Actor = "user"
		if ev.ClientID != "" && ev.Subject == "" {
			ev.Actor = "client:" + ev.ClientID
		}
	}
	if err := s.writeAudit(ctx, ev, web.RequestID(ctx), web.ClientAddr(r)); err != nil {
		s.logger.ErrorContext(ctx, "audit event not written", slog.String("kind", ev.Kind), slog.Any("error", err))
	}
}
