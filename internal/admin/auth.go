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

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/refusal"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/signin"
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

// principal is the authenticated admin of a request: who (actor), and what
// they may act on — every organization (operator), or their memberships,
// of which the request acts for one (org, with its role).
type principal struct {
	actor    string
	sess     session.Session // admin session (pages); zero for API keys
	operator bool            // the deployment's operators: the Policy's admins, keys without an organization
	members  []Membership    // a session's memberships, by organization; a key's one
	key      bool            // an admin API key (acts for its own organization only)
	// org is the acting organization: the one the request names (?org=) or
	// the admin's first; for an operator the organization filtered on, ""
	// for every one. role is the role there ("" for an operator).
	org  string
	role Role
}

type principalKey struct{}

func principalOf(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// scope is the organization a request's reads are limited to ("": every
// organization, for an operator who did not filter).
func scopeOf(r *http.Request) string { return principalOf(r.Context()).org }

// actorOf is the Actor the audit trail records for r, acting for its
// organization (an operator acts for every one).
func actorOf(r *http.Request) Actor {
	p := principalOf(r.Context())
	a := Actor{Name: p.actor, RequestID: web.RequestID(r.Context()), IP: clientIP(r)}
	if !p.operator {
		a.Org, a.Role = p.org, p.role
	}
	return a
}

// clientIP is the client's address as web.RequestContext resolved it
// (trusted proxies' X-Forwarded-For believed, nobody else's).
func clientIP(r *http.Request) string { return web.ClientAddr(r) }

// OrgParam is the query parameter that picks the acting organization of an
// admin page or API request (docs/admin.md).
const OrgParam = "org"

// act picks the organization p acts for in r (?org=) and checks p's role
// there against least. An organization p does not act for is not found
// (the same answer as one that does not exist); a role below least is
// refusal.ErrRoleInsufficient, whatever the request names.
func act(r *http.Request, p principal, least Role) (principal, error) {
	want := r.URL.Query().Get(OrgParam)
	switch {
	case p.operator:
		if want != "" && !names.ValidOrg(want) {
			return p, errNoOrg(want)
		}
		p.org = want
		return p, nil
	case want == "" && len(p.members) > 0:
		p.org, p.role = p.members[0].Org, p.members[0].Role
	default:
		i := slices.IndexFunc(p.members, func(m Membership) bool { return m.Org == want })
		if i < 0 {
			return p, errNoOrg(want)
		}
		p.org, p.role = p.members[i].Org, p.members[i].Role
	}
	if !p.role.Allows(least) {
		return p, fmt.Errorf("%s is %s in %s, %s needs %s: %w", p.actor, p.role, p.org, r.Pattern, least,
			refusal.ErrRoleInsufficient)
	}
	return p, nil
}

// sessionPrincipal is who a live admin session is now, re-checked on every
// request: an operator while the Policy still admits it (and its latest
// sign-in was the Policy's: a claim is only in the ID token), and the
// admin of its organizations as org_admins says now — so a removed admin
// is refused on their next request. Nil: neither any more.
func (s *Server) sessionPrincipal(ctx context.Context, sess session.Session) (*principal, error) {
	members, signedInAsOperator, err := s.members(ctx, sess.Issuer, sess.Subject)
	if err != nil {
		return nil, err
	}
	operator := s.policy.stillAdmits(s.issuerURL, sess) && (signedInAsOperator == nil || *signedInAsOperator)
	if !operator && len(members) == 0 {
		return nil, nil
	}
	return &principal{actor: "admin:" + sess.Subject, sess: sess, operator: operator, members: members}, nil
}

// members is what a sign-in at issuer speaks for: the memberships of
// (issuer, subject), save those an organization's own issuer cannot vouch
// for. An organization's issuer (its SSO, package org) is run by that
// organization, which can mint any subject there: it speaks for that
// organization's admins only, so a role another organization granted to an
// identity at it gives nothing (Grant refuses to make one, too). The
// deployment's issuers speak for every organization that named them.
func (s *Server) members(ctx context.Context, issuer, subject string) ([]Membership, *bool, error) {
	members, operator, err := s.store.memberships(ctx, issuer, subject)
	if err != nil || len(members) == 0 {
		return members, operator, err
	}
	owner, err := s.store.issuerOrg(ctx, issuer)
	if err != nil {
		return nil, nil, err // the issuer's owner could not be read: 503, not a refusal
	}
	if owner != "" {
		members = slices.DeleteFunc(members, func(m Membership) bool { return m.Org != owner })
	}
	return members, operator, nil
}

// requireSession guards a page: only a live admin session passes, whose
// role in the acting organization is at least least. A browser without
// one that asks for a page (GET) is sent to the admin sign-in, which
// brings it back here; anyone else (a form post, a signed-in admin the policy
// no longer admits, a request with credentials of another kind) gets 403 and
// a way to sign in as an admin. An error of the page itself is shown inside
// the admin layout, with its navigation.
func (s *Server) requireSession(least Role, h web.PageFunc) web.PageFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.login == nil {
			return s.refusePage(w, r, templates.AdminSignInView{
				Message: "Admin sign-in is not configured on this connectd (CONNECTD_ADMIN_ISSUER)."})
		}
		sess, err := s.sessions.Load(w, r)
		var p *principal
		if err == nil {
			if p, err = s.sessionPrincipal(r.Context(), sess); err != nil {
				return err // the database could not say: 503, not a refusal
			}
		}
		switch {
		case err != nil && !errors.Is(err, session.ErrNoSession):
			return err // the database could not say: 503, not a refusal
		case p != nil:
		case err != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("Authorization") == "":
			s.logger.InfoContext(r.Context(), "admin sign-in needed", slog.String("path", r.URL.Path))
			http.Redirect(w, r, loginURL(r), http.StatusSeeOther)
			return nil
		default:
			v := templates.AdminSignInView{LoginURL: loginURL(r),
				Message: "This page is for connectd administrators. Sign in with an administrator account."}
			if err == nil {
				v.SignedInAs = sess.Subject // signed in, but not an admin: say who, and lead to their own page
			}
			return s.refusePage(w, r, v)
		}
		acting, err := act(r, *p, least)
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, acting))
		if err == nil {
			err = h(w, r)
		}
		if err != nil {
			return s.inLayout(r, err)
		}
		return nil
	}
}

