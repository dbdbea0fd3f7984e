package connect

import (
	"errors"
	"net/http"

	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// switchPath is where a connect page's "Not you?" form posts.
func switchPath(id string) string { return "/c/" + id + "/switch" }

// switchAccount handles POST /c/{id}/switch, "Not you? Sign out and
// continue": the form's CSRF token must match the session, which then ends
// (on every replica), and a page leads back to the same link, which asks
// to sign in at the link's issuer — letting the user choose the account
// there (switchLoginPath: prompt=login, or select_account), since an
// identity provider that keeps its own session would sign the same one
// straight back in. A page with a link rather than a
// redirect: the sign-in is at another origin, and Chromium holds every
// redirect after a form to the page's form-action ('self'). It leads
// nowhere but that link, and it is all it does: nothing is decided about
// the request.
func (s *Server) switchAccount(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if !elicitation.ValidID(id) {
		return errLinkInvalid
	}
	e, err := s.elicitations.Get(r.Context(), id)
	if errors.Is(err, elicitation.ErrNotFound) {
		return errLinkInvalid
	}
	if err != nil {
		return err
	}
	sess, err := s.sessions.Get(r)
	switch {
	case errors.Is(err, session.ErrNoSession):
		s.sessions.Clear(w)
	case err != nil:
		return err
	default:
		if err := s.checkForm(w, r, sess); err != nil {
			return err
		}
		if err := s.sessions.End(r.Context(), w, sess); err != nil {
			return err
		}
	}
	return web.Render(w, r, http.StatusOK, templates.SwitchedOut(switchLoginPath(e.Issuer, "/c/"+id)))
}
