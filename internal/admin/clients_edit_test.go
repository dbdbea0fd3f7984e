package admin_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// Creating and editing MCP servers in the admin pages and API (issue 34,
// "Surfaces"): in the acting organization, by its admins, the key shown
// once. The old admin code had none of these routes: every test below got
// 404 (or 403 from the catch-all) there.

var clientKeyPattern = regexp.MustCompile(`cks_[A-Za-z0-9_-]{43}`)

// signedIn is a browser signed in as bob, with role in org-a, and the CSRF
// token of its session.
func (e *orgsEnv) signedIn(t *testing.T, role string) (*browser, string) {
	t.Helper()
	e.grant("org-a", "bob", role)
	b := e.browser()
	if r := e.adminLogin(b, "bob"); r.status != http.StatusSeeOther {
		t.Fatalf("bob's sign-in: %d %.300s", r.status, r.body)
	}
	return b, csrfOf(t, b.get(e.srv.URL+"/admin/clients").body)
}

func (e *orgsEnv) clientsOf(org string) int {
	return e.count(`SELECT count(*) FROM clients WHERE org_id = $1`, org)
}

// TestCreateClientInBrowser: an admin of org-a creates an MCP server with
// the form on /admin/clients; the answer shows its key once (with the copy
// button and the words that it will not be shown again), the key
// authenticates on /v1 as a client of org-a, and the key is in no log line,
// no redirect and no other page. Audited as client.created with the actor,
// role and organization.
func TestCreateClientInBrowser(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	b, csrf := e.signedIn(t, "admin")
	page := b.get(e.srv.URL + "/admin/clients")
	if page.status != 200 || !strings.Contains(page.body, "New MCP server") || !strings.Contains(page.body, `action="/admin/clients?org=org-a"`) {
		t.Fatalf("clients page: %d %s", page.status, page.body)
	}
	form := url.Values{"csrf_token": {csrf}, "name": {"Acme tools"}, "resources": {"https://tools.acme.example/mcp\nhttps://tools2.acme.example/"},
		"providers": {"fake"}, "proxy_only": {"yes"}, "logo_url": {"https://cdn.acme.example/logo.png"},
		"homepage": {"https://acme.example/"}}
	r := b.do(http.MethodPost, e.srv.URL+"/admin/clients?org=org-a", form)
	if r.status != 200 || r.location != "" {
		t.Fatalf("create: %d %q %s", r.status, r.location, r.body)
	}
	key := clientKeyPattern.FindString(r.body)
	if key == "" {
		t.Fatalf("no key on the answer: %s", r.body)
	}
	for _, want := range []string{"will not be shown again", `data-copy="client-key"`, `src="/static/admin-copy.js"`, "Acme tools", "org-a"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the answer lacks %q", want)
		}
	}
	if strings.Contains(r.body, "<script>") {
		t.Error("inline script on the answer")
	}
	c, err := e.clients.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatalf("the shown key: %v", err)
	}
	if c.Org != "org-a" || c.Name != "Acme tools" || !c.ProxyOnly || c.LogoURL != "https://cdn.acme.example/logo.png" ||
		c.Homepage != "https://acme.example/" || len(c.Resources) != 2 || strings.Join(c.Providers, ",") != "fake" {
		t.Fatalf("created %+v", c)
	}
	m := &mcpServer{e: e.env, client: c, key: key}
	if st, out := m.call(http.MethodGet, "/v1/connections", "bob", nil); st != 200 {
		t.Fatalf("/v1 with the shown key: %d %v", st, out)
	}
	// Once: not on its page, the listing, nor in any log line.
	for _, u := range []string{"/admin/clients/" + c.ID, "/admin/clients"} {
		if p := b.get(e.srv.URL + u); p.status != 200 || strings.Contains(p.body, key) || !strings.Contains(p.body, c.ID) {
			t.Fatalf("%s: %d, or holds the key", u, p.status)
		}
	}
	if strings.Contains(e.logs.String(), key) || strings.Contains(e.logs.String(), key[len("cks_"):]) {
		t.Fatal("the client key is in the log")
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE kind = 'client.created' AND org_id = 'org-a' AND client_id = $1
		AND actor = 'admin:bob' AND detail->>'role' = 'admin'`, c.ID); n != 1 {
		t.Fatalf("client.created audit rows: %d", n)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE detail::text LIKE '%' || $1 || '%'`, key[len("cks_"):]); n != 0 {
		t.Fatal("the key is in the audit trail")
	}
}

