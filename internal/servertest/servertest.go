// Package servertest is the one test harness that builds a connectd: a fresh
// migrated database (pgtest), the development identity providers (devidp)
// and a fake OAuth provider (providertest) each behind its own TLS server, a
// keyring, and server.New with test defaults — a settable clock, logs in a
// buffer, every /v1 answer held to docs/openapi.yaml — on httptest listeners,
// public and internal. Options.Config edits the configuration before the
// server is built, as dex's newTestServerWith(t, updateConfig) does. The
// connect and admin harnesses and the end-to-end test start connectd with
// it; each keeps only what its own tests need on top.
//
// It is test support: nothing in production imports it (cmd/connectd's
// TestNoTestCodeLinked checks the binary's dependencies). Everything is real:
// Postgres, HTTP over TLS, crypto; nothing is mocked.
package servertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/clientauth"
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
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/web/templates"
)

// IdPSecret is the client secret of connectd's client ("connectd") at every
// identity provider.
const IdPSecret = "connectd-test-secret"

// FakeSecret is the fake provider's client secret.
const FakeSecret = "fake-client-secret"

// Options configure New; the zero value is one IdP, the fake provider named
// "fake" and the defaults of Env.Config.
type Options struct {
	// Issuers is the number of identity providers (default 1), with the ids
	// "idp0", "idp1", ... at connectd, all login issuers.
	Issuers int
	// IdP edits IdP n's configuration before it is built (ID-token claims,
	// more clients); the client "connectd" is already in cfg.Clients.
	IdP func(n int, cfg *devidp.Config)
	// Fake are the fake OAuth provider's options. TLS, RequirePKCE,
	// RedirectURIs (connectd's /oauth/callback) and ClientSecret are set by
	// New.
	Fake providertest.Options
	// FakeName is the fake provider's name in the providers file (default
	// "fake"), and FakeEntry edits its entry there.
	FakeName  string
	FakeEntry func(map[string]any)
	// Providers are further entries of the providers file, after the fake's.
	Providers []map[string]any
	// DevProviders parses the providers file as CONNECTD_DEV does (http://
	// endpoints allowed).
	DevProviders bool
	// Config edits the configuration New built, before the server is.
	Config func(*server.Config)
}

// Env is one connectd (server.New, real Postgres, TLS) with its identity
// providers and fake provider. The fields are its parts, for tests that look
// inside.
type Env struct {
	t testing.TB

	Pool   *pgxpool.Pool
	Public *httptest.Server // connectd's public listener (TLS)
	// Internal is the operators' listener (metrics, health, pprof), plain
	// HTTP as in production.
	Internal *httptest.Server
	// URL is Public's base URL, connectd's public URL.
	URL string
	// Config is the configuration Server was built from, for replicas.
	Config server.Config
	Server *server.Server
	IdPs   []*IdP
	Fake   *providertest.Server
	// Clock is Config.Now; Logs receives Config.Logger's JSON lines.
	Clock *testkit.Clock
	Logs  *testkit.LogBuffer
}

// IdP is a development identity provider behind its own TLS server.
type IdP struct {
	*devidp.Provider
	Server *httptest.Server
	// ID is its issuer id at connectd ("idp0", ...).
	ID string
}

