package admin_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/session"
)

// whoIs returns the subject /session shows b signed in as, or "" when b is
// not signed in.
func (e *env) whoIs(b *browser) string {
	e.t.Helper()
	r := b.get(e.srv.URL + "/session")
	if r.status != http.StatusOK {
		e.t.Fatalf("/session: %d %s", r.status, r.body)
	}
	if strings.Contains(r.body, "Not signed in") {
		return ""
	}
	for _, user := range []string{"alice", "bob"} {
		if strings.Contains(r.body, user) {
			return user
		}
	}
	e.t.Fatalf("/session names no known user: %s", r.body)
	return ""
}

// TestSignInEndsTheCarriedSession is the copied-cookie attack on a shared
// browser: alice signs in, her session cookie is copied, and the same
// browser signs in again — as bob, or as alice once more. The sign-in ends
// the session the browser's cookie carried on the server, so the copy is
// refused from then on, and the browser holds only its new session. The same
// for the end users' /login and the admins' /admin/login (one flow, package
// signin), and for an admin sign-in the policy refuses, which clears the
// browser's admin session: it ends on the server too, as sign-out does.
// (That every other replica hears of it within a second is
// TestLoginEndsTheCarriedSessionEverywhere in package session and
// TestServeSignInEndsTheCarriedSession in cmd/connectd.)
func TestSignInEndsTheCarriedSession(t *testing.T) {
	t.Parallel()
	// bob may be an admin too, so that an admin sign-in can switch user.
	e := newEnv(t, envOptions{policy: &admin.Policy{Issuer: "idp0", Subjects: []string{"alice", "bob"}}})
	strict := newEnv(t, envOptions{}) // only alice is an admin
	for _, next := range []string{"bob", "alice"} {
		t.Run("user then "+next, func(t *testing.T) {
			b := e.browser()
			e.userLogin(b, "alice")
			thief := e.browser()
			thief.Cookies[session.CookieName] = b.Cookies[session.CookieName]
			if who := e.whoIs(thief); who != "alice" {
				t.Fatalf("the copied cookie does not work before the second sign-in: %q", who)
			}
			e.userLogin(b, next)
			if who := e.whoIs(thief); who != "" {
				t.Fatalf("alice's copied cookie still signs in as %q after the browser signed in as %s", who, next)
			}
			if who := e.whoIs(b); who != next || b.Cookies[session.CookieName] == thief.Cookies[session.CookieName] {
				t.Fatalf("the browser is signed in as %q with its old cookie kept: %v", who,
					b.Cookies[session.CookieName] == thief.Cookies[session.CookieName])
			}
		})
		t.Run("admin then "+next, func(t *testing.T) {
			b := e.adminBrowser()
			thief := e.browser()
			thief.Cookies[admin.SessionCookie] = b.Cookies[admin.SessionCookie]
			if !e.isAdmin(thief) {
				t.Fatal("the copied admin cookie does not work before the second sign-in")
			}
			if r := e.adminLogin(b, next); r.status != http.StatusSeeOther || !r.setsAdminSession() {
				t.Fatalf("admin sign-in as %s: %d %s", next, r.status, r.body)
			}
			if e.isAdmin(thief) {
				t.Fatalf("alice's copied admin cookie still works after the browser signed in as %s", next)
			}
			if !e.isAdmin(b) || b.Cookies[admin.SessionCookie] == thief.Cookies[admin.SessionCookie] {
				t.Fatal("the browser lost its new admin session, or kept the old cookie")
			}
		})
	}
	t.Run("admin then a refused bob", func(t *testing.T) {
		b := strict.adminBrowser()
		thief := strict.browser()
		thief.Cookies[admin.SessionCookie] = b.Cookies[admin.SessionCookie]
		if !strict.isAdmin(thief) {
			t.Fatal("the copied admin cookie does not work before the second sign-in")
		}
		if r := strict.adminLogin(b, "bob"); r.status != http.StatusForbidden || strict.code(r) != "not_an_admin" ||
			!strings.Contains(r.setCookie(admin.SessionCookie), "Max-Age=0") {
			t.Fatalf("bob's admin sign-in: %d %q %q", r.status, strict.code(r), r.setCookie(admin.SessionCookie))
		}
		if strict.isAdmin(thief) {
			t.Fatal("alice's copied admin cookie still works after the browser's admin session was cleared")
		}
	})
	t.Run("the other cookie stays", func(t *testing.T) {
		// A sign-in ends the session of its own cookie only: the admin pages'
		// sign-in leaves the browser's end-user session, and the other way round.
		b := e.browser()
		e.userLogin(b, "alice")
		if r := e.adminLogin(b, "alice"); r.status != http.StatusSeeOther {
			t.Fatalf("admin sign-in: %d %s", r.status, r.body)
		}
		if who := e.whoIs(b); who != "alice" {
			t.Fatalf("the admin sign-in ended the end-user session: %q", who)
		}
		e.userLogin(b, "bob")
		if !e.isAdmin(b) {
			t.Fatal("the end-user sign-in ended the admin session")
		}
	})
	if n := e.count(`SELECT count(*) FROM browser_sessions WHERE ended_at IS NULL`); n != 6 {
		// Live: one user and one admin session per browser that signed in twice
		// (4), and the last browser's two.
		t.Fatalf("%d live sessions, want 6", n)
	}
}