// TestClientEditRoles: a viewer's and a security admin's forms and API calls
// change nothing (403 role_insufficient): no MCP server is created, none
// edited, no key rotated.
func TestClientEditRoles(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	mA := e.mA.client.ID
	before := e.clientsOf("org-a")
	keys := e.count(`SELECT count(*) FROM client_keys WHERE client_id = $1`, mA)
	create := map[string]any{"name": "x", "resources": []string{"https://x.mcp.example/"}}
	for _, role := range []string{"viewer", "security"} {
		b, csrf := e.signedIn(t, role)
		pages := []struct{ path string }{{"/admin/clients"}, {"/admin/clients/" + mA + "/display"},
			{"/admin/clients/" + mA + "/proxy-only"}, {"/admin/clients/" + mA + "/rotate-key"}}
		for _, p := range pages {
			r := b.do(http.MethodPost, e.srv.URL+p.path, url.Values{"csrf_token": {csrf}, "name": {"x"},
				"resources": {"https://x.mcp.example/"}, "logo_url": {"https://cdn.example.com/l.png"}, "proxy_only": {"yes"},
				"confirm": {mA}, "overlap": {"0s"}})
			if r.status != http.StatusForbidden || e.code(r) != "role_insufficient" {
				t.Errorf("page %s as %s: %d %q", p.path, role, r.status, e.code(r))
			}
		}
		if page := b.get(e.srv.URL + "/admin/clients"); strings.Contains(page.body, `action="/admin/clients?org=org-a"`) ||
			!strings.Contains(page.body, "needs the admin role") {
			t.Errorf("the %s is offered the create form", role)
		}
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{http.MethodPost, "/admin/api/clients", create},
			{http.MethodPatch, "/admin/api/clients/" + mA, map[string]any{"proxy_only": true}},
			{http.MethodPost, "/admin/api/clients/" + mA + "/rotate-key", map[string]any{"overlap": "0s"}},
		} {
			st, raw := e.raw(c.method, c.path, "Bearer "+e.keys[role], nil, c.body)
			if st != http.StatusForbidden || decode(t, raw)["error"] != "role_insufficient" {
				t.Errorf("%s %s as %s: %d %s", c.method, c.path, role, st, raw)
			}
		}
	}
	if n := e.clientsOf("org-a"); n != before {
		t.Fatalf("org-a has %d MCP servers, had %d", n, before)
	}
	if n := e.count(`SELECT count(*) FROM client_keys WHERE client_id = $1`, mA); n != keys {
		t.Fatalf("keys of mA: %d, had %d", n, keys)
	}
	if n := e.count(`SELECT count(*) FROM clients WHERE id = $1 AND NOT proxy_only AND logo_url = ''`, mA); n != 1 {
		t.Fatal("mA was edited")
	}
	if _, err := e.clients.Authenticate(context.Background(), e.mA.key); err != nil {
		t.Fatalf("mA's key: %v", err)
	}
}

