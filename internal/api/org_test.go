package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/api"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/servertest"
	"github.com/connectd/connectd/internal/vault"
)

// orgEnv is a connectd (servertest) with organizations acme and beta, an
// MCP server (client) of each for the fake provider, and the answers of /v1
// as an MCP server sees them.
type orgEnv struct {
	*servertest.Env
	t          *testing.T
	acme, beta member
}

// member is a client of one organization with its key.
type member struct {
	client clientauth.Client
	key    string
}

func newOrgEnv(t *testing.T, opts servertest.Options) *orgEnv {
	t.Helper()
	e := &orgEnv{Env: servertest.New(t, opts), t: t}
	ctx := context.Background()
	for _, org := range []string{"acme", "beta"} {
		if _, err := e.Server.Orgs().Create(ctx, org, strings.ToUpper(org[:1])+org[1:], "test"); err != nil {
			t.Fatal(err)
		}
		c, key, err := e.Server.Clients().CreateIn(ctx, org, org+" files", []string{"https://" + org + ".mcp.example/"},
			[]string{"fake"})
		if err != nil {
			t.Fatal(err)
		}
		if org == "acme" {
			e.acme = member{c, key}
		} else {
			e.beta = member{c, key}
		}
	}
	return e
}

// user is subject at the first IdP.
func (e *orgEnv) user(subject string) identity.User {
	return identity.User{Issuer: e.IdPs[0].Issuer(), Subject: subject}
}

// connect stores a connection of u's at the fake provider in org's
// vault handle (through app, "" the deployment's), with tokens the fake
// issued, and approves the client m for it when m is not nil.
func (e *orgEnv) connect(org string, u identity.User, appID string, expiry time.Duration, m *member) *vault.Connection {
	e.t.Helper()
	ctx := context.Background()
	tok := e.Fake.Grant([]string{"files.read"}, time.Hour)
	conn, err := e.Server.Vault().In(org).PutWith(ctx, u, "fake", vault.Target{AppID: appID}, vault.Credential{
		AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: "Bearer",
		Expiry: e.Clock.Now().Add(expiry), Scopes: []string{"files.read"}, AccountID: "acct-" + u.Subject,
		AccountLabel: u.Subject + "@" + org}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if m != nil {
		if err := consent.Record(ctx, e.Pool, consent.Grant{User: u, ClientID: m.client.ID, Provider: "fake",
			Scopes: []string{"files.read"}, AccountID: "acct-" + u.Subject, ConnectionID: conn.ID,
			Elicitation: "el_test", At: e.Clock.Now()}); err != nil {
			e.t.Fatal(err)
		}
	}
	return conn
}

// forge writes m's approval of connection c behind package consent's back
// (as an older replica, or a bug, might): the second line must hold without
// the first.
func (e *orgEnv) forge(m member, c *vault.Connection) {
	e.t.Helper()
	if _, err := e.Pool.Exec(context.Background(), `INSERT INTO consents (issuer, subject, client_id, provider, scopes,
		account_hash, granted_at, updated_at, connection_id) VALUES ($1, $2, $3, 'fake', '{files.read}', $4, now(), now(), $5)`,
		c.User.Issuer, c.User.Subject, m.client.ID, c.AccountHash, c.ID); err != nil {
		e.t.Fatal(err)
	}
}

// answer is one HTTP answer: status and body.
type answer struct {
	status int
	body   []byte
}

// normalized is the answer with what legitimately differs between two
// requests taken out: the request id, and the connection id the request
// named (placeholder).
func (a answer) normalized(named string) string {
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		return string(a.body)
	}
	delete(m, "request_id")
	b, _ := json.Marshal(m)
	s := string(b)
	if named != "" {
		s = strings.ReplaceAll(s, named, "<named>")
	}
	return s
}

// route is one way an MCP server reaches a user's connection: the request
// m makes for user's connection at fake (account, "" for its only one).
type route struct {
	name string
	do   func(e *orgEnv, m member, user, account string) answer
	ok   int // the status of a success
}