// errorTitles name an admin error page by its status.
var errorTitles = map[int]string{
	http.StatusBadRequest:          "This request could not be processed",
	http.StatusForbidden:           "Not allowed",
	http.StatusNotFound:            "Not found",
	http.StatusConflict:            "Conflict",
	http.StatusTooManyRequests:     "Too many requests",
	http.StatusInternalServerError: "Something went wrong",
	http.StatusServiceUnavailable:  "Temporarily unavailable",
}

// inLayout gives an admin page's error the admin layout: the same status,
// code, description and log line (web.Error.Page), with the admin's
// navigation around it. A database outage keeps the shared answer, whose
// log line is rate-limited by identity.
func (s *Server) inLayout(r *http.Request, err error) error {
	e := web.AsError(err)
	if e.Status == 499 || e.Page != nil || db.Unavailable(err) {
		return err
	}
	c := *e
	if we, ok := err.(*web.Error); ok {
		c.Err = we.Err
	} else {
		c.Err = err
	}
	title := errorTitles[c.Status]
	if title == "" {
		title = http.StatusText(c.Status)
	}
	c.Page = templates.AdminError(templates.AdminErrorView{Nav: s.nav(r, navSection(r.URL.Path)), Status: c.Status,
		Title: title, Message: c.Description, RequestID: web.RequestID(r.Context())})
	return &c
}

// navSection is the admin navigation's entry a path belongs to.
func navSection(path string) string {
	switch {
	case strings.HasPrefix(path, "/admin/clients"), strings.HasPrefix(path, "/admin/webhooks"),
		strings.HasPrefix(path, "/admin/deliveries"):
		return "clients"
	case strings.HasPrefix(path, "/admin/events"):
		return "events"
	case strings.HasPrefix(path, "/admin/apps"):
		return "apps"
	case strings.HasPrefix(path, "/admin/admins"):
		return "admins"
	}
	return "connections"
}

