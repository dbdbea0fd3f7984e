package admin_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/session"
)

// signedIn reports whether b's end-user session still signs it in.
func (e *env) signedIn(b *browser) bool {
	e.t.Helper()
	r := b.get(e.srv.URL + "/session")
	if r.status != http.StatusOK {
		e.t.Fatalf("/session: %d %s", r.status, r.body)
	}
	return !strings.Contains(r.body, "Not signed in")
}

// isAdmin reports whether b's admin session still opens an admin page.
func (e *env) isAdmin(b *browser) bool {
	e.t.Helper()
	return b.get(e.srv.URL+"/admin/clients").status == http.StatusOK
}

// TestEndSessionsFromThePage: the button on a connection's page ends every
// browser session of that connection's user — end-user and admin sessions,
// in every browser — and no one else's (not the admin's own, though she is
// signed in at the same issuer); only with the admin session's CSRF token;
// audited with the admin's name.
func TestEndSessionsFromThePage(t *testing.T) {
	t.Parallel()
	// bob is an admin too, so that he has an admin session to lose.
	e := newEnv(t, envOptions{policy: &admin.Policy{Issuer: "idp0", Subjects: []string{"alice", "bob"}}})
	m := e.newMCPServer("files", "fake")
	connID := e.connectFully(m, "bob", "files.read")
	bobHome, bobWork, alice := e.browser(), e.browser(), e.browser()
	e.userLogin(bobHome, "bob")
	e.userLogin(bobWork, "bob")
	e.userLogin(alice, "alice")
	bobAdmin := e.browser()
	if r := e.adminLogin(bobAdmin, "bob"); r.status != http.StatusSeeOther {
		t.Fatalf("bob's admin sign-in: %d %s", r.status, r.body)
	}
	b := e.adminBrowser() // alice, the admin who ends bob's sessions

	detail := b.get(e.srv.URL + "/admin/connections/" + connID)
	if detail.status != http.StatusOK || !strings.Contains(detail.body, `action="/admin/sessions/end"`) ||
		!strings.Contains(detail.body, "End all sessions of bob") {
		t.Fatalf("no end-sessions button on the connection page: %d %s", detail.status, detail.body)
	}
	form := url.Values{"csrf_token": {csrfOf(t, detail.body)}, "issuer": {e.idp.Issuer()}, "subject": {"bob"}}
	without := func(k string) url.Values {
		f := url.Values{}
		for key, v := range form {
			if key != k {
				f[key] = v
			}
		}
		return f
	}
	for _, tt := range []struct {
		name   string
		b      *browser
		form   url.Values
		status int
		code   string
	}{
		{"no CSRF token", b, without("csrf_token"), http.StatusForbidden, "csrf_failed"},
		{"another session's CSRF token", b, url.Values{"csrf_token": {csrfOf(t, bobAdmin.get(e.srv.URL+"/admin/clients").body)},
			"issuer": {e.idp.Issuer()}, "subject": {"bob"}}, http.StatusForbidden, "csrf_failed"},
		{"no admin session (cross-site form with a leaked token)", e.browser(), form, http.StatusForbidden, "admin_required"},
		{"an end user's session", alice, form, http.StatusForbidden, "admin_required"},
		{"no subject", b, without("subject"), http.StatusBadRequest, "invalid_request"},
		{"no issuer", b, without("issuer"), http.StatusBadRequest, "invalid_request"},
	} {
		r := tt.b.do(http.MethodPost, e.srv.URL+"/admin/sessions/end", tt.form)
		if r.status != tt.status || e.code(r) != tt.code {
			t.Fatalf("%s: %d %q, want %d %q", tt.name, r.status, e.code(r), tt.status, tt.code)
		}
	}
	if !e.signedIn(bobHome) || !e.isAdmin(bobAdmin) || e.auditCount("sessions.ended") != 0 {
		t.Fatal("a refused request ended sessions")
	}

	// The button asks first (issue 38 item 8): without confirm=yes the
	// post shows the confirmation page and ends nothing.
	ask := b.do(http.MethodPost, e.srv.URL+"/admin/sessions/end", form)
	if ask.status != http.StatusOK || !strings.Contains(ask.body, "End all sessions of bob?") ||
		!strings.Contains(ask.body, `name="confirm" value="yes"`) || !e.signedIn(bobHome) || e.auditCount("sessions.ended") != 0 {
		t.Fatalf("end sessions without confirming: %d %s", ask.status, ask.body)
	}
	form.Set("confirm", "yes")
	live := e.count(`SELECT count(*) FROM browser_sessions WHERE subject = 'bob' AND ended_at IS NULL`)
	done := b.do(http.MethodPost, e.srv.URL+"/admin/sessions/end", form)
	if done.status != http.StatusOK || !strings.Contains(done.body, "Sessions ended") ||
		!strings.Contains(done.body, strconv.Itoa(live)+" browser session(s) of bob") {
		t.Fatalf("end sessions: %d %s", done.status, done.body)
	}
	for name, signedIn := range map[string]bool{"bob at home": e.signedIn(bobHome),
		"bob at work": e.signedIn(bobWork), "bob's admin session": e.isAdmin(bobAdmin)} {
		if signedIn {
			t.Errorf("%s still signed in", name)
		}
	}
	if !e.signedIn(alice) || !e.isAdmin(b) {
		t.Fatal("alice was signed out")
	}
	var actor, subject string
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT actor, subject, (detail->>'sessions')::int FROM audit_events
		WHERE kind = 'sessions.ended'`).Scan(&actor, &subject, &n); err != nil || actor != "admin:alice" ||
		subject != "bob" || n != live || live < 4 {
		t.Fatalf("audit: %q %q %d (live before: %d) %v", actor, subject, n, live, err)
	}
}

// TestEndSessionsThroughTheAPI: the admin API ends a user's sessions with
// an admin key, audited with the key's id; a request without a subject ends
// nothing.
func TestEndSessionsThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	alice, bob := e.browser(), e.browser()
	e.userLogin(alice, "alice")
	e.userLogin(bob, "bob")
	k, key := e.newAdminKey("ops")
	if st, out := e.adminAPI(key, http.MethodPost, "/admin/api/sessions/end", map[string]any{"issuer": e.idp.Issuer()}); st != http.StatusBadRequest || out["error"] != "invalid_request" {
		t.Fatalf("without a subject: %d %v", st, out)
	}
	st, out := e.adminAPI(key, http.MethodPost, "/admin/api/sessions/end", map[string]any{"issuer": e.idp.Issuer(), "subject": "bob"})
	if st != http.StatusOK || out["sessions_ended"] != float64(1) || out["subject"] != "bob" {
		t.Fatalf("end sessions: %d %v", st, out)
	}
	if e.signedIn(bob) || !e.signedIn(alice) {
		t.Fatal("the wrong sessions ended")
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE kind = 'sessions.ended' AND actor = $1 AND subject = 'bob'`,
		"admin_key:"+k.ID); n != 1 {
		t.Fatalf("%d audit events", n)
	}
}

