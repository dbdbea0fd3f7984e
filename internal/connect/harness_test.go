package connect_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/connect"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/flowtest"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/servertest"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/testkit"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// idp is a development identity provider behind its own TLS server.
type idp struct {
	*devidp.Provider
	srv *httptest.Server
}

// env is one connectd (servertest: server.New over TLS, real Postgres) with
// its identity providers, a fake third-party provider and an API-key
// provider, as a browser and an MCP server see them. The fields below server
// are its parts, for tests that look inside.
type env struct {
	*servertest.Env
	t      *testing.T
	pool   *pgxpool.Pool
	srv    *httptest.Server // connectd's public listener
	cfg    server.Config    // as built, for replicas
	server *server.Server
	idps   []*idp
	keys   []session.Key
	clock  *testkit.Clock
	logs   *testkit.LogBuffer
	fake   *providertest.Server // provider "fake" (OAuth)
	keyAPI *httptest.Server     // verification endpoint of provider "keyed" (api_key)

	sessions *session.Store
	rp       *mcpauth.Login
	verifier *mcpauth.Verifier
	clients  *clientauth.Clients
	keyring  *keyring.Keyring
	vault    *vault.Store
	catalog  *provider.Catalog
	connect  *connect.Server
}

type envOptions struct {
	// idTokenClaims tampers with the first IdP's ID tokens.
	idTokenClaims func(jwt.MapClaims)
	// issuers is the number of IdPs (default 1), ids "idp0", "idp1", ...
	issuers int
	// quirks configure the fake OAuth provider.
	quirks providertest.Quirks
	// rotate makes the fake provider rotate refresh tokens.
	rotate bool
	// apps are further OAuth clients the fake provider knows (client id →
	// secret): organizations' own apps.
	apps map[string]string
	// limits are the public listener's rate limits (default: none) and
	// mintLimit the per-(user, client) mint limit, mintUserLimit the per-user
	// ceiling; maxWaiters the long-polls per client key (0: default).
	limits                   web.RateLimits
	mintLimit, mintUserLimit web.Rate
	maxWaiters               int
	// fakeEntry edits the fake provider's providers-file entry.
	fakeEntry func(map[string]any)
	// brand is the operator's branding (CONNECTD_BRAND_*).
	brand templates.Brand
	// tracing is the tracer provider (nil: tracing off).
	tracing trace.TracerProvider
	// config edits the configuration last (egress_proxy_test.go).
	config func(*server.Config)
}

func newEnv(t *testing.T, opts envOptions) *env {
	t.Helper()
	keyAPI := keyedVerifier(t)
	s := servertest.New(t, servertest.Options{
		Issuers: opts.issuers,
		IdP: func(n int, c *devidp.Config) {
			if n == 0 {
				c.IDTokenClaims = opts.idTokenClaims
			}
		},
		Fake:      providertest.Options{Quirks: opts.quirks, RotateRefreshTokens: opts.rotate, Apps: opts.apps},
		FakeEntry: opts.fakeEntry,
		Providers: []map[string]any{{"name": "keyed", "kind": "api_key", "display_name": "Keyed",
			"verify": map[string]any{"method": "GET", "url": keyAPI.URL + "/check", "header": "Authorization",
				"value": "Bearer {key}", "expect_status": 200}}},
		DevProviders: true,
		Config: func(c *server.Config) {
			c.RateLimit = server.RateLimitConfig{Public: opts.limits, Mint: opts.mintLimit, MintUser: opts.mintUserLimit,
				MaxWaiters: opts.maxWaiters}
			c.Connect.Brand = opts.brand
			c.Tracing = opts.tracing
			if opts.config != nil {
				opts.config(c)
			}
		},
	})
	e := &env{Env: s, t: t, pool: s.Pool, srv: s.Public, cfg: s.Config, server: s.Server,
		keys: s.Config.Identity.SessionKeys, clock: s.Clock, logs: s.Logs, fake: s.Fake, keyAPI: keyAPI}
	for _, p := range s.IdPs {
		e.idps = append(e.idps, &idp{Provider: p.Provider, srv: p.Server})
	}
	e.sessions, e.rp, e.verifier, e.clients = s.Server.Sessions(), s.Server.Login(), s.Server.Verifier(), s.Server.Clients()
	e.keyring, e.vault, e.catalog, e.connect = s.Server.Keyring(), s.Server.Vault(), s.Server.Catalog(), s.Server.Connect()
	return e
}

