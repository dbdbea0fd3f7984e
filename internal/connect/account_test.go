package connect_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/connectd/connectd/web/templates"
)

// accountPage opens /account in b (signing in as user when needed) and
// returns the page.
func (e *env) accountPage(b *browser, user string) response {
	e.t.Helper()
	r := b.get(e.srv.URL + "/account")
	if r.status == http.StatusFound && strings.Contains(r.location, "/login?") {
		authURL := b.get(r.location)
		back := b.get(e.pick(b, authURL.location, user))
		if back.status != http.StatusSeeOther || back.location != e.srv.URL+"/account" {
			e.t.Fatalf("sign-in did not return to /account: %d %s", back.status, back.location)
		}
		r = b.get(e.srv.URL + "/account")
	}
	if r.status != http.StatusOK {
		e.t.Fatalf("/account: %d %s", r.status, r.body)
	}
	return r
}

// post submits an account form with the page's CSRF token.
func (e *env) accountPost(b *browser, page response, action string, form url.Values) response {
	e.t.Helper()
	form.Set("csrf_token", csrfOf(e.t, page.body))
	if !form.Has("connection") {
		form.Set("connection", connectionOf(page.body))
	}
	return b.do(http.MethodPost, e.srv.URL+action, form)
}

// connectionOf is the first connection id an account page's forms post
// ("" for none).
func connectionOf(body string) string {
	_, rest, ok := strings.Cut(body, `name="connection" value="`)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, `"`)
	return id
}

