package connect

import (
	"log/slog"
	"net/http"
	"net/url"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/signin"
	"github.com/connectd/connectd/internal/web"
)

// defaultReturnTo is where a login without return_to ends.
const defaultReturnTo = "/session"

// loginPath returns the URL that starts a login at issuer and comes back to
// returnTo (a path that passes web.SafeReturnTo).
func loginPath(issuerID, returnTo string) string {
	q := url.Values{"issuer": {issuerID}}
	if returnTo != "" {
		q.Set("return_to", returnTo)
	}
	return "/login?" + q.Encode()
}

// switchLoginPath is loginPath for a user who signed out to continue as
// another account: the issuer is asked to let them choose
// (mcpauth.Issuer.SwitchPrompt), not to sign the same one back in.
func switchLoginPath(issuerID, returnTo string) string {
	return loginPath(issuerID, returnTo) + "&switch=1"
}

// newSignin is the end users' browser sign-in (package signin): at any
// login issuer, back to a plain path on this site (/session by default).
func (s *Server) newSignin() (*signin.Flow, error) {
	return signin.New(signin.Config{
		Login: s.login, Sessions: s.sessions, Home: defaultReturnTo,
		SafePath: web.SafeReturnTo, PathRule: "return_to must be a plain path on this site.",
		CSRFHelp: "The form has expired. Go back, reload the page and try again.",
		SignedIn: func(r *http.Request, res mcpauth.LoginResult) {
			s.logger.InfoContext(r.Context(), "login", slog.String("issuer", res.Issuer), slog.String("subject", res.Subject))
		},
		SignedOut: func(r *http.Request, sess session.Session) {
			s.logger.InfoContext(r.Context(), "logout", slog.String("issuer", sess.Issuer), slog.String("subject", sess.Subject))
		},
	})
}
