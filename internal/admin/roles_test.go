package admin_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/admin"
)

// The attacks of issue 34's "Isolation is the product" on the admin surface:
// an admin of organization A, of every role, naming organization B's objects.
// The setup writes memberships and key roles with plain SQL (the tables of
// migration 00030), so that these tests build against the admin code before
// roles and fail there: it showed every organization's rows to every admin.

// leastRoles is the least role of every guarded admin route: the
// specification the route table (Route.Least) is held to. A new route must
// be added here, with the role it needs.
var leastRoles = map[string]string{
	"GET /admin/{$}":                            "viewer",
	"GET /admin/connections":                    "viewer",
	"GET /admin/connections/{id}":               "viewer",
	"GET /admin/connections/{id}/revoke":        "security",
	"POST /admin/connections/{id}/revoke":       "security",
	"POST /admin/sessions/end":                  "security",
	"GET /admin/clients":                        "viewer",
	"GET /admin/clients/{id}":                   "viewer",
	"GET /admin/clients/{id}/cut-off":           "security",
	"POST /admin/clients/{id}/cut-off":          "security",
	"POST /admin/clients/{id}/cut-off/revoke":   "security",
	"POST /admin/clients/{id}/enable":           "security",
	"POST /admin/clients/{id}/webhooks":         "admin",
	"GET /admin/webhooks/{id}":                  "viewer",
	"GET /admin/webhooks/{id}/delete":           "admin",
	"POST /admin/webhooks/{id}/delete":          "admin",
	"GET /admin/deliveries/{id}":                "viewer",
	"POST /admin/deliveries/{id}/redeliver":     "admin",
	"GET /admin/events":                         "viewer",
	"GET /admin/admins":                         "owner",
	"POST /admin/admins":                        "owner",
	"POST /admin/admins/revoke":                 "owner",
	"POST /admin/clients":                       "admin", // clients_edit.go
	"POST /admin/clients/{id}/registration":     "admin",
	"POST /admin/clients/{id}/display":          "admin",
	"POST /admin/clients/{id}/proxy-only":       "admin",
	"POST /admin/clients/{id}/rotate-key":       "admin",
	"GET /admin/apps":                           "owner", // apps.go
	"POST /admin/apps":                          "owner",
	"POST /admin/apps/remove":                   "owner",
	"/admin/":                                   "viewer",
	"GET /admin/api/connections":                "viewer",
	"GET /admin/api/connections/{id}":           "viewer",
	"POST /admin/api/connections/{id}/revoke":   "security",
	"POST /admin/api/sessions/end":              "security",
	"GET /admin/api/clients":                    "viewer",
	"POST /admin/api/clients/{id}/cut-off":      "security",
	"PUT /admin/api/clients/{id}/jwt-keys":      "admin",
	"GET /admin/api/clients/{id}/webhooks":      "viewer",
	"GET /admin/api/clients/{id}/approvals":     "viewer", // approvals.go
	"POST /admin/api/clients/{id}/webhooks":     "admin",
	"DELETE /admin/api/webhooks/{id}":           "admin",
	"GET /admin/api/webhooks/{id}/deliveries":   "viewer",
	"GET /admin/api/deliveries/{id}":            "viewer",
	"POST /admin/api/deliveries/{id}/redeliver": "admin",
	"GET /admin/api/events":                     "viewer",
	"GET /admin/api/admins":                     "owner",
	"PUT /admin/api/admins":                     "owner",
	"POST /admin/api/admins/revoke":             "owner",
	"POST /admin/api/clients":                   "admin", // clients_edit.go
	"PATCH /admin/api/clients/{id}":             "admin",
	"POST /admin/api/clients/{id}/rotate-key":   "admin",
	"GET /admin/api/apps":                       "owner", // apps.go
	"PUT /admin/api/apps/{provider}":            "owner",
	"DELETE /admin/api/apps/{provider}":         "owner",
	"/admin/api/":                               "viewer",
}

var roleOrder = []string{"viewer", "security", "admin", "owner"}

func allows(role, least string) bool {
	rank := func(r string) int {
		for i, x := range roleOrder {
			if x == r {
				return i
			}
		}
		return -1
	}
	return rank(role) >= rank(least) && rank(least) >= 0
}

