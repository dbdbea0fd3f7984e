package connect

import (
	"net/http"

	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// sessionPage handles GET /session: who is signed in, with a sign-out form, or
// where to sign in.
func (s *Server) sessionPage(w http.ResponseWriter, r *http.Request) error {
	var v templates.SessionView
	if sess, err := s.sessions.Load(w, r); err == nil {
		v = templates.SessionView{SignedIn: true, Subject: sess.Subject, Issuer: sess.Issuer,
			CSRF: s.sessions.CSRFToken(sess)}
	} else {
		for _, is := range s.login.Issuers() {
			v.Issuers = append(v.Issuers, templates.IssuerLink{ID: is.ID, URL: is.URL, LoginURL: loginPath(is.ID, "")})
		}
	}
	return web.Render(w, r, http.StatusOK, templates.SessionPage(v))
}
