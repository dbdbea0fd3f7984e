package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// Cookie names and paths of admin sign-in. The admin session lives in its own
// cookie, so an end user's session never counts as an admin's, and signing
// out of one leaves the other alone.
const (
	SessionCookie = "__Host-connectd_admin"
	BindingCookie = "__Host-connectd_admin_binding"
	LoginPath     = "/admin/login"
	// CallbackPath is the redirect URI to register at the admin issuer:
	// <public URL>/admin/login/callback.
	CallbackPath = "/admin/login/callback"
	homePath     = "/admin/connections"
)

// Policy says who is an admin: a user of the admin issuer who is in Subjects
// (when set) and carries Claim = ClaimValue in their ID token (when set). At
// least one of the two must be set; when both are, both must hold.
type Policy struct {
	Issuer     string   // id or URL of a login issuer
	Subjects   []string // allow-listed subjects at that issuer
	Claim      string   // an ID token claim, dotted for nested objects (realm_access.roles)
	ClaimValue string   // the value it must hold (or contain, when it is a list)
}

func (p Policy) validate() error {
	switch {
	case p.Issuer == "":
		return errors.New("admin: Policy.Issuer is required")
	case len(p.Subjects) == 0 && p.Claim == "":
		return errors.New("admin: Policy needs Subjects or Claim, or everyone at the issuer would be an admin")
	case p.Claim != "" && p.ClaimValue == "":
		return errors.New("admin: Policy.Claim needs a ClaimValue")
	}
	return nil
}

// admits decides at sign-in: the issuer, the subject and the claim.
func (p Policy) admits(issuerURL string, res mcpauth.LoginResult) bool {
	if res.Issuer != issuerURL || res.Subject == "" {
		return false
	}
	if len(p.Subjects) > 0 && !slices.Contains(p.Subjects, res.Subject) {
		return false
	}
	if p.Claim != "" && !claimHolds(res.Claims, p.Claim, p.ClaimValue) {
		return false
	}
	return len(p.Subjects) > 0 || p.Claim != ""
}

// stillAdmits re-checks a live admin session on every request against what
// can be re-checked without the ID token: the issuer and the subject list.
// (The claim is checked at sign-in; the admin session's lifetime bounds how
// long a removed claim keeps working.)
func (p Policy) stillAdmits(issuerURL string, sess session.Session) bool {
	return sess.Issuer == issuerURL && (len(p.Subjects) == 0 || slices.Contains(p.Subjects, sess.Subject))
}

// claimHolds reports whether the claim at the dotted path equals want, or is a
// list containing it. Strings compare exactly; booleans and numbers by their
// JSON text.
func claimHolds(claims map[string]any, path, want string) bool {
	var v any = claims
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[part]; !ok {
			return false
		}
	}
	match := func(x any) bool {
		switch x := x.(type) {
		case string:
			return x == want
		case bool:
			return strconv.FormatBool(x) == want
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64) == want
		}
		return false
	}
	if list, ok := v.([]any); ok {
		return slices.ContainsFunc(list, match)
	}
	return match(v)
}

// principal is the authenticated admin of a request.
type principal struct {
	actor string
	sess  session.Session // admin session (pages); zero for API keys
}

type principalKey struct{}

func principalOf(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// actorOf is the Actor the audit trail records for r.
func actorOf(r *http.Request) Actor {
	return Actor{Name: principalOf(r.Context()).actor, RequestID: web.RequestID(r.Context()), IP: clientIP(r)}
}

// clientIP is the client's address as web.RequestContext resolved it
// (trusted proxies' X-Forwarded-For believed, nobody else's).
func clientIP(r *http.Request) string { return web.ClientAddr(r) }

// requireSession guards a page: only a live admin session passes; anyone else
// gets 403 and a way to sign in as an admin.
func (s *Server) requireSession(h web.PageFunc) web.PageFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.login == nil {
			return s.refusePage(w, r, "", "Admin sign-in is not configured on this connectd (CONNECTD_ADMIN_ISSUER).")
		}
		sess, err := s.sessions.Load(w, r)
		if err != nil || !s.policy.stillAdmits(s.issuerURL, sess) {
			return s.refusePage(w, r, loginURL(r), "This page is for connectd administrators. Sign in with an administrator account.")
		}
		ctx := context.WithValue(r.Context(), principalKey{}, principal{actor: "admin:" + sess.Subject, sess: sess})
		return h(w, r.WithContext(ctx))
	}
}

