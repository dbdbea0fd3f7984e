package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/session"
)

// publicRoutes are the only admin routes a non-admin may use: signing in
// (which admits only admins) and signing out. Adding a route to this list is a
// security decision; adding any other route makes the test below check it.
var publicRoutes = []string{"GET " + admin.LoginPath, "GET " + admin.CallbackPath, "POST /admin/logout"}

// instantiate turns a route pattern into a request for it.
func instantiate(pattern, connID string) (method, path string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	path = strings.ReplaceAll(path, "{id}", connID)
	if p, ok := strings.CutSuffix(path, "{$}"); ok {
		path = p
	} else if strings.HasSuffix(path, "/") {
		path += "no-such-thing" // a catch-all
	}
	return method, path
}

// TestEveryAdminRouteRefusesNonAdmins walks the registered route table: every
// route that is not explicitly public answers every kind of non-admin with
// 403 (a browser without an admin session asking for a page: a redirect to
// the admin sign-in) and does nothing, with the right credential of the
// other kind included (an admin session on the API, an admin key on the
// pages).
func TestEveryAdminRouteRefusesNonAdmins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	m := e.newMCPServer("files", "fake")
	connID := e.connectFully(m, "alice", "files.read")

	_, goodKey := e.newAdminKey("good")
	revoked, revokedKey := e.newAdminKey("revoked")
	if err := e.keys.Revoke(ctx, revoked.ID, admin.Actor{Name: "cli:test"}); err != nil {
		t.Fatal(err)
	}
	_, expiringKey, err := e.keys.Create(ctx, "short", time.Minute, admin.Actor{Name: "cli:test"})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)

	userOfAdmin := e.browser() // alice is an admin, but this is her end-user session
	e.userLogin(userOfAdmin, "alice")
	bob := e.browser() // tried the admin sign-in and was refused
	if r := e.adminLogin(bob, "bob"); r.status != http.StatusForbidden {
		t.Fatalf("bob's admin sign-in: %d", r.status)
	}
	adminB := e.adminBrowser()
	confirm := adminB.get(e.srv.URL + "/admin/connections/" + connID + "/revoke")
	csrf := csrfOf(t, confirm.body) // even a leaked CSRF token must not help

	type cred struct {
		name    string
		cookies map[string]string
		authz   string
	}
	nonAdmins := []cred{
		{"anonymous", nil, ""},
		{"end-user session of an admin", userOfAdmin.Cookies, ""},
		{"end-user cookie under the admin name", map[string]string{admin.SessionCookie: userOfAdmin.Cookies[session.CookieName]}, ""},
		{"refused admin sign-in", bob.Cookies, ""},
		{"revoked admin key", nil, "Bearer " + revokedKey},
		{"expired admin key", nil, "Bearer " + expiringKey},
		{"forged admin key", nil, "Bearer " + admin.KeyPrefix + strings.Repeat("A", 43)},
		{"client key", nil, "Bearer " + m.key},
		{"user access token", nil, "Bearer " + m.token("alice")},
		{"admin key in the wrong scheme", nil, "Basic " + goodKey},
	}

	noRedirects := *e.srv.Client()
	noRedirects.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var public []string
	checked := 0
	for _, rt := range e.admin.RouteTable() {
		if rt.Access == admin.Public {
			public = append(public, rt.Pattern)
			continue
		}
		method, path := instantiate(rt.Pattern, connID)
		creds := slices.Clone(nonAdmins)
		switch rt.Access {
		case admin.AdminAPI:
			creds = append(creds, cred{"admin session on the API", adminB.Cookies, ""})
		case admin.AdminPage:
			creds = append(creds, cred{"admin key on a page", nil, "Bearer " + goodKey})
		default:
			t.Fatalf("route %s has access %q", rt.Pattern, rt.Access)
		}
		for _, c := range creds {
			req, _ := http.NewRequest(method, e.srv.URL+path, nil)
			if method == http.MethodPost {
				if rt.Access == admin.AdminAPI {
					b, _ := json.Marshal(map[string]string{"confirm": connID})
					req, _ = http.NewRequest(method, e.srv.URL+path, strings.NewReader(string(b)))
					req.Header.Set("Content-Type", "application/json")
				} else {
					form := url.Values{"csrf_token": {csrf}, "confirm": {connID}}
					req, _ = http.NewRequest(method, e.srv.URL+path, strings.NewReader(form.Encode()))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				}
			}
			if c.authz != "" {
				req.Header.Set("Authorization", c.authz)
			}
			for k, v := range c.cookies {
				req.AddCookie(&http.Cookie{Name: k, Value: v})
			}
			resp, err := noRedirects.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			body := string(raw)
			resp.Body.Close()
			// A browser without an admin session asking for a page is sent
			// to the admin sign-in (and back); every other attempt is 403.
			if rt.Access == admin.AdminPage && method == http.MethodGet && c.authz == "" {
				if resp.StatusCode != http.StatusSeeOther ||
					!strings.HasPrefix(resp.Header.Get("Location"), admin.LoginPath+"?return_to=") {
					t.Errorf("%s %s as %s: %d %s, want 303 to the admin sign-in", method, path, c.name, resp.StatusCode,
						resp.Header.Get("Location"))
				}
				if (response{setCookies: resp.Header.Values("Set-Cookie")}).setsAdminSession() {
					t.Errorf("%s %s as %s set an admin cookie", method, path, c.name)
				}
				continue
			}
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s as %s: %d, want 403", method, path, c.name, resp.StatusCode)
				continue
			}
			switch rt.Access {
			case admin.AdminAPI:
				if !strings.Contains(body, `"error":"admin_required"`) {
					t.Errorf("%s %s as %s: %s", method, path, c.name, body)
				}
			case admin.AdminPage:
				if !strings.Contains(body, "Administrators only") {
					t.Errorf("%s %s as %s: %s", method, path, c.name, body)
				}
			}
			if (response{setCookies: resp.Header.Values("Set-Cookie")}).setsAdminSession() {
				t.Errorf("%s %s as %s set an admin cookie", method, path, c.name)
			}
		}
		checked++

		// The positive control: the admin gets through (so the refusals above
		// are the guard's, not a broken request).
		if method == http.MethodGet {
			var st int
			if rt.Access == admin.AdminAPI {
				st, _ = e.raw(method, path, "Bearer "+goodKey, nil, nil)
			} else {
				st = adminB.get(e.srv.URL + path).status
			}
			if st == http.StatusForbidden || st == http.StatusUnauthorized {
				t.Errorf("%s %s as the admin: %d", method, path, st)
			}
		}
	}
	slices.Sort(public)
	want := slices.Sorted(slices.Values(publicRoutes))
	if !slices.Equal(public, want) {
		t.Fatalf("public admin routes are %v, want exactly %v", public, want)
	}
	if checked < 10 {
		t.Fatalf("only %d guarded routes in the table", checked)
	}
	// Nothing happened: the connection, its consent and its tokens are intact.
	if e.connectionID("alice", "fake") != connID || e.count(`SELECT count(*) FROM consents`) != 1 ||
		e.fake.Counts().Revoke != 0 || e.auditCount("connection.revoked") != 0 {
		t.Fatal("a non-admin request changed something")
	}
	if st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusOK {
		t.Fatalf("token after the attempts: %d %v", st, out)
	}
}