// TestClientEditOtherOrg: an admin of org-a naming org-b's MCP server on
// edit and rotate, in the pages and the API, gets 404 not_found — the body
// is not even read — and org-b's client is as it was: its key works, it has
// no other, its display and proxy-only are unchanged.
func TestClientEditOtherOrg(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	mB := e.mB.client.ID
	b, csrf := e.signedIn(t, "owner")
	for _, path := range []string{"/display", "/proxy-only", "/rotate-key"} {
		for _, q := range []string{"", "?org=org-b"} {
			r := b.do(http.MethodPost, e.srv.URL+"/admin/clients/"+mB+path+q, url.Values{"csrf_token": {csrf},
				"logo_url": {"https://evil.example/l.png"}, "proxy_only": {"yes"}, "confirm": {mB}, "overlap": {"0s"}})
			if r.status != http.StatusNotFound || clientKeyPattern.MatchString(r.body) {
				t.Errorf("page %s%s: %d %q", path, q, r.status, e.code(r))
			}
		}
	}
	for _, role := range []string{"admin", "owner"} {
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{http.MethodPatch, "/admin/api/clients/" + mB, map[string]any{"proxy_only": true, "logo_url": "https://evil.example/l.png"}},
			{http.MethodPatch, "/admin/api/clients/" + mB, map[string]any{"not_a_field": 1}},
			{http.MethodPost, "/admin/api/clients/" + mB + "/rotate-key", map[string]any{"overlap": "0s"}},
			{http.MethodPost, "/admin/api/clients/" + mB + "/rotate-key", nil},
		} {
			st, raw := e.raw(c.method, c.path, "Bearer "+e.keys[role], nil, c.body)
			if st != http.StatusNotFound || decode(t, raw)["error"] != "not_found" || clientKeyPattern.MatchString(raw) {
				t.Errorf("%s %s as org-a's %s: %d %s", c.method, c.path, role, st, raw)
			}
		}
	}
	if n := e.count(`SELECT count(*) FROM client_keys WHERE client_id = $1`, mB); n != 1 {
		t.Fatalf("org-b's client has %d keys", n)
	}
	if n := e.count(`SELECT count(*) FROM clients WHERE id = $1 AND NOT proxy_only AND logo_url = '' AND org_id = 'org-b'`, mB); n != 1 {
		t.Fatal("org-b's client was edited")
	}
	if _, err := e.clients.Authenticate(context.Background(), e.mB.key); err != nil {
		t.Fatalf("org-b's key: %v", err)
	}
	e.orgBUnchanged()
}

