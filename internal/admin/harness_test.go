package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/connect"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/flowtest"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/servertest"
	"github.com/connectd/connectd/internal/testkit"
	"github.com/connectd/connectd/internal/vault"
)

// idpSecret is connectd's client secret at the IdP.
const idpSecret = servertest.IdPSecret

// adminGroup is the claim value the claim-based policies require.
const adminGroup = "connectd-admins"

// env is one connectd (servertest: server.New over TLS, real Postgres: the
// connect flow, the /v1 API and the admin pages and API behind the
// production middleware), the development IdP as the real OIDC peer for
// users and admins, and a fake OAuth provider. The fields below server are
// its parts, for tests that look inside.
type env struct {
	*servertest.Env
	t      *testing.T
	pool   *pgxpool.Pool
	srv    *httptest.Server
	clock  *testkit.Clock
	logs   *testkit.LogBuffer
	idp    *devidp.Provider
	fake   *providertest.Server
	server *server.Server

	clients *clientauth.Clients
	vault   *vault.Store
	connect *connect.Server
	store   *admin.Store
	keys    *admin.Keys
	admin   *admin.Server
}

type envOptions struct {
	// policy is the admin policy; default: subject alice at the IdP.
	policy *admin.Policy
	// noAdminLogin builds the admin server without sign-in (API keys only).
	noAdminLogin bool
	// revokeDelay makes the fake provider's revocation endpoint answer late.
	revokeDelay time.Duration
	// spareIdP starts a second IdP (e.IdPs[1], "idp1") that is not one of
	// the deployment's issuers: for an organization's own issuer.
	spareIdP bool
}

func newEnv(t *testing.T, opts envOptions) *env {
	t.Helper()
	issuers := 1
	if opts.spareIdP {
		issuers = 2
	}
	s := servertest.New(t, servertest.Options{
		Issuers: issuers,
		// The IdP: alice and bob; only alice's ID tokens carry the admin group.
		IdP: func(_ int, c *devidp.Config) {
			c.IDTokenClaims = func(c jwt.MapClaims) {
				if c["sub"] == "alice" {
					c["groups"] = []string{"staff", adminGroup}
				}
			}
		},
		Fake:         providertest.Options{RotateRefreshTokens: true, RevokeDelay: opts.revokeDelay},
		DevProviders: true,
		// servertest's one session keyring serves end users and admins, as
		// in production: the cookie name alone keeps an end user's session
		// from opening as an admin's.
		Config: func(cfg *server.Config) {
			cfg.Identity.Issuers = cfg.Identity.Issuers[:1] // idp1, if any, is no deployment issuer
			if opts.noAdminLogin {
				return
			}
			policy := admin.Policy{Issuer: "idp0", Subjects: []string{"alice"}}
			if opts.policy != nil {
				policy = *opts.policy
			}
			cfg.Admin = server.AdminConfig{Issuer: policy.Issuer, Subjects: policy.Subjects, Claim: policy.Claim,
				ClaimValue: policy.ClaimValue, SessionMaxAge: 4 * time.Hour}
		},
	})
	e := &env{Env: s, t: t, pool: s.Pool, srv: s.Public, clock: s.Clock, logs: s.Logs, idp: s.IdPs[0].Provider,
		fake: s.Fake, server: s.Server}
	e.clients, e.vault, e.connect = s.Server.Clients(), s.Server.Vault(), s.Server.Connect()
	e.store, e.keys, e.admin = s.Server.AdminStore(), s.Server.AdminKeys(), s.Server.Admin()
	return e
}

// browser is servertest's scripted browser, failing the test on a transport
// error.
type browser struct {
	*servertest.Browser
	t *testing.T
}

func (e *env) browser() *browser { return &browser{Browser: e.Env.Browser(), t: e.t} }

type response struct {
	status   int
	location string
	body     string
	header   http.Header
	// setCookies are the raw Set-Cookie headers.
	setCookies []string
}

func (b *browser) do(method, u string, form url.Values) response {
	b.t.Helper()
	r := b.Request(method, u, form)
	return response{status: r.Status, location: r.Location, body: r.Body, header: r.Header, setCookies: r.SetCookies}
}

func (b *browser) get(u string) response { b.t.Helper(); return b.do(http.MethodGet, u, nil) }

// setsAdminSession reports whether r gives the browser an admin session
// (clearing one does not count).
func (r response) setsAdminSession() bool {
	c := r.setCookie(admin.SessionCookie)
	return c != "" && !strings.Contains(c, "Max-Age=0")
}

func (r response) setCookie(name string) string {
	return flowtest.Response{SetCookies: r.setCookies}.SetCookie(name)
}

// pick answers the IdP's user picker as user and returns the callback URL the
// IdP sends the browser back to.
func (e *env) pick(b *browser, authorizeURL, user, callbackPath string) string {
	e.t.Helper()
	return e.Pick(b.Browser, authorizeURL, user, callbackPath)
}

// adminLogin signs b in at /admin/login as user and returns the callback's answer.
func (e *env) adminLogin(b *browser, user string) response {
	e.t.Helper()
	return b.get(e.pick(b, e.StartLogin(b.Browser, admin.LoginPath), user, admin.CallbackPath))
}