// orgsEnv is one connectd with two organizations: org-a, whose admins
// attack, and org-b, whose objects they name.
type orgsEnv struct {
	*env
	mA, mB        *mcpServer
	connA, connB  string            // bob's connection through mA, alice's through mB
	epB, delB     string            // org-b's webhook endpoint and one of its deliveries
	markerB       string            // an org-b audit event's kind
	keys          map[string]string // org-a admin keys by role
	operatorKey   string
	webhookTarget string
}

func (e *env) exec(q string, args ...any) {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(), q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

// grant makes subject (at the dev IdP) role in org, with plain SQL.
func (e *env) grant(org, subject, role string) {
	e.t.Helper()
	e.exec(`INSERT INTO org_admins (org_id, issuer, subject, role, created_by) VALUES ($1, $2, $3, $4, 'test')
		ON CONFLICT (org_id, issuer, subject) DO UPDATE SET role = EXCLUDED.role`, org, e.idp.Issuer(), subject, role)
}

// orgKey is an admin key of org with role.
func (e *env) orgKey(org, role string) string {
	e.t.Helper()
	k, secret := e.newAdminKey(org + " " + role)
	e.exec(`UPDATE admin_keys SET org_id = $2, role = $3 WHERE id = $1`, k.ID, org, role)
	return secret
}

// connectIn connects user through m, then moves m and the connection to
// org: the connect flow's own organization handling is another package's
// (and its tests'); here only where the rows are matters.
func (e *env) connectIn(org string, m *mcpServer, user string) string {
	e.t.Helper()
	id := e.connectFully(m, user, "files.read")
	e.exec(`UPDATE clients SET org_id = $1 WHERE id = $2`, org, m.client.ID)
	e.exec(`UPDATE connections SET org_id = $1 WHERE id = $2`, org, id)
	return id
}

func newOrgsEnv(t *testing.T) *orgsEnv {
	t.Helper()
	e := &orgsEnv{env: newEnv(t, envOptions{}), keys: map[string]string{}}
	e.exec(`INSERT INTO organizations (id, name) VALUES ('org-a', 'A'), ('org-b', 'B')`)
	e.mA, e.mB = e.newMCPServer("files-a", "fake"), e.newMCPServer("files-b", "fake")
	e.connA = e.connectIn("org-a", e.mA, "bob")
	e.connB = e.connectIn("org-b", e.mB, "alice")

	rc := newReceiver(t)
	e.webhookTarget = rc.srv.URL + "/hooks"
	wh, err := e.store.Webhooks()
	if err != nil {
		t.Fatal(err)
	}
	ep, _, err := wh.Create(context.Background(), e.mB.client.ID, e.webhookTarget, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.epB, e.delB = ep.ID, "msg_orgbdelivery"
	e.exec(`INSERT INTO webhook_deliveries (id, endpoint_id, event_type, payload, created_at, status, attempts)
		VALUES ($1, $2, 'connection.created', '{"org":"b"}', now(), 'failed', 3)`, e.delB, e.epB)
	e.markerB = "security.org_b_only"
	e.exec(`INSERT INTO audit_events (kind, actor, org_id) VALUES ($1, 'client:x', 'org-b')`, e.markerB)
	e.exec(`INSERT INTO audit_events (kind, actor, org_id) VALUES ('security.org_a_only', 'client:x', 'org-a')`)
	e.grant("org-b", "b-owner", "owner")
	// bob is org-a's admin (his role changes per test step: it is read
	// on every request); a key of each role.
	e.grant("org-a", "bob", "viewer")
	for _, role := range roleOrder {
		e.keys[role] = e.orgKey("org-a", role)
	}
	_, e.operatorKey = e.newAdminKey("operator")
	return e
}

// orgBUnchanged fails the test if any of org-b's objects changed.
func (e *orgsEnv) orgBUnchanged() {
	e.t.Helper()
	checks := []struct {
		what  string
		query string
		arg   string
	}{
		{"org-b's connection", `SELECT count(*) FROM connections WHERE id = $1 AND org_id = 'org-b'`, e.connB},
		{"org-b's consent", `SELECT count(*) FROM consents WHERE connection_id = $1`, e.connB},
		{"org-b's client, enabled, without assertion keys", `SELECT count(*) FROM clients WHERE id = $1 AND NOT disabled
			AND jwks_url IS NULL AND jwks IS NULL`, e.mB.client.ID},
		{"org-b's client's registration", `SELECT count(*) FROM clients WHERE id = $1 AND name = 'files-b'
			AND resources = '{https://files-b.mcp.example/}'`, e.mB.client.ID},
		{"org-b's endpoint", `SELECT count(*) FROM webhook_endpoints WHERE id = $1`, e.epB},
		{"org-b's endpoint alone", `SELECT 1 + count(*) FROM webhook_endpoints WHERE client_id = (SELECT client_id FROM webhook_endpoints WHERE id = $1) AND id <> $1`, e.epB},
		{"org-b's delivery, as it was", `SELECT count(*) FROM webhook_deliveries WHERE id = $1 AND status = 'failed' AND attempts = 3`, e.delB},
		{"org-b's owner", `SELECT count(*) FROM org_admins WHERE org_id = 'org-b' AND subject = $1 AND role = 'owner'`, "b-owner"},
		{"org-b's admins", `SELECT count(*) FROM org_admins WHERE org_id = 'org-b' AND $1 <> ''`, "x"},
		{"alice's sessions", `SELECT 1 + count(*) FROM audit_events WHERE kind = 'sessions.ended' AND $1 <> ''`, "x"},
	}
	for _, c := range checks {
		if n := e.count(c.query, c.arg); n != 1 {
			e.t.Errorf("%s changed: %d rows", c.what, n)
		}
	}
}

// orgBMarkers are what no answer to an org-a admin may hold.
func (e *orgsEnv) orgBMarkers() []string {
	return []string{e.connB, e.mB.client.ID, e.epB, e.delB, e.markerB, "b-owner"}
}

// target is a request for pattern naming org-b's object of its kind.
func (e *orgsEnv) target(pattern string) (method, path string, named bool) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	if p, ok := strings.CutSuffix(path, "{$}"); ok {
		path = p
	}
	if strings.Contains(path, "{id}") {
		named = true
		id := e.connB
		switch {
		case strings.Contains(path, "/clients/"):
			id = e.mB.client.ID
		case strings.Contains(path, "/webhooks/"):
			id = e.epB
		case strings.Contains(path, "/deliveries/"):
			id = e.delB
		}
		path = strings.ReplaceAll(path, "{id}", id)
	}
	if strings.HasSuffix(path, "/sessions/end") {
		named = true // names alice, a user of org-b only
	}
	if strings.HasSuffix(path, "/") {
		path += "no-such-thing"
	}
	return method, path, named
}

// since is a time in the past by the test's clock and the real one.
func (e *orgsEnv) since() time.Time {
	t := time.Now()
	if c := e.clock.Now(); c.Before(t) {
		t = c
	}
	return t.Add(-48 * time.Hour).UTC()
}

// body is what the route is sent: everything a valid request of it needs,
// naming org-b's object, so only the organization can stop it (page forms
// give dates as the form's date input does).
func (e *orgsEnv) body(path string, page bool) map[string]any {
	trimmed := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(path, "/revoke"), "/cut-off"), "/delete")
	id := trimmed[strings.LastIndex(trimmed, "/")+1:]
	since := e.since().Format(time.RFC3339)
	if page {
		since = e.since().Format("2006-01-02")
	}
	switch {
	case strings.HasSuffix(path, "/sessions/end"):
		return map[string]any{"issuer": e.idp.Issuer(), "subject": "alice"}
	case strings.HasSuffix(path, "/cut-off"):
		return map[string]any{"confirm": e.mB.client.ID, "since": since, "revoke": true}
	case strings.HasSuffix(path, "/cut-off/revoke"):
		return map[string]any{"confirm": e.mB.client.ID, "since": since}
	case strings.HasSuffix(path, "/jwt-keys"):
		return map[string]any{"jwks_url": "https://keys.example.com/jwks.json", "drop_client_keys": true}
	case strings.HasSuffix(path, "/webhooks"):
		return map[string]any{"url": e.webhookTarget + "/evil"}
	case strings.HasSuffix(path, "/admins"):
		return map[string]any{"issuer": e.idp.Issuer(), "subject": "mallory", "role": "owner"}
	case strings.HasSuffix(path, "/registration"):
		return map[string]any{"name": "Pwned", "resources": "https://evil.example/"}
	case strings.HasSuffix(path, "/admins/revoke"):
		return map[string]any{"issuer": e.idp.Issuer(), "subject": "b-owner"}
	}
	return map[string]any{"confirm": id}
}