// TestClientCreateRefused: bad input is a 4xx with a stable code, on the
// page (the form again, with the message and what was typed) and in the
// API, and no row is written; a form without the CSRF token is refused.
func TestClientCreateRefused(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	b, csrf := e.signedIn(t, "admin")
	before, all := e.clientsOf("org-a"), e.count(`SELECT count(*) FROM clients`)
	tests := []struct {
		name      string
		form      url.Values
		status    int
		code      string
		page, api string // what the page and the API's description say
	}{
		{"empty name", url.Values{"name": {"  "}, "resources": {"https://n.mcp.example/"}}, 400, "invalid_request", "a name is required", ""},
		{"no resource", url.Values{"name": {"n"}}, 400, "invalid_request", "at least one resource URI", ""},
		{"javascript logo", url.Values{"name": {"n"}, "resources": {"https://n.mcp.example/"}, "logo_url": {"javascript:alert(1)"}},
			400, "invalid_request", "logo URL must be", ""},
		{"data logo", url.Values{"name": {"n"}, "resources": {"https://n.mcp.example/"}, "logo_url": {"data:image/png;base64,AAAA"}},
			400, "invalid_request", "logo URL must be", ""},
		{"javascript homepage", url.Values{"name": {"n"}, "resources": {"https://n.mcp.example/"}, "homepage": {"javascript:alert(1)"}},
			400, "invalid_request", "homepage must be", ""},
		{"unknown provider", url.Values{"name": {"n"}, "resources": {"https://n.mcp.example/"}, "providers": {"nosuch"}},
			400, "invalid_request", `is not in the catalog (known: fake)`, ""},
		{"bad resource", url.Values{"name": {"n"}, "resources": {"javascript:alert(1)"}}, 400, "invalid_request",
			"the registration was refused", ""},
		{"long name", url.Values{"name": {strings.Repeat("n", 201)}, "resources": {"https://n.mcp.example/"}}, 400, "invalid_request",
			"the registration was refused", ""},
		// The holder is org-b's: the answer does not name it.
		{"resource taken", url.Values{"name": {"n"}, "resources": {e.mB.client.Resources[0]}}, 409, "resource_taken",
			"already registered to another MCP server", ""},
	}
	for _, tt := range tests {
		f := url.Values{"csrf_token": {csrf}}
		for k, v := range tt.form {
			f[k] = v
		}
		r := b.do(http.MethodPost, e.srv.URL+"/admin/clients", f)
		if r.status != tt.status || e.code(r) != tt.code || !strings.Contains(r.body, tt.page) {
			t.Errorf("page, %s: %d %q %.2000s", tt.name, r.status, e.code(r), r.body)
		}
		if !strings.Contains(r.body, `name="name"`) || !strings.Contains(r.body, `role="alert"`) ||
			strings.Contains(r.body, e.mB.client.ID) {
			t.Errorf("page, %s: not the form again with the message, or names org-b's client", tt.name)
		}
		body := map[string]any{"name": tt.form.Get("name"), "resources": strings.Fields(tt.form.Get("resources")),
			"providers": tt.form["providers"], "logo_url": tt.form.Get("logo_url"), "homepage": tt.form.Get("homepage")}
		st, raw := e.raw(http.MethodPost, "/admin/api/clients", "Bearer "+e.keys["admin"], nil, body)
		if out := decode(t, raw); st != tt.status || out["error"] != tt.code || strings.Contains(raw, e.mB.client.ID) ||
			!strings.Contains(out["error_description"].(string), tt.page) {
			t.Errorf("API, %s: %d %s", tt.name, st, raw)
		}
	}
	// The form is kept: what was typed is in it again.
	r := b.do(http.MethodPost, e.srv.URL+"/admin/clients", url.Values{"csrf_token": {csrf}, "name": {"Kept name"},
		"resources": {"https://kept.mcp.example/"}, "logo_url": {"javascript:alert(1)"}})
	if !strings.Contains(r.body, `value="Kept name"`) || !strings.Contains(r.body, "https://kept.mcp.example/") {
		t.Errorf("the refused form lost its values: %s", r.body)
	}
	// No CSRF token, or another session's.
	good := url.Values{"name": {"n"}, "resources": {"https://csrf.mcp.example/"}}
	if r := b.do(http.MethodPost, e.srv.URL+"/admin/clients", good); r.status != 403 || e.code(r) != "csrf_failed" {
		t.Errorf("no CSRF token: %d %q", r.status, e.code(r))
	}
	good.Set("csrf_token", "x"+csrf)
	if r := b.do(http.MethodPost, e.srv.URL+"/admin/clients", good); r.status != 403 || e.code(r) != "csrf_failed" {
		t.Errorf("a wrong CSRF token: %d %q", r.status, e.code(r))
	}
	// An operator key must name the organization.
	if st, raw := e.raw(http.MethodPost, "/admin/api/clients", "Bearer "+e.operatorKey, nil,
		map[string]any{"name": "n", "resources": []string{"https://op.mcp.example/"}}); st != 400 || decode(t, raw)["error"] != "invalid_request" {
		t.Errorf("operator without ?org=: %d %s", st, raw)
	}
	if n, m := e.clientsOf("org-a"), e.count(`SELECT count(*) FROM clients`); n != before || m != all {
		t.Fatalf("MCP servers: org-a %d (had %d), all %d (had %d)", n, before, m, all)
	}
	if n := e.auditCount("client.created"); n != 0 {
		t.Fatalf("%d client.created rows", n)
	}
}

