package admin_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/connectd/connectd/internal/browsertest"
	"github.com/connectd/connectd/internal/org"
)

// An organization's provider apps in the admin pages and API (issue 34,
// "Surfaces"), for its owners. The old admin code had no such route.

// appSecret is the client secret the tests set; it must appear in no page,
// API answer, log line or audit row.
const appSecret = "s3cr3t-Zq7vX1-never-shown"

// noSecret fails the test if the app secret is anywhere it must not be.
func (e *orgsEnv) noSecret(t *testing.T, where, text string) {
	t.Helper()
	if strings.Contains(text, appSecret) {
		t.Fatalf("the client secret is in %s", where)
	}
}

func (e *orgsEnv) appsOf(orgID string) int {
	return e.count(`SELECT count(*) FROM provider_apps WHERE org_id = $1`, orgID)
}

// TestAppsOwnerSetsAndRemoves: org-a's owner key sets an app at fake; org-a
// then Resolves to it; the listing says "own" and that a secret is set,
// never the secret; removing it tells how many connections were made
// through it (they can no longer be refreshed) and that org-a now has no
// app there (provider_app_required: fake's shared_app is "default").
// Audited in org-a with the role.
func TestAppsOwnerSetsAndRemoves(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	ctx := context.Background()
	orgs := e.server.Orgs()
	st, raw := e.raw(http.MethodGet, "/admin/api/apps", "Bearer "+e.keys["owner"], nil, nil)
	out := decode(t, raw)
	if st != 200 || out["redirect_uri"] != e.srv.URL+"/oauth/callback" || !strings.Contains(raw, `"uses":"none"`) ||
		!strings.Contains(raw, `"error":"provider_app_required"`) {
		t.Fatalf("apps before: %d %s", st, raw)
	}
	st, raw = e.raw(http.MethodPut, "/admin/api/apps/fake", "Bearer "+e.keys["owner"], nil,
		map[string]any{"client_id": "acme-client-1", "client_secret": appSecret})
	e.noSecret(t, "the PUT answer", raw)
	out = decode(t, raw)
	app, _ := out["app"].(map[string]any)
	if st != 200 || app["client_id"] != "acme-client-1" || app["secret_set"] != true || out["redirect_uri"] != e.srv.URL+"/oauth/callback" {
		t.Fatalf("set: %d %s", st, raw)
	}
	appID := app["id"].(string)
	res, err := orgs.Resolve(ctx, "org-a", "fake")
	if err != nil || res.AppID != appID {
		t.Fatalf("org-a resolves to %q, %v; want %s", res.AppID, err, appID)
	}
	st, raw = e.raw(http.MethodGet, "/admin/api/apps", "Bearer "+e.keys["owner"], nil, nil)
	e.noSecret(t, "the listing", raw)
	if st != 200 || !strings.Contains(raw, `"uses":"own"`) || !strings.Contains(raw, `"secret_set":true`) ||
		!strings.Contains(raw, appID) {
		t.Fatalf("apps after: %d %s", st, raw)
	}
	// A connection made through it: removing the app leaves it unrefreshable.
	e.exec(`UPDATE connections SET app_id = $1 WHERE id = $2`, appID, e.connA)
	st, raw = e.raw(http.MethodDelete, "/admin/api/apps/fake", "Bearer "+e.keys["owner"], nil, nil)
	out = decode(t, raw)
	removed, _ := out["removed"].(map[string]any)
	now, _ := out["now"].(map[string]any)
	if st != 200 || removed["id"] != appID || removed["connections"] != float64(1) || now["uses"] != "none" {
		t.Fatalf("remove: %d %s", st, raw)
	}
	if _, err := orgs.Resolve(ctx, "org-a", "fake"); !errors.Is(err, org.ErrNoApp) {
		t.Fatalf("org-a resolves after the removal: %v", err)
	}
	if st, raw := e.raw(http.MethodDelete, "/admin/api/apps/fake", "Bearer "+e.keys["owner"], nil, nil); st != 404 ||
		decode(t, raw)["error"] != "not_found" {
		t.Fatalf("remove again: %d %s", st, raw)
	}
	for _, kind := range []string{"admin.app_set", "admin.app_removed"} {
		if n := e.count(`SELECT count(*) FROM audit_events WHERE kind = $1 AND org_id = 'org-a' AND detail->>'role' = 'owner'
			AND actor LIKE 'admin_key:%' AND target = $2`, kind, appID); n != 1 {
			t.Errorf("%s: %d audit rows", kind, n)
		}
	}
	// The org package's own rows are org-a's too, not the default organization's.
	if n := e.count(`SELECT count(*) FROM audit_events WHERE kind IN ('org.app_set', 'org.app_removed') AND org_id = 'org-a'
		AND target = $1`, appID); n != 2 {
		t.Errorf("org.app_* rows in org-a: %d", n)
	}
	e.noSecret(t, "the log", e.logs.String())
	if n := e.count(`SELECT count(*) FROM audit_events WHERE detail::text LIKE '%' || $1 || '%'`, appSecret); n != 0 {
		t.Fatal("the client secret is in the audit trail")
	}
}