func form(b map[string]any, csrf string) url.Values {
	v := url.Values{"csrf_token": {csrf}}
	for k, x := range b {
		switch x := x.(type) {
		case string:
			v.Set(k, x)
		case bool:
			if x {
				v.Set(k, "yes")
			}
		}
	}
	return v
}

// TestOrgAdminsCannotReachAnotherOrg is the matrix: every guarded admin
// route, as an org-a admin of every role (an API key of the role, and a
// signed-in admin of the role on the pages), naming org-b's object by id —
// or, on a listing, asking for everything, or with ?org=org-b. A role the
// route allows gets 404 and nothing of org-b; a role it does not allow gets
// 403 role_insufficient, the same answer whatever it names; nothing of
// org-b changes. The old admin code answered with org-b's rows and let the
// viewer revoke, cut off and delete them.
func TestOrgAdminsCannotReachAnotherOrg(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	b := e.browser()
	pages := true // the API's attacks are made even when the sign-in fails
	if r := e.adminLogin(b, "bob"); r.status != http.StatusSeeOther {
		t.Errorf("sign-in of org-a's admin: %d %.200s", r.status, r.body)
		pages = false
	}
	csrf := ""
	if pages {
		csrf = csrfOf(t, b.get(e.srv.URL+"/admin/connections").body)
	}

	seen := map[string]bool{}
	for _, role := range roleOrder {
		e.grant("org-a", "bob", role) // read on bob's next request
		for _, rt := range e.admin.RouteTable() {
			if rt.Access == admin.Public {
				continue
			}
			least, ok := leastRoles[rt.Pattern]
			if !ok {
				t.Errorf("route %s is not in leastRoles: say which role it needs", rt.Pattern)
				continue
			}
			seen[rt.Pattern] = true
			if rt.Access == admin.AdminPage && !pages {
				continue
			}
			e.attack(t, b, csrf, rt, role, least)
		}
	}
	for p := range leastRoles {
		if !seen[p] {
			t.Errorf("leastRoles names %s, which is not a route", p)
		}
	}
	e.orgBUnchanged()
}