// TestCopiedAdminCookieRefusedAfterSignOut: an admin's session cookie copied
// into another browser stops working when the admin signs out.
func TestCopiedAdminCookieRefusedAfterSignOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.adminBrowser()
	thief := e.browser()
	thief.Cookies[admin.SessionCookie] = b.Cookies[admin.SessionCookie]
	if !e.isAdmin(thief) {
		t.Fatal("the copied cookie does not work before sign-out")
	}
	page := b.get(e.srv.URL + "/admin/clients")
	if r := b.do(http.MethodPost, e.srv.URL+"/admin/logout", url.Values{session.CSRFField: {csrfOf(t, page.body)}}); r.status != http.StatusOK {
		t.Fatalf("logout: %d %s", r.status, r.body)
	}
	r := thief.get(e.srv.URL + "/admin/clients")
	if !toSignIn(r) {
		t.Fatalf("the copied admin cookie still works after sign-out: %d %q", r.status, e.code(r))
	}
}

// TestEndSessionsIsByteExact: an identity is (issuer, subject) byte for byte
// (docs/identity.md), so "alice " (a subject mcpauth.CheckSubject accepts,
// trailing space and all) is another user than alice. Ending the sessions of
// "alice " — through the API or the page — ends exactly hers and leaves
// alice signed in; a subject or issuer the rule refuses is answered 400
// invalid_request and ends nothing. Nothing is ever trimmed into another
// identity.
func TestEndSessionsIsByteExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	_, key := e.newAdminKey("ops")
	admin := e.adminBrowser()
	alice := e.browser()
	e.userLogin(alice, "alice")
	// The look-alikes have sessions as a login at the IdP would leave them
	// (the development IdP's picker offers only its demo users).
	others, err := session.New(session.Config{Pool: e.pool, Keys: []session.Key{session.NewKey()}})
	if err != nil {
		t.Fatal(err)
	}
	lookAlike := func(subject string) *http.Request {
		t.Helper()
		w := httptest.NewRecorder()
		if _, err := others.Start(ctx, w, e.idp.Issuer(), subject); err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		for _, c := range w.Result().Cookies() {
			r.AddCookie(c)
		}
		return r
	}
	live := func(r *http.Request) bool {
		t.Helper()
		_, err := others.Get(r)
		if err != nil && !errors.Is(err, session.ErrNoSession) {
			t.Fatal(err)
		}
		return err == nil
	}
	spaced, leading, blank := lookAlike("alice "), lookAlike(" alice"), lookAlike(" ")

	// Refused values: nothing ended, whatever they would trim or clean up to.
	for _, tc := range []struct{ name, issuer, subject string }{
		{"tab", e.idp.Issuer(), "alice\t"},
		{"newline", e.idp.Issuer(), "alice\n"},
		{"NUL", e.idp.Issuer(), "alice\x00"},
		{"line separator", e.idp.Issuer(), "alice\u2028"},
		{"empty", e.idp.Issuer(), ""},
		{"issuer with a newline", e.idp.Issuer() + "\n", "alice"},
	} {
		body := map[string]any{"issuer": tc.issuer, "subject": tc.subject}
		if st, out := e.adminAPI(key, http.MethodPost, "/admin/api/sessions/end", body); st != http.StatusBadRequest ||
			out["error"] != "invalid_request" {
			t.Errorf("API, %s: %d %v, want 400 invalid_request", tc.name, st, out)
		}
		page := admin.get(e.srv.URL + "/admin/clients")
		r := admin.do(http.MethodPost, e.srv.URL+"/admin/sessions/end", url.Values{"csrf_token": {csrfOf(t, page.body)},
			"issuer": {tc.issuer}, "subject": {tc.subject}})
		if r.status != http.StatusBadRequest || e.code(r) != "invalid_request" {
			t.Errorf("page, %s: %d %q, want 400 invalid_request", tc.name, r.status, e.code(r))
		}
	}
	if !e.signedIn(alice) || !live(spaced) || !live(leading) || !live(blank) || e.auditCount("sessions.ended") != 0 {
		t.Fatal("a refused request ended sessions")
	}

	// "alice " through the API: hers end, and only hers.
	st, out := e.adminAPI(key, http.MethodPost, "/admin/api/sessions/end",
		map[string]any{"issuer": e.idp.Issuer(), "subject": "alice "})
	if st != http.StatusOK || out["sessions_ended"] != float64(1) || out["subject"] != "alice " {
		t.Fatalf(`end sessions of "alice ": %d %v`, st, out)
	}
	if live(spaced) || !e.signedIn(alice) || !live(leading) || !live(blank) {
		t.Fatalf(`ending "alice " ended the wrong sessions: "alice " live %v, alice %v, " alice" %v, " " %v`,
			live(spaced), e.signedIn(alice), live(leading), live(blank))
	}
	// " alice" through the page, and " " (a subject of one space) through the API.
	page := admin.get(e.srv.URL + "/admin/clients")
	if r := admin.do(http.MethodPost, e.srv.URL+"/admin/sessions/end", url.Values{"csrf_token": {csrfOf(t, page.body)},
		"issuer": {e.idp.Issuer()}, "subject": {" alice"}, "confirm": {"yes"}}); r.status != http.StatusOK ||
		!strings.Contains(r.body, "1 browser session(s)") {
		t.Fatalf(`end sessions of " alice" on the page: %d %s`, r.status, r.body)
	}
	if st, out := e.adminAPI(key, http.MethodPost, "/admin/api/sessions/end",
		map[string]any{"issuer": e.idp.Issuer(), "subject": " "}); st != http.StatusOK || out["sessions_ended"] != float64(1) {
		t.Fatalf(`end sessions of " ": %d %v`, st, out)
	}
	if live(leading) || live(blank) || !e.signedIn(alice) || !e.isAdmin(admin) {
		t.Fatal(`ending " alice" and " " ended the wrong sessions`)
	}
	var subjects []string
	rows, err := e.pool.Query(ctx, `SELECT subject FROM audit_events WHERE kind = 'sessions.ended' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, s)
	}
	if strings.Join(subjects, "|") != "alice | alice| " {
		t.Fatalf("audited subjects %q", subjects)
	}
}
