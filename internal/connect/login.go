package connect

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// defaultReturnTo is where a login without return_to ends.
const defaultReturnTo = "/session"

// loginPath returns the URL that starts a login at issuer and comes back to
// returnTo (a path that passes safeReturnTo).
func loginPath(issuerID, returnTo string) string {
	q := url.Values{"issuer": {issuerID}}
	if returnTo != "" {
		q.Set("return_to", returnTo)
	}
	return "/login?" + q.Encode()
}

// startLogin handles GET /login?issuer=ID-or-URL&return_to=/path: it binds a
// new login state to this browser and redirects to the issuer.
func (s *Server) startLogin(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	returnTo := q.Get("return_to")
	if returnTo == "" {
		returnTo = defaultReturnTo
	}
	if !safeReturnTo(returnTo) {
		return web.Errorf(http.StatusBadRequest, "invalid_return_to", "return_to must be a plain path on this site.")
	}
	issuer := q.Get("issuer")
	if issuer == "" {
		if is := s.login.Issuers(); len(is) == 1 {
			issuer = is[0].ID
		}
	}
	binding, err := s.sessions.Binding(w, r)
	if err != nil {
		return err
	}
	target, err := s.login.Start(r.Context(), issuer, returnTo, binding)
	if err != nil {
		return loginError(err)
	}
	noStore(w)
	http.Redirect(w, r, target, http.StatusFound)
	return nil
}

// finishLogin handles GET /login/callback: it completes the login, starts a
// session with a new id, and redirects to the login's return_to.
func (s *Server) finishLogin(w http.ResponseWriter, r *http.Request) error {
	rp, perr := parseRedirect(r.URL.Query())
	if perr != nil {
		// Missing, repeated or malformed: refused before the database is asked.
		return loginError(fmt.Errorf("%w: %w", mcpauth.ErrLoginState, perr))
	}
	binding, _ := s.sessions.ReadBinding(r) // nil: Finish refuses with ErrStateMismatch
	res, err := s.login.Finish(r.Context(), mcpauth.Callback{
		State:   rp.State,
		Code:    rp.Code,
		Iss:     rp.Iss,
		Error:   rp.Error,
		Binding: binding,
	})
	if err != nil {
		return loginError(err)
	}
	if _, err := s.sessions.Start(r.Context(), w, res.Issuer, res.Subject); err != nil {
		return err
	}
	s.logger.InfoContext(r.Context(), "login", slog.String("issuer", res.Issuer), slog.String("subject", res.Subject))
	target := res.ReturnTo
	if !safeReturnTo(target) { // checked at /login too; stored values are re-checked
		target = defaultReturnTo
	}
	noStore(w)
	http.Redirect(w, r, target, http.StatusSeeOther)
	return nil
}

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
	return render(w, r, templates.SessionPage(v))
}

// logout handles POST /logout: with a valid session, the form's CSRF token
// must match it; then the session ends on the server (so a copy of the
// cookie stops working on every replica) and its cookie is cleared.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		return web.Errorf(http.StatusBadRequest, "bad_form", "The form could not be read.")
	}
	sess, err := s.sessions.Get(r)
	if errors.Is(err, session.ErrNoSession) {
		// Nothing live to end: clear whatever cookie there is.
		s.sessions.Clear(w)
		return render(w, r, templates.SignedOutPage())
	}
	if err != nil {
		return err // the database cannot say: the session is not ended, so do not pretend
	}
	if err := s.sessions.CheckCSRF(sess, r.PostForm.Get(session.CSRFField)); err != nil {
		return &web.Error{Status: http.StatusForbidden, Code: "csrf_failed",
			Description: "The form has expired. Go back, reload the page and try again.", Err: err}
	}
	if err := s.sessions.End(r.Context(), w, sess); err != nil {
		return err
	}
	s.logger.InfoContext(r.Context(), "logout", slog.String("issuer", sess.Issuer), slog.String("subject", sess.Subject))
	return render(w, r, templates.SignedOutPage())
}

// loginError maps a login failure onto the page the browser sees. None of
// them reveals more than what went wrong in general terms.
func loginError(err error) error {
	page := func(status int, code, desc string) error {
		return &web.Error{Status: status, Code: code, Description: desc, Err: err}
	}
	switch {
	case errors.Is(err, mcpauth.ErrUnknownIssuer):
		return page(http.StatusBadRequest, "unknown_issuer", "There is no sign-in at that issuer.")
	case errors.Is(err, mcpauth.ErrLoginState):
		return page(http.StatusBadRequest, "invalid_state", "This sign-in link was already used or has expired. Please start again.")
	case errors.Is(err, mcpauth.ErrStateMismatch):
		return page(http.StatusBadRequest, "state_mismatch", "This sign-in was started in another browser. Please start again here.")
	case errors.Is(err, mcpauth.ErrIssuerMismatch):
		return page(http.StatusBadRequest, "issuer_mismatch", "The sign-in answer came from an unexpected issuer.")
	case errors.Is(err, mcpauth.ErrLoginDenied):
		return page(http.StatusForbidden, "login_denied", "Sign-in was cancelled or refused.")
	case errors.Is(err, mcpauth.ErrLoginFailed):
		return page(http.StatusBadRequest, "login_failed", "The issuer did not complete the sign-in. Please start again.")
	case errors.Is(err, mcpauth.ErrIssuerUnavailable):
		return page(http.StatusServiceUnavailable, "issuer_unavailable", "The sign-in service cannot be reached. Please try again later.")
	case errors.Is(err, mcpauth.ErrInvalidToken):
		return page(http.StatusBadRequest, "invalid_id_token", "The issuer's answer could not be verified. Please start again.")
	default:
		return err
	}
}
