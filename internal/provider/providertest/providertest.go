// Package providertest is a fake third-party OAuth 2.0 provider for tests: an
// in-process httptest server speaking the real protocol over HTTP, so that
// code under test runs its real HTTP clients against it.
//
// It serves
//
//	GET  /authorize                                 authorization endpoint: approves at once (as Options.Subject)
//	                                                and redirects back with code, state and (Quirks.IssParameter) iss;
//	                                                with Options.Accounts and prompt=select_account it shows an
//	                                                account chooser instead (an HTML form)
//	POST /authorize                                 the chooser's answer (only with Options.Accounts): approves as the
//	                                                account chosen and redirects back as GET does
//	POST /token                                     token endpoint: authorization_code (PKCE S256 checked,
//	                                                redirect_uri must match) and refresh_token (optional
//	                                                rotation with reuse detection; "scope" narrows the
//	                                                access token to a subset of the grant, RFC 6749 §6)
//	POST /revoke                                    RFC 7009 revocation (and the bearer variant), recorded
//	GET  /api/files                                 a protected API that needs a valid access token
//	GET  /api/stream?n=3&gap=100ms                  server-sent events, slowly: n events "data: i" (i = 1…n),
//	                                                each flushed, gap apart; with type=ndjson, chunked
//	                                                JSON lines {"n":i} instead (no event stream)
//	*    /api/echo[/…]                              any method: the request as received, as JSON (EchoAnswer)
//	GET  /api/redirect?to=URL                       302 to URL (another host, say)
//	GET  /api/cookie                                200 with a Set-Cookie
//	GET  /api/limited?after=N                       429 with Retry-After: N
//	GET  /api/limited?remaining=N&reset=T           200 with GitHub's X-RateLimit-Remaining: N and
//	                                                X-RateLimit-Reset: T (Unix seconds); with
//	                                                ratelimit=V instead, the IETF draft's RateLimit: V
//	*    /api/denied                                401 whatever the token (APIRequests records every /api request)
//	GET  /api/bytes?n=N                             a body of exactly N bytes
//	GET  /.well-known/oauth-authorization-server    RFC 8414 metadata
//	GET  /.well-known/openid-configuration          the same document
//
// The /api endpoints are the provider's API (ProviderConfig names
// URL()+"/api" its api_base_url): each needs exactly one valid access token
// as a Bearer token (401 with WWW-Authenticate: Bearer error="invalid_token"
// otherwise) and, when set, Options.APIScope; all but /api/files are there
// for tests of connectd's proxy.
//
// Quirks switch on the behaviour of real providers (GitHub's form-encoded
// answers, Slack's nested user token, Notion's Basic-only client
// authentication, no expires_in, no new refresh token on refresh, outages,
// access_denied, scopes as a JSON array, a per-customer host) and can be
// changed while the server runs (SetQuirks).
// Counters and records (Counts, Revocations, TokenRequests) let tests assert
// what reached the provider.
//
// It is imported only by tests (of any package) and the demo, which serves it
// through NewHandler; it never touches a database.
package providertest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Quirks make the fake behave like a particular real provider.
type Quirks struct {
	// FormEncoded: like GitHub, the token endpoint answers
	// application/x-www-form-urlencoded unless the request says
	// Accept: application/json, reports errors with HTTP 200 and GitHub's
	// codes (bad_verification_code, bad_refresh_token), and lists granted
	// scopes comma-separated.
	FormEncoded bool
	// SlackNested: like Slack's oauth.v2.access in the user-token flow, the
	// token sits in "authed_user" (no top-level access_token), scopes are
	// comma-separated, and errors are HTTP 200 {"ok":false,"error":…} with
	// Slack's codes (invalid_code, invalid_refresh_token).
	SlackNested bool
	// BasicAuthOnly: like Notion, the token and revocation endpoints accept
	// client credentials only as HTTP Basic; client_secret_post gets 401
	// invalid_client.
	BasicAuthOnly bool
	// NoExpiresIn: token responses carry no expires_in, and tokens never
	// expire.
	NoExpiresIn bool
	// NoRefreshTokenOnRefresh: refresh responses omit refresh_token; the old
	// one stays valid (Dropbox, Salesforce).
	NoRefreshTokenOnRefresh bool
	// ServerError: the token, revocation and API endpoints answer 503 with an
	// HTML body.
	ServerError bool
	// AccessDenied: the authorization endpoint redirects back with
	// error=access_denied.
	AccessDenied bool
	// IssParameter: authorization responses carry RFC 9207 iss, and the
	// metadata says so.
	IssParameter bool
	// IgnoreRefreshScope: like many providers, a refresh ignores "scope"
	// and issues a token for the whole grant (and says so in its answer).
	IgnoreRefreshScope bool
	// ScopeArray: like Twitch, JSON token answers list granted scopes as a
	// JSON array rather than a space-separated string.
	ScopeArray bool
	// AnswerDelay: the token endpoint does its work at once (a refresh
	// rotates the refresh token) and then answers this late, whether or not
	// the client is still there: a slow provider whose answer may be lost.
	AnswerDelay time.Duration
	// RefreshAnswer replaces the answer to a refresh that succeeded (the
	// refresh token was rotated all the same): "garbage" (200, not JSON),
	// "empty" (200 {}), "huge" (200, a 5 MB JSON body) or "redirect" (302
	// to another host). "" answers normally.
	RefreshAnswer string
	// WhoAmI: like GitHub's GET /user, GET /api/me answers whose token the
	// bearer token is ({"id": subject, "login": subject}), and
	// ProviderConfig names it as the account_url. Combine with FormEncoded
	// for a github-shaped provider whose token answer names no account.
	WhoAmI bool
	// CustomerHost: like a per-customer provider (acme.zendesk.com), every
	// endpoint answers only requests whose Host (without port) is this name,
	// and 404 otherwise. Reach the server under that name with HostClient.
	CustomerHost string
}

// Account is one of the accounts a user may sign in with at the provider
// (Options.Accounts).
type Account struct {
	Subject string // the provider's account id, which token answers name (user.id)
	Label   string // its display name (user.name), which connectd shows
}

