package admin_test

import (
	"net/http"
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
