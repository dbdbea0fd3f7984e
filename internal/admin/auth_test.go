package admin_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/session"
)

func TestAdminSignInPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy admin.Policy
		admins []string // of alice and bob; alice's ID tokens carry groups=[staff, connectd-admins]
	}{
		{"subject allow-list", admin.Policy{Issuer: "idp0", Subjects: []string{"alice"}}, []string{"alice"}},
		{"claim", admin.Policy{Issuer: "idp0", Claim: "groups", ClaimValue: adminGroup}, []string{"alice"}},
		{"claim of another value", admin.Policy{Issuer: "idp0", Claim: "groups", ClaimValue: "root"}, nil},
		{"subjects and claim both required", admin.Policy{Issuer: "idp0", Subjects: []string{"alice", "bob"},
			Claim: "groups", ClaimValue: adminGroup}, []string{"alice"}},
		{"string claim", admin.Policy{Issuer: "idp0", Claim: "email", ClaimValue: "bob@example.test"}, []string{"bob"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{policy: &tt.policy})
			for _, user := range []string{"alice", "bob"} {
				b := e.browser()
				r := e.adminLogin(b, user)
				if !slices.Contains(tt.admins, user) {
					if r.status != http.StatusForbidden || e.code(r) != "not_an_admin" || r.setsAdminSession() {
						t.Fatalf("%s: got %d %q, want 403 not_an_admin and no admin cookie", user, r.status, e.code(r))
					}
					// A way out (issue 38 item 10): who is signed in, another
					// account's sign-in (choosing at the issuer), their own page.
					if !strings.Contains(r.body, "You are signed in as <strong>"+user+"</strong>") ||
						!strings.Contains(r.body, `href="/admin/login?return_to=%2Fadmin%2Fconnections&amp;switch=1"`) ||
						!strings.Contains(r.body, `href="/account"`) {
						t.Fatalf("%s: the refusal offers no way out:\n%s", user, r.body)
					}
					if p := b.get(e.srv.URL + "/admin/connections"); !toSignIn(p) {
						t.Fatalf("%s: /admin/connections after a refused sign-in: %d %s", user, p.status, p.location)
					}
					continue
				}
				if r.status != http.StatusSeeOther || r.location != e.srv.URL+"/admin/connections" {
					t.Fatalf("%s: sign-in: %d %s %s", user, r.status, r.location, r.body)
				}
				c := r.setCookie(admin.SessionCookie)
				for _, attr := range []string{"Path=/", "HttpOnly", "Secure", "SameSite=Lax"} {
					if !strings.Contains(c, attr) {
						t.Fatalf("admin cookie lacks %s: %s", attr, c)
					}
				}
				if strings.Contains(c, "Domain=") || r.setCookie(session.CookieName) != "" {
					t.Fatalf("admin sign-in set a Domain or an end-user session: %v", r.setCookies)
				}
				if p := b.get(e.srv.URL + "/admin/connections"); p.status != http.StatusOK || !strings.Contains(p.body, "Linked accounts") {
					t.Fatalf("%s: /admin/connections: %d", user, p.status)
				}
			}
			if got := e.auditCount("security.admin_login_refused"); got != 2-len(tt.admins) {
				t.Fatalf("refused sign-ins audited: %d", got)
			}
			if got := e.auditCount("admin.login"); got != len(tt.admins) {
				t.Fatalf("sign-ins audited: %d", got)
			}
		})
	}
}

// TestAdminSessionIsSeparate: an end user's session — even an admin's own —
// never opens the admin pages, an admin session is not an end-user session,
// and signing out of one leaves the other.
func TestAdminSessionIsSeparate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})

	user := e.browser()
	e.userLogin(user, "alice")
	if r := user.get(e.srv.URL + "/admin/connections"); !toSignIn(r) ||
		!strings.HasSuffix(r.location, "/admin/login?return_to=%2Fadmin%2Fconnections") {
		t.Fatalf("end-user session on an admin page: %d %s", r.status, r.location)
	}
	// The end-user cookie presented under the admin cookie's name does not
	// open (the name is part of the MAC), though both stores share keys.
	forged := e.browser()
	forged.Cookies[admin.SessionCookie] = user.Cookies[session.CookieName]
	if r := forged.get(e.srv.URL + "/admin/connections"); !toSignIn(r) {
		t.Fatalf("renamed end-user cookie: %d", r.status)
	}

	b := e.adminBrowser()
	if r := b.get(e.srv.URL + "/session"); !strings.Contains(r.body, "Not signed in") {
		t.Fatalf("an admin session counts as an end-user session: %s", r.body)
	}
	// Sign-out needs the admin session's CSRF token.
	page := b.get(e.srv.URL + "/admin/clients")
	if r := b.do(http.MethodPost, e.srv.URL+"/admin/logout", url.Values{"csrf_token": {"forged"}}); r.status != http.StatusForbidden ||
		e.code(r) != "csrf_failed" {
		t.Fatalf("sign-out without CSRF: %d %q", r.status, e.code(r))
	}
	if r := b.get(e.srv.URL + "/admin/clients"); r.status != http.StatusOK {
		t.Fatalf("the refused sign-out signed out: %d", r.status)
	}
	e.userLogin(b, "alice") // the same browser is also an end user now
	r := b.do(http.MethodPost, e.srv.URL+"/admin/logout", url.Values{"csrf_token": {csrfOf(t, page.body)}})
	if r.status != http.StatusOK || !strings.Contains(r.setCookie(admin.SessionCookie), "Max-Age=0") {
		t.Fatalf("sign-out: %d %v", r.status, r.setCookies)
	}
	if r := b.get(e.srv.URL + "/admin/clients"); !toSignIn(r) {
		t.Fatalf("after sign-out: %d", r.status)
	}
	if r := b.get(e.srv.URL + "/session"); !strings.Contains(r.body, "Signed in") {
		t.Fatal("signing out of the admin pages ended the end-user session")
	}
	if e.auditCount("admin.logout") != 1 {
		t.Fatal("sign-out not audited")
	}
}