// Options configure a Server. The zero value is usable.
type Options struct {
	ClientID     string // default "test-client"
	ClientSecret string // default: random
	// Apps are further OAuth clients the provider knows, client id →
	// secret: an organization's own app at the same provider. A code and a
	// grant belong to the client they were issued to; another client
	// presenting them gets invalid_grant (RFC 6749 §4.1.3, §6).
	Apps map[string]string
	// RedirectURIs registered for the client; empty accepts any absolute
	// redirect URI (the token request must still repeat it exactly).
	RedirectURIs []string
	// RequirePKCE refuses authorization requests without an S256 challenge.
	RequirePKCE bool
	// RotateRefreshTokens issues a new refresh token on every refresh; a
	// rotated-away token presented again is refused with invalid_grant and
	// its whole grant is revoked (reuse detection).
	RotateRefreshTokens bool
	TokenLifetime       time.Duration // default 1h
	Subject             string        // the account that approves; default "user-1" (Accounts[0] with Accounts)
	AccountLabel        string        // workspace / team name; default "Test Workspace"
	// Accounts, when set, are the accounts the user has at the provider, as
	// in a browser signed in to several (Google, Microsoft): an
	// authorization request that asks to choose (prompt=select_account,
	// OpenID Connect Core §3.1.2.1, which connectd sends to connect another
	// account: ProviderConfig's select_account_params) gets a page listing
	// them, whose form (POST /authorize) approves as the one chosen;
	// without that prompt /authorize still approves at once as Subject.
	// Every grant then keeps its account: token answers name its Subject
	// (user.id, Slack's authed_user.id) and Label (user.name, Slack's
	// team.name; ProviderConfig names the field), and /api/files its
	// owner. Subject's label is its entry's, else AccountLabel. Unset, the
	// server behaves exactly as before (approvals name the current
	// Subject, SetSubject).
	Accounts []Account
	// APIScope, when set, is required by the /api endpoints (403 insufficient_scope).
	APIScope string
	// TokenDelay makes the token endpoint slow, to widen race windows. The
	// request is given up (nothing done) when the client goes away first.
	TokenDelay time.Duration
	// RevokeDelay makes the revocation endpoint answer late (a provider
	// having a bad day); the revocation is done once the delay is over.
	RevokeDelay time.Duration
	// ReuseGrace: a refresh token rotated away less than this long ago is
	// accepted again (Okta's grace period, Auth0's reuse interval, Xero's
	// 30 minutes): it gets a new access token and the same successor
	// refresh token, instead of tripping reuse detection.
	ReuseGrace time.Duration
	Now        func() time.Time // default time.Now
	TLS        bool             // serve https (use Server.Client)
	Quirks     Quirks
}

// Counts is how many requests reached each endpoint (including refused ones).
type Counts struct {
	Authorize int
	Exchange  int // token requests with grant_type=authorization_code
	Refresh   int // token requests with grant_type=refresh_token
	Revoke    int
	API       int // GET /api/files
	Discovery int
	// The proxy-test endpoints under /api.
	Stream, Echo, Redirect, Cookie, Limited, Bytes, Denied int
}

// APIRequest is one request that reached the fake under /api, whatever its
// path (one no endpoint serves included), as it arrived.
type APIRequest struct {
	Method string
	Path   string // escaped, as sent
	Query  string
	Header http.Header
}

// EchoAnswer is what /api/echo answers: the request as it arrived.
// Authorization values are "[redacted]" (one per value sent), so that an
// answer passed on to a caller never carries the token; every other header
// is as received.
type EchoAnswer struct {
	Method        string              `json:"method"`
	Path          string              `json:"path"`
	RawQuery      string              `json:"raw_query"`
	Host          string              `json:"host"`
	Headers       map[string][]string `json:"headers"`
	ContentLength int64               `json:"content_length"` // as the request said (-1: unknown, chunked)
	BodyLength    int64               `json:"body_length"`    // as read
	BodySHA256    string              `json:"body_sha256"`    // hex
}

// Bounds of the proxy-test endpoints' parameters.
const (
	maxStreamEvents = 1000
	maxStreamGap    = 10 * time.Second
	maxEchoBody     = 64 << 20
	maxBytes        = 1 << 30
)

// TokenRequest records a token request's grant type, how the client
// authenticated ("basic", "post" or "none") and the scope it asked for (a
// refresh's "scope", as sent).
type TokenRequest struct {
	GrantType  string
	ClientAuth string
	ClientID   string // the client it authenticated as (or claimed to)
	Accept     string
	Scope      string
	Host       string // the Host the request named (without port)
}

// Revocation records one revocation request.
type Revocation struct {
	Token      string
	Hint       string
	ClientAuth string // "basic", "post", "bearer" or "none"
	ClientID   string
	Known      bool // the token was one the server issued
}

// Tokens is a token set issued by the server.
type Tokens struct {
	AccessToken  string
	RefreshToken string
	IDToken      string    // an OpenID Connect ID token, for a grant with openid
	Expiry       time.Time // zero under NoExpiresIn
	Scopes       []string
}

type code struct {
	clientID, redirectURI, challenge string
	scopes                           []string
	expires                          time.Time
	account                          *Account // chosen on the account chooser; nil: the current subject
}

type grant struct {
	client  string // the client id it was issued to ("" : Options.ClientID)
	scopes  []string
	revoked bool
	subject string // the account that approved it
	label   string // its label (with Options.Accounts)
}

// choice is an authorization request waiting on the account chooser: the
// query GET /authorize was given, which the chooser's answer approves.
type choice struct {
	query   url.Values
	expires time.Time
}

type accessToken struct {
	grant   *grant
	scopes  []string // what the token carries: its grant's, or a subset (a narrowed refresh)
	expires time.Time
	revoked bool
}

type refreshToken struct {
	grant     *grant
	used      bool // rotated away
	revoked   bool
	successor string    // the refresh token it was rotated to
	rotatedAt time.Time // when
}

// Server is the fake provider.
type Server struct {
	ClientID     string
	ClientSecret string

	srv    *httptest.Server // nil when made by NewHandler
	base   string           // base URL and issuer
	client *http.Client
	opts   Options

	mux         *http.ServeMux
	mu          sync.Mutex
	quirks      Quirks
	subject     string // the account that approves (Options.Subject, SetSubject)
	codes       map[string]*code
	access      map[string]*accessToken
	refresh     map[string]*refreshToken
	counts      Counts
	revocations []Revocation
	tokenReqs   []TokenRequest
	apiReqs     []APIRequest
	prompts     []string           // the prompt of each authorization request
	choices     map[string]*choice // requests on the account chooser, by its form's request id
}