func (s *Server) refusePage(w http.ResponseWriter, r *http.Request, login, msg string) error {
	s.logger.InfoContext(r.Context(), "request refused", slog.String("code", "admin_required"),
		slog.Int("status", http.StatusForbidden))
	return render(w, r, http.StatusForbidden, templates.AdminSignIn(templates.AdminSignInView{LoginURL: login, Message: msg}))
}

// loginURL starts an admin sign-in that comes back to the page asked for.
func loginURL(r *http.Request) string {
	target := homePath
	if r.Method == http.MethodGet && safeAdminPath(r.URL.Path) {
		target = r.URL.Path
	}
	return LoginPath + "?" + url.Values{"return_to": {target}}.Encode()
}

var errAdminKey = &web.Error{Status: http.StatusForbidden, Code: "admin_required",
	Description: "an admin API key is required (Authorization: Bearer cka_…); create one with `connectd admin keys create`"}

// requireKey guards an API route: only an active admin API key passes.
// Cookies are not looked at, so the API needs no CSRF defence.
func (s *Server) requireKey(h web.APIFunc) web.APIFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		scheme, secret, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return errAdminKey
		}
		k, err := s.keys.Authenticate(r.Context(), strings.TrimSpace(secret))
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				return err
			}
			e := *errAdminKey
			e.Err = err
			return &e
		}
		ctx := context.WithValue(r.Context(), principalKey{}, principal{actor: "admin_key:" + k.ID})
		return h(w, r.WithContext(ctx))
	}
}

// adminPath: the admin pages a sign-in may return to — plain paths under
// /admin made of ids and words, nothing a browser could read as another site.
var adminPath = regexp.MustCompile(`^/admin(/[A-Za-z0-9_-]+)*$`)

func safeAdminPath(p string) bool {
	return len(p) <= 256 && adminPath.MatchString(p) && !strings.HasPrefix(p, "/admin/api") &&
		!strings.HasPrefix(p, "/admin/log")
}

func page(status int, code, desc string, err error) error {
	return &web.Error{Status: status, Code: code, Description: desc, Err: err}
}

// startLogin handles GET /admin/login[?return_to=/admin/...]: a fresh OIDC
// login at the admin issuer, bound to this browser.
func (s *Server) startLogin(w http.ResponseWriter, r *http.Request) error {
	if s.login == nil {
		return page(http.StatusForbidden, "admin_login_disabled", "Admin sign-in is not configured on this connectd.", nil)
	}
	returnTo := r.URL.Query().Get("return_to")
	if returnTo == "" {
		returnTo = homePath
	}
	if !safeAdminPath(returnTo) {
		return page(http.StatusBadRequest, "invalid_return_to", "return_to must be an admin page.", nil)
	}
	binding, err := s.sessions.Binding(w, r)
	if err != nil {
		return err
	}
	target, err := s.login.Start(r.Context(), s.issuerURL, returnTo, binding)
	if err != nil {
		return loginError(err)
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target, http.StatusFound)
	return nil
}

// finishLogin handles GET /admin/login/callback: it completes the login and
// starts an admin session only for an identity the Policy admits.
func (s *Server) finishLogin(w http.ResponseWriter, r *http.Request) error {
	if s.login == nil {
		return page(http.StatusForbidden, "admin_login_disabled", "Admin sign-in is not configured on this connectd.", nil)
	}
	cb, err := mcpauth.ParseRedirect(r.URL.Query())
	if err != nil {
		// Missing, repeated or malformed: refused before the database is asked.
		return loginError(fmt.Errorf("%w: %w", mcpauth.ErrLoginState, err))
	}
	cb.Binding, _ = s.sessions.ReadBinding(r) // nil: Finish refuses with ErrStateMismatch
	res, err := s.login.Finish(r.Context(), cb)
	if err != nil {
		return loginError(err)
	}
	by := Actor{Name: "admin:" + res.Subject, RequestID: web.RequestID(r.Context()), IP: clientIP(r)}
	if !s.policy.admits(s.issuerURL, res) {
		s.sessions.Clear(w)
		if err := s.store.Audit(r.Context(), Event{Kind: "security.admin_login_refused", Issuer: res.Issuer,
			Subject: res.Subject}, Actor{Name: "user", RequestID: by.RequestID, IP: by.IP}); err != nil {
			s.logger.ErrorContext(r.Context(), "audit event not written", slog.Any("error", err))
		}
		s.logger.WarnContext(r.Context(), "admin sign-in refused", slog.String("issuer", res.Issuer),
			slog.String("subject", res.Subject))
		return page(http.StatusForbidden, "not_an_admin",
			"This account is not a connectd administrator. Nothing was changed.", nil)
	}
	if _, err := s.sessions.Start(r.Context(), w, res.Issuer, res.Subject); err != nil {
		return err
	}
	if err := s.store.Audit(r.Context(), Event{Kind: "admin.login", Detail: map[string]any{"issuer": res.Issuer}}, by); err != nil {
		s.logger.ErrorContext(r.Context(), "audit event not written", slog.Any("error", err))
	}
	s.logger.InfoContext(r.Context(), "admin signed in", slog.String("subject", res.Subject))
	target := res.ReturnTo
	if !safeAdminPath(target) { // checked at /admin/login too; stored values are re-checked
		target = homePath
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target, http.StatusSeeOther)
	return nil
}