// toSignIn reports whether r sends the browser to the admin sign-in (and back
// to the page it asked for): what an admin page answers a browser without an
// admin session.
func toSignIn(r response) bool {
	return r.status == http.StatusSeeOther && strings.Contains(r.location, admin.LoginPath+"?return_to=%2Fadmin") &&
		!r.setsAdminSession()
}

// TestAnonymousAdminGoesToSignIn: a browser without an admin session that
// opens /admin is sent to the admin sign-in and, signed in, comes back to the
// page it asked for; a form post without a session still gets the 403 page.
// A page's own error is shown inside the admin layout, with its navigation.
func TestAnonymousAdminGoesToSignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.browser()
	r := b.get(e.srv.URL + "/admin/events")
	if !toSignIn(r) || !strings.HasSuffix(r.location, admin.LoginPath+"?return_to=%2Fadmin%2Fevents") {
		t.Fatalf("anonymous /admin/events: %d %s", r.status, r.location)
	}
	start := b.get(r.location) // the sign-in: off to the admin issuer
	if start.status/100 != 3 || start.location == "" {
		t.Fatalf("/admin/login: %d %s", start.status, start.body)
	}
	cb := b.get(e.pick(b, start.location, "alice", admin.CallbackPath))
	if cb.status != http.StatusSeeOther || cb.location != e.srv.URL+"/admin/events" {
		t.Fatalf("after signing in: %d %s, want /admin/events", cb.status, cb.location)
	}
	if page := b.get(cb.location); page.status != http.StatusOK || !strings.Contains(page.body, "Security events") {
		t.Fatalf("/admin/events signed in: %d", page.status)
	}
	if r := e.browser().do(http.MethodPost, e.srv.URL+"/admin/sessions/end", url.Values{"subject": {"bob"}}); r.status != http.StatusForbidden ||
		!strings.Contains(r.body, "Administrators only") {
		t.Fatalf("anonymous form post: %d", r.status)
	}

	// Errors inside the admin layout: the navigation and sign-out stay.
	for _, tt := range []struct {
		path   string
		status int
		says   string
		active string
	}{
		{"/admin/connections/cn_nope", http.StatusNotFound, "Not found", `href="/admin/connections" aria-current="page"`},
		{"/admin/webhooks/we_nope", http.StatusNotFound, "no such endpoint", `href="/admin/clients" aria-current="page"`},
		{"/admin/events?window=2y", http.StatusBadRequest, "window must be one of", `href="/admin/events" aria-current="page"`},
		{"/admin/no-such-page", http.StatusNotFound, "no such admin resource", `href="/admin/connections" aria-current="page"`},
	} {
		r := b.get(e.srv.URL + tt.path)
		if r.status != tt.status || !strings.Contains(r.body, tt.says) || !strings.Contains(r.body, "connectd · admin") ||
			!strings.Contains(r.body, `action="/admin/logout"`) || !strings.Contains(r.body, tt.active) {
			t.Errorf("%s: %d, want %d in the admin layout saying %q:\n%s", tt.path, r.status, tt.status, tt.says, r.body)
		}
	}
}

// TestEventsAllKinds: /admin/events shows security events by default and
// every kind with show=all, which its form offers.
func TestEventsAllKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.adminBrowser() // admin.login is an audit event, not a security one
	page := b.get(e.srv.URL + "/admin/events")
	if page.status != http.StatusOK || !strings.Contains(page.body, `<option value="all">all kinds</option>`) ||
		strings.Contains(page.body, "admin.login") {
		t.Fatalf("security events: %d\n%s", page.status, page.body)
	}
	page = b.get(e.srv.URL + "/admin/events?show=all")
	if page.status != http.StatusOK || !strings.Contains(page.body, "<h1>All events</h1>") || !strings.Contains(page.body, "admin.login") ||
		!strings.Contains(page.body, `<option value="all" selected>all kinds</option>`) {
		t.Fatalf("all kinds: %d\n%s", page.status, page.body)
	}
	if r := b.get(e.srv.URL + "/admin/events?show=some"); r.status != http.StatusBadRequest {
		t.Fatalf("show=some: %d", r.status)
	}
}
