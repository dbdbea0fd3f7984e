package admin_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/vault"
)

// TestNoSecretInAnyAdminView renders every admin page and API response — for
// a connection made through the real flow and refreshed once, and for one
// whose plaintext credential the test chose — and checks that no token,
// refresh token, key, client secret or cookie appears in any of them, in the
// audit trail or in the logs.
func TestNoSecretInAnyAdminView(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	m := e.newMCPServer("files", "fake")
	aliceID := e.connectFully(m, "alice", "files.read")

	secrets := map[string]string{}
	collect := func(label string) {
		_, cred, err := e.vault.Get(ctx, e.user("alice"), "fake", "")
		if err != nil || cred.AccessToken == "" || cred.RefreshToken == "" {
			t.Fatalf("alice's credential: %v", err)
		}
		secrets[label+" access token"], secrets[label+" refresh token"] = cred.AccessToken, cred.RefreshToken
	}
	collect("first")
	if st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusOK {
		t.Fatalf("token: %d %v", st, out)
	}
	e.clock.Advance(2 * time.Hour) // past the access token's expiry: the next read refreshes
	if st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusOK {
		t.Fatalf("token after expiry: %d %v", st, out)
	}
	collect("refreshed")
	if secrets["first access token"] == secrets["refreshed access token"] || e.auditCount("connection.refreshed") != 1 {
		t.Fatal("no refresh happened")
	}

	bobConn, err := e.vault.Put(ctx, e.user("bob"), "fake", vault.Credential{
		AccessToken: "bob-access-PLAINTEXT-5f2c07", RefreshToken: "bob-refresh-PLAINTEXT-9a1e55", TokenType: "Bearer",
		Scopes: []string{"files.read"}, AccountID: "u-4242", AccountLabel: "bob-workspace"})
	if err != nil {
		t.Fatal(err)
	}
	secrets["bob access token"], secrets["bob refresh token"] = "bob-access-PLAINTEXT-5f2c07", "bob-refresh-PLAINTEXT-9a1e55"
	// Test fixture: bob's consent, as the consent page would record it.
	if _, err := e.pool.Exec(ctx, `INSERT INTO consents (issuer, subject, client_id, provider, scopes, granted_at, updated_at, connection_id)
		VALUES ($1, 'bob', $2, 'fake', '{files.read}', now(), now(), $3)`, e.idp.Issuer(), m.client.ID, bobConn.ID); err != nil {
		t.Fatal(err)
	}
	// A refused /v1 call carrying a (bogus) user token: a security event.
	if st, _ := m.callWith(http.MethodGet, "/v1/connections", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJib2IifQ.sig-PLAINTEXT", nil); st != http.StatusUnauthorized {
		t.Fatalf("bogus user token: %d", st)
	}
	secrets["bogus user token"] = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJib2IifQ.sig-PLAINTEXT"

	_, adminKey := e.newAdminKey("scripts")
	user := e.browser()
	e.userLogin(user, "alice")
	b := e.adminBrowser()
	secrets["client key"] = m.key
	secrets["admin key"] = adminKey
	secrets["user access token"] = m.token("alice")
	secrets["IdP client secret"] = idpSecret
	secrets["provider client secret"] = "fake-client-secret"
	secrets["admin session cookie"] = b.Cookies[admin.SessionCookie]
	secrets["user session cookie"] = user.Cookies[session.CookieName]
	for name, s := range secrets {
		if len(s) < 12 {
			t.Fatalf("secret %q is too short to search for: %q", name, s)
		}
	}

	views := map[string]string{}
	get := func(a admin.Access, path string) {
		t.Helper()
		if a == admin.AdminAPI {
			st, body := e.raw(http.MethodGet, path, "Bearer "+adminKey, nil, nil)
			views["API "+path] = body
			if st != http.StatusOK && st != http.StatusNotFound {
				t.Fatalf("%s: %d %s", path, st, body)
			}
			return
		}
		r := b.get(e.srv.URL + path)
		if r.status != http.StatusOK && r.status != http.StatusNotFound && r.status != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
		views["page "+path] = r.body
	}
	extras := []string{"?user=alice", "?user=bob&provider=fake", "?client=" + m.client.ID, "?status=active&limit=1"}
	kinds := []string{"token.read", "connection.refreshed", "consent.granted", "elicitation.completed", "admin.key_created",
		"admin.login", "security.invalid_user_token"}
	renderAll := func() {
		for _, rt := range e.admin.RouteTable() {
			if rt.Access == admin.Public {
				continue
			}
			for _, id := range []string{aliceID, bobConn.ID} {
				method, path := instantiate(rt.Pattern, id)
				if method != http.MethodGet {
					continue
				}
				get(rt.Access, path)
			}
		}
		for _, a := range []admin.Access{admin.AdminPage, admin.AdminAPI} {
			base := "/admin/connections"
			events := "/admin/events"
			if a == admin.AdminAPI {
				base, events = "/admin/api/connections", "/admin/api/events"
			}
			for _, x := range extras {
				get(a, base+x)
			}
			for _, k := range kinds {
				get(a, events+"?window=90d&kind="+k)
			}
		}
	}
	renderAll()
	for _, want := range []string{aliceID, bobConn.ID, "bob-workspace", m.client.ID, "connection.refreshed", "token.read"} {
		found := false
		for _, body := range views {
			found = found || strings.Contains(body, want)
		}
		if !found {
			t.Fatalf("no view shows %q: the views did not render real data", want)
		}
	}

	// The revocations themselves, through the page and the API, then
	// everything again with their audit events in it.
	confirm := b.get(e.srv.URL + "/admin/connections/" + aliceID + "/revoke")
	views["revoke confirmation"] = confirm.body
	r := b.do(http.MethodPost, e.srv.URL+"/admin/connections/"+aliceID+"/revoke",
		url.Values{"csrf_token": {csrfOf(t, confirm.body)}, "confirm": {aliceID}})
	if r.status != http.StatusOK {
		t.Fatalf("revoke page: %d %s", r.status, r.body)
	}
	views["revoke result page"] = r.body
	st, body := e.raw(http.MethodPost, "/admin/api/connections/"+bobConn.ID+"/revoke", "Bearer "+adminKey, nil,
		map[string]string{"confirm": bobConn.ID})
	if st != http.StatusOK {
		t.Fatalf("revoke API: %d %s", st, body)
	}
	views["revoke result API"] = body
	renderAll()

	var trail string
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(string_agg(row_to_json(a)::text, E'\n'), '') FROM audit_events a`).Scan(&trail); err != nil {
		t.Fatal(err)
	}
	views["audit_events table"] = trail
	views["logs"] = e.logs.String()
	if len(views) < 30 {
		t.Fatalf("only %d views rendered", len(views))
	}
	for view, body := range views {
		for name, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("%s contains the %s", view, name)
			}
		}
	}
}
