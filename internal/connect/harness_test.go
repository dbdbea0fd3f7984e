package connect_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/connect"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/flowtest"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/openapitest"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/testkit"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

const clientSecret = "connectd-test-secret"

// idp is a development identity provider behind its own TLS server.
type idp struct {
	*devidp.Provider
	srv *httptest.Server
}

// env is one connectd (server.New over TLS, real Postgres) with its identity
// providers and a fake third-party provider, as a browser and an MCP server
// see them. The fields below server are its parts, for tests that look
// inside.
type env struct {
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
	clients  *mcpauth.Clients
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
	// limits are the public listener's rate limits (default: none) and
	// mintLimit the per-(user, client) mint limit, mintUserLimit the per-user
	// ceiling; maxWaiters the long-polls per client key (0: default).
	limits                   web.RateLimits
	mintLimit, mintUserLimit web.Rate
	maxWaiters               int
	// fakeEntry edits the fake provider's providers-file entry.
	fakeEntry func(map[string]any)
}

func newEnv(t *testing.T, opts envOptions) *env {
	t.Helper()
	if opts.issuers == 0 {
		opts.issuers = 1
	}
	e := &env{t: t, pool: pgtest.Pool(t), clock: testkit.NewClock(time.Now()), logs: &testkit.LogBuffer{}}
	// connectd's address is known before it starts: redirect URIs at the
	// IdPs and the provider, and its public URL, name it.
	e.srv = httptest.NewUnstartedServer(nil)
	t.Cleanup(e.srv.Close)
	base := "https://" + e.srv.Listener.Addr().String()
	var issuers []mcpauth.Issuer
	for n := range opts.issuers {
		mux := http.NewServeMux()
		srv := httptest.NewTLSServer(mux)
		t.Cleanup(srv.Close)
		cfg := devidp.Config{
			Issuer:  srv.URL,
			Clients: []devidp.Client{{ID: "connectd", Secret: clientSecret, RedirectURIs: []string{base + "/login/callback"}}},
		}
		if n == 0 {
			cfg.IDTokenClaims = opts.idTokenClaims
		}
		p, err := devidp.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mux.Handle("/", p.Handler())
		mux.Handle("GET /static/", staticFiles()) // the picker page's stylesheet
		e.idps = append(e.idps, &idp{Provider: p, srv: srv})
		issuers = append(issuers, mcpauth.Issuer{ID: "idp" + string(rune('0'+n)), URL: srv.URL, Login: true,
			ClientID: "connectd", ClientSecret: clientSecret})
	}
	e.keys = []session.Key{session.NewKey()}
	k, err := keyring.GenerateKey(1)
	if err != nil {
		t.Fatal(err)
	}
	keyring, err := keyring.Parse(k)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base)
	e.cfg = server.Config{
		PublicURL: u, Pool: e.pool, Logger: web.NewLogger(e.logs, slog.LevelDebug, "json"),
		Identity: server.IdentityConfig{Issuers: issuers, SessionKeys: e.keys},
		Vault:    server.VaultConfig{Keyring: keyring, Providers: e.providers(base, opts)},
		RateLimit: server.RateLimitConfig{Public: opts.limits, Mint: opts.mintLimit, MintUser: opts.mintUserLimit,
			MaxWaiters: opts.maxWaiters},
		Now: e.clock.Now,
		// Trusts the test certificate, which every httptest TLS server shares.
		HTTPClient: e.idps[0].srv.Client(),
	}
	e.server = e.build(e.cfg)
	// Every /v1 answer is held to docs/openapi.yaml.
	e.srv.Config.Handler = openapitest.Handler(t, e.server.Public())
	e.srv.StartTLS()
	s := e.server
	e.sessions, e.rp, e.verifier, e.clients = s.Sessions(), s.Login(), s.Verifier(), s.Clients()
	e.keyring, e.vault, e.catalog, e.connect = s.Keyring(), s.Vault(), s.Catalog(), s.Connect()
	return e
}

// build is server.New, failing the test on an error.
func (e *env) build(cfg server.Config) *server.Server {
	e.t.Helper()
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Close)
	return s
}