// build is server.New, failing the test on an error.
func (e *env) build(cfg server.Config) *server.Server { e.t.Helper(); return e.Build(cfg) }

// run runs s's background work (the notification hub, the sweeps) until the
// test ends.
func (e *env) run(s *server.Server) { e.Run(s) }

// replica builds another connectd from cfg (e's configuration, edited: its
// own pool on the same database, other keys, caches) behind its own TLS
// server, and returns it with its base URL.
func (e *env) replica(cfg server.Config) (*server.Server, string) {
	e.t.Helper()
	return e.Replica(cfg)
}

// goodAPIKey is the only key the "keyed" provider's verification accepts.
const goodAPIKey = "sk-test-good-key-123"

// keyedVerifier is the API-key verification endpoint of provider "keyed".
func keyedVerifier(t *testing.T) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+goodAPIKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// withKeys returns the base URL of a second connectd on the same database and
// issuers whose session keyring is keys (a replica after a key rotation).
func (e *env) withKeys(keys ...session.Key) string {
	e.t.Helper()
	cfg := e.cfg
	cfg.Identity.SessionKeys, cfg.Logger = keys, slog.New(slog.DiscardHandler)
	_, base := e.replica(cfg)
	return base
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
	if successRedirect(r) {
		// A completed flow ends with a 303 to the link's own success page
		// (issue 38 item 2): followed here as a browser does, so that the
		// tests read the page the user sees; TestSuccessPageIsReloadable
		// checks the redirect itself.
		r = b.Request(http.MethodGet, r.Location, nil)
	}
	return response{status: r.Status, location: r.Location, body: r.Body, header: r.Header, setCookies: r.SetCookies}
}

// successRedirect reports whether r is the redirect of a completed flow to
// its success page (/c/{id}?account=…).
func successRedirect(r flowtest.Response) bool {
	if r.Status != http.StatusSeeOther {
		return false
	}
	u, err := url.Parse(r.Location)
	return err == nil && strings.HasPrefix(u.Path, "/c/") && u.Query().Has("account")
}

func (b *browser) get(u string) response { b.t.Helper(); return b.do(http.MethodGet, u, nil) }

// setCookie returns the raw Set-Cookie header for name, or "".
func (r response) setCookie(name string) string {
	return flowtest.Response{SetCookies: r.setCookies}.SetCookie(name)
}

// startLogin opens /login and returns the IdP authorization URL it redirects to.
func (e *env) startLogin(b *browser, query string) string {
	e.t.Helper()
	return e.StartLogin(b.Browser, "/login?"+query)
}

// pick answers the IdP's user picker as user ("" cancels) and returns the
// callback URL the IdP redirects the browser to.
func (e *env) pick(b *browser, authorizeURL, user string) string {
	e.t.Helper()
	return e.Pick(b.Browser, authorizeURL, user, "/login/callback")
}

// login runs a whole login at the first IdP and returns the callback response.
func (e *env) login(b *browser, user, returnTo string) response {
	e.t.Helper()
	q := url.Values{"issuer": {"idp0"}}
	if returnTo != "" {
		q.Set("return_to", returnTo)
	}
	return b.get(e.pick(b, e.startLogin(b, q.Encode()), user))
}

// session decodes the browser's session cookie with the env's keys.
func (e *env) session(b *browser) (session.Session, error) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if v, ok := b.Cookies[session.CookieName]; ok {
		r.AddCookie(&http.Cookie{Name: session.CookieName, Value: v})
	}
	return e.sessions.Get(r)
}

// code returns the error code connectd logged for the request of r.
func (e *env) code(r response) string { return e.Code(r.header) }

// refused checks that r is an error page with status and code, and that it
// neither signed the browser in nor redirected it anywhere.
func (e *env) refused(r response, status int, code string) {
	e.t.Helper()
	if r.status != status || e.code(r) != code {
		e.t.Fatalf("got %d %q, want %d %q: %s", r.status, e.code(r), status, code, r.body)
	}
	if r.setCookie(session.CookieName) != "" {
		e.t.Fatal("a refused request set a session cookie")
	}
	if r.location != "" {
		e.t.Fatalf("a refused request redirects to %s", r.location)
	}
}
