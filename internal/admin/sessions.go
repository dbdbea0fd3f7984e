package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// "End all sessions of a user": a stolen or forgotten browser session must be
// cut without waiting for it to expire. The pages, the API and the CLI all
// come here.

// MayEndSessions is what EndSessions checks before it ends anything: user
// is a valid identity (ErrInvalid) and, for an organization's admin, one of
// its users (ErrNotFound); the confirmation page asks nothing of anyone
// else.
func (st *Store) MayEndSessions(ctx context.Context, user identity.User, by Actor) error {
	if err := (Filter{Issuer: user.Issuer, Subject: user.Subject}).Validate(); err != nil {
		return err
	}
	if user.Issuer == "" || user.Subject == "" {
		return problem.Detail(ErrInvalid, "a user is an issuer and a subject; both are required")
	}
	if by.Org != "" {
		// An organization's admin ends the sessions of its own users only:
		// those with a connection in it. Anyone else is not found.
		var ok bool
		if err := st.pool.QueryRow(ctx, selectUserInOrg, user.Issuer, user.Subject, by.Org).Scan(&ok); err != nil {
			return fmt.Errorf("admin: end sessions: %w", err)
		}
		if !ok {
			return problem.Detail(ErrNotFound, "no such user")
		}
	}
	return nil
}

// EndSessions ends every browser session of user (for an organization's
// admin, a user with a connection in by.Org; ErrNotFound otherwise) — connect pages and admin
// pages alike — and returns how many were live. The sessions end and the
// audit event (sessions.ended) is written in one transaction; every replica
// forgets them within a second of the commit (see package session).
//
// user is taken byte for byte, as every identity is (docs/identity.md):
// "alice " is another user than alice, and its sessions are the only ones
// ended. Callers pass what they were given, never a cleaned-up copy; a
// subject or issuer that mcpauth.CheckSubject/CheckIssuer refuses (no stored
// identity can have it) is ErrInvalid and ends nothing.
func (st *Store) EndSessions(ctx context.Context, user identity.User, by Actor) (int, error) {
	if err := st.MayEndSessions(ctx, user, by); err != nil {
		return 0, err
	}
	var n int
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var err error
		if n, err = session.EndUser(ctx, tx, user.Issuer, user.Subject, st.now()); err != nil {
			return err
		}
		return writeAudit(ctx, tx, Event{Kind: "sessions.ended", Issuer: user.Issuer, Subject: user.Subject,
			Detail: map[string]any{"sessions": n}}, by)
	})
	if err != nil {
		return 0, fmt.Errorf("admin: end sessions: %w", err)
	}
	st.logger.InfoContext(ctx, "browser sessions ended by an admin", slog.String("issuer", user.Issuer),
		slog.String("subject", user.Subject), slog.String("actor", by.Name), slog.Int("sessions", n))
	return n, nil
}

// endSessionsPage handles POST /admin/sessions/end (the button on a
// connection's page): only with the admin session's CSRF token, and only
// with confirm=yes (the confirmation page's form); without it, it shows
// that page and ends nothing.
func (s *Server) endSessionsPage(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return web.Refuse(http.StatusBadRequest, "bad_form", "The form could not be read.", err)
	}
	if err := s.sessions.CheckCSRF(principalOf(r.Context()).sess, r.PostForm.Get(session.CSRFField)); err != nil {
		return web.Refuse(http.StatusForbidden, "csrf_failed", "The form has expired. Open the page again and retry.", err)
	}
	// Byte for byte, as everywhere (EndSessions): trimming would make
	// "alice " alice.
	user := identity.User{Issuer: r.PostForm.Get("issuer"), Subject: r.PostForm.Get("subject")}
	back := s.href(r, listURL("/admin/connections", Filter{Subject: user.Subject, Issuer: user.Issuer}, nil, 0))
	if r.PostForm.Get("confirm") != "yes" {
		if err := s.store.MayEndSessions(r.Context(), user, actorOf(r)); err != nil {
			return err
		}
		return web.Render(w, r, http.StatusOK, templates.AdminEndSessionsConfirm(templates.AdminEndSessionsView{
			Nav: s.nav(r, "connections"), Subject: user.Subject, Issuer: user.Issuer,
			Action: s.href(r, "/admin/sessions/end"), BackURL: back}))
	}
	n, err := s.store.EndSessions(r.Context(), user, actorOf(r))
	if err != nil {
		return err
	}
	return web.Render(w, r, http.StatusOK, templates.AdminSessionsEnded(templates.AdminSessionsEndedView{
		Nav: s.nav(r, "connections"), Subject: user.Subject, Issuer: user.Issuer, Sessions: strconv.Itoa(n),
		BackURL: back}))
}

type endSessionsRequest struct {
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
}

// apiEndSessions handles POST /admin/api/sessions/end
// {"issuer": URL, "subject": SUB}.
func (s *Server) apiEndSessions(w http.ResponseWriter, r *http.Request) error {
	var req endSessionsRequest
	if err := web.DecodeJSON(w, r, &req, 8<<10); err != nil {
		return err
	}
	user := identity.User{Issuer: req.Issuer, Subject: req.Subject} // byte for byte (EndSessions)
	n, err := s.store.EndSessions(r.Context(), user, actorOf(r))
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"issuer": user.Issuer, "subject": user.Subject, "sessions_ended": n})
	return nil
}