func TestAdminSignInReturnTo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	tests := []struct {
		returnTo string
		want     string // where the callback sends the browser; "" when /admin/login refuses
	}{
		{"", "/admin/connections"},
		{"/admin/events", "/admin/events"},
		{"/admin/connections/cn_abc", "/admin/connections/cn_abc"},
		{"//evil.example/admin", ""},
		{"https://evil.example/admin", ""},
		{"/admin/../login", ""},
		{"/admin/%2F%2Fevil", ""},
		{"/admin/api/connections", ""},
		{"/session", ""},
	}
	for _, tt := range tests {
		b := e.browser()
		r := b.get(e.srv.URL + admin.LoginPath + "?" + url.Values{"return_to": {tt.returnTo}}.Encode())
		if tt.want == "" {
			if r.status != http.StatusBadRequest || e.code(r) != "invalid_return_to" {
				t.Errorf("return_to %q: %d %q, want 400 invalid_return_to", tt.returnTo, r.status, e.code(r))
			}
			continue
		}
		cb := b.get(e.pick(b, r.location, "alice", admin.CallbackPath))
		if cb.status != http.StatusSeeOther || cb.location != e.srv.URL+tt.want {
			t.Errorf("return_to %q: %d %s, want %s", tt.returnTo, cb.status, cb.location, tt.want)
		}
	}
	// The admin callback refuses a state minted for the end users' login and
	// the other way round: each login has its own redirect URI at the IdP.
	b := e.browser()
	start := b.get(e.srv.URL + "/login?issuer=idp0")
	cb := e.pick(b, start.location, "alice", "/login/callback")
	cu, _ := url.Parse(cb)
	if r := b.get(e.srv.URL + admin.CallbackPath + "?" + cu.RawQuery); r.status < 400 || r.setsAdminSession() {
		t.Fatalf("an end-user login state finished an admin sign-in: %d", r.status)
	}
}

func TestAdminSignInNotConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noAdminLogin: true})
	b := e.browser()
	if r := b.get(e.srv.URL + admin.LoginPath); r.status != http.StatusForbidden {
		t.Fatalf("/admin/login without an admin issuer: %d", r.status)
	}
	if r := b.get(e.srv.URL + "/admin/connections"); r.status != http.StatusForbidden || strings.Contains(r.body, "/admin/login") {
		t.Fatalf("page without an admin issuer: %d %s", r.status, r.body)
	}
	_, key := e.newAdminKey("scripts")
	if st, out := e.adminAPI(key, http.MethodGet, "/admin/api/connections", nil); st != http.StatusOK {
		t.Fatalf("API with a key: %d %v", st, out)
	}
}

// TestAdminCallbackParamsChecked: the admin sign-in callback applies the same
// parameter check as every redirect back to connectd: a repeated, malformed or
// missing state is refused before the login state is looked up, so the real
// callback still completes afterwards.
func TestAdminCallbackParamsChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.browser()
	start := b.get(e.srv.URL + admin.LoginPath)
	cb := e.pick(b, start.location, "alice", admin.CallbackPath)
	cu, _ := url.Parse(cb)
	q := cu.Query()
	for name, tamper := range map[string]func(url.Values){
		"repeated state": func(v url.Values) { v.Add("state", v.Get("state")) },
		"repeated code":  func(v url.Values) { v.Add("code", "other") },
		"short state":    func(v url.Values) { v.Set("state", "abc") },
		"missing state":  func(v url.Values) { v.Del("state") },
		"long code":      func(v url.Values) { v.Set("code", strings.Repeat("c", 5000)) },
	} {
		v := url.Values{}
		for k, vs := range q {
			v[k] = append([]string(nil), vs...)
		}
		tamper(v)
		r := b.get(e.srv.URL + admin.CallbackPath + "?" + v.Encode())
		if r.status != http.StatusBadRequest || e.code(r) != "invalid_state" || r.setsAdminSession() {
			t.Fatalf("%s: %d %q", name, r.status, e.code(r))
		}
	}
	if r := b.get(cb); r.status != http.StatusSeeOther || !r.setsAdminSession() {
		t.Fatalf("the untampered callback after the refusals: %d", r.status)
	}
}