// attack sends route rt as org-a's admin of role (its key on the API, the
// signed-in b on the pages), naming org-b's object, and checks the answer.
func (e *orgsEnv) attack(t *testing.T, b *browser, csrf string, rt admin.Route, role, least string) {
	t.Helper()
	method, path, named := e.target(rt.Pattern)
	for _, orgParam := range []string{"", "?org=org-b"} {
		var (
			status int
			body   string
			code   string
		)
		switch rt.Access {
		case admin.AdminAPI:
			var in any
			if method != http.MethodGet && method != http.MethodDelete {
				in = e.body(path, false)
			}
			status, body = e.raw(method, path+orgParam, "Bearer "+e.keys[role], nil, in)
			code, _ = decode(t, body)["error"].(string)
		case admin.AdminPage:
			var f url.Values
			if method == http.MethodPost {
				f = form(e.body(path, true), csrf)
			}
			r := b.do(method, e.srv.URL+path+orgParam, f)
			status, body, code = r.status, r.body, e.code(r)
		}
		name := rt.Pattern + orgParam + " as org-a's " + role
		for _, m := range e.orgBMarkers() {
			if strings.Contains(body, m) {
				t.Errorf("%s: the answer holds org-b's %q: %.300s", name, m, body)
			}
		}
		switch {
		case orgParam != "": // an organization it does not act for: not found, whatever the role
			if status != http.StatusNotFound {
				t.Errorf("%s: %d %q, want 404", name, status, code)
			}
		case !allows(role, least):
			if status != http.StatusForbidden || code != "role_insufficient" {
				t.Errorf("%s: %d %q, want 403 role_insufficient", name, status, code)
			}
		case named || strings.HasSuffix(path, "no-such-thing"):
			if status != http.StatusNotFound {
				t.Errorf("%s: %d %q, want 404", name, status, code)
			}
		case method == http.MethodGet:
			if status != http.StatusOK && status != http.StatusSeeOther {
				t.Errorf("%s: %d %q, want the org-a listing", name, status, code)
			}
		}
	}
}