// TestClientEditAPI: an admin key creates an MCP server (201, the key once),
// edits its display and proxy-only (PATCH), and rotates its key with no
// overlap: the new key works, the old one is refused at once. An operator
// key creates in the organization it names. Each change audited with the
// organization and role.
func TestClientEditAPI(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	st, out := e.adminAPI(e.keys["admin"], http.MethodPost, "/admin/api/clients", map[string]any{"name": "API made",
		"resources": []string{"https://api-made.mcp.example/"}, "providers": []string{"fake"}})
	if st != 201 {
		t.Fatalf("create: %d %v", st, out)
	}
	key, _ := out["key"].(string)
	doc := out["client"].(map[string]any)
	id := doc["id"].(string)
	if !clientKeyPattern.MatchString(key) || doc["org"] != "org-a" || doc["proxy_only"] != false {
		t.Fatalf("create: %v", out)
	}
	if c, err := e.clients.Authenticate(context.Background(), key); err != nil || c.ID != id || c.Org != "org-a" {
		t.Fatalf("the key: %v %v", c, err)
	}
	st, out = e.adminAPI(e.keys["admin"], http.MethodPatch, "/admin/api/clients/"+id, map[string]any{
		"logo_url": "https://cdn.example.com/logo.png", "homepage": "https://example.com/", "proxy_only": true})
	if st != 200 || out["proxy_only"] != true || out["logo_url"] != "https://cdn.example.com/logo.png" {
		t.Fatalf("patch: %d %v", st, out)
	}
	st, out = e.adminAPI(e.keys["admin"], http.MethodPatch, "/admin/api/clients/"+id, map[string]any{"logo_url": "javascript:x"})
	if st != 400 || out["error"] != "invalid_request" {
		t.Fatalf("bad patch: %d %v", st, out)
	}
	if st, out := e.adminAPI(e.keys["admin"], http.MethodPatch, "/admin/api/clients/"+id, map[string]any{}); st != 400 {
		t.Fatalf("empty patch: %d %v", st, out)
	}
	c, err := e.clients.Get(context.Background(), id)
	if err != nil || !c.ProxyOnly || c.LogoURL != "https://cdn.example.com/logo.png" || c.Homepage != "https://example.com/" {
		t.Fatalf("after the patches: %+v %v", c, err)
	}
	if st, out := e.adminAPI(e.keys["admin"], http.MethodPost, "/admin/api/clients/"+id+"/rotate-key", map[string]any{"overlap": "720h1s"}); st != 400 {
		t.Fatalf("overlap too long: %d %v", st, out)
	}
	st, out = e.adminAPI(e.keys["admin"], http.MethodPost, "/admin/api/clients/"+id+"/rotate-key", map[string]any{"overlap": "0s"})
	fresh, _ := out["key"].(string)
	if st != 200 || !clientKeyPattern.MatchString(fresh) || fresh == key {
		t.Fatalf("rotate: %d %v", st, out)
	}
	if _, err := e.clients.Authenticate(context.Background(), fresh); err != nil {
		t.Fatalf("the new key: %v", err)
	}
	if _, err := e.clients.Authenticate(context.Background(), key); err == nil {
		t.Fatal("the old key still works with no overlap")
	}
	// No body: the default overlap (the old key keeps working).
	st, out = e.adminAPI(e.keys["owner"], http.MethodPost, "/admin/api/clients/"+id+"/rotate-key", nil)
	if st != 200 || out["overlap"] != "24h0m0s" {
		t.Fatalf("rotate, default overlap: %d %v", st, out)
	}
	if _, err := e.clients.Authenticate(context.Background(), fresh); err != nil {
		t.Fatalf("the previous key within the overlap: %v", err)
	}
	for kind, n := range map[string]int{"client.created": 1, "client.display_set": 1, "client.proxy_only_set": 1, "client.key_rotated": 2} {
		if got := e.count(`SELECT count(*) FROM audit_events WHERE kind = $1 AND org_id = 'org-a' AND client_id = $2
			AND detail->>'role' IN ('admin', 'owner') AND actor LIKE 'admin_key:%'`, kind, id); got != n {
			t.Errorf("%s: %d audit rows, want %d", kind, got, n)
		}
	}
	// An operator creates in the organization it names.
	st, out = e.adminAPI(e.operatorKey, http.MethodPost, "/admin/api/clients?org=org-b", map[string]any{"name": "Op made",
		"resources": []string{"https://op-made.mcp.example/"}})
	if st != 201 || out["client"].(map[string]any)["org"] != "org-b" {
		t.Fatalf("operator create in org-b: %d %v", st, out)
	}
	for _, k := range []string{key, fresh} {
		if strings.Contains(e.logs.String(), k) {
			t.Fatal("a client key is in the log")
		}
	}
}