// TestAppsNeedOwner: an admin (not owner) — and a viewer, a security admin —
// can neither set nor remove an app, nor see the apps, on the pages or the
// API: 403 role_insufficient and no row.
func TestAppsNeedOwner(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	if _, _, err := e.server.Orgs().SetApp(context.Background(), "org-a", "fake", "kept-client", appSecret, "test"); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"viewer", "security", "admin"} {
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{http.MethodGet, "/admin/api/apps", nil},
			{http.MethodPut, "/admin/api/apps/fake", map[string]any{"client_id": "evil", "client_secret": "x"}},
			{http.MethodDelete, "/admin/api/apps/fake", nil},
		} {
			st, raw := e.raw(c.method, c.path, "Bearer "+e.keys[role], nil, c.body)
			if st != 403 || decode(t, raw)["error"] != "role_insufficient" || strings.Contains(raw, "kept-client") {
				t.Errorf("%s %s as %s: %d %s", c.method, c.path, role, st, raw)
			}
		}
		b, csrf := e.signedIn(t, role)
		if r := b.get(e.srv.URL + "/admin/apps"); r.status != 403 || e.code(r) != "role_insufficient" {
			t.Errorf("apps page as %s: %d %q", role, r.status, e.code(r))
		}
		if r := b.do(http.MethodPost, e.srv.URL+"/admin/apps", url.Values{"csrf_token": {csrf}, "provider": {"fake"},
			"client_id": {"evil"}, "client_secret": {"x"}}); r.status != 403 || e.code(r) != "role_insufficient" {
			t.Errorf("set as %s: %d %q", role, r.status, e.code(r))
		}
		if r := b.do(http.MethodPost, e.srv.URL+"/admin/apps/remove", url.Values{"csrf_token": {csrf}, "provider": {"fake"},
			"confirm": {"fake"}}); r.status != 403 || e.code(r) != "role_insufficient" {
			t.Errorf("remove as %s: %d %q", role, r.status, e.code(r))
		}
	}
	a, err := e.server.Orgs().App(context.Background(), "org-a", "fake")
	if err != nil || a.ClientID != "kept-client" || e.appsOf("org-a") != 1 {
		t.Fatalf("org-a's app changed: %+v %v", a, err)
	}
}

// TestAppsOtherOrg: org-a's owner neither sees nor touches org-b's app:
// the listing holds only org-a's, ?org=org-b is 404, removing "its" app at
// fake is 404 (org-a has none) and org-b's stays as it was.
func TestAppsOtherOrg(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	bApp, _, err := e.server.Orgs().SetApp(context.Background(), "org-b", "fake", "org-b-client", appSecret, "test")
	if err != nil {
		t.Fatal(err)
	}
	owner := "Bearer " + e.keys["owner"]
	if st, raw := e.raw(http.MethodGet, "/admin/api/apps", owner, nil, nil); st != 200 || strings.Contains(raw, "org-b-client") ||
		strings.Contains(raw, bApp.ID) {
		t.Fatalf("org-a's listing: %d %s", st, raw)
	}
	for _, c := range []struct {
		method, path string
		body         any
		status       int
	}{
		{http.MethodGet, "/admin/api/apps?org=org-b", nil, 404},
		{http.MethodPut, "/admin/api/apps/fake?org=org-b", map[string]any{"client_id": "evil", "client_secret": "x"}, 404},
		{http.MethodDelete, "/admin/api/apps/fake?org=org-b", nil, 404},
		{http.MethodDelete, "/admin/api/apps/fake", nil, 404},
		{http.MethodDelete, "/admin/api/apps/%C3%A9t%C3%A9%20x", nil, 404}, // no app can have that name
	} {
		st, raw := e.raw(c.method, c.path, owner, nil, c.body)
		if st != c.status || strings.Contains(raw, "org-b-client") {
			t.Errorf("%s %s: %d %s", c.method, c.path, st, raw)
		}
	}
	// An operator sees every organization's apps, and must name one to change them.
	op := "Bearer " + e.operatorKey
	if st, raw := e.raw(http.MethodGet, "/admin/api/apps", op, nil, nil); st != 200 || !strings.Contains(raw, `"org":"org-b"`) ||
		!strings.Contains(raw, "org-b-client") || strings.Contains(raw, `"providers"`) {
		t.Fatalf("operator's listing: %d %s", st, raw)
	}
	if st, raw := e.raw(http.MethodGet, "/admin/api/apps?org=org-b", op, nil, nil); st != 200 || !strings.Contains(raw, `"uses":"own"`) {
		t.Fatalf("operator's listing of org-b: %d %s", st, raw)
	}
	if st, raw := e.raw(http.MethodPut, "/admin/api/apps/fake", op, nil, map[string]any{"client_id": "x", "client_secret": "y"}); st != 400 ||
		decode(t, raw)["error"] != "invalid_request" {
		t.Fatalf("operator's set without ?org=: %d %s", st, raw)
	}
	alice := e.adminBrowser()
	if r := alice.get(e.srv.URL + "/admin/apps"); r.status != 200 || !strings.Contains(r.body, "org-b-client") ||
		!strings.Contains(r.body, `href="/admin/apps?org=org-b"`) {
		t.Fatalf("operator's apps page: %d %s", r.status, r.body)
	}
	e.grant("org-a", "bob", "owner")
	b := e.browser()
	if r := e.adminLogin(b, "bob"); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", r.status)
	}
	page := b.get(e.srv.URL + "/admin/apps")
	csrf := csrfOf(t, page.body)
	if page.status != 200 || strings.Contains(page.body, "org-b-client") || strings.Contains(page.body, bApp.ID) {
		t.Fatalf("org-a's apps page: %d", page.status)
	}
	if r := b.do(http.MethodPost, e.srv.URL+"/admin/apps/remove?org=org-b", url.Values{"csrf_token": {csrf}, "provider": {"fake"},
		"confirm": {"fake"}}); r.status != 404 {
		t.Fatalf("remove in org-b: %d", r.status)
	}
	a, err := e.server.Orgs().App(context.Background(), "org-b", "fake")
	if err != nil || a.ID != bApp.ID || a.ClientID != "org-b-client" {
		t.Fatalf("org-b's app changed: %+v %v", a, err)
	}
	if res, err := e.server.Orgs().Resolve(context.Background(), "org-b", "fake"); err != nil || res.AppID != bApp.ID {
		t.Fatalf("org-b resolves to %q, %v", res.AppID, err)
	}
}