var routes = []route{
	{"token read", func(e *orgEnv, m member, user, account string) answer {
		return e.send(m, http.MethodGet, "/v1/connections/fake/token"+query(account), user, nil)
	}, http.StatusOK},
	{"token exchange", func(e *orgEnv, m member, user, account string) answer {
		aud := api.AudiencePrefix + "fake"
		if account != "" {
			aud += ":" + account
		}
		form := url.Values{"grant_type": {api.GrantTokenExchange}, "subject_token": {e.token(m, user)},
			"subject_token_type": {api.TokenTypeAccessToken}, "audience": {aud}}
		req, _ := http.NewRequest(http.MethodPost, e.URL+api.TokenPath, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(url.QueryEscape(m.client.ID), url.QueryEscape(m.key))
		return e.do(req)
	}, http.StatusOK},
	{"proxy", func(e *orgEnv, m member, user, account string) answer {
		req, _ := http.NewRequest(http.MethodGet, e.URL+"/v1/proxy/fake/files", nil)
		req.Header.Set("Authorization", "Bearer "+m.key)
		req.Header.Set(mcpauth.UserTokenHeader, e.token(m, user))
		if account != "" {
			req.Header.Set(api.AccountHeader, account)
		}
		return e.do(req)
	}, http.StatusOK},
	{"mint for the connection", func(e *orgEnv, m member, user, account string) answer {
		if account == "" {
			return answer{status: http.StatusCreated} // a mint that names no connection reaches none
		}
		return e.send(m, http.MethodPost, "/v1/elicitations", user, map[string]any{"provider": "fake", "account": account})
	}, http.StatusCreated},
	{"unlink", func(e *orgEnv, m member, user, account string) answer {
		return e.send(m, http.MethodDelete, "/v1/connections/fake"+query(account), user, nil)
	}, http.StatusOK},
}

func query(account string) string {
	if account == "" {
		return ""
	}
	return "?account=" + url.QueryEscape(account)
}

// token is user's MCP access token for m's resource.
func (e *orgEnv) token(m member, user string) string {
	e.t.Helper()
	tok, err := e.IdPs[0].AccessToken(user, m.client.Resources[0])
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// send makes a /v1 request as m for user.
func (e *orgEnv) send(m member, method, path, user string, body any) answer {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, e.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, e.token(m, user))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return e.do(req)
}

func (e *orgEnv) do(req *http.Request) answer {
	e.t.Helper()
	resp, err := e.Public.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: b}
}