// admin returns a browser signed in as the admin alice.
func (e *env) adminBrowser() *browser {
	e.t.Helper()
	b := e.browser()
	if r := e.adminLogin(b, "alice"); r.status != http.StatusSeeOther {
		e.t.Fatalf("admin sign-in: %d %s", r.status, r.body)
	}
	return b
}

// userLogin signs b in as an end user at the connect pages' /login.
func (e *env) userLogin(b *browser, user string) {
	e.t.Helper()
	if r := b.get(e.pick(b, e.StartLogin(b.Browser, "/login?issuer=idp0"), user, "/login/callback")); r.status != http.StatusSeeOther {
		e.t.Fatalf("user login: %d %s", r.status, r.body)
	}
}

// code returns the error code connectd logged for the request of r.
func (e *env) code(r response) string { return e.Code(r.header) }

func csrfOf(t *testing.T, body string) string { t.Helper(); return servertest.CSRF(t, body) }

// mcpServer is an MCP server registered as a connectd client.
type mcpServer struct {
	e      *env
	client clientauth.Client
	key    string
}

func (e *env) newMCPServer(name string, providers ...string) *mcpServer {
	e.t.Helper()
	c, key := e.NewClient(name, []string{"https://" + name + ".mcp.example/"}, providers)
	return &mcpServer{e: e, client: c, key: key}
}

// token returns user's MCP access token for this MCP server.
func (m *mcpServer) token(user string) string {
	m.e.t.Helper()
	tok, err := m.e.idp.AccessToken(user, m.client.Resources[0])
	if err != nil {
		m.e.t.Fatal(err)
	}
	return tok
}

// call makes a /v1 request as this MCP server for user with userToken ("":
// a valid token of user).
func (m *mcpServer) call(method, path, user string, body any) (int, map[string]any) {
	m.e.t.Helper()
	return m.callWith(method, path, m.token(user), body)
}

func (m *mcpServer) callWith(method, path, userToken string, body any) (int, map[string]any) {
	m.e.t.Helper()
	return m.e.request(method, path, "Bearer "+m.key, map[string]string{mcpauth.UserTokenHeader: userToken}, body)
}

// request makes a JSON request to connectd and decodes the answer.
func (e *env) request(method, path, authz string, header map[string]string, body any) (int, map[string]any) {
	e.t.Helper()
	st, raw := e.raw(method, path, authz, header, body)
	var out map[string]any
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		e.t.Fatalf("%s %s: %d, body not JSON: %s", method, path, st, raw)
	}
	return st, out
}

func (e *env) raw(method, path, authz string, header map[string]string, body any) (int, string) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 500 {
		e.t.Fatalf("%s %s: server error %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, string(raw)
}

// adminAPI calls the admin API with an admin key.
func (e *env) adminAPI(key, method, path string, body any) (int, map[string]any) {
	e.t.Helper()
	return e.request(method, path, "Bearer "+key, nil, body)
}

// newAdminKey creates an admin API key.
func (e *env) newAdminKey(name string) (admin.Key, string) {
	e.t.Helper()
	k, secret, err := e.keys.Create(context.Background(), name, 0, admin.Actor{Name: "cli:test"})
	if err != nil {
		e.t.Fatal(err)
	}
	return k, secret
}

// connectFully runs user's whole connect flow for m (consent, fake provider)
// and returns the connection id.
func (e *env) connectFully(m *mcpServer, user string, scopes ...string) string {
	e.t.Helper()
	st, el := m.call(http.MethodPost, "/v1/elicitations", user, map[string]any{"provider": "fake", "scopes": scopes})
	if st != http.StatusCreated {
		e.t.Fatalf("mint: %d %v", st, el)
	}
	u := el["url"].(string)
	b := e.browser()
	e.userLogin(b, user)
	consent := b.get(u)
	if consent.status != http.StatusOK {
		e.t.Fatalf("consent page: %d %s", consent.status, consent.body)
	}
	form, ok := flowtest.AllowForm(consent.body)
	if !ok {
		e.t.Fatalf("no consent form: %s", consent.body)
	}
	redirect := b.do(http.MethodPost, u, form)
	if redirect.status == http.StatusSeeOther && strings.HasPrefix(redirect.location, u+"?account=") {
		return e.connectionID(user, "fake") // consent-only: the connection had the scopes already
	}
	if redirect.status != http.StatusSeeOther {
		e.t.Fatalf("allow: %d %s", redirect.status, redirect.body)
	}
	back, err := e.fake.Approve(redirect.location)
	if err != nil {
		e.t.Fatal(err)
	}
	if done := b.get(back.String()); done.status != http.StatusSeeOther || !strings.HasPrefix(done.location, u+"?account=") {
		e.t.Fatalf("callback: %d %s", done.status, done.body)
	}
	return e.connectionID(user, "fake")
}

func (e *env) user(subject string) identity.User {
	return identity.User{Issuer: e.idp.Issuer(), Subject: subject}
}

func (e *env) connectionID(user, provider string) string {
	e.t.Helper()
	var id string
	if err := e.pool.QueryRow(context.Background(), `SELECT id FROM connections WHERE issuer = $1 AND subject = $2 AND provider = $3`,
		e.idp.Issuer(), user, provider).Scan(&id); err != nil {
		e.t.Fatalf("connection of %s at %s: %v", user, provider, err)
	}
	return id
}

func (e *env) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) auditCount(kind string) int {
	return e.count(`SELECT count(*) FROM audit_events WHERE kind = $1`, kind)
}