// TestAccountPage: alice sees each connection with its account, scopes and
// the MCP servers allowed to use it; withdrawing one server's access leaves
// it consent_required while the other keeps the token; disconnecting revokes
// the credential at the provider and every server loses it. Both actions are
// audited; bob sees none of it.
func TestAccountPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	// Beta is approved on the consent page alone: the connection exists.
	u := b.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
	br0 := e.browser()
	if r := e.allow(br0, u, e.openAs(br0, u, "alice")); r.status != http.StatusOK || !strings.Contains(r.body, `href="/account"`) {
		t.Fatalf("consent-only approval: %d %s", r.status, r.body)
	}
	tokenOf(t, a, "alice")                                       // a token read: "last used"
	if err := e.server.Sweep(context.Background()); err != nil { // writes the sampled token.read row
		t.Fatal(err)
	}

	br := e.browser()
	page := e.accountPage(br, "alice")
	for _, want := range []string{"Connected accounts", "alice", "user-1", "<code>read</code>", "alpha",
		"beta", "Working", "Remove access", "Disconnect", `action="/logout"`, "last used"} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("account page lacks %q:\n%s", want, page.body)
		}
	}
	if cc := page.header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q", cc)
	}
	for _, secret := range e.fakeTokens() {
		if strings.Contains(page.body, secret) {
			t.Fatal("the account page shows the access token")
		}
	}

	// Bob's page is empty: nothing of alice's.
	bob := e.accountPage(e.browser(), "bob")
	if strings.Contains(bob.body, "alpha") || !strings.Contains(bob.body, "not connected any account") {
		t.Fatalf("bob's page:\n%s", bob.body)
	}

	// Remove access asks first (issue 38 item 8): a post without
	// confirm=yes only shows the confirmation page, naming the application
	// and the account; nothing is withdrawn.
	r := e.accountPost(br, page, "/account/withdraw", url.Values{"provider": {"fake"}, "client": {b.client.ID}})
	if r.status != http.StatusOK || !strings.Contains(pageText(r.body), "Remove beta's access to your Fake") ||
		!strings.Contains(r.body, `name="confirm" value="yes"`) || e.auditCount("consent.withdrawn") != 0 {
		t.Fatalf("withdraw without confirming: %d %s", r.status, r.body)
	}
	tokenOf(t, b, "alice") // beta still has it
	// Another application than the ones allowed: back to the page, "gone".
	if r := e.accountPost(br, page, "/account/withdraw", url.Values{"provider": {"fake"}, "client": {"cli_nobody00000000"}}); r.status != http.StatusSeeOther ||
		r.location != e.srv.URL+"/account?done=gone" {
		t.Fatalf("confirming for an application that has no access: %d %s", r.status, r.location)
	}
	// Withdraw Beta: it gets consent_required, Alpha keeps its token.
	r = e.accountPost(br, page, "/account/withdraw", url.Values{"confirm": {"yes"}, "provider": {"fake"}, "client": {b.client.ID}})
	if r.status != http.StatusSeeOther || r.location != e.srv.URL+"/account?done=withdrawn" {
		t.Fatalf("withdraw: %d %s %s", r.status, r.location, r.body)
	}
	st, out := b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	tokenOf(t, a, "alice")
	page = br.get(r.location)
	if strings.Contains(page.body, ">beta<") || !strings.Contains(page.body, "Access removed") {
		t.Fatalf("after withdrawing:\n%s", page.body)
	}
	if e.auditCount("consent.withdrawn") != 1 {
		t.Fatal("withdrawal not audited")
	}
	// Submitted again (the back button): nothing to do, no second row.
	r = e.accountPost(br, page, "/account/withdraw", url.Values{"confirm": {"yes"}, "provider": {"fake"}, "client": {b.client.ID}})
	if r.location != e.srv.URL+"/account?done=gone" || e.auditCount("consent.withdrawn") != 1 {
		t.Fatalf("withdrawing twice: %d %s", r.status, r.location)
	}

	// Disconnect asks first (issue 27): the account page links the
	// confirmation step, which names the account and who loses it; a post
	// that skipped it only shows that page. Nothing is disconnected.
	tok := e.fakeTokens()
	if !strings.Contains(page.body, `href="/account/disconnect?connection=`) {
		t.Fatalf("the account page does not link the confirmation step:\n%s", page.body)
	}
	confirm := br.get(e.srv.URL + templates.DisconnectPath("fake", connectionOf(page.body)))
	if confirm.status != http.StatusOK || !strings.Contains(confirm.body, "Disconnect your Fake fake account") ||
		!strings.Contains(confirm.body, "These applications lose access") || !strings.Contains(confirm.body, `name="confirm" value="yes"`) {
		t.Fatalf("confirmation page: %d\n%s", confirm.status, confirm.body)
	}
	if r := e.accountPost(br, page, "/account/disconnect", url.Values{"provider": {"fake"}}); r.status != http.StatusOK ||
		!strings.Contains(r.body, `name="confirm" value="yes"`) || e.auditCount("connection.revoked") != 0 {
		t.Fatalf("disconnect without confirming: %d %s", r.status, r.location)
	}
	tokenOf(t, a, "alice") // still there
	if r := br.get(e.srv.URL + templates.DisconnectPath("fake", "cn_"+strings.Repeat("a", 26))); r.status != http.StatusSeeOther ||
		r.location != e.srv.URL+"/account?done=gone" {
		t.Fatalf("confirming another connection: %d %s", r.status, r.location)
	}

	// Confirmed: revoked at the provider, and Alpha loses it too.
	r = e.accountPost(br, page, "/account/disconnect", url.Values{"provider": {"fake"}, "confirm": {"yes"}})
	if r.status != http.StatusSeeOther || r.location != e.srv.URL+"/account?done=disconnected" {
		t.Fatalf("disconnect: %d %s %s", r.status, r.location, r.body)
	}
	if len(tok) == 0 || e.fake.Valid(tok[0]) || len(e.fake.Revocations()) == 0 {
		t.Fatal("the token is still valid at the provider after disconnecting")
	}
	st, out = a.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusNotFound, "not_connected")
	// One shape for every end of a connection (package lifecycle), in the
	// deleting transaction: connection.revoked by the user, one
	// consent.withdrawn per client, then the provider's answer.
	var actor, by string
	if err := e.pool.QueryRow(context.Background(),
		`SELECT actor, detail->>'by' FROM audit_events WHERE kind = 'connection.revoked' AND subject = 'alice'`).Scan(&actor, &by); err != nil ||
		actor != "user" || by != "user" {
		t.Fatalf("disconnect audit: %q %q %v", actor, by, err)
	}
	if e.auditCount("connection.provider_revocation") != 1 || e.auditCount("consent.withdrawn") < 2 {
		t.Fatalf("disconnect audit rows: %d provider_revocation, %d consent.withdrawn",
			e.auditCount("connection.provider_revocation"), e.auditCount("consent.withdrawn"))
	}
	if e.count("consents") != 0 {
		t.Fatal("approvals outlived the connection")
	}
	page = br.get(r.location)
	if !strings.Contains(page.body, "Disconnected.") || !strings.Contains(page.body, "not connected any account") {
		t.Fatalf("after disconnecting:\n%s", page.body)
	}
}

