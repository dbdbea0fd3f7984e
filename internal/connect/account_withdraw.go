package connect

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/web"
)

// withdraw handles POST /account/withdraw: one MCP server loses the user's
// approval of one connection (it gets consent_required until the user
// allows it again); the connection and the other approvals stay.
func (s *Server) withdraw(w http.ResponseWriter, r *http.Request) error {
	u, p, id, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	client := r.PostForm.Get("client")
	if !names.ValidClientID(client) {
		return web.Refuse(http.StatusBadRequest, "bad_form", "The form names no application.", nil)
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