// TestOrgRolesActions: in its own organization each role may do exactly
// what its role allows — a viewer's (and a security admin's) POST changes
// nothing and the row is still there; the role that may, does; the audit
// row of each action carries the organization and the role. The old code
// let every key do everything, recording neither.
func TestOrgRolesActions(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	mA := e.mA.client.ID
	type step struct {
		role   string
		method string
		path   string
		body   any
		status int
		after  func() bool // the state the step must leave
	}
	connA := func() bool { return e.count(`SELECT count(*) FROM connections WHERE id = $1`, e.connA) == 1 }
	webhooks := func(n int) func() bool {
		return func() bool { return e.count(`SELECT count(*) FROM webhook_endpoints WHERE client_id = $1`, mA) == n }
	}
	owners := func(n int) func() bool {
		return func() bool {
			return e.count(`SELECT count(*) FROM org_admins WHERE org_id = 'org-a' AND subject = 'erin'`) == n
		}
	}
	enabled := func(want bool) func() bool {
		return func() bool {
			return e.count(`SELECT count(*) FROM clients WHERE id = $1 AND disabled = $2`, mA, !want) == 1
		}
	}
	since := e.since().Format(time.RFC3339)
	grant := map[string]any{"issuer": e.idp.Issuer(), "subject": "erin", "role": "viewer"}
	steps := []step{
		{"viewer", http.MethodGet, "/admin/api/connections/" + e.connA, nil, 200, connA},
		{"viewer", http.MethodPost, "/admin/api/connections/" + e.connA + "/revoke", map[string]any{"confirm": e.connA}, 403, connA},
		{"viewer", http.MethodPost, "/admin/api/clients/" + mA + "/webhooks", map[string]any{"url": e.webhookTarget}, 403, webhooks(0)},
		{"security", http.MethodPost, "/admin/api/clients/" + mA + "/webhooks", map[string]any{"url": e.webhookTarget}, 403, webhooks(0)},
		{"admin", http.MethodPost, "/admin/api/clients/" + mA + "/webhooks", map[string]any{"url": e.webhookTarget}, 201, webhooks(1)},
		{"viewer", http.MethodGet, "/admin/api/admins", nil, 403, owners(0)},
		{"admin", http.MethodPut, "/admin/api/admins", grant, 403, owners(0)},
		{"owner", http.MethodPut, "/admin/api/admins", grant, 200, owners(1)},
		{"owner", http.MethodPost, "/admin/api/admins/revoke", map[string]any{"issuer": e.idp.Issuer(), "subject": "erin"}, 200, owners(0)},
		{"security", http.MethodPost, "/admin/api/connections/" + e.connA + "/revoke", map[string]any{"confirm": e.connA}, 200,
			func() bool { return !connA() }},
		{"viewer", http.MethodPost, "/admin/api/clients/" + mA + "/cut-off", map[string]any{"confirm": mA, "since": since}, 403, enabled(true)},
		{"security", http.MethodPost, "/admin/api/clients/" + mA + "/cut-off", map[string]any{"confirm": mA, "since": since}, 200, enabled(false)},
	}
	for i, s := range steps {
		st, raw := e.raw(s.method, s.path, "Bearer "+e.keys[s.role], nil, s.body)
		if st != s.status {
			t.Fatalf("step %d: %s %s as %s: %d %s, want %d", i, s.method, s.path, s.role, st, raw, s.status)
		}
		if st == http.StatusForbidden && decode(t, raw)["error"] != "role_insufficient" {
			t.Fatalf("step %d: %s", i, raw)
		}
		if !s.after() {
			t.Fatalf("step %d: %s %s as %s left the wrong state", i, s.method, s.path, s.role)
		}
	}
	// Every action is in org-a's trail, with the role it was taken in.
	for kind, role := range map[string]string{"webhook.created": "admin", "admin.role_granted": "owner",
		"admin.role_revoked": "owner", "admin.connection_revoked": "security", "client.cut_off": "security"} {
		if n := e.count(`SELECT count(*) FROM audit_events WHERE kind = $1 AND org_id = 'org-a' AND detail->>'role' = $2
			AND actor LIKE 'admin_key:%'`, kind, role); n != 1 {
			t.Errorf("%s: %d audit rows in org-a by a %s key, want 1", kind, n, role)
		}
	}
	e.orgBUnchanged()
}