// New starts a fake provider, closed when the test ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	s, mux := newServer(opts)
	if opts.TLS {
		s.srv = httptest.NewTLSServer(mux)
	} else {
		s.srv = httptest.NewServer(mux)
	}
	t.Cleanup(s.srv.Close)
	s.base, s.client = s.srv.URL, s.srv.Client()
	return s
}

// NewHandler returns a fake provider that is not tied to a test, and its HTTP
// handler, which the caller serves at baseURL (an absolute URL without a
// trailing slash: the issuer and the base of every endpoint). The demo
// (`make demo`, cmd/connectd-demo) runs it as its third-party service. Options.TLS is
// ignored: TLS is the caller's listener's business.
func NewHandler(baseURL string, opts Options) (*Server, http.Handler) {
	s, mux := newServer(opts)
	s.base, s.client = strings.TrimRight(baseURL, "/"), &http.Client{Timeout: 10 * time.Second}
	return s, mux
}

// newServer applies the defaults of opts and returns the server with its
// routes.
func newServer(opts Options) (*Server, http.Handler) {
	if opts.ClientID == "" {
		opts.ClientID = "test-client"
	}
	if opts.ClientSecret == "" {
		opts.ClientSecret = "secret-" + random()
	}
	if opts.TokenLifetime <= 0 {
		opts.TokenLifetime = time.Hour
	}
	if opts.Subject == "" {
		opts.Subject = "user-1"
		if len(opts.Accounts) > 0 {
			opts.Subject = opts.Accounts[0].Subject
		}
	}
	if opts.AccountLabel == "" {
		opts.AccountLabel = "Test Workspace"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{
		ClientID: opts.ClientID, ClientSecret: opts.ClientSecret, opts: opts, quirks: opts.Quirks, subject: opts.Subject,
		codes: map[string]*code{}, access: map[string]*accessToken{}, refresh: map[string]*refreshToken{},
		choices: map[string]*choice{},
	}
	mux := http.NewServeMux()
	s.mux = mux
	mux.HandleFunc("GET /authorize", s.authorize)
	if len(opts.Accounts) > 0 {
		mux.HandleFunc("POST /authorize", s.chosen)
	}
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("POST /revoke", s.revoke)
	mux.HandleFunc("GET /api/files", s.api)
	mux.HandleFunc("GET /api/me", s.me)
	mux.Handle("GET /api/stream", s.apiEndpoint(func(c *Counts) *int { return &c.Stream }, s.stream))
	mux.Handle("/api/echo", s.apiEndpoint(func(c *Counts) *int { return &c.Echo }, s.echo))
	mux.Handle("/api/echo/", s.apiEndpoint(func(c *Counts) *int { return &c.Echo }, s.echo))
	mux.Handle("GET /api/redirect", s.apiEndpoint(func(c *Counts) *int { return &c.Redirect }, s.redirect))
	mux.Handle("GET /api/cookie", s.apiEndpoint(func(c *Counts) *int { return &c.Cookie }, s.cookie))
	mux.Handle("GET /api/limited", s.apiEndpoint(func(c *Counts) *int { return &c.Limited }, s.limited))
	mux.Handle("GET /api/bytes", s.apiEndpoint(func(c *Counts) *int { return &c.Bytes }, s.bytes))
	mux.Handle("/api/denied", http.HandlerFunc(s.denied))
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.metadata)
	mux.HandleFunc("GET /.well-known/openid-configuration", s.metadata)
	return s, http.HandlerFunc(s.serve)
}

// serve applies Quirks.CustomerHost before routing, and records every
// request under /api (APIRequests).
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.EscapedPath(); strings.HasPrefix(p, "/api") {
		s.mu.Lock()
		s.apiReqs = append(s.apiReqs, APIRequest{Method: r.Method, Path: p, Query: r.URL.RawQuery, Header: r.Header.Clone()})
		s.mu.Unlock()
	}
	if h := s.Quirks().CustomerHost; h != "" && hostOnly(r.Host) != h {
		http.NotFound(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// HostClient returns a client that reaches this server whatever host a URL
// names (its dialer always connects to the server's listener), so a test can
// use per-customer names such as acme.fake.test that no resolver knows. Only
// for servers started with New.
func (s *Server) HostClient() *http.Client {
	addr := s.srv.Listener.Addr().String()
	tr := s.srv.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// URL is the server's base URL, which is also its issuer identifier.
func (s *Server) URL() string { return s.base }

// Issuer is the issuer identifier (the base URL).
func (s *Server) Issuer() string { return s.base }

// AuthorizeURL is the authorization endpoint.
func (s *Server) AuthorizeURL() string { return s.base + "/authorize" }

// TokenURL is the token endpoint.
func (s *Server) TokenURL() string { return s.base + "/token" }

// RevocationURL is the revocation endpoint.
func (s *Server) RevocationURL() string { return s.base + "/revoke" }

// APIURL is the protected API endpoint.
func (s *Server) APIURL() string { return s.base + "/api/files" }

// APIBaseURL is the base of the provider's API (ProviderConfig's
// api_base_url): APIURL is APIBaseURL()+"/files".
func (s *Server) APIBaseURL() string { return s.base + "/api" }

// Client is an HTTP client that trusts the server (needed with TLS).
func (s *Server) Client() *http.Client { return s.client }

// SetSubject switches the provider account that approves the next
// authorizations (Options.Subject), as when the user signs in at the provider
// as someone else.
func (s *Server) SetSubject(subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subject = subject
}

// SetQuirks switches quirks while the server runs.
func (s *Server) SetQuirks(q Quirks) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quirks = q
}

// Quirks returns the current quirks.
func (s *Server) Quirks() Quirks {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quirks
}

// Counts returns the request counters.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// APIRequests returns every request that reached /api (and below), in
// order, with its headers as received (Authorization included: a test's
// own record, never an answer).
func (s *Server) APIRequests() []APIRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.apiReqs)
}

// Revocations returns the revocation requests received, in order.
func (s *Server) Revocations() []Revocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.revocations)
}

// TokenRequests returns the token requests received, in order.
func (s *Server) TokenRequests() []TokenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tokenReqs)
}

// Prompts returns the "prompt" parameter of each authorization request
// received, in order ("" where there was none): whether connectd asked the
// provider to let the user choose another account.
func (s *Server) Prompts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.prompts)
}