// TestClientEditPages: an admin edits display and proxy-only with the forms
// on the MCP server's page, and rotates its key: the new key is shown once,
// with until when the old one works. A bad logo URL shows the forms again
// with the message and changes nothing.
func TestClientEditPages(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	mA := e.mA.client.ID
	b, csrf := e.signedIn(t, "admin")
	page := b.get(e.srv.URL + "/admin/clients/" + mA)
	for _, want := range []string{"/admin/clients/" + mA + "/display", "/admin/clients/" + mA + "/proxy-only",
		"/admin/clients/" + mA + "/rotate-key", "Rotate key"} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("the MCP server's page lacks %q", want)
		}
	}
	base := e.srv.URL + "/admin/clients/" + mA
	r := b.do(http.MethodPost, base+"/display", url.Values{"csrf_token": {csrf}, "logo_url": {"javascript:alert(1)"}, "homepage": {""}})
	if r.status != 400 || e.code(r) != "invalid_request" || !strings.Contains(r.body, "logo URL must be") ||
		!strings.Contains(r.body, "Save display") {
		t.Fatalf("bad display: %d %q", r.status, e.code(r))
	}
	if n := e.auditCount("client.display_set"); n != 0 {
		t.Fatal("a refused display was recorded")
	}
	r = b.do(http.MethodPost, base+"/display", url.Values{"csrf_token": {csrf}, "logo_url": {"https://cdn.example.com/a.png"},
		"homepage": {"https://a.example/"}})
	if r.status != http.StatusSeeOther || !strings.Contains(r.location, "/admin/clients/"+mA+"?org=org-a") {
		t.Fatalf("display: %d %q", r.status, r.location)
	}
	r = b.do(http.MethodPost, base+"/proxy-only", url.Values{"csrf_token": {csrf}, "proxy_only": {"yes"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("proxy-only: %d", r.status)
	}
	c, _ := e.clients.Get(context.Background(), mA)
	if !c.ProxyOnly || c.LogoURL != "https://cdn.example.com/a.png" || c.Homepage != "https://a.example/" {
		t.Fatalf("after the forms: %+v", c)
	}
	if r := b.do(http.MethodPost, base+"/rotate-key", url.Values{"overlap": {"1h0m0s"}, "confirm": {mA}}); r.status != 403 ||
		e.code(r) != "csrf_failed" {
		t.Fatalf("rotate without CSRF: %d %q", r.status, e.code(r))
	}
	if r := b.do(http.MethodPost, base+"/rotate-key", url.Values{"csrf_token": {csrf}, "overlap": {"1h0m0s"}}); r.status != 400 ||
		e.code(r) != "confirmation_required" {
		t.Fatalf("rotate without confirm: %d %q", r.status, e.code(r))
	}
	r = b.do(http.MethodPost, base+"/rotate-key", url.Values{"csrf_token": {csrf}, "overlap": {"1h0m0s"}, "confirm": {mA}})
	key := clientKeyPattern.FindString(r.body)
	if r.status != 200 || key == "" || key == e.mA.key || !strings.Contains(r.body, "keep working for 1 hour") ||
		!strings.Contains(r.body, "will not be shown again") {
		t.Fatalf("rotate: %d %s", r.status, r.body)
	}
	for _, k := range []string{key, e.mA.key} {
		if _, err := e.clients.Authenticate(context.Background(), k); err != nil {
			t.Fatalf("a key within the overlap: %v", err)
		}
	}
	if strings.Contains(b.get(base).body, key) || strings.Contains(e.logs.String(), key) {
		t.Fatal("the rotated key is shown again or logged")
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE kind IN ('client.display_set', 'client.proxy_only_set', 'client.key_rotated')
		AND org_id = 'org-a' AND actor = 'admin:bob' AND detail->>'role' = 'admin'`); n != 3 {
		t.Fatalf("audit rows: %d", n)
	}
}
