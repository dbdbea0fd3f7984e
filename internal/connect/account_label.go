package connect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
)

// relabel handles POST /account/label: the user's own name for one of their
// connections ("work"), shown to them and to the clients that may use it;
// an empty label removes it.
func (s *Server) relabel(w http.ResponseWriter, r *http.Request) error {
	u, p, id, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	label := strings.TrimSpace(r.PostForm.Get("label"))
	if !vault.ValidLabel(label) {
		return web.Refuse(http.StatusBadRequest, "bad_form",
			fmt.Sprintf("A label is at most %d characters of text.", vault.MaxLabel), nil)
	}
	done := "labelled"
	if err := s.labelIn(r.Context(), u, p, id, label); errors.Is(err, vault.ErrNotConnected) {
		done = "gone"
	} else if err != nil {
		return err
	}
	http.Redirect(w, r, accountPath+"?done="+done, http.StatusSeeOther)
	return nil
}

// labelIn labels the user's connection id in its organization.
func (s *Server) labelIn(ctx context.Context, u identity.User, p, id, label string) error {
	c, err := s.ownConnection(ctx, u, p, id)
	if err != nil {
		return err
	}
	return s.vault.In(c.Org).SetLabel(ctx, u, p, id, label)
}