// TestAppsPage: an owner's apps page shows the redirect URI to register
// (with a copy button and no inline script), what each provider uses, and
// a set form whose secret field is a password field without autocomplete.
// Setting an app (CSRF-checked) says what happened and never shows the
// secret, nor when the input is refused (the form again, the client id kept,
// the secret not); removing needs the confirmation and says what happens to
// the connections made through it.
func TestAppsPage(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	b, _ := e.signedIn(t, "owner")
	page := b.get(e.srv.URL + "/admin/apps")
	csrf := csrfOf(t, page.body)
	for _, want := range []string{"Provider apps of org-a", `value="` + e.srv.URL + `/oauth/callback"`, `data-copy="redirect-uri"`,
		`src="/static/admin-copy.js"`, `type="password" name="client_secret" required autocomplete="off"`,
		"provider_app_required", `href="/admin/apps?org=org-a"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the apps page lacks %q", want)
		}
	}
	if strings.Contains(page.body, "<script>") {
		t.Error("inline script on the apps page")
	}
	set := url.Values{"provider": {"fake"}, "client_id": {"acme-page-client"}, "client_secret": {appSecret}}
	if r := b.do(http.MethodPost, e.srv.URL+"/admin/apps", set); r.status != 403 || e.code(r) != "csrf_failed" {
		t.Fatalf("set without CSRF: %d %q", r.status, e.code(r))
	}
	if e.appsOf("org-a") != 0 {
		t.Fatal("an app was set without the CSRF token")
	}
	// Refused input: the form again with the message; no row.
	for _, c := range []struct {
		name string
		form url.Values
		want string
	}{
		{"unknown provider", url.Values{"provider": {"nosuch"}, "client_id": {"kept-id"}, "client_secret": {appSecret}}, "not in the catalog"},
		{"no client id", url.Values{"provider": {"fake"}, "client_id": {""}, "client_secret": {appSecret}}, "client id must be"},
		{"no secret", url.Values{"provider": {"fake"}, "client_id": {"kept-id"}, "client_secret": {""}}, "client secret must be"},
	} {
		c.form.Set("csrf_token", csrf)
		r := b.do(http.MethodPost, e.srv.URL+"/admin/apps", c.form)
		e.noSecret(t, "a refused set's page", r.body)
		if r.status != 400 || e.code(r) != "invalid_request" || !strings.Contains(r.body, c.want) ||
			!strings.Contains(r.body, `role="alert"`) {
			t.Errorf("%s: %d %q %.1500s", c.name, r.status, e.code(r), r.body)
		}
		if c.form.Get("client_id") != "" && !strings.Contains(r.body, `value="`+c.form.Get("client_id")+`"`) {
			t.Errorf("%s: the client id was not kept", c.name)
		}
	}
	if e.appsOf("org-a") != 0 {
		t.Fatal("a refused set wrote a row")
	}
	set.Set("csrf_token", csrf)
	r := b.do(http.MethodPost, e.srv.URL+"/admin/apps", set)
	e.noSecret(t, "the set answer", r.body)
	if r.status != 200 || !strings.Contains(r.body, "The app at fake is set: client id acme-page-client") ||
		!strings.Contains(r.body, "its own app (app_") || !strings.Contains(r.body, "<td>set</td>") {
		t.Fatalf("set: %d %s", r.status, r.body)
	}
	a, err := e.server.Orgs().App(context.Background(), "org-a", "fake")
	if err != nil {
		t.Fatal(err)
	}
	// Another client id: a new app, replacing the one a connection names.
	e.exec(`UPDATE connections SET app_id = $1 WHERE id = $2`, a.ID, e.connA)
	set.Set("client_id", "acme-page-client-2")
	r = b.do(http.MethodPost, e.srv.URL+"/admin/apps", set)
	if r.status != 200 || !strings.Contains(r.body, "replacing "+a.ID) || !strings.Contains(r.body, "the 1 connection(s) made through it can no longer be refreshed") {
		t.Fatalf("replace: %d %s", r.status, r.body)
	}
	e.noSecret(t, "the replace answer", r.body)
	if r := b.do(http.MethodPost, e.srv.URL+"/admin/apps/remove", url.Values{"csrf_token": {csrf}, "provider": {"fake"}}); r.status != 400 ||
		e.code(r) != "confirmation_required" || e.appsOf("org-a") != 1 {
		t.Fatalf("remove without confirmation: %d %q", r.status, e.code(r))
	}
	r = b.do(http.MethodPost, e.srv.URL+"/admin/apps/remove", url.Values{"csrf_token": {csrf}, "provider": {"fake"}, "confirm": {"fake"}})
	if r.status != 200 || !strings.Contains(r.body, "Removed the app") || !strings.Contains(r.body, "No connection was made through it") ||
		!strings.Contains(r.body, "are refused with provider_app_required until an app is set") || e.appsOf("org-a") != 0 {
		t.Fatalf("remove: %d %s", r.status, r.body)
	}
	e.noSecret(t, "the log", e.logs.String())
	for _, u := range []string{"/admin/apps", "/admin/events?show=all", "/admin/clients"} {
		e.noSecret(t, u, b.get(e.srv.URL+u).body)
	}
}

// TestManagePagesInABrowser: in Chromium, an owner of org-a creates an MCP
// server with the form, sees its key once with a working copy button (the
// script is a file the CSP allows: the button shows and copies, or selects
// the key where the clipboard is refused), and opens the apps page with the
// redirect URI's copy button — each page checked at a phone's and a
// desktop's width (test-output/screenshots/2x-admin-manage-*).
func TestManagePagesInABrowser(t *testing.T) {
	t.Parallel()
	e := newOrgsEnv(t)
	e.grant("org-a", "bob", "owner")
	ctx := browsertest.Tab(t, browsertest.New(t))
	browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/admin/clients"), chromedp.WaitVisible(chromedp.CSS(`button[value="bob"]`)),
		chromedp.Click(chromedp.CSS(`button[value="bob"]`)))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("New MCP server"))
	browsertest.Shoot(t, ctx, "40-admin-manage-clients")
	browsertest.Do(t, ctx, chromedp.SendKeys(chromedp.CSS("#nc-name"), "Browser made"),
		chromedp.SendKeys(chromedp.CSS("#nc-resources"), "https://browser-made.mcp.example/"),
		chromedp.Click(chromedp.CSS(`input[name="providers"][value="fake"]`)),
		chromedp.Click(chromedp.CSS("section.manage button.primary")))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("will not be shown again"))
	browsertest.WaitUntil(t, ctx, `!document.querySelector('button[data-copy="client-key"]').hidden`)
	browsertest.Shoot(t, ctx, "41-admin-manage-key-shown")
	key := browsertest.Eval[string](t, ctx, `document.getElementById("client-key").value`)
	if _, err := e.clients.Authenticate(context.Background(), key); err != nil {
		t.Fatalf("the key on the page: %v", err)
	}
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[data-copy="client-key"]`)))
	browsertest.WaitUntil(t, ctx, `document.querySelector('button[data-copy="client-key"]').textContent === "Copied" ||
		document.activeElement === document.getElementById("client-key")`)

	browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/admin/apps"))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("Provider apps of org-a"))
	browsertest.WaitUntil(t, ctx, `!document.querySelector('button[data-copy="redirect-uri"]').hidden`)
	browsertest.Shoot(t, ctx, "42-admin-manage-apps")
}