// ProviderConfig returns a providers-file entry (see docs/providers.md) for
// this server under name, with the client secret referenced as the
// environment variable secretEnv (set it to s.ClientSecret), the base of its
// API as api_base_url (APIBaseURL), and the fields its current quirks need.
// It needs dev mode unless Options.TLS is set.
func (s *Server) ProviderConfig(name, secretEnv string) map[string]any {
	q := s.Quirks()
	e := map[string]any{
		"name": name, "kind": "oauth2", "display_name": "Fake " + name,
		"issuer": s.Issuer(), "authorize_url": s.AuthorizeURL(), "token_url": s.TokenURL(),
		"revocation_url": s.RevocationURL(), "api_base_url": s.APIBaseURL(),
		"client_id": s.ClientID, "client_secret_env": secretEnv,
		"pkce": true, "iss_parameter_supported": q.IssParameter,
		// Like an OpenID Connect provider (Core 1.0 §3.1.2.1); see Prompts.
		"select_account_params": map[string]string{"prompt": "select_account"},
	}
	if q.BasicAuthOnly {
		e["auth_style"] = "basic"
	}
	if q.FormEncoded {
		e["accept_json"] = true
		e["invalid_grant_errors"] = []string{"invalid_grant", "bad_verification_code", "bad_refresh_token"}
	}
	if !q.FormEncoded && !q.WhoAmI {
		e["account_id_field"] = "user.id" // the account that approved, in every JSON token answer
		if len(s.opts.Accounts) > 0 {
			e["account_label_field"] = "user.name" // and its label (Options.Accounts)
		}
	}
	if q.WhoAmI {
		e["account_url"], e["account_url_id_field"], e["account_url_label_field"] = s.base+"/api/me", "id", "login"
	}
	if q.SlackNested {
		e["token_response"] = "slack_user"
		e["scope_separator"] = ","
		e["account_id_field"] = "authed_user.id"
		e["account_label_field"] = "team.name"
		e["invalid_grant_errors"] = []string{"invalid_grant", "invalid_code", "code_already_used", "invalid_refresh_token"}
	}
	return e
}

// Grant issues a token set directly, as if the user had authorized scopes
// just now, with the given access-token lifetime (0: Options.TokenLifetime).
func (s *Server) Grant(scopes []string, lifetime time.Duration) Tokens {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lifetime <= 0 {
		lifetime = s.opts.TokenLifetime
	}
	return s.issueLocked(&grant{scopes: slices.Clone(scopes), subject: s.subject, label: s.labelLocked(s.subject)}, lifetime, true)
}

// Approve performs the browser's visit to an authorization URL without
// following the redirect, and returns where the provider sends the browser
// back (the redirect URI with code, state and iss, or error).
func (s *Server) Approve(authURL string) (*url.URL, error) {
	c := *s.client
	if s.srv != nil {
		c = *s.HostClient() // the browser visits this server, under whatever name the URL uses
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(authURL)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && len(s.opts.Accounts) > 0 {
		return nil, errors.New("providertest: authorize showed the account chooser (use ApproveAs)")
	}
	if resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("providertest: authorize answered %d, not a redirect", resp.StatusCode)
	}
	return url.Parse(resp.Header.Get("Location"))
}

// ApproveAs is Approve for an authorization request that shows the account
// chooser (Options.Accounts and prompt=select_account): it visits authURL,
// chooses subject on the page and submits it, and returns where the provider
// sends the browser back. It fails when no chooser is shown.
func (s *Server) ApproveAs(authURL, subject string) (*url.URL, error) {
	c := *s.client
	if s.srv != nil {
		c = *s.HostClient()
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(authURL)
	if err != nil {
		return nil, err
	}
	page, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	form, ok := ChooserForm(string(page), subject)
	if resp.StatusCode != http.StatusOK || !ok {
		return nil, fmt.Errorf("providertest: authorize answered %d without an account chooser offering %q", resp.StatusCode, subject)
	}
	action, err := resp.Request.URL.Parse("/authorize")
	if err != nil {
		return nil, err
	}
	if resp, err = c.PostForm(action.String(), form); err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("providertest: the account chooser answered %d, not a redirect", resp.StatusCode)
	}
	return url.Parse(resp.Header.Get("Location"))
}

var (
	chooserRequest = regexp.MustCompile(`name="request" value="([^"]+)"`)
	chooserAccount = regexp.MustCompile(`name="account" value="([^"]+)"`)
)

// ChooserForm is the answer a browser sends (POST /authorize, a form) when
// the user picks subject on the account chooser page: ok is false when page
// is no chooser or does not offer subject.
func ChooserForm(page, subject string) (form url.Values, ok bool) {
	m := chooserRequest.FindStringSubmatch(page)
	if m == nil {
		return nil, false
	}
	for _, a := range chooserAccount.FindAllStringSubmatch(page, -1) {
		if html.UnescapeString(a[1]) == subject {
			return url.Values{"request": {m[1]}, "account": {subject}, "decision": {"allow"}}, true
		}
	}
	return nil, false
}

// RevokeAccessToken makes the API refuse one access token from now on (its
// grant, and so its refresh token, stays good): a provider that ended a
// token early, as a proxied call's 401 meets it.
func (s *Server) RevokeAccessToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.access[token]; ok {
		a.revoked = true
	}
}

// Revoked reports whether a token the server issued has been revoked (or its
// grant has).
func (s *Server) Revoked(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.access[token]; ok {
		return a.revoked || a.grant.revoked
	}
	if r, ok := s.refresh[token]; ok {
		return r.revoked || r.grant.revoked
	}
	return false
}

// TokenScopes returns the scopes an access token the server issued carries
// (a narrowed one carries a subset of its grant), and whether it knows it.
func (s *Server) TokenScopes(accessToken string) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.access[accessToken]
	if !ok {
		return nil, false
	}
	return slices.Clone(a.scopes), true
}

// Valid reports whether an access token would be accepted by the API now.
func (s *Server) Valid(accessToken string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.access[accessToken]
	return ok && s.validLocked(a)
}

func (s *Server) validLocked(a *accessToken) bool {
	return !a.revoked && !a.grant.revoked && (a.expires.IsZero() || s.opts.Now().Before(a.expires))
}