// logout handles POST /admin/logout: with a live admin session the form's
// CSRF token must match it; then the admin session ends on the server and its
// cookie is cleared.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) error {
	if s.sessions == nil {
		return page(http.StatusForbidden, "admin_login_disabled", "Admin sign-in is not configured on this connectd.", nil)
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		return page(http.StatusBadRequest, "bad_form", "The form could not be read.", err)
	}
	sess, err := s.sessions.Get(r)
	if errors.Is(err, session.ErrNoSession) {
		// Nothing live to end: clear whatever cookie there is.
		s.sessions.Clear(w)
		return render(w, r, http.StatusOK, templates.SignedOutPage())
	}
	if err != nil {
		return err // the database cannot say: the session is not ended, so do not pretend
	}
	if err := s.sessions.CheckCSRF(sess, r.PostForm.Get(session.CSRFField)); err != nil {
		return page(http.StatusForbidden, "csrf_failed", "The form has expired. Reload the page and try again.", err)
	}
	// Ended on the server: a copy of the admin cookie stops working too.
	if err := s.sessions.End(r.Context(), w, sess); err != nil {
		return err
	}
	if err := s.store.Audit(r.Context(), Event{Kind: "admin.logout"}, Actor{Name: "admin:" + sess.Subject,
		RequestID: web.RequestID(r.Context()), IP: clientIP(r)}); err != nil {
		s.logger.ErrorContext(r.Context(), "audit event not written", slog.Any("error", err))
	}
	return render(w, r, http.StatusOK, templates.SignedOutPage())
}

// loginError maps a sign-in failure onto the page the browser sees.
func loginError(err error) error {
	switch {
	case errors.Is(err, mcpauth.ErrUnknownIssuer):
		return page(http.StatusBadRequest, "unknown_issuer", "There is no sign-in at that issuer.", err)
	case errors.Is(err, mcpauth.ErrLoginState):
		return page(http.StatusBadRequest, "invalid_state", "This sign-in link was already used or has expired. Please start again.", err)
	case errors.Is(err, mcpauth.ErrStateMismatch):
		return page(http.StatusBadRequest, "state_mismatch", "This sign-in was started in another browser. Please start again here.", err)
	case errors.Is(err, mcpauth.ErrIssuerMismatch):
		return page(http.StatusBadRequest, "issuer_mismatch", "The sign-in answer came from an unexpected issuer.", err)
	case errors.Is(err, mcpauth.ErrLoginDenied):
		return page(http.StatusForbidden, "login_denied", "Sign-in was cancelled or refused.", err)
	case errors.Is(err, mcpauth.ErrLoginFailed):
		return page(http.StatusBadRequest, "login_failed", "The issuer did not complete the sign-in. Please start again.", err)
	case errors.Is(err, mcpauth.ErrIssuerUnavailable):
		return page(http.StatusServiceUnavailable, "issuer_unavailable", "The sign-in service cannot be reached. Please try again later.", err)
	case errors.Is(err, mcpauth.ErrInvalidToken):
		return page(http.StatusBadRequest, "invalid_id_token", "The issuer's answer could not be verified. Please start again.", err)
	default:
		return fmt.Errorf("admin: sign-in: %w", err)
	}
}
