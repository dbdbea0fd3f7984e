package connect

import (
	"context"
	"net/http"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// accountPath is the user's account page: what they connected, which MCP
// servers may use each account with what, and the actions that take that
// back (DESIGN: the user is in control of every grant).
const accountPath = "/account"

// accountForm is the start of the account actions: a signed-in session,
// the form's CSRF token, a well-formed provider and connection id. Without
// a session the browser goes back to the page, which signs in again.
func (s *Server) accountForm(w http.ResponseWriter, r *http.Request) (identity.User, string, string, bool, error) {
	sess, err := s.sessions.Load(w, r)
	if err != nil {
		http.Redirect(w, r, accountPath, http.StatusSeeOther)
		return identity.User{}, "", "", false, nil
	}
	if err := r.ParseForm(); err != nil {
		return identity.User{}, "", "", false, web.Refuse(http.StatusBadRequest, "bad_form", "The form could not be read.", nil)
	}
	if err := s.sessions.CheckCSRF(sess, r.PostForm.Get(session.CSRFField)); err != nil {
		return identity.User{}, "", "", false, &web.Error{Status: http.StatusForbidden, Code: "csrf_failed", Err: err,
			Description: "The form has expired. Open your account page again and retry."}
	}
	p := r.PostForm.Get("provider")
	if !names.ValidProvider(p) {
		return identity.User{}, "", "", false, web.Refuse(http.StatusBadRequest, "bad_form", "The form names no account.", nil)
	}
	id := r.PostForm.Get("connection")
	if !vault.ValidID(id) {
		return identity.User{}, "", "", false, web.Refuse(http.StatusBadRequest, "bad_form", "The form names no account.", nil)
	}
	return identity.User{Issuer: sess.Issuer, Subject: sess.Subject}, p, id, true, nil
}

// whenIn formats a time for the end-user pages in ctx's language
// (templates.DateTime, in UTC: "2 Jan 2006, 15:04 UTC" in English).
func whenIn(ctx context.Context, t time.Time) string { return templates.DateTime(ctx, t.UTC()) }
