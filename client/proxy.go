package client

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// AccountHeader names the connection a proxied call is for (the token
// read's account=<id>); connectd reads it and does not forward it.
const AccountHeader = "Connectd-Account"

// ScopesHeader names the scopes a proxied call needs (the token read's
// scopes=…); connectd reads it and does not forward it.
const ScopesHeader = "Connectd-Scopes"

// RequestIDHeader carries a request id to connectd, which adopts it (1–64
// characters of [A-Za-z0-9._:-]), answers with it and writes it into its
// error envelope's request_id. connectd never forwards it to the provider.
const RequestIDHeader = "X-Request-Id"

// maxEnvelope bounds how much of an error answer is read to see whether it
// is connectd's error envelope rather than the provider's own error.
const maxEnvelope = 64 << 10

// maxRedirects is how many same-host redirects ProviderClient follows.
const maxRedirects = 10

// ProviderOption configures ProviderClient and ProviderTransport.
type ProviderOption func(*ProviderTransport)

// WithAccount makes every call as one of the user's accounts at the
// provider: its connection id (Account.ID, Connection.ID), sent as
// Connectd-Account. Without it connectd uses the one account this client
// is approved for there (ErrAccountRequired when several).
func WithAccount(id string) ProviderOption {
	return func(t *ProviderTransport) { t.account = id }
}

// WithScopes makes every call require scopes of the connection, as
// Token's required scopes do: a connection without them is
// *InsufficientScopeError (and a client not approved for them
// *ConsentRequiredError) before connectd calls the provider, so the MCP
// server can ask the user for them instead of reading the provider's 403.
func WithScopes(scopes ...string) ProviderOption {
	return func(t *ProviderTransport) { t.scopes = strings.Join(scopes, " ") }
}

// WithPathPrefix strips prefix from every request's path before it is sent:
// for an SDK whose base URL has a path that connectd's API base for the
// provider already has (GitLab's SDK calls https://gitlab.com/api/v4/…,
// connectd's gitlab API base is https://gitlab.com/api/v4). A request whose
// path is not below prefix fails without being sent.
func WithPathPrefix(prefix string) ProviderOption {
	return func(t *ProviderTransport) {
		p := "/" + strings.Trim(prefix, "/")
		if p == "/" {
			p = ""
		}
		t.prefix = (&url.URL{Path: p}).EscapedPath()
	}
}

// WithBaseTransport makes the calls to connectd with rt. Default: the
// Transport of Config.HTTPClient, else http.DefaultTransport.
func WithBaseTransport(rt http.RoundTripper) ProviderOption {
	return func(t *ProviderTransport) { t.base = rt }
}