func random() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// issueLocked mints an access token (and a refresh token when withRefresh).
func (s *Server) issueLocked(g *grant, lifetime time.Duration, withRefresh bool) Tokens {
	t := Tokens{AccessToken: "at_" + random(), Scopes: slices.Clone(g.scopes)}
	a := &accessToken{grant: g, scopes: slices.Clone(g.scopes)}
	if !s.quirks.NoExpiresIn {
		a.expires = s.opts.Now().Add(lifetime)
		t.Expiry = a.expires
	}
	s.access[t.AccessToken] = a
	if withRefresh {
		t.RefreshToken = "rt_" + random()
		s.refresh[t.RefreshToken] = &refreshToken{grant: g}
	}
	return t
}

func splitScopes(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Authorize++
	q := r.URL.Query()
	s.prompts = append(s.prompts, q.Get("prompt"))
	s.authorizeLocked(w, r, q, nil)
}

// authorizeLocked answers the authorization request q: checks it, and
// redirects back with a code for as (the account chosen on the chooser), or
// with as nil for the current subject — unless the request asks to choose
// an account (Options.Accounts), which shows the chooser.
func (s *Server) authorizeLocked(w http.ResponseWriter, r *http.Request, q url.Values, as *Account) {
	redirect, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case !s.knowsClient(q.Get("client_id")):
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	case err != nil || !redirect.IsAbs() || redirect.Fragment != "":
		http.Error(w, "redirect_uri must be an absolute URL", http.StatusBadRequest)
		return
	case len(s.opts.RedirectURIs) > 0 && !slices.Contains(s.opts.RedirectURIs, q.Get("redirect_uri")):
		http.Error(w, "redirect_uri is not registered", http.StatusBadRequest)
		return
	}
	back := func(params url.Values) {
		if s.quirks.IssParameter {
			params.Set("iss", s.Issuer())
		}
		if st := q.Get("state"); st != "" {
			params.Set("state", st)
		}
		u := *redirect
		rq := u.Query()
		for k, v := range params {
			rq[k] = v
		}
		u.RawQuery = rq.Encode()
		status := http.StatusFound
		if r.Method == http.MethodPost {
			status = http.StatusSeeOther // the chooser's form: the browser goes on with a GET
		}
		http.Redirect(w, r, u.String(), status)
	}
	challenge, method := q.Get("code_challenge"), q.Get("code_challenge_method")
	switch {
	case q.Get("response_type") != "code":
		back(url.Values{"error": {"unsupported_response_type"}})
		return
	case challenge != "" && method != "S256":
		back(url.Values{"error": {"invalid_request"}, "error_description": {"only S256 is supported"}})
		return
	case challenge == "" && s.opts.RequirePKCE:
		back(url.Values{"error": {"invalid_request"}, "error_description": {"PKCE S256 is required"}})
		return
	case s.quirks.AccessDenied:
		back(url.Values{"error": {"access_denied"}})
		return
	case as == nil && r.Method == http.MethodPost:
		back(url.Values{"error": {"access_denied"}}) // the user cancelled on the chooser
		return
	case as == nil && len(s.opts.Accounts) > 0 && slices.Contains(strings.Fields(q.Get("prompt")), "select_account"):
		s.showChooserLocked(w, q)
		return
	}
	scopes := splitScopes(q.Get("scope"))
	if s.quirks.SlackNested {
		scopes = splitScopes(q.Get("user_scope"))
	}
	c := "code_" + random()
	s.codes[c] = &code{clientID: q.Get("client_id"), redirectURI: q.Get("redirect_uri"), challenge: challenge,
		scopes: scopes, expires: s.opts.Now().Add(10 * time.Minute), account: as}
	back(url.Values{"code": {c}})
}

// chooserPage is the account chooser: the accounts as radio buttons, in a
// form that answers POST /authorize with the request's id.
var chooserPage = template.Must(template.New("chooser").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Choose an account</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem}
label{display:block;padding:.5rem;border:1px solid #ccc;border-radius:.4rem;margin:.4rem 0}
.muted{color:#666}button{font:inherit;padding:.4rem 1rem;margin-right:.5rem}</style>
</head>
<body>
<h1>Choose an account</h1>
<p><strong>{{.ClientID}}</strong> asks to use one of your accounts here.</p>
<form method="post" action="/authorize">
<input type="hidden" name="request" value="{{.Request}}">
<fieldset><legend>Your accounts</legend>
{{range $i, $a := .Accounts}}<label><input type="radio" name="account" value="{{$a.Subject}}"{{if eq $i 0}} required{{end}}> {{$a.Label}} <span class="muted">({{$a.Subject}})</span></label>
{{end}}</fieldset>
<p><button type="submit" name="decision" value="allow">Continue</button><button type="submit" name="decision" value="deny" formnovalidate>Cancel</button></p>
</form>
</body>
</html>
`))

// showChooserLocked shows the account chooser for the authorization
// request q (already checked), which waits for its answer.
func (s *Server) showChooserLocked(w http.ResponseWriter, q url.Values) {
	now := s.opts.Now()
	for id, c := range s.choices {
		if now.After(c.expires) {
			delete(s.choices, id)
		}
	}
	id := "req_" + random()
	s.choices[id] = &choice{query: q, expires: now.Add(10 * time.Minute)}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	_ = chooserPage.Execute(w, map[string]any{"ClientID": s.opts.ClientID, "Request": id, "Accounts": s.opts.Accounts})
}

// chosen handles POST /authorize, the account chooser's answer: the request
// it names (single use, whatever happens next) is answered as GET
// /authorize answers it, approved as the account chosen (decision=deny: the
// user cancelled, access_denied). An unknown, used or expired request, or an
// account not in Options.Accounts, is refused without a redirect.
func (s *Server) chosen(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PostForm.Get("request")
	c, ok := s.choices[id]
	delete(s.choices, id)
	if !ok || s.opts.Now().After(c.expires) {
		http.Error(w, "unknown or expired authorization request", http.StatusBadRequest)
		return
	}
	if r.PostForm.Get("decision") == "deny" {
		s.authorizeLocked(w, r, c.query, nil)
		return
	}
	i := slices.IndexFunc(s.opts.Accounts, func(a Account) bool { return a.Subject == r.PostForm.Get("account") })
	if i < 0 {
		http.Error(w, "choose one of the accounts", http.StatusBadRequest)
		return
	}
	a := s.opts.Accounts[i]
	s.authorizeLocked(w, r, c.query, &a)
}

// labelLocked is subject's label: its entry's in Options.Accounts, else
// Options.AccountLabel.
func (s *Server) labelLocked(subject string) string {
	if i := slices.IndexFunc(s.opts.Accounts, func(a Account) bool { return a.Subject == subject }); i >= 0 {
		return s.opts.Accounts[i].Label
	}
	return s.opts.AccountLabel
}

// clientAuth authenticates the client of a token or revocation request.
func (s *Server) clientAuth(r *http.Request) (how, clientID string, ok bool) {
	id, secret, basic := r.BasicAuth()
	formID, formSecret := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	switch {
	case basic && formSecret != "":
		return "both", "", false // RFC 6749 §2.3: one method only
	case basic:
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		how = "basic"
	case formSecret != "":
		id, secret, how = formID, formSecret, "post"
		if s.quirks.BasicAuthOnly {
			return how, id, false
		}
	default:
		return "none", formID, false
	}
	want, known := s.opts.ClientSecret, id == s.opts.ClientID
	if !known {
		want, known = s.opts.Apps[id]
	}
	ok = known && subtle.ConstantTimeCompare([]byte(secret), []byte(want)) == 1
	return how, id, ok
}

// knowsClient reports whether id is the provider's client or one of its
// Apps.
func (s *Server) knowsClient(id string) bool {
	_, app := s.opts.Apps[id]
	return id == s.opts.ClientID || app
}

// clientOf is the client id g was issued to.
func (g *grant) clientOf(def string) string {
	if g.client == "" {
		return def
	}
	return g.client
}

// tokenError answers a token request with an OAuth error in the shape the
// current quirks call for.
func (s *Server) tokenError(w http.ResponseWriter, r *http.Request, status int, code string) {
	switch {
	case s.quirks.SlackNested:
		slack := map[string]string{"invalid_grant": "invalid_refresh_token", "invalid_client": "invalid_client_id"}
		if c, ok := slack[code]; ok {
			code = c
		}
		if code == "invalid_refresh_token" && r.PostForm.Get("grant_type") == "authorization_code" {
			code = "invalid_code"
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": code})
	case s.quirks.FormEncoded:
		if code == "invalid_grant" {
			code = "bad_refresh_token"
			if r.PostForm.Get("grant_type") == "authorization_code" {
				code = "bad_verification_code"
			}
		}
		if acceptsJSON(r) {
			writeJSON(w, http.StatusOK, map[string]any{"error": code})
			return
		}
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, url.Values{"error": {code}}.Encode())
	default:
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="providertest"`)
		}
		writeJSON(w, status, map[string]any{"error": code})
	}
}

func acceptsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	if d := s.opts.TokenDelay; d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	// The work is done (and its answer recorded) first; a slow answer is
	// sent afterwards, with the lock released.
	rec := httptest.NewRecorder()
	s.tokenLocked(rec, r)
	s.mu.Lock()
	q := s.quirks
	s.mu.Unlock()
	if q.AnswerDelay > 0 {
		time.Sleep(q.AnswerDelay)
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (s *Server) tokenLocked(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	grantType := r.PostForm.Get("grant_type")
	switch grantType {
	case "authorization_code":
		s.counts.Exchange++
	case "refresh_token":
		s.counts.Refresh++
	}
	how, authID, ok := s.clientAuth(r)
	s.tokenReqs = append(s.tokenReqs, TokenRequest{GrantType: grantType, ClientAuth: how, ClientID: authID, Accept: r.Header.Get("Accept"),
		Scope: r.PostForm.Get("scope"), Host: hostOnly(r.Host)})
	if s.quirks.ServerError {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "<html><body>503 upstream unavailable</body></html>")
		return
	}
	if !ok {
		s.tokenError(w, r, http.StatusUnauthorized, "invalid_client")
		return
	}
	var (
		tok Tokens
		g   *grant
	)
	switch grantType {
	case "authorization_code":
		c, found := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code")) // single use, whatever happens next
		switch {
		case !found || s.opts.Now().After(c.expires):
			s.tokenError(w, r, http.StatusBadRequest, "invalid_grant")
			return
		case r.PostForm.Get("redirect_uri") != c.redirectURI:
			s.tokenError(w, r, http.StatusBadRequest, "invalid_grant")
			return
		case c.challenge != "" && !pkceOK(c.challenge, r.PostForm.Get("code_verifier")):
			s.tokenError(w, r, http.StatusBadRequest, "invalid_grant")
			return
		case c.clientID != authID: // issued to another client
			s.tokenError(w, r, http.StatusBadRequest, "invalid_grant")
			return
		}
		g = &grant{client: authID, scopes: c.scopes, subject: s.subject, label: s.labelLocked(s.subject)}
		if c.account != nil {
			g.subject, g.label = c.account.Subject, c.account.Label
		}
		tok = s.issueLocked(g, s.opts.TokenLifetime, true)
		if slices.Contains(c.scopes, "openid") {
			tok.IDToken = s.idTokenLocked(g)
		}
	case "refresh_token":
		rt, found := s.refresh[r.PostForm.Get("refresh_token")]
		switch {
		case !found || rt.revoked || rt.grant.revoked || rt.grant.clientOf(s.opts.ClientID) != authID:
			s.tokenError(w, r, http.StatusBadRequest, "invalid_grant")
			return
		case rt.used && s.opts.ReuseGrace > 0 && s.opts.Now().Sub(rt.rotatedAt) <= s.opts.ReuseGrace &&
			s.refresh[rt.successor] != nil && !s.refresh[rt.successor].used:
			// Within the grace: a new access token, the same successor.
			tok = s.issueLocked(rt.grant, s.opts.TokenLifetime, false)
			tok.RefreshToken = rt.successor
			s.writeRefreshAnswer(w, r, tok, rt.grant)
			return
		case rt.used:
			rt.grant.revoked = true // reuse detected: the whole grant goes
			s.tokenError(w, r, http.StatusBadRequest, "invalid_grant")
			return
		}
		g = rt.grant
		// RFC 6749 §6: scope, when given, must be within the original
		// grant; the access token carries only it, the grant (and any new
		// refresh token) keeps everything.
		var narrowed []string
		if sc := r.PostForm.Get("scope"); sc != "" && !s.quirks.IgnoreRefreshScope {
			narrowed = splitScopes(sc)
			for _, x := range narrowed {
				if !slices.Contains(g.scopes, x) {
					s.tokenError(w, r, http.StatusBadRequest, "invalid_scope")
					return
				}
			}
		}
		rotate := s.opts.RotateRefreshTokens && !s.quirks.NoRefreshTokenOnRefresh
		tok = s.issueLocked(g, s.opts.TokenLifetime, rotate)
		if narrowed != nil {
			s.access[tok.AccessToken].scopes = narrowed
			tok.Scopes = slices.Clone(narrowed)
		}
		if rotate {
			rt.used, rt.successor, rt.rotatedAt = true, tok.RefreshToken, s.opts.Now()
		} else if !s.quirks.NoRefreshTokenOnRefresh {
			tok.RefreshToken = r.PostForm.Get("refresh_token") // same one again
		}
		s.writeRefreshAnswer(w, r, tok, rt.grant)
		return
	default:
		s.tokenError(w, r, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	s.writeTokens(w, r, tok, g)
}

// writeRefreshAnswer answers a refresh that succeeded, as RefreshAnswer
// says.
func (s *Server) writeRefreshAnswer(w http.ResponseWriter, r *http.Request, tok Tokens, g *grant) {
	switch s.quirks.RefreshAnswer {
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "<html>not json{")
	case "empty":
		writeJSON(w, http.StatusOK, map[string]any{})
	case "huge":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"%s","token_type":"Bearer","padding":"%s"}`, tok.AccessToken,
			strings.Repeat("x", 5<<20))
	case "redirect":
		http.Redirect(w, r, "https://elsewhere.example/token?code=secret", http.StatusFound)
	default:
		s.writeTokens(w, r, tok, g)
	}
}

func pkceOK(challenge, verifier string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

// writeTokens answers a token request with t, of grant g.
func (s *Server) writeTokens(w http.ResponseWriter, r *http.Request, t Tokens, g *grant) {
	// The account the answer names: the current subject, as ever, or with
	// Options.Accounts the grant's own.
	subject, label := s.subject, s.opts.AccountLabel
	if len(s.opts.Accounts) > 0 {
		subject, label = g.subject, g.label
	}
	expiresIn := ""
	if !t.Expiry.IsZero() {
		expiresIn = strconv.Itoa(int(t.Expiry.Sub(s.opts.Now()).Round(time.Second) / time.Second))
	}
	switch {
	case s.quirks.SlackNested:
		user := map[string]any{"id": subject, "scope": strings.Join(t.Scopes, ","),
			"access_token": t.AccessToken, "token_type": "user"}
		if t.RefreshToken != "" {
			user["refresh_token"] = t.RefreshToken
		}
		if expiresIn != "" {
			user["expires_in"], _ = strconv.Atoi(expiresIn)
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "app_id": "A0FAKE", "authed_user": user,
			"team": map[string]any{"id": "T0FAKE", "name": label}, "enterprise": nil,
			"is_enterprise_install": false})
	case s.quirks.FormEncoded && !acceptsJSON(r):
		v := url.Values{"access_token": {t.AccessToken}, "token_type": {"bearer"}, "scope": {strings.Join(t.Scopes, ",")}}
		if t.RefreshToken != "" {
			v.Set("refresh_token", t.RefreshToken)
		}
		if expiresIn != "" {
			v.Set("expires_in", expiresIn)
		}
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		fmt.Fprint(w, v.Encode())
	default:
		sep := " "
		if s.quirks.FormEncoded {
			sep = ","
		}
		m := map[string]any{"access_token": t.AccessToken, "token_type": "Bearer", "scope": strings.Join(t.Scopes, sep),
			"user": map[string]any{"id": subject}}
		if len(s.opts.Accounts) > 0 {
			m["user"] = map[string]any{"id": subject, "name": label}
		}
		if s.quirks.ScopeArray {
			m["scope"] = t.Scopes
		}
		if t.RefreshToken != "" {
			m["refresh_token"] = t.RefreshToken
		}
		if t.IDToken != "" {
			m["id_token"] = t.IDToken
		}
		if expiresIn != "" {
			m["expires_in"], _ = strconv.Atoi(expiresIn)
		}
		if s.quirks.WhoAmI {
			delete(m, "user") // the account is told by /api/me only
		}
		writeJSON(w, http.StatusOK, m)
	}
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if d := s.opts.RevokeDelay; d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Revoke++
	if s.quirks.ServerError {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "<html><body>503 upstream unavailable</body></html>")
		return
	}
	rec := Revocation{Token: r.PostForm.Get("token"), Hint: r.PostForm.Get("token_type_hint")}
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && rec.Token == "" {
		// The bearer variant (Dropbox, Slack): the token revokes itself.
		rec.Token, rec.ClientAuth = bearer, "bearer"
	} else {
		how, id, ok := s.clientAuth(r)
		rec.ClientAuth, rec.ClientID = how, id
		if !ok {
			s.revocations = append(s.revocations, rec)
			w.Header().Set("WWW-Authenticate", `Basic realm="providertest"`)
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
			return
		}
	}
	if rec.Token == "" {
		s.revocations = append(s.revocations, rec)
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request"})
		return
	}
	if a, ok := s.access[rec.Token]; ok {
		a.revoked, rec.Known = true, true
	}
	if rt, ok := s.refresh[rec.Token]; ok {
		// RFC 7009 §2.1: revoking a refresh token ends the grant.
		rt.revoked, rt.grant.revoked, rec.Known = true, true, true
	}
	s.revocations = append(s.revocations, rec)
	if s.quirks.SlackNested {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "revoked": true})
		return
	}
	w.WriteHeader(http.StatusOK) // RFC 7009: 200 even for unknown tokens
}

// idTokenLocked is an ID token for g's account, issued by this server for
// its client (signed with a key of its own; connectd takes ID tokens from
// the token endpoint on TLS's word, OpenID Connect Core §3.1.3.7).
func (s *Server) idTokenLocked(g *grant) string {
	now := s.opts.Now()
	t, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": s.base, "aud": s.ClientID, "sub": g.subject,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}).SignedString([]byte(s.ClientSecret))
	return t
}

// me answers whose token the bearer token is (WhoAmI).
func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	a, known := s.access[tok]
	if !ok || !known || !s.validLocked(a) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_token"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": a.grant.subject, "login": a.grant.subject})
}

// checkAPILocked is what every /api endpoint checks first (but /api/me):
// ServerError (503), exactly one Authorization value holding a valid
// access token as a Bearer token (401 invalid_token), and Options.APIScope
// (403 insufficient_scope). It answers a refusal itself.
func (s *Server) checkAPILocked(w http.ResponseWriter, r *http.Request) (*accessToken, bool) {
	if s.quirks.ServerError {
		http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
		return nil, false
	}
	// Two Authorization values (a caller's own next to the one attached
	// for it) are refused, not resolved by taking the first.
	auth := r.Header.Values("Authorization")
	tok, ok := "", len(auth) == 1
	if ok {
		tok, ok = strings.CutPrefix(auth[0], "Bearer ")
	}
	a, known := s.access[tok]
	if !ok || !known || !s.validLocked(a) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_token"})
		return nil, false
	}
	if s.opts.APIScope != "" && !slices.Contains(a.scopes, s.opts.APIScope) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q`, s.opts.APIScope))
		writeJSON(w, http.StatusForbidden, map[string]any{"error": "insufficient_scope"})
		return nil, false
	}
	return a, true
}