// run runs s's background work (the notification hub, the sweeps) until the
// test ends.
func (e *env) run(s *server.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

// replica builds another connectd from cfg (e's configuration, edited: its
// own pool on the same database, other keys, caches) behind its own TLS
// server, and returns it with its base URL.
func (e *env) replica(cfg server.Config) (*server.Server, string) {
	e.t.Helper()
	s := e.build(cfg)
	srv := httptest.NewTLSServer(s.Public())
	e.t.Cleanup(srv.Close)
	return s, srv.URL
}

// staticFiles serves the stylesheet as connectd does.
func staticFiles() http.Handler {
	static, err := fs.Sub(templates.Static, "static")
	if err != nil {
		panic(err)
	}
	return http.StripPrefix("/static/", web.Static(static))
}

// providers starts the fake OAuth provider and an API-key verification
// endpoint, and returns the providers file naming them.
func (e *env) providers(base string, opts envOptions) *provider.Config {
	t := e.t
	e.fake = providertest.New(t, providertest.Options{TLS: true, RequirePKCE: true, Quirks: opts.quirks,
		RotateRefreshTokens: opts.rotate, RedirectURIs: []string{base + "/oauth/callback"},
		ClientSecret: "fake-client-secret"})
	e.keyAPI = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+goodAPIKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(e.keyAPI.Close)
	fakeEntry := e.fake.ProviderConfig("fake", "FAKE_SECRET")
	if opts.fakeEntry != nil {
		opts.fakeEntry(fakeEntry)
	}
	cfgJSON, err := json.Marshal(map[string]any{"providers": []any{
		fakeEntry,
		map[string]any{"name": "keyed", "kind": "api_key", "display_name": "Keyed",
			"verify": map[string]any{"method": "GET", "url": e.keyAPI.URL + "/check", "header": "Authorization",
				"value": "Bearer {key}", "expect_status": 200}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := provider.ParseConfig(cfgJSON, provider.ParseOptions{Dev: true, Getenv: func(k string) string {
		if k == "FAKE_SECRET" {
			return "fake-client-secret"
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// goodAPIKey is the only key the "keyed" provider's verification accepts.
const goodAPIKey = "sk-test-good-key-123"

// withKeys returns the base URL of a second connectd on the same database and
// issuers whose session keyring is keys (a replica after a key rotation).
func (e *env) withKeys(keys ...session.Key) string {
	e.t.Helper()
	cfg := e.cfg
	cfg.Identity.SessionKeys, cfg.Logger = keys, slog.New(slog.DiscardHandler)
	_, base := e.replica(cfg)
	return base
}

// browser is flowtest's scripted browser, failing the test on a transport
// error.
type browser struct {
	*flowtest.Browser
	t *testing.T
}

func (e *env) browser() *browser {
	return &browser{Browser: flowtest.New(e.srv.Client()), t: e.t}
}

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
	r, err := b.Do(method, u, form)
	if err != nil {
		b.t.Fatal(err)
	}
	return response{status: r.Status, location: r.Location, body: r.Body, header: r.Header, setCookies: r.SetCookies}
}

func (b *browser) get(u string) response { return b.do(http.MethodGet, u, nil) }

// setCookie returns the raw Set-Cookie header for name, or "".
func (r response) setCookie(name string) string {
	return flowtest.Response{SetCookies: r.setCookies}.SetCookie(name)
}

// startLogin opens /login and returns the IdP authorization URL it redirects to.
func (e *env) startLogin(b *browser, query string) string {
	e.t.Helper()
	r := b.get(e.srv.URL + "/login?" + query)
	if r.status != http.StatusFound {
		e.t.Fatalf("/login?%s: %d %s", query, r.status, r.body)
	}
	return r.location
}

// pick answers the IdP's user picker as user ("" cancels) and returns the
// callback URL the IdP redirects the browser to.
func (e *env) pick(b *browser, authorizeURL, user string) string {
	e.t.Helper()
	if r := b.get(authorizeURL); r.status != http.StatusOK || !strings.Contains(r.body, `value="alice"`) {
		e.t.Fatalf("picker: %d %s", r.status, r.body)
	}
	u, _ := url.Parse(authorizeURL)
	form := u.Query() // the picker's hidden fields carry exactly these
	form.Set("user", user)
	u.RawQuery = ""
	r := b.do(http.MethodPost, u.String(), form)
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, e.srv.URL+"/login/callback?") {
		e.t.Fatalf("picker answer: %d %s %s", r.status, r.location, r.body)
	}
	return r.location
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

// code returns the error code connectd logged for the request of r (error
// pages show a description, not the code; the log line has both).
func (e *env) code(r response) string {
	e.t.Helper()
	id := r.header.Get("X-Request-Id")
	for _, line := range strings.Split(e.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["request_id"] == id && m["code"] != nil {
			return m["code"].(string)
		}
	}
	return ""
}

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
