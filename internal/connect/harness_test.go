package connect_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/openapitest"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
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

// env is one connectd (connect.Server over TLS, real Postgres) with its
// identity providers and a fake third-party provider, as a browser and an MCP
// server see them.
type env struct {
	t        *testing.T
	pool     *pgxpool.Pool
	srv      *httptest.Server // connectd
	mux      *web.Mux
	idps     []*idp
	keys     []session.Key
	sessions *session.Store
	rp       *mcpauth.Login
	clock    *testkit.Clock // login-state clock
	logs     *testkit.LogBuffer

	verifier *mcpauth.Verifier
	clients  *mcpauth.Clients
	auth     *mcpauth.Authenticator
	keyring  *vault.Keyring
	vault    *vault.Store
	catalog  *provider.Catalog
	fake     *providertest.Server // provider "fake" (OAuth)
	keyAPI   *httptest.Server     // verification endpoint of provider "keyed" (api_key)
	connect  *connect.Server
	logger   *slog.Logger

	mintLimit, mintUserLimit web.Rate
	maxWaiters               int
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
	e := &env{t: t, pool: pgtest.Pool(t), mux: web.NewMux(), clock: testkit.NewClock(time.Now()), logs: &testkit.LogBuffer{}}
	logger := web.NewLogger(e.logs, slog.LevelDebug, "json")
	// The same middleware as the real public listener.
	public, err := web.Public(e.mux, web.PublicConfig{Logger: logger, HSTS: true, Limits: opts.limits})
	if err != nil {
		t.Fatal(err)
	}
	// Every /v1 answer is held to docs/openapi.yaml.
	e.srv = httptest.NewTLSServer(openapitest.Handler(t, public))
	t.Cleanup(e.srv.Close)
	e.mintLimit, e.mintUserLimit, e.maxWaiters = opts.mintLimit, opts.mintUserLimit, opts.maxWaiters
	var issuers []mcpauth.Issuer
	for n := range opts.issuers {
		mux := http.NewServeMux()
		srv := httptest.NewTLSServer(mux)
		t.Cleanup(srv.Close)
		cfg := devidp.Config{
			Issuer:  srv.URL,
			Clients: []devidp.Client{{ID: "connectd", Secret: clientSecret, RedirectURIs: []string{e.srv.URL + "/login/callback"}}},
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
	v, err := mcpauth.NewVerifier(mcpauth.VerifierConfig{Issuers: issuers, HTTPClient: e.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	e.verifier = v
	e.rp, err = mcpauth.NewLogin(mcpauth.LoginConfig{Pool: e.pool, Verifier: v,
		RedirectURL: e.srv.URL + "/login/callback", Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.keys = []session.Key{session.NewKey()}
	e.sessions = e.store(e.keys...)
	e.logger = logger
	e.clients = mcpauth.NewClients(mcpauth.ClientsConfig{Pool: e.pool, Now: e.clock.Now})
	e.auth = mcpauth.NewAuthenticator(e.clients, v)
	e.setupProviders(opts)
	e.connect = e.newServer(e.pool, e.sessions, logger)
	e.connect.Routes(e.mux)
	e.mux.Handle(web.AssetRoute("GET /static/", staticFiles()))
	e.mux.Handle(web.Route{Pattern: "/", Kind: web.KindPage, Class: web.ClassBrowser, Handler: web.Fallback(logger)})
	return e
}

// staticFiles serves the stylesheet as cmd/connectd does.
func staticFiles() http.Handler {
	static, err := fs.Sub(templates.Static, "static")
	if err != nil {
		panic(err)
	}
	return http.StripPrefix("/static/", web.Static(static))
}

// setupProviders starts the fake OAuth provider and an API-key verification
// endpoint, and builds the catalog and vault over them.
func (e *env) setupProviders(opts envOptions) {
	t := e.t
	e.fake = providertest.New(t, providertest.Options{TLS: true, RequirePKCE: true, Quirks: opts.quirks,
		RotateRefreshTokens: opts.rotate, RedirectURIs: []string{e.srv.URL + "/oauth/callback"},
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
	e.catalog, err = provider.New(context.Background(), pc, provider.Options{HTTPClient: e.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	k, err := vault.GenerateKey(1)
	if err != nil {
		t.Fatal(err)
	}
	e.keyring, err = vault.ParseKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	e.vault = e.newVault(e.pool)
}

// newVault returns a vault store on pool that refreshes and revokes through
// the catalog.
func (e *env) newVault(pool *pgxpool.Pool) *vault.Store {
	e.t.Helper()
	cat := e.catalog
	st, err := vault.New(vault.Config{Pool: pool, Keyring: e.keyring, Now: e.clock.Now,
		Refresh: func(ctx context.Context, name, rt string) (*vault.Refreshed, error) {
			p, err := cat.OAuth(name)
			if err != nil {
				return nil, err
			}
			tok, err := p.Refresh(ctx, rt)
			if errors.Is(err, provider.ErrInvalidGrant) {
				return nil, fmt.Errorf("%w: %w", vault.ErrReauthorizationRequired, err)
			}
			if errors.Is(err, provider.ErrUnavailable) {
				return nil, fmt.Errorf("%w: %w", vault.ErrProviderUnavailable, err)
			}
			if err != nil {
				return nil, err
			}
			return &vault.Refreshed{AccessToken: tok.AccessToken, TokenType: tok.TokenType,
				RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, Scopes: tok.Scopes}, nil
		},
		RefreshScoped: func(ctx context.Context, name, rt string, scopes []string) (*vault.Refreshed, error) {
			p, err := cat.OAuth(name)
			if err != nil {
				return nil, err
			}
			tok, err := p.RefreshScoped(ctx, rt, scopes)
			var pe *provider.Error
			switch {
			case errors.Is(err, provider.ErrInvalidGrant):
				return nil, fmt.Errorf("%w: %w", vault.ErrReauthorizationRequired, err)
			case errors.Is(err, provider.ErrUnavailable):
				return nil, fmt.Errorf("%w: %w", vault.ErrProviderUnavailable, err)
			case errors.As(err, &pe) && pe.Code == "invalid_scope":
				return nil, fmt.Errorf("%w: %w", vault.ErrCannotNarrow, err)
			case err != nil:
				return nil, err
			}
			return &vault.Refreshed{AccessToken: tok.AccessToken, TokenType: tok.TokenType,
				RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, Scopes: tok.Scopes}, nil
		},
		Revoke: func(ctx context.Context, name string, c *vault.Credential) error {
			p, err := cat.OAuth(name)
			if err != nil {
				return vault.ErrRevocationNotSupported
			}
			return provider.RevokeGrant(ctx, p, c.AccessToken, c.RefreshToken)
		}})
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// newServer builds a connect.Server over pool (the same database as e for a
// second replica) with its own vault store.
func (e *env) newServer(pool *pgxpool.Pool, sessions *session.Store, logger *slog.Logger) *connect.Server {
	e.t.Helper()
	st := e.vault
	if pool != e.pool {
		st = e.newVault(pool)
	}
	s, err := connect.New(connect.Config{Logger: logger, Pool: pool, Sessions: sessions, Login: e.rp, Auth: e.auth,
		Clients: e.clients, Vault: st, Keyring: e.keyring, Catalog: e.catalog, PublicURL: e.srv.URL, Now: e.clock.Now,
		MintLimit: web.NewLimiter(e.mintLimit), MintUserLimit: web.NewLimiter(e.mintUserLimit), MaxWaiters: e.maxWaiters})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// goodAPIKey is the only key the "keyed" provider's verification accepts.
const goodAPIKey = "sk-test-good-key-123"

func (e *env) store(keys ...session.Key) *session.Store {
	e.t.Helper()
	s, err := session.New(session.Config{Pool: e.pool, Keys: keys})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// withKeys returns the base URL of a second connectd on the same database and
// issuers whose session keyring is keys (a replica after a key rotation).
func (e *env) withKeys(keys ...session.Key) string {
	e.t.Helper()
	mux := web.NewMux()
	e.newServer(e.pool, e.store(keys...), slog.New(slog.DiscardHandler)).Routes(mux)
	srv := httptest.NewTLSServer(mux)
	e.t.Cleanup(srv.Close)
	return srv.URL
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