// TestOperatorSeesEveryOrg: an operator key (no organization) and the
// Policy's admin see and act on every organization, and may filter by one.
func TestOperatorSeesEveryOrg(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	ids := func(out map[string]any) string {
		var s []string
		for _, c := range out["connections"].([]any) {
			s = append(s, c.(map[string]any)["id"].(string))
		}
		return strings.Join(s, " ")
	}
	st, all := e.adminAPI(e.operatorKey, http.MethodGet, "/admin/api/connections", nil)
	if st != 200 || !strings.Contains(ids(all), e.connA) || !strings.Contains(ids(all), e.connB) {
		t.Fatalf("operator listing: %d %v", st, all)
	}
	if st, b := e.adminAPI(e.operatorKey, http.MethodGet, "/admin/api/connections?org=org-b", nil); st != 200 || ids(b) != e.connB {
		t.Fatalf("operator listing of org-b: %d %v", st, b)
	}
	if st, d := e.adminAPI(e.operatorKey, http.MethodGet, "/admin/api/connections/"+e.connB, nil); st != 200 || d["org"] != "org-b" {
		t.Fatalf("operator detail of org-b's connection: %d %v", st, d)
	}
	alice := e.adminBrowser() // the Policy's admin
	if r := alice.get(e.srv.URL + "/admin/connections/" + e.connB); r.status != 200 {
		t.Fatalf("operator page of org-b's connection: %d", r.status)
	}
	if r := alice.get(e.srv.URL + "/admin/clients"); r.status != 200 || !strings.Contains(r.body, e.mA.client.ID) ||
		!strings.Contains(r.body, e.mB.client.ID) {
		t.Fatalf("operator clients page: %d", r.status)
	}
	// Acts on org-b, recorded in org-b's trail as an operator's.
	if st, out := e.adminAPI(e.operatorKey, http.MethodPost, "/admin/api/connections/"+e.connB+"/revoke",
		map[string]any{"confirm": e.connB}); st != 200 {
		t.Fatalf("operator revoke: %d %v", st, out)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE kind = 'admin.connection_revoked' AND org_id = 'org-b'
		AND detail->>'role' = 'operator'`); n != 1 {
		t.Fatalf("operator revocation audit rows in org-b: %d", n)
	}
}

// TestRemovedAdminRefusedAtOnce: a signed-in org admin whose membership is
// removed is refused on the very next request; an admin of two
// organizations picks the acting one with ?org= and sees only its objects.
// The old code admitted no org admin at all (the Policy alone).
func TestRemovedAdminRefusedAtOnce(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	e.grant("org-b", "bob", "viewer") // now an admin of both
	b := e.browser()
	if r := e.adminLogin(b, "bob"); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", r.status, r.body)
	}
	page := b.get(e.srv.URL + "/admin/connections")
	if page.status != 200 || !strings.Contains(page.body, e.connA) || strings.Contains(page.body, e.connB) {
		t.Fatalf("first organization's listing: %d", page.status)
	}
	if !strings.Contains(page.body, `href="/admin/connections?org=org-b"`) {
		t.Fatalf("no switch to org-b: %s", page.body)
	}
	page = b.get(e.srv.URL + "/admin/connections?org=org-b")
	if page.status != 200 || !strings.Contains(page.body, e.connB) || strings.Contains(page.body, e.connA) ||
		!strings.Contains(page.body, "/admin/connections/"+e.connB+"?org=org-b") {
		t.Fatalf("org-b's listing: %d", page.status)
	}
	if r := b.get(e.srv.URL + "/admin/connections/" + e.connB + "?org=org-b"); r.status != 200 {
		t.Fatalf("org-b's connection in org-b: %d", r.status)
	}
	if r := b.get(e.srv.URL + "/admin/connections/" + e.connB + "?org=org-a"); r.status != 404 {
		t.Fatalf("org-b's connection acting for org-a: %d", r.status)
	}

	e.exec(`DELETE FROM org_admins WHERE subject = 'bob' AND org_id = 'org-b'`)
	if r := b.get(e.srv.URL + "/admin/connections?org=org-b"); r.status != 404 || strings.Contains(r.body, e.connB) {
		t.Fatalf("org-b after its membership went: %d", r.status)
	}
	e.exec(`DELETE FROM org_admins WHERE subject = 'bob'`)
	if r := b.get(e.srv.URL + "/admin/connections"); r.status != http.StatusForbidden || strings.Contains(r.body, e.connA) {
		t.Fatalf("after every membership went: %d", r.status)
	}
	// A key's role is read on every request too.
	e.exec(`UPDATE admin_keys SET role = 'viewer' WHERE org_id = 'org-a' AND role = 'security'`)
	if st, out := e.adminAPI(e.keys["security"], http.MethodPost, "/admin/api/connections/"+e.connA+"/revoke",
		map[string]any{"confirm": e.connA}); st != 403 || out["error"] != "role_insufficient" {
		t.Fatalf("demoted key: %d %v", st, out)
	}
}

// TestClaimPolicyMemberIsNotOperator: with a claim-only Policy the claim is
// in the ID token alone, which a later request cannot re-check; an org
// admin at the admin issuer without the claim must stay an org admin, not
// pass the per-request check as an operator.
func TestClaimPolicyMemberIsNotOperator(t *testing.T) {
	t.Parallel()
	e := &orgsEnv{env: newEnv(t, envOptions{policy: &admin.Policy{Issuer: "idp0", Claim: "groups", ClaimValue: adminGroup}})}
	e.exec(`INSERT INTO organizations (id, name) VALUES ('org-a', 'A'), ('org-b', 'B')`)
	e.mB = e.newMCPServer("files-b", "fake")
	e.connB = e.connectIn("org-b", e.mB, "alice")
	e.grant("org-a", "bob", "viewer")
	b := e.browser()
	if r := e.adminLogin(b, "bob"); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", r.status, r.body)
	}
	if r := b.get(e.srv.URL + "/admin/connections"); r.status != 200 || strings.Contains(r.body, e.connB) {
		t.Fatalf("listing: %d", r.status)
	}
	if r := b.get(e.srv.URL + "/admin/connections/" + e.connB); r.status != 404 {
		t.Fatalf("org-b's connection: %d", r.status)
	}
	alice := e.adminBrowser() // has the claim: an operator
	if r := alice.get(e.srv.URL + "/admin/connections/" + e.connB); r.status != 200 {
		t.Fatalf("operator: %d", r.status)
	}
}

// TestClaimMappingRole: a group claim mapping (org_admin_claims) gives a
// role to whoever signs in with the claim — here alice, whose ID token's
// groups hold connectd-admins, under a Policy that admits only the
// subject admin. Her role is the mapping's, limited to its organization;
// removing the mapping refuses her next request. The old code refused her
// sign-in.
func TestClaimMappingRole(t *testing.T) {
	t.Parallel()
	e := &orgsEnv{env: newEnv(t, envOptions{policy: &admin.Policy{Issuer: "idp0", Subjects: []string{"admin"}}})}
	e.exec(`INSERT INTO organizations (id, name) VALUES ('org-a', 'A'), ('org-b', 'B')`)
	e.mA, e.mB = e.newMCPServer("files-a", "fake"), e.newMCPServer("files-b", "fake")
	e.connA = e.connectIn("org-a", e.mA, "bob")
	e.connB = e.connectIn("org-b", e.mB, "alice")
	e.exec(`INSERT INTO org_admin_claims (org_id, issuer, claim, value, role, created_by)
		VALUES ('org-a', $1, 'groups', $2, 'viewer', 'test'), ('org-a', $1, 'groups', 'staff', 'security', 'test'),
		('org-b', $1, 'groups', 'nobody-has-this', 'owner', 'test')`, e.idp.Issuer(), adminGroup)

	b := e.browser()
	if r := e.adminLogin(b, "alice"); r.status != http.StatusSeeOther {
		t.Fatalf("alice's sign-in: %d %.300s", r.status, r.body)
	}
	page := b.get(e.srv.URL + "/admin/connections")
	if page.status != 200 || !strings.Contains(page.body, e.connA) || strings.Contains(page.body, e.connB) ||
		!strings.Contains(page.body, "security of org-a") { // the higher of her two mappings' roles
		t.Fatalf("alice's listing: %d", page.status)
	}
	if r := b.get(e.srv.URL + "/admin/connections/" + e.connB); r.status != 404 {
		t.Fatalf("org-b's connection: %d", r.status)
	}
	if r := b.get(e.srv.URL + "/admin/connections?org=org-b"); r.status != 404 {
		t.Fatalf("org-b, whose mapping her token does not meet: %d", r.status)
	}
	e.exec(`DELETE FROM org_admin_claims WHERE value = 'staff'`) // security goes, viewer stays
	if r := b.get(e.srv.URL + "/admin/connections/" + e.connA + "/revoke"); r.status != 403 || e.code(r) != "role_insufficient" {
		t.Fatalf("revoke page after the security mapping went: %d %q", r.status, e.code(r))
	}
	e.exec(`DELETE FROM org_admin_claims WHERE org_id = 'org-a'`)
	if r := b.get(e.srv.URL + "/admin/connections"); r.status != http.StatusForbidden || strings.Contains(r.body, e.connA) {
		t.Fatalf("after the mappings went: %d", r.status)
	}
	// bob's token meets no mapping: refused at sign-in, as before.
	if r := e.adminLogin(e.browser(), "bob"); r.status != http.StatusForbidden {
		t.Fatalf("bob's sign-in: %d", r.status)
	}
}

// TestOwnerAdminsPage: an owner manages the organization's admins on the
// page (grant, remove, CSRF-checked, audited with the owner's role); a
// lower role is refused the page.
func TestOwnerAdminsPage(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	e.grant("org-a", "bob", "owner")
	b := e.browser()
	if r := e.adminLogin(b, "bob"); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", r.status)
	}
	page := b.get(e.srv.URL + "/admin/admins")
	if page.status != 200 || !strings.Contains(page.body, "Admins of org-a") || strings.Contains(page.body, "b-owner") ||
		!strings.Contains(page.body, `href="/admin/admins?org=org-a"`) {
		t.Fatalf("admins page: %d %s", page.status, page.body)
	}
	csrf := csrfOf(t, page.body)
	grant := url.Values{"issuer": {e.idp.Issuer()}, "subject": {"alice"}, "role": {"viewer"}}
	if r := b.do(http.MethodPost, e.srv.URL+"/admin/admins", grant); r.status != http.StatusForbidden || e.code(r) != "csrf_failed" {
		t.Fatalf("grant without CSRF: %d %q", r.status, e.code(r))
	}
	grant.Set("csrf_token", csrf)
	if r := b.do(http.MethodPost, e.srv.URL+"/admin/admins", grant); r.status != 200 || !strings.Contains(r.body, "alice is now viewer of org-a") {
		t.Fatalf("grant: %d %s", r.status, r.body)
	}
	if n := e.count(`SELECT count(*) FROM org_admins WHERE org_id = 'org-a' AND subject = 'alice' AND role = 'viewer'`); n != 1 {
		t.Fatalf("alice's role rows: %d", n)
	}
	revoke := url.Values{"csrf_token": {csrf}, "issuer": {e.idp.Issuer()}, "subject": {"alice"}}
	if r := b.do(http.MethodPost, e.srv.URL+"/admin/admins/revoke", revoke); r.status != 200 {
		t.Fatalf("remove: %d %s", r.status, r.body)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE kind IN ('admin.role_granted', 'admin.role_revoked')
		AND org_id = 'org-a' AND actor = 'admin:bob' AND detail->>'role' = 'owner'`); n != 2 {
		t.Fatalf("audit rows: %d", n)
	}
	e.grant("org-a", "bob", "admin")
	if r := b.get(e.srv.URL + "/admin/admins"); r.status != http.StatusForbidden || e.code(r) != "role_insufficient" {
		t.Fatalf("admins page as admin: %d %q", r.status, e.code(r))
	}
}