// New builds and starts a connectd for t, with everything it talks to. The
// configuration has, before opts.Config edits it: the IdPs as login issuers
// and a session key; a fresh vault key and the providers file naming the fake
// provider (and opts.Providers); the settable Clock as Now; a debug JSON
// logger writing to Logs; an HTTP client trusting the test certificate; no
// rate limits, no admin sign-in. The server's background work does not run:
// Run starts it.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.Issuers == 0 {
		opts.Issuers = 1
	}
	if opts.FakeName == "" {
		opts.FakeName = "fake"
	}
	e := &Env{t: t, Pool: pgtest.Pool(t), Clock: testkit.NewClock(time.Now()), Logs: &testkit.LogBuffer{}}
	// connectd's address is known before it starts: the redirect URIs at
	// the IdPs and the provider, and its public URL, name it.
	e.Public = httptest.NewUnstartedServer(nil)
	t.Cleanup(e.Public.Close)
	e.URL = "https://" + e.Public.Listener.Addr().String()
	var issuers []mcpauth.Issuer
	for n := range opts.Issuers {
		idp := e.newIdP(n, opts.IdP)
		issuers = append(issuers, mcpauth.Issuer{ID: idp.ID, URL: idp.Server.URL, Login: true,
			ClientID: "connectd", ClientSecret: IdPSecret})
	}
	line, err := keyring.GenerateKey(1)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := keyring.Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	publicURL, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	e.Config = server.Config{
		PublicURL: publicURL, Pool: e.Pool, Logger: web.NewLogger(e.Logs, slog.LevelDebug, "json"),
		Identity: server.IdentityConfig{Issuers: issuers, SessionKeys: []session.Key{session.NewKey()}},
		Vault:    server.VaultConfig{Keyring: keys, Providers: e.providers(opts)},
		Now:      e.Clock.Now,
		// Trusts the test certificate, which every httptest TLS server shares.
		HTTPClient: e.IdPs[0].Server.Client(),
	}
	if opts.Config != nil {
		opts.Config(&e.Config)
	}
	e.Server = e.Build(e.Config)
	// Every /v1 answer is held to docs/openapi.yaml.
	e.Public.Config.Handler = openapitest.Handler(t, e.Server.Public())
	e.Public.StartTLS()
	e.Internal = httptest.NewServer(e.Server.Internal())
	t.Cleanup(e.Internal.Close)
	return e
}

// newIdP starts IdP n: connectd's client, with connectd's sign-in callbacks
// for end users and admins, edited by edit.
func (e *Env) newIdP(n int, edit func(int, *devidp.Config)) *IdP {
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	e.t.Cleanup(srv.Close)
	cfg := devidp.Config{Issuer: srv.URL, Clients: []devidp.Client{{ID: "connectd", Secret: IdPSecret,
		RedirectURIs: []string{e.URL + "/login/callback", e.URL + admin.CallbackPath}}}}
	if edit != nil {
		edit(n, &cfg)
	}
	p, err := devidp.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	mux.Handle("/", p.Handler())
	mux.Handle("GET /static/", staticFiles()) // the picker page's stylesheet
	idp := &IdP{Provider: p, Server: srv, ID: fmt.Sprintf("idp%d", n)}
	e.IdPs = append(e.IdPs, idp)
	return idp
}

// staticFiles serves the stylesheet as connectd does.
func staticFiles() http.Handler {
	static, err := fs.Sub(templates.Static, "static")
	if err != nil {
		panic(err)
	}
	return http.StripPrefix("/static/", web.Static(static))
}