// ProviderTransport is an http.RoundTripper that sends every request to
// connectd's provider API proxy (GET, HEAD, POST, PUT, PATCH or DELETE
// /v1/proxy/{provider}/{path}), for one user, one provider and optionally
// one account: connectd attaches the user's credential and forwards the
// call to the provider's API, so the MCP server never holds the credential.
// Make one with Client.ProviderTransport or Client.ProviderClient. It is
// safe for concurrent use.
//
// The path maps as follows: whatever scheme and host the request names
// (the SDK's base URL), its path — less the WithPathPrefix prefix — is the
// API path below connectd's API base URL for the provider, and its query
// is kept: GET https://api.github.com/user/repos?per_page=10 is sent as GET
// {connectd}/v1/proxy/github/user/repos?per_page=10. The path is sent as
// the request encodes it (an escaped slash stays escaped).
//
// The request's method, body (streamed, never buffered) and headers cross
// to connectd, which forwards them less Authorization, cookies and its own
// headers; the transport replaces Authorization with the client key, and
// sets X-User-Token, Connectd-Account (WithAccount) and, unless the request
// has one, a fresh X-Request-Id. The answer — the provider's status, kept
// headers and body, streamed — is returned as it arrives, with
// Response.Request the caller's request; a redirect is returned, not
// followed (whether to follow it is the http.Client's CheckRedirect).
//
// connectd forwards only GET, HEAD, POST, PUT, PATCH and DELETE, as
// written (methods are case-sensitive: "patch" is not PATCH), and only a
// call whose provider acts on exactly that method and path. It refuses,
// before anything is looked up, as an *APIError matching ErrInvalidRequest:
// any other method (405 method_not_allowed, with an Allow header); a path
// that is not a plain path below the API base — an empty, "." or ".."
// segment in any encoding, a ";", a backslash (400 invalid_proxy_path); a
// method override or URL rewrite — a header such as X-HTTP-Method-Override
// or X-Original-URL, a _method query parameter or form-encoded field (400
// proxy_override_refused). An SDK that tunnels PATCH or DELETE through POST
// with an override must be set to send the method itself. The transport
// does not check these before sending: connectd's answer is the one rule
// (docs/api.md), and it names what was wrong.
//
// A refusal by connectd itself (not connected, no consent, the provider
// refused the credential even refreshed, rate limited, …) is returned as
// an *APIError, with no response: it matches the package's sentinels with
// errors.Is (NeedsConnection, ErrAccountRequired, ErrRateLimited, …), through
// the *url.Error http.Client wraps it in and through SDKs that return the
// client's error. It is told apart from the provider's own JSON errors by
// its request_id: connectd writes the request's X-Request-Id into its
// envelope and never forwards that header to the provider, so an answer
// whose JSON body names the same request_id can only be connectd's. Every
// other answer, the provider's errors included, is the provider's and
// passes through untouched. An answer without a body (to HEAD) cannot be
// told apart and also passes through: a HEAD connectd refuses is a bare
// 400 or 405 response.
type ProviderTransport struct {
	connectd  *url.URL
	key       string
	userToken string
	provider  string
	account   string
	scopes    string // space-separated, "" for none
	prefix    string // escaped, "" or "/…" without a trailing slash
	base      http.RoundTripper
}

// ProviderTransport returns the http.RoundTripper that sends an SDK's
// requests through connectd's provider API proxy for userToken's user at
// provider (see ProviderTransport). Use it where an SDK takes a transport;
// ProviderClient wraps it in an *http.Client.
func (c *Client) ProviderTransport(userToken, provider string, opts ...ProviderOption) *ProviderTransport {
	u, _ := url.Parse(c.base) // checked by New
	t := &ProviderTransport{connectd: u, key: c.key, userToken: userToken, provider: provider, base: c.hc.Transport}
	for _, o := range opts {
		o(t)
	}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	return t
}

// ProviderClient returns an *http.Client for a provider's own Go SDK:
// every request it makes goes through connectd's provider API proxy for
// userToken's user at provider, with the user's credential attached by
// connectd (see ProviderTransport for how requests map and how connectd's
// refusals come back). For example, with github.com/google/go-github:
//
//	gh := github.NewClient(cd.ProviderClient(userToken, "github"))
//	repos, _, err := gh.Repositories.ListByAuthenticatedUser(ctx, nil)
//	if client.NeedsConnection(err) { /* RequireConnection */ }
//
// It follows a redirect only to the host of the first request (the
// provider's API, again through connectd), up to 10; any other redirect
// (a download link to another host) is returned to the SDK as it is. It has
// no timeout of its own: connectd bounds each proxied call
// (CONNECTD_PROXY_TIMEOUT, 5 minutes by default) and a context deadline
// bounds it sooner; set Timeout on the returned client for more.
func (c *Client) ProviderClient(userToken, provider string, opts ...ProviderOption) *http.Client {
	return &http.Client{Transport: c.ProviderTransport(userToken, provider, opts...), CheckRedirect: sameHost}
}

// sameHost lets the client follow redirects within the first request's
// scheme and host only.
func sameHost(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("connectd client: stopped after %d redirects", maxRedirects)
	}
	if first := via[0].URL; req.URL.Scheme != first.Scheme || !strings.EqualFold(req.URL.Host, first.Host) {
		return http.ErrUseLastResponse
	}
	return nil
}