// refusePage answers 403 with the sign-in page v (its way out: an
// administrator's sign-in, and the user's own account page).
func (s *Server) refusePage(w http.ResponseWriter, r *http.Request, v templates.AdminSignInView) error {
	s.logger.InfoContext(r.Context(), "request refused", slog.String("code", "admin_required"),
		slog.Int("status", http.StatusForbidden))
	if v.LoginURL != "" && s.orgSignIn != nil {
		v.OrgLoginPath, v.ReturnTo = LoginPath, returnTarget(r)
	}
	return web.Render(w, r, http.StatusForbidden, templates.AdminSignIn(v))
}

// loginURL starts an admin sign-in that comes back to the page asked for.
func loginURL(r *http.Request) string {
	return LoginPath + "?" + url.Values{"return_to": {returnTarget(r)}}.Encode()
}

// returnTarget is the admin page a sign-in started from r comes back to.
func returnTarget(r *http.Request) string {
	if r.Method == http.MethodGet && safeAdminPath(r.URL.Path) {
		return r.URL.Path
	}
	return homePath
}

var errAdminKey = &web.Error{Status: http.StatusForbidden, Code: "admin_required",
	Description: "an admin API key is required (Authorization: Bearer cka_…); create one with `connectd admin keys create`"}

// requireKey guards an API route: only an active admin API key passes. A
// key of an organization acts for it alone, with its role, which must be at
// least least. Cookies are not looked at, so the API needs no CSRF defence.
func (s *Server) requireKey(least Role, h web.APIFunc) web.APIFunc {
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
		p := principal{actor: "admin_key:" + k.ID, key: true, operator: k.Org == ""}
		if k.Org != "" {
			p.members = []Membership{{Org: k.Org, Role: k.Role}}
		}
		p, err = act(r, p, least)
		if err != nil {
			return err
		}
		return h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

// adminPath: the admin pages a sign-in may return to — plain paths under
// /admin made of ids and words, nothing a browser could read as another site.
var adminPath = regexp.MustCompile(`^/admin(/[A-Za-z0-9_-]+)*$`)

func safeAdminPath(p string) bool {
	return len(p) <= 256 && adminPath.MatchString(p) && !strings.HasPrefix(p, "/admin/api") &&
		!strings.HasPrefix(p, "/admin/log")
}

// errLoginDisabled answers the sign-in routes when no admin issuer is
// configured (and sign-out too without an admin session store).
var errLoginDisabled = web.Refuse(http.StatusForbidden, "admin_login_disabled",
	"Admin sign-in is not configured on this connectd.", nil)

// newSignin is the admins' browser sign-in (package signin), serving
// GET /admin/login[?return_to=/admin/...][&issuer=…], GET
// /admin/login/callback and POST /admin/logout: at the admin issuer, or at
// another login issuer the start URL names (an organization's admin may
// sign in at any login issuer connectd knows), for an identity the Policy
// or a membership admits, back to an admin page. It has its own session
// store, so an end user's session never counts here, and signing out of one
// leaves the other.
func (s *Server) newSignin() (*signin.Flow, error) {
	return signin.New(signin.Config{
		Login: s.login, Sessions: s.sessions, Disabled: errLoginDisabled, Home: homePath,
		SafePath: safeAdminPath, PathRule: "return_to must be an admin page.",
		CSRFHelp: "The form has expired. Reload the page and try again.",
		Admit:    s.admit,
		SignedIn: func(r *http.Request, res mcpauth.LoginResult) {
			by := "admin:" + res.Subject
			if s.policy.admits(s.issuerURL, res) {
				s.auditLogged(r, Event{Kind: "admin.login", Detail: map[string]any{"issuer": res.Issuer}}, Actor{Name: by})
			}
			// Each organization's trail shows its admins' sign-ins.
			members, _, err := s.members(r.Context(), res.Issuer, res.Subject)
			if err != nil {
				s.logger.ErrorContext(r.Context(), "audit event not written", slog.Any("error", err))
			}
			for _, m := range members {
				s.auditLogged(r, Event{Kind: "admin.login", Detail: map[string]any{"issuer": res.Issuer}},
					Actor{Name: by, Org: m.Org, Role: m.Role})
			}
			s.logger.InfoContext(r.Context(), "admin signed in", slog.String("subject", res.Subject),
				slog.Int("memberships", len(members)))
		},
		SignedOut: func(r *http.Request, sess session.Session) {
			s.auditLogged(r, Event{Kind: "admin.logout"}, Actor{Name: "admin:" + sess.Subject, noRole: true})
		},
	})
}

// startSignin is the sign-in's start: at the admin issuer unless the URL
// names another login issuer (?issuer=) or an organization (?org=, its own
// sign-in: the organization's login issuer when it has one). An
// organization without one, or that does not exist, signs in at the admin
// issuer: the answer says nothing of which organizations exist.
func (s *Server) startSignin(w http.ResponseWriter, r *http.Request) error {
	if s.login != nil {
		if q := r.URL.Query(); q.Get("issuer") == "" {
			issuer := s.policy.Issuer
			if org := q.Get(OrgParam); org != "" && s.orgSignIn != nil {
				if !names.ValidOrg(org) {
					return errNoOrgName
				}
				id, err := s.orgSignIn(r.Context(), org)
				if err != nil {
					return err // the organization's issuers could not be read: 503
				}
				if id != "" {
					issuer = id
				}
			}
			q.Del(OrgParam)
			q.Set("issuer", issuer)
			r = r.Clone(r.Context())
			r.URL.RawQuery = q.Encode()
		}
	}
	return s.signin.Start(w, r)
}

// errNoOrgName answers a sign-in naming something that cannot be an
// organization id.
var errNoOrgName = web.Refuse(http.StatusBadRequest, "bad_org",
	"That is not an organization id: lower-case letters, digits and '-' (ask your administrator for it).", nil)

// admit lets a finished sign-in start an admin session only for an identity
// the Policy admits (an operator) or that has a role in an organization (an
// assignment, or a claim mapping its ID token meets);
// which one it was is recorded for the per-request re-check. A refusal is
// audited.
func (s *Server) admit(r *http.Request, res mcpauth.LoginResult) error {
	operator := s.policy.admits(s.issuerURL, res)
	// Recorded first (a refused sign-in too: it clears what an earlier one
	// matched), so the memberships below include this ID token's mappings.
	if err := s.store.recordSignin(r.Context(), res.Issuer, res.Subject, operator, res.Claims); err != nil {
		return err
	}
	members, _, err := s.members(r.Context(), res.Issuer, res.Subject)
	if err != nil {
		return err
	}
	if operator || len(members) > 0 {
		return nil
	}
	s.auditLogged(r, Event{Kind: "security.admin_login_refused", Issuer: res.Issuer, Subject: res.Subject}, Actor{Name: "user", noRole: true})
	s.logger.WarnContext(r.Context(), "admin sign-in refused", slog.String("issuer", res.Issuer),
		slog.String("subject", res.Subject))
	refused := web.Refuse(http.StatusForbidden, "not_an_admin",
		"This account is not a connectd administrator. Nothing was changed.", nil)
	// The way out (issue 38 item 10): who is signed in, another account's
	// sign-in (the issuer asked to let the user choose), the user's own
	// account page.
	refused.Page = templates.AdminSignIn(templates.AdminSignInView{Message: refused.Description,
		LoginURL: LoginPath + "?" + url.Values{"return_to": {homePath}, "switch": {"1"}}.Encode(), SignedInAs: res.Subject})
	return refused
}

// auditLogged records ev on its own by actor; a failure is logged, as the
// sign-in it records has happened.
func (s *Server) auditLogged(r *http.Request, ev Event, by Actor) {
	by.RequestID, by.IP = web.RequestID(r.Context()), clientIP(r)
	if err := s.store.Audit(r.Context(), ev, by); err != nil {
		s.logger.ErrorContext(r.Context(), "audit event not written", slog.Any("error", err))
	}
}