// listed is the connection ids GET /v1/connections lists to m for user.
func (e *orgEnv) listed(m member, user string) []string {
	e.t.Helper()
	a := e.send(m, http.MethodGet, "/v1/connections", user, nil)
	var doc struct {
		Connections []struct {
			ID          string `json:"id"`
			DisplayName string `json:"display_name"`
		} `json:"connections"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &doc) != nil {
		e.t.Fatalf("listing: %d %s", a.status, a.body)
	}
	var ids []string
	for _, c := range doc.Connections {
		ids = append(ids, c.ID)
	}
	return ids
}

// madeUp is a connection id nobody has.
const madeUp = "cn_aaaaaaaaaaaaaaaaaaaaaaaaaa"

// TestOrgClientNeverReachesAnotherOrganizationsConnection is the attack of
// one organization's MCP server on another's connections (issue 34), on
// every route a client reaches a connection by — the token read, the token
// exchange, the proxy, a mint naming the connection, unlink, the listing:
// beta's client asking for alice's acme connection (by provider, by its id,
// even holding an approval of it written behind consent's back) or for
// carol's connection of the default organization gets exactly what it gets
// for bob, who has no connection at all, or for an id nobody has — the same
// status, code and body, never a hint (consent_required, a listed row).
// acme's own client reaches alice's connection on every route.
func TestOrgClientNeverReachesAnotherOrganizationsConnection(t *testing.T) {
	t.Parallel()
	e := newOrgEnv(t, servertest.Options{})
	alice := e.connect("acme", e.user("alice"), "", time.Hour, &e.acme)
	e.forge(e.beta, alice)
	e.connect(vault.DefaultOrg, e.user("carol"), "", time.Hour, nil)
	if !vault.ValidID(madeUp) {
		t.Fatalf("%s is not a connection id", madeUp)
	}
	e.hooks() // both clients hear of connection changes (acme's unlink at the end)

	// The listing: beta's client lists nothing of alice's; acme's lists it.
	if got := e.listed(e.beta, "alice"); len(got) != 0 {
		t.Errorf("beta's client lists %v of alice's acme connections", got)
	}
	if got := e.listed(e.acme, "alice"); len(got) != 1 || got[0] != alice.ID {
		t.Errorf("acme's client lists %v, want alice's connection %s", got, alice.ID)
	}

	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			// By provider: alice (another organization's connection, an
			// approval forged for it) and carol (the default
			// organization's) are bob to beta.
			none := r.do(e, e.beta, "bob", "")
			for _, user := range []string{"alice", "carol"} {
				got := r.do(e, e.beta, user, "")
				if got.status != none.status || got.normalized("") != none.normalized("") {
					t.Errorf("beta's client asking for %s's connection: %d %s\nwant what it gets for none: %d %s",
						user, got.status, got.body, none.status, none.body)
				}
			}
			// By id: alice's connection is an id nobody has.
			noID := r.do(e, e.beta, "alice", madeUp)
			got := r.do(e, e.beta, "alice", alice.ID)
			if got.status != noID.status || got.normalized(alice.ID) != noID.normalized(madeUp) {
				t.Errorf("beta's client naming alice's acme connection: %d %s\nwant what an unknown id gets: %d %s",
					got.status, got.body, noID.status, noID.body)
			}
			if got.status < 400 {
				t.Errorf("beta's client naming alice's acme connection: %d %s", got.status, got.body)
			}
			// acme's own client reaches it.
			if own := r.do(e, e.acme, "alice", alice.ID); own.status != r.ok {
				t.Errorf("acme's client, alice's acme connection: %d %s, want %d", own.status, own.body, r.ok)
			}
		})
	}
	// Unlink went last: the connection is gone for acme's client too, and
	// its connection.revoked event went to acme's client alone — not to
	// beta's, whose forged approval the deletion withdrew with the rest.
	if got := e.listed(e.acme, "alice"); len(got) != 0 {
		t.Errorf("after acme's unlink, acme's client lists %v", got)
	}
	e.eventsOnlyToAcme(alice, "connection.revoked")
}

// hooks registers a webhook endpoint for acme's and beta's clients.
func (e *orgEnv) hooks() {
	e.t.Helper()
	for _, m := range []member{e.acme, e.beta} {
		if _, _, err := e.Server.Webhooks().Create(context.Background(), m.client.ID,
			"https://hooks."+m.client.Org+".example/connectd", nil); err != nil {
			e.t.Fatal(err)
		}
	}
}

// eventsOnlyToAcme checks the webhook deliveries enqueued about connection
// c: none to beta's client, and one event typ to acme's, naming c and the
// scopes acme's client may see (not the blank answer for a client of
// another organization).
func (e *orgEnv) eventsOnlyToAcme(c *vault.Connection, typ string) {
	e.t.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT e.client_id, d.event_type, convert_from(d.payload, 'UTF8')
		FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var client, got, payload string
		if err := rows.Scan(&client, &got, &payload); err != nil {
			e.t.Fatal(err)
		}
		switch {
		case client != e.acme.client.ID && strings.Contains(payload, c.ID):
			e.t.Errorf("beta's client was sent %s naming acme's connection: %s", got, payload)
		case client == e.acme.client.ID && got == typ:
			n++
			if !strings.Contains(payload, c.ID) || !strings.Contains(payload, `"files.read"`) {
				e.t.Errorf("acme's client was told %s, want its connection and the scopes it may see", payload)
			}
		}
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	if n != 1 {
		e.t.Errorf("%d %s events to acme's client, want 1", n, typ)
	}
}

// TestOrgAppRefreshesItsOwnConnection: a connection obtained through acme's
// own app (issue 34) is refreshed, and revoked, with that app's client id
// and secret, never the deployment's (which the fake provider does not even
// know here); once the app is gone — removed, or replaced by another client
// id — its refresh token has no app left that may use it: the token read
// answers reauthorization_required, and nothing is sent to the provider with
// another app's credentials.
func TestOrgAppRefreshesItsOwnConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		gone func(e *orgEnv) error
	}{
		{"removed", func(e *orgEnv) error {
			_, err := e.Server.Orgs().RemoveApp(context.Background(), "acme", "fake", "test")
			return err
		}},
		{"client id changed", func(e *orgEnv) error {
			_, _, err := e.Server.Orgs().SetApp(context.Background(), "acme", "fake", "acme-new-client",
				provider.Secret("another-secret"), "test")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The deployment's own app at fake is a client id the fake
			// provider does not know: only acme's app can refresh.
			e := newOrgEnv(t, servertest.Options{FakeEntry: func(m map[string]any) { m["client_id"] = "deployment-client" }})
			ctx := context.Background()
			app, _, err := e.Server.Orgs().SetApp(ctx, "acme", "fake", e.Fake.ClientID, provider.Secret(servertest.FakeSecret), "test")
			if err != nil {
				t.Fatal(err)
			}
			alice := e.connect("acme", e.user("alice"), app.ID, 10*time.Second, &e.acme) // due for refresh
			if alice.AppID != app.ID {
				t.Fatalf("stored with app %q, want %q", alice.AppID, app.ID)
			}
			e.forge(e.beta, alice)
			e.hooks()
			read := func() answer {
				return e.send(e.acme, http.MethodGet, "/v1/connections/fake/token?account="+alice.ID, "alice", nil)
			}
			refreshes := func() []string {
				var ids []string
				for _, r := range e.Fake.TokenRequests() {
					if r.GrantType == "refresh_token" {
						ids = append(ids, r.ClientID)
					}
				}
				return ids
			}
			if a := read(); a.status != http.StatusOK {
				t.Fatalf("token read of acme's connection through acme's app: %d %s", a.status, a.body)
			}
			if got := refreshes(); len(got) != 1 || got[0] != e.Fake.ClientID {
				t.Fatalf("refreshes sent as %v, want one as acme's app %s", got, e.Fake.ClientID)
			}

			if err := tc.gone(e); err != nil {
				t.Fatal(err)
			}
			e.Clock.Advance(2 * time.Hour) // due again
			a := read()
			var doc map[string]any
			_ = json.Unmarshal(a.body, &doc)
			if a.status != http.StatusConflict || doc["error"] != "reauthorization_required" {
				t.Fatalf("token read once acme's app is gone: %d %s, want 409 reauthorization_required", a.status, a.body)
			}
			if got := refreshes(); len(got) != 1 {
				t.Fatalf("refreshes sent as %v once the app was gone, want none more", got)
			}
			// acme's client hears it (decided for acme), beta's not.
			e.eventsOnlyToAcme(alice, "connection.reauthorization_required")
		})
	}

	t.Run("revoked with its app", func(t *testing.T) {
		t.Parallel()
		e := newOrgEnv(t, servertest.Options{FakeEntry: func(m map[string]any) { m["client_id"] = "deployment-client" }})
		app, _, err := e.Server.Orgs().SetApp(context.Background(), "acme", "fake", e.Fake.ClientID,
			provider.Secret(servertest.FakeSecret), "test")
		if err != nil {
			t.Fatal(err)
		}
		alice := e.connect("acme", e.user("alice"), app.ID, time.Hour, &e.acme)
		a := e.send(e.acme, http.MethodDelete, "/v1/connections/fake?account="+alice.ID, "alice", nil)
		var doc map[string]any
		_ = json.Unmarshal(a.body, &doc)
		if a.status != http.StatusOK || doc["revocation"] != "revoked" {
			t.Fatalf("acme's unlink: %d %s, want the connection revoked at the provider", a.status, a.body)
		}
		revs := e.Fake.Revocations()
		if len(revs) == 0 {
			t.Fatal("nothing revoked at the provider")
		}
		for _, r := range revs {
			if r.ClientID != e.Fake.ClientID {
				t.Errorf("revoked as client %q, want acme's app %s", r.ClientID, e.Fake.ClientID)
			}
		}
	})
}
