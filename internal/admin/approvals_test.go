package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/webhook"
)

// askRules are the request rules of the approval tests: reading is
// allowed, opening an issue asks (and may be allowed for an hour), deleting
// one asks for each call.
var askRules = []string{"GET /files*", `POST /echo/issues ask:1h "Open issues in your repositories"`,
	`DELETE /echo/issues/* ask "Delete an issue"`}

// bodyMarker is in every body the tests send: no admin answer may hold it.
const bodyMarker = "body-never-shown-to-admins"

// asking gives m the ask rules at the fake provider and connects alice.
func (e *env) asking(m *mcpServer) string {
	e.t.Helper()
	if err := e.clients.SetProxyRules(context.Background(), m.client.ID, "fake",
		&clientauth.ProxyRules{Rules: askRules, Description: "Read files; open and delete issues when you say so"}); err != nil {
		e.t.Fatal(err)
	}
	return e.connectFully(m, "alice", "files.read")
}

// ask makes m's proxied call as user, which must be answered
// user_approval_required, and returns its approval.
func (m *mcpServer) ask(method, path, user, body string) map[string]any {
	m.e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, m.e.srv.URL+"/v1/proxy/fake/"+path, rd)
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, m.token(user))
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.e.srv.Client().Do(req)
	if err != nil {
		m.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Error    string         `json:"error"`
		Approval map[string]any `json:"approval"`
	}
	if json.Unmarshal(raw, &out) != nil || resp.StatusCode != http.StatusForbidden || out.Error != "user_approval_required" ||
		out.Approval == nil {
		m.e.t.Fatalf("%s %s: want 403 user_approval_required, got %d %s", method, path, resp.StatusCode, raw)
	}
	// Asked one after the other: each later by the clock the rows record.
	m.e.clock.Advance(time.Second)
	return out.Approval
}

var bodyHashField = regexp.MustCompile(`name="body_sha256" value="([0-9a-f]{64})"`)

// decide answers approval ap on its page in b (signed in as its user).
func (e *env) decide(b *browser, ap map[string]any, decision string) {
	e.t.Helper()
	u := ap["url"].(string)
	page := b.get(u)
	if page.status != http.StatusOK {
		e.t.Fatalf("approval page: %d %s", page.status, page.body)
	}
	f := url.Values{"csrf_token": {csrfOf(e.t, page.body)}, "decision": {decision}}
	if m := bodyHashField.FindStringSubmatch(page.body); m != nil {
		f.Set("body_sha256", m[1])
	}
	if r := b.do(http.MethodPost, u, f); r.status != http.StatusOK {
		e.t.Fatalf("%s: %d %s", decision, r.status, r.body)
	}
}

// approvalsFixture is one MCP server whose calls asked alice six times,
// one approval of each outcome: the returned ids, newest first.
func (e *env) approvalsFixture(m *mcpServer) (ids []string, conn string) {
	e.t.Helper()
	conn = e.asking(m)
	alice := e.browser()
	e.userLogin(alice, "alice")
	body := func(s string) string { return `{"title":"` + s + `","body":"` + bodyMarker + `"}` }

	once := m.ask(http.MethodPost, "echo/issues?repo=a", "alice", body("once"))
	e.decide(alice, once, "once")
	standing := m.ask(http.MethodPost, "echo/issues?repo=b", "alice", body("standing"))
	e.decide(alice, standing, "standing")
	denied := m.ask(http.MethodDelete, "echo/issues/1", "alice", "")
	e.decide(alice, denied, "deny")
	dismissed := m.ask(http.MethodDelete, "echo/issues/2", "alice", "")
	if st, doc := m.call(http.MethodDelete, "/v1/elicitations/"+dismissed["elicitation_id"].(string), "alice", nil); st != http.StatusOK &&
		st != http.StatusNoContent {
		e.t.Fatalf("dismiss: %d %v", st, doc)
	}
	expired := m.ask(http.MethodDelete, "echo/issues/3", "alice", "")
	e.exec(`UPDATE elicitations SET expires_at = $2 WHERE id = $1`, expired["elicitation_id"], e.clock.Now().Add(-time.Second))
	pending := m.ask(http.MethodDelete, "echo/issues/4", "alice", "")
	for _, ap := range []map[string]any{pending, expired, dismissed, denied, standing, once} {
		ids = append(ids, ap["elicitation_id"].(string))
	}
	return ids, conn
}