// apiEndpoint counts a request to a proxy-test endpoint (counter picks its
// field of Counts) and runs h if checkAPILocked lets it through; h runs
// without the lock, so a slow answer holds up nothing else.
func (s *Server) apiEndpoint(counter func(*Counts) *int, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		*counter(&s.counts)++
		_, ok := s.checkAPILocked(w, r)
		s.mu.Unlock()
		if ok {
			h(w, r)
		}
	})
}

// stream answers server-sent events (text/event-stream) slowly: n events
// (default 3, at most 1000) "data: i", i = 1…n, each flushed as it is
// written, gap apart (a Go duration, default 100ms, at most 10s). It stops
// when the client goes away.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	n, gap := 3, 100*time.Millisecond
	if v := r.URL.Query().Get("n"); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 || i > maxStreamEvents {
			http.Error(w, "n must be 0-1000", http.StatusBadRequest)
			return
		}
		n = i
	}
	if v := r.URL.Query().Get("gap"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxStreamGap {
			http.Error(w, "gap must be a duration of 0-10s", http.StatusBadRequest)
			return
		}
		gap = d
	}
	ndjson := r.URL.Query().Get("type") == "ndjson"
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	if ndjson {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	for i := 1; i <= n; i++ {
		if i > 1 {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
		}
		line := fmt.Sprintf("data: %d\n\n", i)
		if ndjson {
			line = fmt.Sprintf("{\"n\":%d}\n", i)
		}
		if _, err := io.WriteString(w, line); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// denied answers 401 invalid_token to any method, whatever the token: an
// API endpoint that refuses every credential (a client can provoke 401s).
func (s *Server) denied(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.counts.Denied++
	s.mu.Unlock()
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_token"})
}

// echo answers the request it received as JSON (EchoAnswer), reading at
// most 64 MiB of body.
func (s *Server) echo(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	n, err := io.Copy(h, http.MaxBytesReader(w, r.Body, maxEchoBody))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	headers := map[string][]string{}
	for k, v := range r.Header {
		if k == "Authorization" {
			v = slices.Repeat([]string{"[redacted]"}, len(v))
		}
		headers[k] = slices.Clone(v)
	}
	writeJSON(w, http.StatusOK, EchoAnswer{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Host: r.Host,
		Headers: headers, ContentLength: r.ContentLength, BodyLength: n, BodySHA256: hex.EncodeToString(h.Sum(nil))})
}

// redirect answers 302 to the URL in "to", wherever it points.
func (s *Server) redirect(w http.ResponseWriter, r *http.Request) {
	to := r.URL.Query().Get("to")
	if to == "" {
		http.Error(w, "to is required", http.StatusBadRequest)
		return
	}
	w.Header().Set("Location", to)
	w.WriteHeader(http.StatusFound)
}

// cookie answers 200 with a session cookie set, as an API behind a web
// login might.
func (s *Server) cookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: "provider_session", Value: random(), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode})
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// limited answers 429 Too Many Requests with Retry-After: after (seconds,
// default 1).
func (s *Server) limited(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Has("remaining") || q.Has("ratelimit") {
		if q.Has("remaining") {
			w.Header().Set("X-RateLimit-Limit", "5000")
			w.Header().Set("X-RateLimit-Remaining", q.Get("remaining"))
			w.Header().Set("X-RateLimit-Reset", q.Get("reset"))
		} else {
			w.Header().Set("RateLimit-Policy", `"default";q=100;w=60`)
			w.Header().Set("RateLimit", q.Get("ratelimit"))
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
		return
	}
	after := 1
	if v := r.URL.Query().Get("after"); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 {
			http.Error(w, "after must be a number of seconds", http.StatusBadRequest)
			return
		}
		after = i
	}
	w.Header().Set("Retry-After", strconv.Itoa(after))
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "rate_limited"})
}

