package admin_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRevokeFromThePages drives a revocation through the admin pages: the
// detail page shows the connection, the confirmation page carries the CSRF
// token, the POST needs both, and afterwards every MCP server gets
// not_connected, the provider saw the revocation, and the audit trail says who.
func TestRevokeFromThePages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	files := e.newMCPServer("files", "fake")
	notes := e.newMCPServer("notes", "fake")
	connID := e.connectFully(files, "alice", "files.read")
	if again := e.connectFully(notes, "alice", "files.read"); again != connID { // consent-only: same connection
		t.Fatalf("second consent made another connection %s", again)
	}
	st, tok := files.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	if st != http.StatusOK {
		t.Fatalf("token before: %d %v", st, tok)
	}
	accessToken := tok["access_token"].(string)
	if err := e.server.Sweep(context.Background()); err != nil { // writes the sampled token.read row
		t.Fatal(err)
	}

	b := e.adminBrowser()
	detail := b.get(e.srv.URL + "/admin/connections/" + connID)
	for _, want := range []string{connID, "alice", "user-1" /* the fake provider's account */, "files.read", "files", "notes",
		files.client.ID, notes.client.ID, "consent.granted", "elicitation.completed", "token.read", `href="/admin/connections/` + connID + `/revoke"`} {
		if detail.status != http.StatusOK || !strings.Contains(detail.body, want) {
			t.Fatalf("detail page lacks %q: %d %s", want, detail.status, detail.body)
		}
	}
	confirm := b.get(e.srv.URL + "/admin/connections/" + connID + "/revoke")
	if confirm.status != http.StatusOK || !strings.Contains(confirm.body, "Revoke now") || !strings.Contains(confirm.body, "notes") {
		t.Fatalf("confirmation page: %d %s", confirm.status, confirm.body)
	}
	csrf := csrfOf(t, confirm.body)
	action := e.srv.URL + "/admin/connections/" + connID + "/revoke"

	other := e.adminBrowser() // the same admin, another session: its token is not this one's
	otherCSRF := csrfOf(t, other.get(e.srv.URL+"/admin/clients").body)
	refusals := []struct {
		name   string
		b      *browser
		form   url.Values
		status int
		code   string
	}{
		{"no CSRF token", b, url.Values{"confirm": {connID}}, http.StatusForbidden, "csrf_failed"},
		{"forged CSRF token", b, url.Values{"csrf_token": {"AAAA"}, "confirm": {connID}}, http.StatusForbidden, "csrf_failed"},
		{"another session's CSRF token", b, url.Values{"csrf_token": {otherCSRF}, "confirm": {connID}}, http.StatusForbidden, "csrf_failed"},
		{"no confirmation", b, url.Values{"csrf_token": {csrf}}, http.StatusBadRequest, "confirmation_required"},
		{"confirmation of another id", b, url.Values{"csrf_token": {csrf}, "confirm": {"cn_other"}}, http.StatusBadRequest, "confirmation_required"},
		{"no admin session (cross-site form with a leaked token)", e.browser(), url.Values{"csrf_token": {csrf}, "confirm": {connID}}, http.StatusForbidden, "admin_required"},
	}
	for _, tt := range refusals {
		r := tt.b.do(http.MethodPost, action, tt.form)
		if r.status != tt.status || e.code(r) != tt.code {
			t.Fatalf("%s: %d %q, want %d %q", tt.name, r.status, e.code(r), tt.status, tt.code)
		}
	}
	if e.connectionID("alice", "fake") != connID || e.fake.Counts().Revoke != 0 {
		t.Fatal("a refused revocation changed something")
	}

	done := b.do(http.MethodPost, action, url.Values{"csrf_token": {csrf}, "confirm": {connID}})
	if done.status != http.StatusOK || !strings.Contains(done.body, "Revoked") || !strings.Contains(done.body, "revoked") {
		t.Fatalf("revoke: %d %s", done.status, done.body)
	}
	// At the provider: revoked (RFC 7009), the access token no longer works.
	if e.fake.Counts().Revoke == 0 || e.fake.Valid(accessToken) {
		t.Fatalf("not revoked at the provider: %+v", e.fake.Counts())
	}
	// For every MCP server: not_connected.
	for _, m := range []*mcpServer{files, notes} {
		st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
		if st != http.StatusNotFound || out["error"] != "not_connected" {
			t.Fatalf("%s after revoke: %d %v", m.client.Name, st, out)
		}
	}
	if n := e.count(`SELECT count(*) FROM consents`); n != 0 {
		t.Fatalf("%d consents left", n)
	}
	var actor string
	if err := e.pool.QueryRow(context.Background(), `SELECT actor FROM audit_events WHERE kind = 'connection.revoked' AND target = $1`,
		connID).Scan(&actor); err != nil || actor != "admin:alice" {
		t.Fatalf("revocation audit: %q %v", actor, err)
	}
	if e.auditCount("consent.withdrawn") != 2 ||
		e.count(`SELECT count(*) FROM audit_events WHERE kind = 'connection.provider_revocation' AND detail->>'outcome' = 'revoked'`) != 1 {
		t.Fatal("consent withdrawals or the provider outcome not audited")
	}
	// The connection is gone: its pages say so.
	if r := b.get(e.srv.URL + "/admin/connections/" + connID); r.status != http.StatusNotFound {
		t.Fatalf("detail after revoke: %d", r.status)
	}
	if r := b.do(http.MethodPost, action, url.Values{"csrf_token": {csrf}, "confirm": {connID}}); r.status != http.StatusNotFound {
		t.Fatalf("second revoke: %d", r.status)
	}
}

func TestRevokeThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noAdminLogin: true})
	m := e.newMCPServer("files", "fake")
	connID := e.connectFully(m, "alice", "files.read")
	key, secret := e.newAdminKey("scripts")
	path := "/admin/api/connections/" + connID + "/revoke"

	st, _ := e.raw(http.MethodPost, path, "Bearer "+secret, nil, nil)
	if st != http.StatusUnsupportedMediaType && st != http.StatusBadRequest {
		t.Fatalf("revoke without a body: %d", st)
	}
	st, out := e.adminAPI(secret, http.MethodPost, path, map[string]string{"confirm": "cn_other"})
	if st != http.StatusBadRequest || out["error"] != "confirmation_required" {
		t.Fatalf("wrong confirmation: %d %v", st, out)
	}
	st, out = e.adminAPI(secret, http.MethodPost, "/admin/api/connections/cn_nope/revoke", map[string]string{"confirm": "cn_nope"})
	if st != http.StatusNotFound || out["error"] != "not_found" {
		t.Fatalf("unknown connection: %d %v", st, out)
	}
	if e.fake.Counts().Revoke != 0 {
		t.Fatal("a refused revocation reached the provider")
	}
	st, out = e.adminAPI(secret, http.MethodPost, path, map[string]string{"confirm": connID})
	if st != http.StatusOK || out["revoked_at_provider"] != true || out["revocation"] != "revoked" {
		t.Fatalf("revoke: %d %v", st, out)
	}
	if w := out["consents_withdrawn"].([]any); len(w) != 1 || w[0] != m.client.ID {
		t.Fatalf("consents withdrawn: %v", w)
	}
	if e.fake.Counts().Revoke == 0 {
		t.Fatal("the provider's revocation endpoint was not called")
	}
	st, out = m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	if st != http.StatusNotFound || out["error"] != "not_connected" {
		t.Fatalf("token after revoke: %d %v", st, out)
	}
	if e.count(`SELECT count(*) FROM audit_events WHERE kind = 'connection.revoked' AND actor = $1`, "admin_key:"+key.ID) != 1 {
		t.Fatal("revocation not audited with the key as actor")
	}
	// The user is told (issue 38 item 3): a notice of alice's, naming the
	// connection, written with the revocation.
	if e.count(`SELECT count(*) FROM user_notices WHERE subject = 'alice' AND kind = 'admin_revoked' AND connection_id = $1`, connID) != 1 {
		t.Fatal("an admin's revocation left alice no notice")
	}
}