// TestAccountActionsRefused: the account forms need the session's CSRF
// token, a same-origin post, well-formed names, and act only on the signed-in
// user's own connections — bob cannot withdraw or disconnect alice's.
func TestAccountActionsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	alice := e.browser()
	page := e.accountPage(alice, "alice")
	good := url.Values{"provider": {"fake"}, "client": {a.client.ID}, "csrf_token": {csrfOf(t, page.body)},
		"connection": {connectionOf(page.body)}}
	with := func(k, v string) url.Values {
		f := url.Values{}
		for key, vals := range good {
			f[key] = append([]string(nil), vals...)
		}
		f.Set(k, v)
		return f
	}

	for _, action := range []string{"/account/withdraw", "/account/disconnect"} {
		e.refused(alice.do(http.MethodPost, e.srv.URL+action, with("csrf_token", "")), http.StatusForbidden, "csrf_failed")
		e.refused(alice.do(http.MethodPost, e.srv.URL+action, with("csrf_token", "forged")), http.StatusForbidden, "csrf_failed")
		e.refused(alice.do(http.MethodPost, e.srv.URL+action, with("provider", "../fake")), http.StatusBadRequest, "bad_form")
		e.refused(alice.do(http.MethodPost, e.srv.URL+action, with("provider", "")), http.StatusBadRequest, "bad_form")
		e.refused(alice.do(http.MethodPost, e.srv.URL+action, with("connection", "")), http.StatusBadRequest, "bad_form")
		e.refused(alice.do(http.MethodPost, e.srv.URL+action, with("connection", "cn_x'--")), http.StatusBadRequest, "bad_form")
	}
	e.refused(alice.do(http.MethodPost, e.srv.URL+"/account/withdraw", with("client", "cli_X'--")), http.StatusBadRequest, "bad_form")
	for _, bad := range []string{"x\nstatus:\tactive", "a\u202ereversed", strings.Repeat("l", 41), "\x1b[31mred"} {
		e.refused(alice.do(http.MethodPost, e.srv.URL+"/account/label", with("label", bad)), http.StatusBadRequest, "bad_form")
	}

	// Bob, signed in with his own session, posts alice's form values (her
	// connection's id too) with his own CSRF token: it acts on bob's
	// (empty) account only.
	bob := e.browser()
	bobPage := e.accountPage(bob, "bob")
	for _, action := range []string{"/account/withdraw", "/account/disconnect", "/account/label"} {
		r := e.accountPost(bob, bobPage, action, url.Values{"provider": {"fake"}, "client": {a.client.ID},
			"connection": {good.Get("connection")}, "label": {"mine now"}})
		if r.status != http.StatusSeeOther || r.location != e.srv.URL+"/account?done=gone" {
			t.Fatalf("bob %s: %d %s", action, r.status, r.location)
		}
	}
	// Alice's CSRF token in bob's browser is refused.
	e.refused(bob.do(http.MethodPost, e.srv.URL+"/account/disconnect", good), http.StatusForbidden, "csrf_failed")

	// Without a session the form goes back to the page (which signs in).
	anon := e.browser()
	r := anon.do(http.MethodPost, e.srv.URL+"/account/disconnect", good)
	if r.status != http.StatusSeeOther || r.location != e.srv.URL+"/account" {
		t.Fatalf("no session: %d %s", r.status, r.location)
	}
	// From another origin: refused before anything is read.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/account/disconnect", strings.NewReader(url.Values{
		"provider": {"fake"}, "csrf_token": {csrfOf(t, page.body)}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := alice.Send(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin disconnect: %d", resp.StatusCode)
	}

	tokenOf(t, a, "alice") // untouched by all of it
	if e.auditCount("consent.withdrawn") != 0 || e.auditCount("connection.revoked") != 0 {
		t.Fatal("a refused action was audited as done")
	}
}
