package connect_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth"
)

// askRules are the request rules of the approval tests: reading is
// allowed, opening an issue asks, and may be allowed for an hour.
var askRules = []string{"GET /files*", `POST /echo/issues ask:1h "open issues in your repositories"`,
	`DELETE /echo/issues/* ask "delete an issue"`}

// askingClient is m with the ask rules at the fake provider, and alice
// connected to it.
func (e *env) askingClient(m *mcpServer) {
	e.t.Helper()
	if err := e.server.Clients().SetProxyRules(context.Background(), m.client.ID, "fake",
		&clientauth.ProxyRules{Rules: askRules}); err != nil {
		e.t.Fatal(err)
	}
	e.connectFully(m, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
}

// proxiedTo is m's proxied call at base (a replica's URL).
func (m *mcpServer) proxiedTo(base, method, path, user, body string) (int, []byte) {
	m.e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, base+"/v1/proxy/fake/"+path, rd)
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, m.token(user))
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.e.srv.Client().Do(req)
	if err != nil {
		m.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// asked makes m's call, which must be answered user_approval_required, and
// returns its approval.
func (m *mcpServer) asked(base, method, path, user, body string) map[string]any {
	m.e.t.Helper()
	st, raw := m.proxiedTo(base, method, path, user, body)
	return approvalOf(m.e.t, st, raw)
}

// approvalOf reads the approval of a user_approval_required answer.
func approvalOf(t *testing.T, status int, raw []byte) map[string]any {
	t.Helper()
	var env struct {
		Error    string         `json:"error"`
		Approval map[string]any `json:"approval"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || status != http.StatusForbidden || env.Error != "user_approval_required" ||
		env.Approval == nil {
		t.Fatalf("want 403 user_approval_required with an approval, got %d %s", status, raw)
	}
	return env.Approval
}

var bodyHashField = regexp.MustCompile(`name="body_sha256" value="([0-9a-f]{64})"`)

// decideApproval opens approval link u in b as user and answers decision.
func (e *env) decideApproval(b *browser, u, user, decision string) response {
	e.t.Helper()
	page := e.openAs(b, u, user)
	if page.status != http.StatusOK {
		e.t.Fatalf("approval page: %d %s", page.status, page.body)
	}
	f := url.Values{"csrf_token": {csrfOf(e.t, page.body)}, "decision": {decision}}
	if m := bodyHashField.FindStringSubmatch(page.body); m != nil {
		f.Set("body_sha256", m[1])
	}
	return b.do(http.MethodPost, u, f)
}

// TestApprovalOnce (issue 36): a proxied call under an ask rule is not
// sent; the answer carries an approval link (the same one while it is
// pending); alice's page shows the exact call with its body inert; "allow
// this request" lets exactly that call through once — a changed body needs
// a new approval, and the same call again asks again. The client is
// proxy-only: it cannot read the token and skip the ask.
func TestApprovalOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.askingClient(a)
	base := e.srv.URL
	body := `{"title":"<script>alert(1)</script>","body":"` + strings.Repeat("long ", 100) + `"}`

	if st, raw := a.proxiedTo(base, http.MethodGet, "files", "alice", ""); st != http.StatusOK {
		t.Fatalf("an allowed read: %d %s", st, raw)
	}
	if st, doc := a.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusForbidden ||
		doc["error"] != "token_release_disabled" {
		t.Fatalf("a client with ask rules read the token: %d %v", st, doc)
	}
	echoes := e.fake.Counts().Echo
	ap := a.asked(base, http.MethodPost, "echo/issues?repo=x", "alice", body)
	if ap["kind"] != "approval" || ap["method"] != "POST" || ap["path"] != "/echo/issues?repo=x" ||
		ap["message"] != "open issues in your repositories" || ap["status"] != "pending" {
		t.Fatalf("approval %v", ap)
	}
	id, link := ap["elicitation_id"].(string), ap["url"].(string)
	if again := a.asked(base, http.MethodPost, "echo/issues?repo=x", "alice", body); again["elicitation_id"] != id {
		t.Fatalf("asking again while pending gave another approval: %v", again["elicitation_id"])
	}
	if e.fake.Counts().Echo != echoes {
		t.Fatal("a call waiting for approval reached the provider")
	}

	// Bob opening alice's link: refused, and nothing about the call shown.
	bob := e.browser()
	if page := e.openAs(bob, link, "bob"); page.status != http.StatusForbidden || strings.Contains(page.body, "echo/issues") ||
		strings.Contains(page.body, "alert") {
		t.Fatalf("bob on alice's approval: %d %s", page.status, page.body)
	}
	// A step of the connect flow never answers an approval.
	br := e.browser()
	page := e.openAs(br, link, "alice")
	if page.status != http.StatusOK || !strings.Contains(page.body, "/api/echo/issues?repo=x") ||
		!strings.Contains(page.body, "open issues in your repositories") {
		t.Fatalf("alice's approval page: %d %s", page.status, page.body)
	}
	if strings.Contains(page.body, "<script>alert") || !strings.Contains(page.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("the body is not rendered inert:\n%s", page.body)
	}
	if !strings.Contains(page.body, "more characters") {
		t.Fatalf("a long value is not folded:\n%s", page.body)
	}
	if r := br.do(http.MethodPost, link+"/key", url.Values{"csrf_token": {csrfOf(t, page.body)}, "api_key": {"x"}}); r.status != http.StatusNotFound {
		t.Fatalf("the API-key step on an approval link: %d %s", r.status, r.body)
	}
	// A form for another body is refused.
	if r := br.do(http.MethodPost, link, url.Values{"csrf_token": {csrfOf(t, page.body)}, "decision": {"once"},
		"body_sha256": {strings.Repeat("0", 64)}}); r.status != http.StatusBadRequest {
		t.Fatalf("allow with another body's hash: %d %s", r.status, r.body)
	}
	if r := e.decideApproval(br, link, "alice", "once"); r.status != http.StatusOK || !strings.Contains(r.body, "Allowed") {
		t.Fatalf("allow: %d %s", r.status, r.body)
	}
	if st, doc := a.call(http.MethodGet, "/v1/elicitations/"+id, "alice", nil); st != http.StatusOK || doc["status"] != "completed" ||
		doc["kind"] != "approval" {
		t.Fatalf("status after allow: %d %v", st, doc)
	}

	// Another body, another query: a new approval each.
	for _, c := range []struct{ path, body string }{{"echo/issues?repo=x", body + " "}, {"echo/issues?repo=y", body}} {
		if other := a.asked(base, http.MethodPost, c.path, "alice", c.body); other["elicitation_id"] == id {
			t.Fatalf("a changed call (%s) passed under the approval", c.path)
		}
	}
	if e.fake.Counts().Echo != echoes {
		t.Fatal("a changed call reached the provider")
	}
	if st, raw := a.proxiedTo(base, http.MethodPost, "echo/issues?repo=x", "alice", body); st != http.StatusOK {
		t.Fatalf("the approved call: %d %s", st, raw)
	}
	if e.fake.Counts().Echo != echoes+1 {
		t.Fatalf("the approved call reached the provider %d times", e.fake.Counts().Echo-echoes)
	}
	// Once means once.
	if next := a.asked(base, http.MethodPost, "echo/issues?repo=x", "alice", body); next["elicitation_id"] == id {
		t.Fatal("the used approval was answered again")
	}
	if e.fake.Counts().Echo != echoes+1 {
		t.Fatal("the approved call went twice")
	}
	// The operator cannot hand the client tokens while it asks.
	if err := e.server.Clients().SetProxyOnly(context.Background(), a.client.ID, false); err == nil {
		t.Fatal("proxy-only was turned off for a client whose rules ask")
	}
}

// TestApprovalDenied (issue 36): a denial is the answer the MCP server
// hears (declined, user_denied), the provider is never called, and the
// same call asks again.
func TestApprovalDenied(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.askingClient(a)
	echoes := e.fake.Counts().Echo
	ap := a.asked(e.srv.URL, http.MethodDelete, "echo/issues/7", "alice", "")
	if strings.Contains(string(mustJSON(t, ap)), "standing") {
		t.Fatalf("approval %v", ap)
	}
	br := e.browser()
	page := e.openAs(br, ap["url"].(string), "alice")
	if strings.Contains(page.body, `value="standing"`) || !strings.Contains(page.body, "No body") {
		t.Fatalf("a rule without a bound offers a standing approval, or the empty body is not said:\n%s", page.body)
	}
	if r := e.decideApproval(br, ap["url"].(string), "alice", "deny"); r.status != http.StatusOK {
		t.Fatalf("deny: %d %s", r.status, r.body)
	}
	st, doc := a.call(http.MethodGet, "/v1/elicitations/"+ap["elicitation_id"].(string)+"?wait=1s", "alice", nil)
	if st != http.StatusOK || doc["status"] != "declined" || doc["reason"] != "user_denied" {
		t.Fatalf("status after deny: %d %v", st, doc)
	}
	if next := a.asked(e.srv.URL, http.MethodDelete, "echo/issues/7", "alice", ""); next["elicitation_id"] == ap["elicitation_id"] {
		t.Fatal("a denied approval was answered again")
	}
	if e.fake.Counts().Echo != echoes {
		t.Fatal("a denied call reached the provider")
	}
	if n := e.auditCount("approval.denied"); n != 1 {
		t.Fatalf("approval.denied audit rows: %d", n)
	}
}

// TestApprovalStanding (issue 36): "allow such requests for an hour" lets
// every call under the rule through — other bodies too — until the user
// removes the client's access; a later consent does not bring it back.
func TestApprovalStanding(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.askingClient(a)
	ap := a.asked(e.srv.URL, http.MethodPost, "echo/issues", "alice", `{"title":"a"}`)
	br := e.browser()
	if r := e.decideApproval(br, ap["url"].(string), "alice", "standing"); r.status != http.StatusOK || !strings.Contains(r.body, "1 hour") {
		t.Fatalf("allow for an hour: %d %s", r.status, r.body)
	}
	echoes := e.fake.Counts().Echo
	for _, b := range []string{`{"title":"a"}`, `{"title":"b"}`, `{"title":"c"}`} {
		if st, raw := a.proxiedTo(e.srv.URL, http.MethodPost, "echo/issues", "alice", b); st != http.StatusOK {
			t.Fatalf("under a standing approval: %d %s", st, raw)
		}
	}
	if e.fake.Counts().Echo != echoes+3 {
		t.Fatalf("calls under the standing approval: %d", e.fake.Counts().Echo-echoes)
	}
	// Another rule is not covered.
	a.asked(e.srv.URL, http.MethodDelete, "echo/issues/1", "alice", "")
	// Removing the client's access removes the approval with it.
	if _, err := e.pool.Exec(context.Background(), `DELETE FROM consents WHERE client_id = $1`, a.client.ID); err != nil {
		t.Fatal(err)
	}
	if n := e.count("approval_grants"); n != 0 {
		t.Fatalf("%d grants left after the consent went", n)
	}
}

// TestApprovalOnceAcrossReplicas (issue 36): "this one request" retried on
// two replicas at once passes once.
func TestApprovalOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.askingClient(a)
	second := e.secondReplica()
	body := `{"title":"once"}`
	ap := a.asked(e.srv.URL, http.MethodPost, "echo/issues", "alice", body)
	if r := e.decideApproval(e.browser(), ap["url"].(string), "alice", "once"); r.status != http.StatusOK {
		t.Fatalf("allow: %d %s", r.status, r.body)
	}
	echoes := e.fake.Counts().Echo
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := e.srv.URL
			if i%2 == 1 {
				base = second
			}
			statuses[i], _ = a.proxiedTo(base, http.MethodPost, "echo/issues", "alice", body)
		}()
	}
	wg.Wait()
	passed := 0
	for _, st := range statuses {
		switch st {
		case http.StatusOK:
			passed++
		case http.StatusForbidden:
		default:
			t.Fatalf("statuses %v", statuses)
		}
	}
	if passed != 1 || e.fake.Counts().Echo != echoes+1 {
		t.Fatalf("one approval passed %d calls (%d reached the provider): %v", passed, e.fake.Counts().Echo-echoes, statuses)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