// TestClientApprovals (issue 36): an MCP server's admin page shows its
// request rules — the ones that ask with their words and bound, and that
// they keep it proxy-only — and its approvals, newest first, with who was
// asked, for which account, under which rule, for which call, and what
// became of each (pending, allowed once, allowed for a time, denied,
// dismissed, expired); GET /admin/api/clients/{id}/approvals answers the
// same, bounded by limit. Neither ever holds a call's body. An admin of
// another organization gets the 404 of a client that does not exist, and
// nothing of its approvals; its own organization's admin sees them.
func TestClientApprovals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	ids, conn := e.approvalsFixture(m)
	_, key := e.newAdminKey("ops")
	path := "/admin/api/clients/" + m.client.ID + "/approvals"

	st, raw := e.raw(http.MethodGet, path, "Bearer "+key, nil, nil)
	if st != http.StatusOK || strings.Contains(raw, bodyMarker) {
		t.Fatalf("approvals: %d %s", st, raw)
	}
	var doc struct {
		ClientID  string           `json:"client_id"`
		ProxyOnly bool             `json:"proxy_only"`
		Approvals []map[string]any `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil || doc.ClientID != m.client.ID || !doc.ProxyOnly {
		t.Fatalf("approvals document: %v %s", err, raw)
	}
	want := []struct{ status, reason, method, path, rule, words string }{
		{"pending", "", "DELETE", "/echo/issues/4", "DELETE /echo/issues/*", "Delete an issue"},
		{"expired", "", "DELETE", "/echo/issues/3", "DELETE /echo/issues/*", "Delete an issue"},
		{"dismissed", "client_declined", "DELETE", "/echo/issues/2", "DELETE /echo/issues/*", "Delete an issue"},
		{"denied", "user_denied", "DELETE", "/echo/issues/1", "DELETE /echo/issues/*", "Delete an issue"},
		{"allowed_standing", "", "POST", "/echo/issues?repo=b", "POST /echo/issues", "Open issues in your repositories"},
		{"allowed_once", "", "POST", "/echo/issues?repo=a", "POST /echo/issues", "Open issues in your repositories"},
	}
	if len(doc.Approvals) != len(want) {
		t.Fatalf("%d approvals, want %d: %s", len(doc.Approvals), len(want), raw)
	}
	for i, w := range want {
		a := doc.Approvals[i]
		reason, _ := a["reason"].(string)
		_, decided := a["decided_at"]
		if a["elicitation_id"] != ids[i] || a["status"] != w.status || reason != w.reason || a["method"] != w.method ||
			a["path"] != w.path || a["rule"] != w.rule || a["words"] != w.words || a["subject"] != "alice" ||
			a["issuer"] != e.idp.Issuer() || a["provider"] != "fake" || a["connection_id"] != conn || a["asked_at"] == nil ||
			a["expires_at"] == nil || decided != (w.status != "pending" && w.status != "expired") {
			t.Errorf("approval %d: %v, want %+v (id %s)", i, a, w, ids[i])
		}
	}

	// The audit trail: asked six times, allowed twice, denied twice (the
	// user's No and the dismissal); an expiry writes no row.
	for kind, n := range map[string]int{"approval.requested": 6, "approval.granted": 2, "approval.denied": 2, "approval.expired": 0} {
		if got := e.auditCount(kind); got != n {
			t.Errorf("%s audit rows: %d, want %d", kind, got, n)
		}
	}

	// Bounded: the newest first.
	if st, out := e.adminAPI(key, http.MethodGet, path+"?limit=2", nil); st != http.StatusOK ||
		len(out["approvals"].([]any)) != 2 || out["approvals"].([]any)[0].(map[string]any)["elicitation_id"] != ids[0] {
		t.Fatalf("limit=2: %d %v", st, out)
	}
	for _, q := range []string{"?limit=0", "?limit=501", "?limit=x"} {
		if st, out := e.adminAPI(key, http.MethodGet, path+q, nil); st != http.StatusBadRequest || out["error"] != "invalid_request" {
			t.Errorf("%s: %d %v, want 400 invalid_request", q, st, out)
		}
	}
	if st, out := e.adminAPI(key, http.MethodGet, "/admin/api/clients/cli_nope/approvals", nil); st != http.StatusNotFound ||
		out["error"] != "not_found" {
		t.Errorf("an unknown client: %d %v", st, out)
	}

	// The page.
	b := e.adminBrowser()
	page := b.get(e.srv.URL + "/admin/clients/" + m.client.ID)
	if page.status != http.StatusOK {
		t.Fatalf("client page: %d %s", page.status, page.body)
	}
	for _, s := range []string{"Request rules", "proxy-only (its request rules ask the user)", "<strong>proxy-only</strong>",
		"Read files; open and delete issues when you say so", "<code>GET /files*</code>",
		"<code>POST /echo/issues</code>", "Open issues in your repositories", "for up to 1 hour",
		"<code>DELETE /echo/issues/*</code>", "this one request only", "Approvals",
		"allowed once", "allowed for a time", "denied", "dismissed", "expired", "pending",
		"DELETE /echo/issues/4", "POST /echo/issues?repo=a", `href="/admin/connections/` + conn + `"`, path} {
		if !strings.Contains(page.body, s) {
			t.Errorf("the client page lacks %q", s)
		}
	}
	if strings.Contains(page.body, bodyMarker) {
		t.Error("the client page shows a call's body")
	}
	if !strings.Contains(page.body, "It must stay proxy-only") || strings.Contains(page.body, "Save proxy-only") {
		t.Error("the page offers to turn proxy-only off for a client whose rules ask")
	}
	if i, j := strings.Index(page.body, "/echo/issues/4"), strings.Index(page.body, "/echo/issues?repo=a"); i < 0 || j < i {
		t.Error("the page does not list the approvals newest first")
	}

	// Another organization's admin: the 404 of no such client, nothing of
	// its approvals; its own organization's admin sees them.
	e.exec(`INSERT INTO organizations (id, name) VALUES ('org-a', 'A'), ('org-b', 'B')`)
	e.exec(`UPDATE clients SET org_id = 'org-b' WHERE id = $1`, m.client.ID)
	e.exec(`UPDATE connections SET org_id = 'org-b' WHERE id = $1`, conn)
	for _, q := range []string{"", "?org=org-b"} {
		st, raw := e.raw(http.MethodGet, path+q, "Bearer "+e.orgKey("org-a", "owner"), nil, nil)
		if st != http.StatusNotFound || strings.Contains(raw, ids[0]) || strings.Contains(raw, "/echo/issues") {
			t.Errorf("org-a's owner%s: %d %s, want 404 and nothing of it", q, st, raw)
		}
	}
	if st, out := e.adminAPI(e.orgKey("org-b", "viewer"), http.MethodGet, path, nil); st != http.StatusOK ||
		len(out["approvals"].([]any)) != len(want) {
		t.Errorf("org-b's viewer: %d %v", st, out)
	}
	e.grant("org-a", "bob", "owner")
	bob := e.browser()
	if r := e.adminLogin(bob, "bob"); r.status != http.StatusSeeOther {
		t.Fatalf("bob's admin sign-in: %d %s", r.status, r.body)
	}
	if r := bob.get(e.srv.URL + "/admin/clients/" + m.client.ID); r.status != http.StatusNotFound ||
		strings.Contains(r.body, "/echo/issues") || strings.Contains(r.body, ids[0]) {
		t.Errorf("org-a's owner on org-b's client page: %d %.300s", r.status, r.body)
	}
}

// TestApprovalWebhooks (issue 36): approval.requested, approval.granted
// (once and standing) and approval.denied reach the MCP server's endpoint
// with a Standard Webhooks signature that verifies, and the data
// docs/webhooks.md lists — never the call's body.
func TestApprovalWebhooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noAdminLogin: true})
	e.runJobs()
	m := e.newMCPServer("files", "fake")
	rc := newReceiver(t)
	wh, err := e.store.Webhooks()
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := wh.Create(context.Background(), m.client.ID, rc.srv.URL+"/hooks",
		[]string{webhook.ApprovalRequested, webhook.ApprovalGranted, webhook.ApprovalDenied})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	_, secret2, err := wh.Create(context.Background(), m.client.ID, rc.srv.URL+"/ended",
		[]string{webhook.ElicitationDeclined, webhook.ElicitationExpired})
	if err != nil {
		t.Fatal(err)
	}
	ended, err := standardwebhooks.NewWebhook(secret2)
	if err != nil {
		t.Fatal(err)
	}
	ids, conn := e.approvalsFixture(m)
	if err := e.server.Sweep(context.Background()); err != nil { // the sweep job expires the one past its expiry
		t.Fatal(err)
	}
	// requested: all six; granted: two; denied: one (the dismissal and the
	// expiry are not approval.* events).
	got := rc.waitPath(t, "/hooks", 9)
	byType := map[string][]map[string]any{}
	for _, r := range got {
		if err := verifier.Verify(r.body, r.header); err != nil {
			t.Fatalf("a delivery does not verify: %v\n%s", err, r.body)
		}
		if strings.Contains(string(r.body), bodyMarker) {
			t.Fatalf("a delivery holds the call's body: %s", r.body)
		}
		var ev struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(r.body, &ev); err != nil {
			t.Fatal(err)
		}
		byType[ev.Type] = append(byType[ev.Type], ev.Data)
	}
	if len(byType[webhook.ApprovalRequested]) != 6 || len(byType[webhook.ApprovalGranted]) != 2 ||
		len(byType[webhook.ApprovalDenied]) != 1 {
		t.Fatalf("deliveries by type: %v", byType)
	}
	common := func(d map[string]any, keys ...string) {
		t.Helper()
		u, _ := d["user"].(map[string]any)
		if d["client_id"] != m.client.ID || d["provider"] != "fake" || d["connection_id"] != conn ||
			u["issuer"] != e.idp.Issuer() || u["subject"] != "alice" {
			t.Errorf("data %v", d)
		}
		for _, k := range append([]string{"elicitation_id", "method", "path", "rule"}, keys...) {
			if s, _ := d[k].(string); s == "" {
				t.Errorf("data %v lacks %s", d, k)
			}
		}
	}
	for _, d := range byType[webhook.ApprovalRequested] {
		common(d, "expires_at")
	}
	decisions := map[string]map[string]any{}
	for _, d := range byType[webhook.ApprovalGranted] {
		common(d, "decision", "expires_at")
		decisions[d["decision"].(string)] = d
	}
	once, standing := decisions["once"], decisions["standing"]
	if once["elicitation_id"] != ids[5] || once["method"] != "POST" || once["path"] != "/echo/issues?repo=a" ||
		once["rule"] != "POST /echo/issues" || standing["elicitation_id"] != ids[4] || standing["path"] != "/echo/issues?repo=b" {
		t.Errorf("granted: %v", decisions)
	}
	until, err := time.Parse(time.RFC3339, standing["expires_at"].(string))
	if err != nil || until.Sub(e.clock.Now()) < 59*time.Minute || until.Sub(e.clock.Now()) > time.Hour {
		t.Errorf("a standing grant for the rule's hour expires at %v (now %v)", standing["expires_at"], e.clock.Now())
	}
	d := byType[webhook.ApprovalDenied][0]
	common(d)
	if d["elicitation_id"] != ids[3] || d["method"] != "DELETE" || d["path"] != "/echo/issues/1" || d["rule"] != "DELETE /echo/issues/*" {
		t.Errorf("denied: %v", d)
	}
	if _, ok := d["decision"]; ok {
		t.Errorf("denied carries a decision: %v", d)
	}

	// A dismissed approval and one that expired are told as a connect
	// link's are: elicitation.declined (client_declined) and
	// elicitation.expired, with no scopes.
	endings := map[string]map[string]any{}
	for _, r := range rc.waitPath(t, "/ended", 2) {
		if err := ended.Verify(r.body, r.header); err != nil {
			t.Fatalf("a delivery does not verify: %v\n%s", err, r.body)
		}
		var ev struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(r.body, &ev); err != nil {
			t.Fatal(err)
		}
		endings[ev.Type] = ev.Data
	}
	if x := endings[webhook.ElicitationDeclined]; x["elicitation_id"] != ids[2] || x["reason"] != "client_declined" ||
		len(x["scopes"].([]any)) != 0 {
		t.Errorf("the dismissal: %v", endings)
	}
	if x := endings[webhook.ElicitationExpired]; x["elicitation_id"] != ids[1] || x["status"] != "expired" {
		t.Errorf("the expiry: %v", endings)
	}
}

// TestProxyOnlyStaysWhileRulesAsk (issue 36): turning proxy-only off for a
// client whose rules ask the user, through PATCH or the page's form, is
// refused with 400 saying why and how to clear them, and changes nothing;
// the page offers no such form, saying the same. The old answer was the
// registration's refusal ("a name of 1-200 characters … are required").
func TestProxyOnlyStaysWhileRulesAsk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	if err := e.clients.SetProxyRules(context.Background(), m.client.ID, "fake",
		&clientauth.ProxyRules{Rules: askRules}); err != nil {
		t.Fatal(err)
	}
	_, key := e.newAdminKey("ops")
	st, out := e.adminAPI(key, http.MethodPatch, "/admin/api/clients/"+m.client.ID+"?org=default", map[string]any{"proxy_only": false})
	desc, _ := out["error_description"].(string)
	if st != http.StatusBadRequest || out["error"] != "invalid_request" || !strings.Contains(desc, "must stay proxy-only") ||
		!strings.Contains(desc, "proxy-rules ID --provider P --clear") {
		t.Errorf("PATCH proxy_only false: %d %v", st, out)
	}
	b := e.adminBrowser()
	page := b.get(e.srv.URL + "/admin/clients/" + m.client.ID)
	if page.status != http.StatusOK || !strings.Contains(page.body, "It must stay proxy-only") ||
		strings.Contains(page.body, "Save proxy-only") {
		t.Errorf("the page offers to turn proxy-only off: %d %s", page.status, page.body)
	}
	r := b.do(http.MethodPost, e.srv.URL+"/admin/clients/"+m.client.ID+"/proxy-only", url.Values{"csrf_token": {csrfOf(t, page.body)}})
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "must stay proxy-only") {
		t.Errorf("the form without proxy_only: %d %s", r.status, r.body)
	}
	if c, err := e.clients.Get(context.Background(), m.client.ID); err != nil || !c.ProxyOnly {
		t.Fatalf("a refused change turned proxy-only off: %+v %v", c, err)
	}
	if n := e.auditCount("client.proxy_only_set"); n != 0 {
		t.Fatalf("%d client.proxy_only_set rows for refused changes", n)
	}
}