// providers starts the fake OAuth provider and returns the providers file
// naming it and opts.Providers.
func (e *Env) providers(opts Options) *provider.Config {
	fo := opts.Fake
	fo.TLS, fo.RequirePKCE = true, true
	fo.RedirectURIs, fo.ClientSecret = []string{e.URL + "/oauth/callback"}, FakeSecret
	e.Fake = providertest.New(e.t, fo)
	entry := e.Fake.ProviderConfig(opts.FakeName, "FAKE_SECRET")
	if opts.FakeEntry != nil {
		opts.FakeEntry(entry)
	}
	entries := []any{entry}
	for _, p := range opts.Providers {
		entries = append(entries, p)
	}
	raw, err := json.Marshal(map[string]any{"providers": entries})
	if err != nil {
		e.t.Fatal(err)
	}
	pc, err := provider.ParseConfig(raw, provider.ParseOptions{Dev: opts.DevProviders, Getenv: func(k string) string {
		if k == "FAKE_SECRET" {
			return FakeSecret
		}
		return ""
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	return pc
}

// Build is server.New, failing the test on an error; the server is closed
// when the test ends.
func (e *Env) Build(cfg server.Config) *server.Server {
	e.t.Helper()
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Close)
	return s
}

// Run runs s's background work (the notification hub, the jobs, the sweeps)
// until the test ends.
func (e *Env) Run(s *server.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

// Replica builds another connectd from cfg (Config, edited: another pool on
// the same database, other keys, caches) behind its own TLS server, and
// returns it with its base URL. Its background work does not run.
func (e *Env) Replica(cfg server.Config) (*server.Server, string) {
	e.t.Helper()
	s := e.Build(cfg)
	srv := httptest.NewTLSServer(s.Public())
	e.t.Cleanup(srv.Close)
	return s, srv.URL
}

// NewClient registers an MCP server at connectd as a client for resources
// and providers, and returns it with its client key.
func (e *Env) NewClient(name string, resources, providers []string) (clientauth.Client, string) {
	e.t.Helper()
	c, key, err := e.Server.Clients().Create(context.Background(), name, resources, providers)
	if err != nil {
		e.t.Fatal(err)
	}
	return c, key
}

// Code returns the error code connectd logged for the request that answered
// with header (error pages show a description, not the code; the log line
// has both), or "".
func (e *Env) Code(header http.Header) string {
	id := header.Get("X-Request-Id")
	for _, line := range strings.Split(e.Logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["request_id"] == id && m["code"] != nil {
			if code, ok := m["code"].(string); ok {
				return code
			}
		}
	}
	return ""
}

// Browser is flowtest's scripted browser (a cookie store; it follows no
// redirect by itself) bound to a test: a transport error fails the test.
type Browser struct {
	*flowtest.Browser
	t testing.TB
}

// Browser returns a new browser trusting the test certificate.
func (e *Env) Browser() *Browser {
	return &Browser{Browser: flowtest.New(e.Public.Client()), t: e.t}
}

// Request is Do, failing the test on a transport error.
func (b *Browser) Request(method, u string, form url.Values) flowtest.Response {
	b.t.Helper()
	r, err := b.Do(method, u, form)
	if err != nil {
		b.t.Fatal(err)
	}
	return r
}

// StartLogin opens path (/login?..., /admin/login) at connectd and returns
// the IdP authorization URL it redirects the browser to.
func (e *Env) StartLogin(b *Browser, path string) string {
	e.t.Helper()
	r := b.Request(http.MethodGet, e.URL+path, nil)
	if r.Status != http.StatusFound {
		e.t.Fatalf("%s: %d %s", path, r.Status, r.Body)
	}
	return r.Location
}

// Pick answers the IdP's user picker at authorizeURL as user ("" cancels)
// and returns the URL of connectd's callbackPath the IdP sends the browser
// back to.
func (e *Env) Pick(b *Browser, authorizeURL, user, callbackPath string) string {
	e.t.Helper()
	if r := b.Request(http.MethodGet, authorizeURL, nil); r.Status != http.StatusOK || !strings.Contains(r.Body, `value="alice"`) {
		e.t.Fatalf("picker: %d %s", r.Status, r.Body)
	}
	action, form, err := PickerAnswer(authorizeURL, user)
	if err != nil {
		e.t.Fatal(err)
	}
	r := b.Request(http.MethodPost, action, form)
	if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, e.URL+callbackPath+"?") {
		e.t.Fatalf("picker answer: %d %s %s", r.Status, r.Location, r.Body)
	}
	return r.Location
}

// PickerAnswer is what a browser posts, and where, when the user picks user
// on the dev IdP's picker page at authorizeURL: the picker's hidden fields
// carry exactly the authorization request's parameters.
func PickerAnswer(authorizeURL, user string) (action string, form url.Values, err error) {
	u, err := url.Parse(authorizeURL)
	if err != nil {
		return "", nil, err
	}
	form = u.Query()
	form.Set("user", user)
	u.RawQuery = ""
	return u.String(), form, nil
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// CSRF returns the CSRF token of the form on page, failing t when it has
// none.
func CSRF(t testing.TB, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in page: %s", page)
	}
	return m[1]
}
