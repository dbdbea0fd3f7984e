package connect_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/servertest"
)

// newOrgIdP starts an identity provider (devidp: real OIDC over TLS) and
// makes it organization orgID's own trusted issuer id, login on, with
// connectd as its client.
func (e *env) newOrgIdP(orgID, id string) *idp {
	e.t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	e.t.Cleanup(srv.Close)
	p, err := devidp.New(devidp.Config{Issuer: srv.URL, Clients: []devidp.Client{{ID: "connectd", Secret: servertest.IdPSecret,
		RedirectURIs: []string{e.srv.URL + "/login/callback"}}}})
	if err != nil {
		e.t.Fatal(err)
	}
	mux.Handle("/", p.Handler())
	if _, err := e.server.Orgs().AddIssuer(context.Background(), orgID, mcpauth.Issuer{ID: id, URL: srv.URL, Login: true,
		ClientID: "connectd", ClientSecret: servertest.IdPSecret}, "test"); err != nil {
		e.t.Fatal(err)
	}
	return &idp{Provider: p, srv: srv}
}

// tokenFor is user's access token at i for the resources of servers.
func tokenFor(t *testing.T, i *devidp.Provider, user string, servers ...*mcpServer) string {
	t.Helper()
	var aud []string
	for _, m := range servers {
		aud = append(aud, m.client.Resources[0])
	}
	tok, err := i.AccessToken(user, aud...)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// v1With makes GET /v1/connections as m with the raw user token tok at base
// and returns the status, the error code and the Retry-After header.
func (m *mcpServer) v1With(base, tok string) (int, string, string) {
	m.e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/connections", nil)
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, tok)
	resp, err := m.e.srv.Client().Do(req)
	if err != nil {
		m.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		m.e.t.Fatalf("GET /v1/connections: %d, not JSON: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, out.Error, resp.Header.Get("Retry-After")
}

// orgsEnv is a connectd with organizations acme (its own issuer acme-idp
// and its own app at fake) and beta, an MCP server in each and one in the
// default organization.
type orgsEnv struct {
	*env
	acmeIdP             *idp
	acme, beta, deflt   *mcpServer
	orgs                *org.Store
	deployment, acmeIss *devidp.Provider
}

func newOrgsEnv(t *testing.T) *orgsEnv {
	e := newEnv(t, envOptions{apps: map[string]string{"acme-app": "acme-secret"}})
	ctx := context.Background()
	o := &orgsEnv{env: e, orgs: e.server.Orgs()}
	for _, id := range []string{"acme", "beta"} {
		if _, err := o.orgs.Create(ctx, id, strings.ToUpper(id[:1])+id[1:]+" Corp", "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := o.orgs.SetApp(ctx, "acme", "fake", "acme-app", provider.Secret("acme-secret"), "test"); err != nil {
		t.Fatal(err)
	}
	o.acmeIdP = e.newOrgIdP("acme", "acme-idp")
	o.acme = e.newOrgMCPServer("acme", "acme-files", "fake")
	o.beta = e.newOrgMCPServer("beta", "beta-files", "fake")
	o.deflt = e.newMCPServer("files", "fake")
	o.deployment, o.acmeIss = e.idps[0].Provider, o.acmeIdP.Provider
	return o
}

// TestOrgIssuerTrust (issue 34): whose user tokens an organization's MCP
// servers accept on /v1 — its own issuer's, and the deployment's while the
// organization allows them; never another organization's issuer's, even
// for a token already verified (and cached) for a client that trusts it;
// never a forged one; and 503, not 401, while an issuer cannot be reached.
func TestOrgIssuerTrust(t *testing.T) {
	t.Parallel()
	o := newOrgsEnv(t)
	ctx := context.Background()
	e := o.env
	e.run(e.server) // the caches are live, as in service
	base := e.srv.URL
	check := func(what string, m *mcpServer, tok string, status int, code string) {
		t.Helper()
		st, got, _ := m.v1With(base, tok)
		if st != status || got != code {
			t.Fatalf("%s: %d %q, want %d %q", what, st, got, status, code)
		}
	}

	check("acme's issuer, acme's server", o.acme, tokenFor(t, o.acmeIss, "alice", o.acme), 200, "")
	check("acme's issuer, beta's server", o.beta, tokenFor(t, o.acmeIss, "alice", o.beta), 401, "untrusted_issuer")
	check("acme's issuer, the default organization's server", o.deflt, tokenFor(t, o.acmeIss, "alice", o.deflt), 401, "untrusted_issuer")
	check("the deployment's issuer, acme's server", o.acme, tokenFor(t, o.deployment, "alice", o.acme), 200, "")
	check("the deployment's issuer, the default organization's server", o.deflt, tokenFor(t, o.deployment, "alice", o.deflt), 200, "")

	// The attack on the verified-token cache: a token whose aud names two
	// organizations' servers, verified (and cached) for the one that
	// trusts its issuer, then presented by the other.
	both := tokenFor(t, o.acmeIss, "mallory", o.acme, o.beta)
	check("acme's issuer, both servers' aud, at acme", o.acme, both, 200, "")
	check("the same token, cached, at beta", o.beta, both, 401, "untrusted_issuer")

	// acme stops accepting the deployment's issuers: their tokens — new
	// ones, and one verified for acme's server before — are refused there,
	// its own issuer's still pass, and the other organizations are as
	// they were.
	cached := tokenFor(t, o.deployment, "bob", o.acme, o.beta)
	check("the deployment's issuer, cached", o.acme, cached, 200, "")
	if _, err := o.orgs.SetDeploymentIssuers(ctx, "acme", false, "test"); err != nil {
		t.Fatal(err)
	}
	eventuallyStatus(t, "acme refuses the deployment's issuer", func() bool {
		st, code, _ := o.acme.v1With(base, tokenFor(t, o.deployment, "alice", o.acme))
		return st == 401 && code == "untrusted_issuer"
	})
	check("a cached deployment token at acme", o.acme, cached, 401, "untrusted_issuer")
	check("the same token at beta", o.beta, cached, 200, "")
	check("acme's own issuer after", o.acme, tokenFor(t, o.acmeIss, "alice", o.acme), 200, "")
	check("the deployment's issuer at the default organization after", o.deflt, tokenFor(t, o.deployment, "alice", o.deflt), 200, "")

	// A token naming acme's issuer URL, signed with a key it never
	// published (iat before its keys were fetched: refused without a fetch).
	forger, err := devidp.New(devidp.Config{Issuer: o.acmeIss.Issuer()})
	if err != nil {
		t.Fatal(err)
	}
	claims := forger.AccessTokenClaims("alice", "mcp-client", "", o.acme.client.Resources[0])
	claims["iat"] = time.Now().Add(-time.Hour).Unix()
	forged, err := forger.Sign("at+jwt", claims)
	if err != nil {
		t.Fatal(err)
	}
	check("forged under acme's issuer", o.acme, forged, 401, "invalid_token")

	// An issuer of acme's whose discovery is down: 503 with Retry-After.
	dead := httptest.NewTLSServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	if _, err := o.orgs.AddIssuer(ctx, "acme", mcpauth.Issuer{ID: "acme-down", URL: deadURL}, "test"); err != nil {
		t.Fatal(err)
	}
	downSigner, err := devidp.New(devidp.Config{Issuer: deadURL})
	if err != nil {
		t.Fatal(err)
	}
	eventuallyStatus(t, "the down issuer is 503", func() bool {
		st, code, retry := o.acme.v1With(base, tokenFor(t, downSigner, "alice", o.acme))
		return st == 503 && code == "jwks_unavailable" && retry != ""
	})

	// A warm read asks the database nothing about trust: the organization's
	// flag and its issuer come from memory.
	warm := tokenFor(t, o.acmeIss, "carol", o.acme)
	check("warm-up", o.acme, warm, 200, "")
	check("warm-up", o.acme, warm, 200, "")
	misses := o.orgs.TrustCacheStats().Misses
	for range 5 {
		check("warm", o.acme, warm, 200, "")
	}
	if got := o.orgs.TrustCacheStats().Misses - misses; got != 0 {
		t.Fatalf("%d of 5 warm reads asked the database about trust", got)
	}
}

func eventuallyStatus(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 3s", what)
		}
	}
}

// TestOrgIssuerRemovedEverywhere: an issuer removed on one replica has its
// tokens — cached ones too — refused on another within a second or so (the
// organizations' notification), never served from its caches after.
func TestOrgIssuerRemovedEverywhere(t *testing.T) {
	t.Parallel()
	o := newOrgsEnv(t)
	e := o.env
	e.run(e.server)
	cfg := e.cfg
	cfg.Pool = pgtest.NewPool(t, e.pool.Config().ConnString())
	other, otherURL := e.replica(cfg)
	e.run(other)
	tok := tokenFor(t, o.acmeIss, "alice", o.acme)
	for _, base := range []string{e.srv.URL, otherURL, otherURL} {
		if st, code, _ := o.acme.v1With(base, tok); st != 200 {
			t.Fatalf("before: %s: %d %s", base, st, code)
		}
	}
	if _, owner, ok, err := other.Orgs().LookupIssuer(context.Background(), o.acmeIss.Issuer()); !ok || owner != "acme" || err != nil {
		t.Fatalf("the other replica: %s %t %v", owner, ok, err)
	}
	if _, err := o.orgs.RemoveIssuer(context.Background(), "acme", "acme-idp", "test"); err != nil {
		t.Fatal(err)
	}
	eventuallyStatus(t, "the other replica refuses the removed issuer's token", func() bool {
		st, code, _ := o.acme.v1With(otherURL, tok)
		return st == 401 && code == "untrusted_issuer"
	})
	if st, code, _ := o.acme.v1With(e.srv.URL, tok); st != 401 || code != "untrusted_issuer" {
		t.Fatalf("the replica that removed it: %d %s", st, code)
	}
}

// TestConnectWithOrgIssuer is the whole flow at an organization's issuer: a
// link minted with a token of acme's issuer is bound to that identity;
// opening it sends the browser to sign in at acme's issuer (not the
// deployment's), and the connection is stored for that identity in acme.
// Token exchange (RFC 8693) trusts the same issuers as /v1.
func TestConnectWithOrgIssuer(t *testing.T) {
	t.Parallel()
	o := newOrgsEnv(t)
	e := o.env
	ctx := context.Background()
	tok := tokenFor(t, o.acmeIss, "alice", o.acme)
	st, out, raw := o.acme.send(e.srv.URL, http.MethodPost, "/v1/elicitations", tok,
		map[string]any{"provider": "fake", "scopes": []string{"repo"}})
	if st != http.StatusCreated {
		t.Fatalf("mint: %d %s", st, raw)
	}
	link := out["url"].(string)
	b := e.browser()
	r := b.get(link)
	if r.status != http.StatusFound || !strings.Contains(r.location, "/login?") {
		t.Fatalf("open: %d %s", r.status, r.location)
	}
	start := b.get(r.location)
	if start.status != http.StatusFound || !strings.HasPrefix(start.location, o.acmeIss.Issuer()+"/") {
		t.Fatalf("sign-in went to %s, want acme's issuer %s", start.location, o.acmeIss.Issuer())
	}
	back := b.get(e.pick(b, start.location, "alice"))
	if back.status != http.StatusSeeOther || back.location != link {
		t.Fatalf("login did not return to the link: %d %s %s", back.status, back.location, back.body)
	}
	sess, err := e.session(b)
	if err != nil || sess.Issuer != o.acmeIss.Issuer() || sess.Subject != "alice" {
		t.Fatalf("session %+v %v", sess, err)
	}
	done := b.get(e.authorize(e.allow(b, link, b.get(link))))
	if done.status != http.StatusOK || !strings.Contains(done.body, "Connected") {
		t.Fatalf("callback: %d %s", done.status, done.body)
	}
	var iss, sub, orgID string
	if err := e.pool.QueryRow(ctx, `SELECT issuer, subject, org_id FROM connections`).Scan(&iss, &sub, &orgID); err != nil ||
		iss != o.acmeIss.Issuer() || sub != "alice" || orgID != "acme" {
		t.Fatalf("connection %s %s %s (%v)", iss, sub, orgID, err)
	}
	if st, _, raw := o.acme.send(e.srv.URL, http.MethodGet, "/v1/connections/fake/token", tok, nil); st != http.StatusOK {
		t.Fatalf("token read: %d %s", st, raw)
	}

	// The account page at acme's issuer (which the sign-in choice does not
	// list): /account?issuer=acme-idp.
	b2 := e.browser()
	acct := b2.get(e.srv.URL + "/account?issuer=acme-idp")
	if acct.status != http.StatusFound || !strings.HasPrefix(acct.location, e.srv.URL+"/login?") {
		t.Fatalf("/account?issuer=: %d %s", acct.status, acct.location)
	}
	if start := b2.get(acct.location); start.status != http.StatusFound ||
		!strings.HasPrefix(start.location, o.acmeIss.Issuer()+"/") {
		t.Fatalf("account sign-in went to %s", start.location)
	}
	if r := b2.get(e.srv.URL + "/login?issuer=nope&return_to=/account"); r.status != http.StatusBadRequest || e.code(r) != "unknown_issuer" {
		t.Fatalf("an unknown issuer: %d %q", r.status, e.code(r))
	}
	if r := b2.get(e.srv.URL + "/session"); strings.Contains(r.body, o.acmeIss.Issuer()) {
		t.Fatal("the sign-in choice lists acme's issuer")
	}

	// Token exchange: acme's server exchanges acme's issuer's token; beta's
	// cannot, though the token names beta's server too.
	if st, _, out := e.postToken(e.srv.URL, o.acme.basic(), exchangeParams(tok, "connectd:provider:fake")); st != http.StatusOK {
		t.Fatalf("acme's exchange: %d %v", st, out)
	}
	both := tokenFor(t, o.acmeIss, "alice", o.beta, o.acme)
	if st, _, out := e.postToken(e.srv.URL, o.acme.basic(), exchangeParams(both, "connectd:provider:fake")); st != http.StatusOK {
		t.Fatalf("acme's exchange of a token for both: %d %v", st, out)
	}
	st, _, out = e.postToken(e.srv.URL, o.beta.basic(), exchangeParams(both, "connectd:provider:fake"))
	if st != http.StatusBadRequest || out["error"] != "invalid_grant" || out["connectd_error"] != "untrusted_issuer" {
		t.Fatalf("beta's exchange of acme's issuer's token: %d %v", st, out)
	}
}
