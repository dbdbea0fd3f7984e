package connect_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/provider"
)

// newOrgMCPServer registers an MCP server in organization orgID.
func (e *env) newOrgMCPServer(orgID, name string, providers ...string) *mcpServer {
	e.t.Helper()
	c, key, err := e.clients.CreateIn(context.Background(), orgID, name, []string{"https://" + name + ".mcp.example/"}, providers)
	if err != nil {
		e.t.Fatal(err)
	}
	return &mcpServer{e: e, client: c, key: key}
}

// lastCodeExchange is the client id the fake provider's last
// authorization_code request authenticated as.
func (e *env) lastCodeExchange() string {
	e.t.Helper()
	reqs := e.fake.TokenRequests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].GrantType == "authorization_code" {
			return reqs[i].ClientID
		}
	}
	e.t.Fatal("no code exchange at the fake provider")
	return ""
}

// TestOrganizationsFlow is issue 34's promise through the browser: an MCP
// server of organization acme sends the user through acme's own OAuth app
// (its client id at the provider, its brand on the pages), and the
// connection is acme's; the same user connecting the same provider account
// for a server of the default organization goes through the deployment's
// app and gets a second connection. Neither organization's server receives
// the other's; the account page shows both, grouped, and disconnecting one
// leaves the other. An organization with no app of its own, where the
// operator allows no fallback, is told so before the browser goes anywhere.
func TestOrganizationsFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{apps: map[string]string{"acme-app": "acme-secret"}})
	ctx := context.Background()
	orgs := e.server.Orgs()
	if _, err := orgs.Create(ctx, "acme", "Acme Corp", "test"); err != nil {
		t.Fatal(err)
	}
	color := "#0f7b6c"
	if _, err := orgs.Update(ctx, "acme", org.Update{BrandColor: &color}, "test"); err != nil {
		t.Fatal(err)
	}
	app, _, err := orgs.SetApp(ctx, "acme", "fake", "acme-app", provider.Secret("acme-secret"), "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := orgs.Create(ctx, "beta", "Beta Inc", "test"); err != nil {
		t.Fatal(err)
	}
	acme := e.newOrgMCPServer("acme", "acme-files", "fake")
	mine := e.newMCPServer("files", "fake")
	body := map[string]any{"provider": "fake", "scopes": []string{"repo"}}

	// Through acme's server: acme's brand, acme's app.
	el := acme.mint("alice", body)
	b := e.browser()
	page := e.openAs(b, el["url"].(string), "alice")
	if !strings.Contains(page.body, "Acme Corp") || !strings.Contains(page.body, "/static/brand/acme.css") {
		t.Fatalf("the consent page does not carry acme's brand: %s", page.body)
	}
	redirect := e.allow(b, el["url"].(string), page)
	if q, _ := url.Parse(redirect.location); q == nil || q.Query().Get("client_id") != "acme-app" {
		t.Fatalf("the browser was sent to the provider as %q, want acme's app", redirect.location)
	}
	if done := b.get(e.authorize(redirect)); done.status != http.StatusOK || !strings.Contains(done.body, "Acme Corp") {
		t.Fatalf("callback: %d %s", done.status, done.body)
	}
	if got := e.lastCodeExchange(); got != "acme-app" {
		t.Fatalf("the code was exchanged as %q, want acme's app", got)
	}
	css := b.get(e.srv.URL + "/static/brand/acme.css")
	if css.status != http.StatusOK || !strings.Contains(css.body, "--accent: #0f7b6c") {
		t.Fatalf("acme's stylesheet: %d %s", css.status, css.body)
	}

	// Through the default organization's server: the deployment's app, a
	// second connection of the same provider account.
	e.connectFully(mine, "alice", body)
	if got := e.lastCodeExchange(); got != e.fake.ClientID {
		t.Fatalf("the default organization's code was exchanged as %q, want the deployment's app", got)
	}
	rows, err := e.pool.Query(ctx, `SELECT org_id, coalesce(app_id, '') FROM connections WHERE subject = 'alice' ORDER BY org_id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var o, a string
		if err := rows.Scan(&o, &a); err != nil {
			t.Fatal(err)
		}
		got = append(got, o+"/"+a)
	}
	if want := []string{"acme/" + app.ID, "default/"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("connections %v, want %v", got, want)
	}

	// Each organization's server receives its own connection's token only.
	tokens := map[string]string{}
	for name, m := range map[string]*mcpServer{"acme": acme, "default": mine} {
		st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
		if st != http.StatusOK {
			t.Fatalf("%s's token read: %d %v", name, st, out)
		}
		tokens[name] = out["access_token"].(string)
	}
	if tokens["acme"] == tokens["default"] {
		t.Fatal("both organizations' servers received the same credential")
	}

	// The account page: both, grouped by organization.
	acct := e.accountPage(b, "alice")
	for _, want := range []string{"Connections for Acme Corp", "Connections for Default"} {
		if !strings.Contains(acct.body, want) {
			t.Fatalf("account page lacks %q", want)
		}
	}
	// Disconnecting acme's leaves the default organization's.
	var acmeConn string
	if err := e.pool.QueryRow(ctx, `SELECT id FROM connections WHERE org_id = 'acme'`).Scan(&acmeConn); err != nil {
		t.Fatal(err)
	}
	if r := e.accountPost(b, acct, "/account/disconnect", url.Values{"provider": {"fake"}, "connection": {acmeConn}, "confirm": {"yes"}}); r.status != http.StatusSeeOther {
		t.Fatalf("disconnect: %d %s", r.status, r.body)
	}
	if st, _ := acme.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st == http.StatusOK {
		t.Fatal("acme's server still receives a credential after its connection was disconnected")
	}
	if st, out := mine.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusOK || out["access_token"] != tokens["default"] {
		t.Fatalf("the default organization's connection went too: %d %v", st, out)
	}

	// The audit trail: every row of acme's server, and the end of acme's
	// connection, is acme's (its admins see them); none of the default
	// organization's server is.
	var acmeRows, strayRows int
	var endedIn string
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE org_id = 'acme'), count(*) FILTER (WHERE org_id <> 'acme')
		FROM audit_events WHERE client_id = $1`, acme.client.ID).Scan(&acmeRows, &strayRows); err != nil {
		t.Fatal(err)
	}
	if acmeRows == 0 || strayRows != 0 {
		t.Fatalf("acme's server's audit rows: %d in acme, %d elsewhere", acmeRows, strayRows)
	}
	if err := e.pool.QueryRow(ctx, `SELECT org_id FROM audit_events WHERE kind = 'connection.revoked' AND target = $1`,
		acmeConn).Scan(&endedIn); err != nil || endedIn != "acme" {
		t.Fatalf("the end of acme's connection is audited in %q (%v)", endedIn, err)
	}
	var mineElsewhere int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE client_id = $1 AND org_id <> 'default'`,
		mine.client.ID).Scan(&mineElsewhere); err != nil || mineElsewhere != 0 {
		t.Fatalf("%d audit rows of the default organization's server in another organization (%v)", mineElsewhere, err)
	}

	// beta has no app at the provider, and the operator allows the
	// deployment's app to the default organization only: its server hears
	// it at mint; a link minted while it had one, opened after its app was
	// removed, tells the user before the browser goes anywhere.
	beta := e.newOrgMCPServer("beta", "beta-files", "fake")
	st, out := beta.call(http.MethodPost, "/v1/elicitations", "alice", body)
	expectError(t, st, out, http.StatusConflict, "provider_app_required")
	if _, _, err := orgs.SetApp(ctx, "beta", "fake", "beta-app", provider.Secret("beta-secret"), "test"); err != nil {
		t.Fatal(err)
	}
	el = beta.mint("bob", body)
	if _, err := orgs.RemoveApp(ctx, "beta", "fake", "test"); err != nil {
		t.Fatal(err)
	}
	r := e.openAs(e.browser(), el["url"].(string), "bob")
	e.refused(r, http.StatusConflict, "provider_app_required")
}