// bytes answers a body of exactly n bytes (at most 1 GiB) of a repeating
// pattern, with its Content-Length.
func (s *Server) bytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 0 || n > maxBytes {
		http.Error(w, "n must be 0-1073741824", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(http.StatusOK)
	chunk := []byte(strings.Repeat("0123456789abcdef", 2048)) // 32 KiB
	for n > 0 {
		b := chunk[:min(n, int64(len(chunk)))]
		if _, err := w.Write(b); err != nil {
			return
		}
		n -= int64(len(b))
	}
}

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.API++
	a, ok := s.checkAPILocked(w, r)
	if !ok {
		return
	}
	owner := s.opts.Subject
	if len(s.opts.Accounts) > 0 {
		owner = a.grant.subject
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"owner": owner, "scopes": a.scopes,
		"files": []map[string]any{{"name": "notes.txt", "size": 42}, {"name": "plan.md", "size": 1337}},
	})
}

func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Discovery++
	auth := []string{"client_secret_basic", "client_secret_post"}
	if s.quirks.BasicAuthOnly {
		auth = auth[:1]
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         s.Issuer(),
		"authorization_endpoint":                         s.AuthorizeURL(),
		"token_endpoint":                                 s.TokenURL(),
		"revocation_endpoint":                            s.RevocationURL(),
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          auth,
		"authorization_response_iss_parameter_supported": s.quirks.IssParameter,
	})
}
