package connect

import (
	"context"
	"errors"
	"net/http"

	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/lifecycle"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// confirmDisconnect handles GET /account/disconnect?provider=&connection=:
// the confirmation step of Disconnect (a page; nothing changes until its
// form is posted), naming the account and every application that loses
// it. A connection that is not the signed-in user's (or no longer exists)
// sends the browser back to the account page with "gone".
func (s *Server) confirmDisconnect(w http.ResponseWriter, r *http.Request) error {
	noStore(w)
	sess, err := s.sessions.Load(w, r)
	if err != nil {
		http.Redirect(w, r, accountPath, http.StatusSeeOther)
		return nil
	}
	q := r.URL.Query()
	p, id := q.Get("provider"), q.Get("connection")
	if !names.ValidProvider(p) || !vault.ValidID(id) {
		return web.Refuse(http.StatusBadRequest, "bad_request", "The link names no account.", nil)
	}
	return s.disconnectPage(w, r, sess, p, id)
}

// disconnectPage renders the confirmation of disconnecting the user's
// connection id at provider p.
func (s *Server) disconnectPage(w http.ResponseWriter, r *http.Request, sess session.Session, p, id string) error {
	v, err := s.accountView(r.Context(), sess)
	if err != nil {
		return err
	}
	for _, c := range v.Connections {
		if c.Provider == p && c.ID == id {
			allowMarks(w, []templates.AccountConnection{c})
			return web.Render(w, r, http.StatusOK, templates.DisconnectConfirm(templates.DisconnectView{Connection: c, CSRF: v.CSRF}))
		}
	}
	http.Redirect(w, r, accountPath+"?done=gone", http.StatusSeeOther)
	return nil
}

// disconnect handles POST /account/disconnect with confirm=yes (the
// confirmation page's form): the connection is deleted with every approval
// of it, then revoked at the provider (RFC 7009) where it can be. Without
// confirm=yes it only shows the confirmation page: a form that skipped it
// disconnects nothing.
func (s *Server) disconnect(w http.ResponseWriter, r *http.Request) error {
	u, p, id, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		sess, err := s.sessions.Load(w, r)
		if err != nil {
			return err
		}
		return s.disconnectPage(w, r, sess, p, id)
	}
	d, _, err := s.deleteConnection(r, u, p, id, nil, lifecycle.Actor{Audit: "user", By: "user"})
	if errors.Is(err, vault.ErrNotConnected) {
		http.Redirect(w, r, accountPath+"?done=gone", http.StatusSeeOther)
		return nil
	}
	if err != nil {
		return err
	}
	done := "disconnected"
	if d.Revocation != vault.Revoked {
		done = "disconnected_here"
	}
	http.Redirect(w, r, accountPath+"?done="+done, http.StatusSeeOther)
	return nil
}

// deleteConnection ends the user's connection to provider through the one
// owner of a connection's end (package lifecycle: approvals withdrawn,
// audit rows and the clients' events in the deleting transaction, then the
// revocation at the provider, audited) and returns the clients that lost
// their approval. Unlinking (/v1) and disconnecting (the account page) both
// go through it, as an admin's revocation does.
//
// account, when not nil, is the provider account the caller decided on: a
// connection holding another's credential since is not deleted on that
// decision (lifecycle.ErrReplaced).
func (s *Server) deleteConnection(r *http.Request, u identity.User, p, id string, account []byte, by lifecycle.Actor) (*vault.Deletion, []string, error) {
	by.RequestID, by.IP = web.RequestID(r.Context()), web.ClientAddr(r)
	c, err := s.ownConnection(r.Context(), u, p, id)
	if err != nil {
		return nil, nil, err
	}
	ended, err := s.lifecycle.DeleteIn(context.WithoutCancel(r.Context()), c.Org, u, p, id, account, by)
	if err != nil {
		return nil, nil, err
	}
	return ended.Deletion, elicitation.NonNil(ended.Withdrawn), nil
}
