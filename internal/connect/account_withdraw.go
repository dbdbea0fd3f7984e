package connect

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// withdraw handles POST /account/withdraw with confirm=yes (the
// confirmation page's form): one MCP server loses the user's approval of
// one connection (it gets consent_required until the user allows it
// again); the connection and the other approvals stay. Without confirm=yes
// it only shows the confirmation page (issue 38 item 8: Remove access
// acted on one click).
func (s *Server) withdraw(w http.ResponseWriter, r *http.Request) error {
	u, p, id, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	client := r.PostForm.Get("client")
	if !names.ValidClientID(client) {
		return web.Refuse(http.StatusBadRequest, "bad_form", "The form names no application.", nil)
	}
	if r.PostForm.Get("confirm") != "yes" {
		return s.withdrawPage(w, r, p, id, client)
	}
	err = s.lifecycle.Withdraw(r.Context(), consent.Withdrawal{User: u, ClientID: client, Provider: p,
		ConnectionID: id, Actor: "user", RequestID: web.RequestID(r.Context()), IP: web.ClientAddr(r)}, "user")
	done := "withdrawn"
	switch {
	case errors.Is(err, consent.ErrNotGiven):
		done = "gone"
	case err != nil:
		return err
	default:
		s.logger.InfoContext(r.Context(), "approval withdrawn by the user", slog.String("provider", p),
			slog.String("client_id", client))
	}
	http.Redirect(w, r, accountPath+"?done="+done, http.StatusSeeOther)
	return nil
}

// withdrawPage renders the confirmation that client loses the user's
// connection id at provider p; a connection that is not the signed-in
// user's, or an application that no longer has it, sends the browser back
// to the account page with "gone".
func (s *Server) withdrawPage(w http.ResponseWriter, r *http.Request, p, id, client string) error {
	noStore(w)
	sess, err := s.sessions.Load(w, r)
	if err != nil {
		return err
	}
	v, err := s.accountView(r.Context(), sess)
	if err != nil {
		return err
	}
	for _, c := range v.Connections {
		if c.Provider != p || c.ID != id {
			continue
		}
		for _, sv := range c.Servers {
			if sv.ClientID == client {
				allowMarks(w, []templates.AccountConnection{c})
				return web.Render(w, r, http.StatusOK, templates.WithdrawConfirm(templates.WithdrawView{Connection: c,
					ClientID: client, ClientName: sv.Name, CSRF: v.CSRF}))
			}
		}
	}
	http.Redirect(w, r, accountPath+"?done=gone", http.StatusSeeOther)
	return nil
}