// RoundTrip sends req through connectd's proxy (see ProviderTransport).
func (t *ProviderTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	fail := func(err error) (*http.Response, error) {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on errors
		}
		return nil, err
	}
	if t.userToken == "" {
		return fail(fmt.Errorf("connectd client: proxy %s %s: no user token given (the MCP access token of the user the call is for): %w",
			req.Method, t.provider, ErrUserToken))
	}
	if t.provider == "" {
		return fail(errors.New("connectd client: proxy: empty provider"))
	}
	target, err := t.target(req.URL)
	if err != nil {
		return fail(err)
	}
	out := req.Clone(req.Context())
	out.URL, out.Host = target, ""
	out.Header.Set("Authorization", "Bearer "+t.key)
	out.Header.Set(UserTokenHeader, t.userToken)
	if t.account != "" {
		out.Header.Set(AccountHeader, t.account)
	}
	if t.scopes != "" {
		out.Header.Set(ScopesHeader, t.scopes)
	}
	id := out.Header.Get(RequestIDHeader)
	if id == "" {
		id = newRequestID()
		out.Header.Set(RequestIDHeader, id)
	}
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		// url.Error names the caller's URL, which holds no secret.
		return nil, fmt.Errorf("connectd client: proxy: %w", err)
	}
	resp.Request = req
	if apiErr := refusal(resp, id); apiErr != nil {
		if apiErr.Approval != nil {
			apiErr.Approval.Account = t.account // the account this call named
		}
		return nil, apiErr
	}
	return resp, nil
}

// target is where a request for u goes: connectd's proxy for the
// provider, u's escaped path below the prefix, u's query.
func (t *ProviderTransport) target(u *url.URL) (*url.URL, error) {
	if u.Opaque != "" {
		return nil, errors.New("connectd client: proxy: an opaque URL has no API path")
	}
	p := u.EscapedPath()
	if t.prefix != "" {
		rest, ok := strings.CutPrefix(p, t.prefix)
		if !ok || (rest != "" && rest[0] != '/') {
			return nil, fmt.Errorf("connectd client: proxy: the path %s is not below %s", u.EscapedPath(), t.prefix)
		}
		p = rest
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	raw := strings.TrimRight(t.connectd.String(), "/") + "/v1/proxy/" + url.PathEscape(t.provider) + p
	if u.RawQuery != "" {
		raw += "?" + u.RawQuery
	}
	out, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("connectd client: proxy: %w", err)
	}
	return out, nil
}

// refusal returns connectd's refusal in resp as an *APIError (resp's body
// then closed), or nil with resp's body as it was (what was read of it put
// back in front). A refusal is an error status whose JSON body is
// connectd's envelope naming this request's id (sent, or the one connectd
// answered with: the provider never sees it).
func refusal(resp *http.Response, sent string) *APIError {
	if resp.StatusCode < 400 || resp.ContentLength > maxEnvelope || resp.Body == nil {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxEnvelope+1))
	if err != nil || len(raw) > maxEnvelope {
		resp.Body = &replayed{Reader: io.MultiReader(bytes.NewReader(raw), resp.Body), Closer: resp.Body}
		return nil
	}
	var b errorBody
	if json.Unmarshal(raw, &b) != nil || b.Error == "" || b.RequestID == "" ||
		(b.RequestID != sent && b.RequestID != resp.Header.Get(RequestIDHeader)) {
		resp.Body = &replayed{Reader: io.MultiReader(bytes.NewReader(raw), resp.Body), Closer: resp.Body}
		return nil
	}
	resp.Body.Close()
	var ae *APIError
	errors.As(apiError(resp, raw), &ae)
	return ae
}

// replayed is a response body with its first bytes read and put back.
type replayed struct {
	io.Reader
	io.Closer
}

// newRequestID is a fresh request id for one proxied call (128 bits, hex).
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	return hex.EncodeToString(b[:])
}
