package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/client"
)

// proxyFake stands in for connectd's proxy endpoint: it records each
// request as it arrived and answers with the test's handler.
type proxyFake struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	method, path, query string
	header              http.Header
	body                []byte
}

func newProxyFake(t *testing.T, prefix string, h http.HandlerFunc) (*proxyFake, *client.Client) {
	t.Helper()
	f := &proxyFake{}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// connectd echoes (or makes) the request id on every answer.
		if id := r.Header.Get(client.RequestIDHeader); id != "" {
			w.Header().Set(client.RequestIDHeader, id)
		}
		var body []byte
		if r.Header.Get("X-Test-Stream") == "" {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), body})
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.srv.Close)
	c, err := client.New(client.Config{BaseURL: f.srv.URL + prefix, Key: testKey, HTTPClient: f.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func (f *proxyFake) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// envelope answers with connectd's error envelope for r (its request id).
func envelope(w http.ResponseWriter, r *http.Request, status int, body map[string]any) {
	body["request_id"] = r.Header.Get(client.RequestIDHeader)
	writeJSON(w, status, body)
}

// repoSDK is shaped as a provider's Go SDK is: a base URL, an
// *http.Client, its own credential and headers on each request, JSON in
// and out, and its own error for a non-2xx answer.
type repoSDK struct {
	BaseURL *url.URL
	HTTP    *http.Client
	Token   string // what the SDK would send without connectd; must not cross
}

type sdkError struct {
	Status int
	Body   string
}

func (e *sdkError) Error() string { return fmt.Sprintf("sdk: %d %s", e.Status, e.Body) }

type repo struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

func (s *repoSDK) do(ctx context.Context, method, path string, in, out any) (*http.Response, error) {
	u, err := s.BaseURL.Parse(path)
	if err != nil {
		return nil, err
	}
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "token "+s.Token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("User-Agent", "repo-sdk/1.0")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return resp, &sdkError{resp.StatusCode, string(raw)}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp, err
		}
	}
	return resp, nil
}

func (s *repoSDK) ListRepos(ctx context.Context, perPage int) ([]repo, error) {
	var out []repo
	_, err := s.do(ctx, http.MethodGet, fmt.Sprintf("user/repos?per_page=%d&sort=updated", perPage), nil, &out)
	return out, err
}

func (s *repoSDK) CreateRepo(ctx context.Context, name string) (*repo, error) {
	var out repo
	_, err := s.do(ctx, http.MethodPost, "user/repos", map[string]any{"name": name, "private": true}, &out)
	return &out, err
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestProviderClientWithAnSDK: an SDK built for https://api.github.com/
// works unchanged through connectd: its GET and POST arrive at
// /v1/proxy/github/{path}?{query} with the client key, the user token and
// the account, without the SDK's own credential, the body and the other
// headers as the SDK sent them; the answers come back to it.
func TestProviderClientWithAnSDK(t *testing.T) {
	f, c := newProxyFake(t, "", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/proxy/github/user/repos":
			w.Header().Set("Link", `<https://api.github.com/user/repos?page=2>; rel="next"`)
			writeJSON(w, http.StatusOK, []repo{{1, "a"}, {2, "b"}})
		case "POST /v1/proxy/github/user/repos":
			var in struct{ Name string }
			_ = json.NewDecoder(r.Body).Decode(&in)
			writeJSON(w, http.StatusCreated, repo{3, in.Name})
		default:
			http.NotFound(w, r)
		}
	})
	sdk := &repoSDK{BaseURL: mustURL(t, "https://api.github.com/"), Token: "gho_sdk_own_token",
		HTTP: c.ProviderClient(testToken, "github", client.WithAccount("cn_work"), client.WithScopes("repo", "read:org"))}
	ctx := context.Background()

	repos, err := sdk.ListRepos(ctx, 10)
	if err != nil || len(repos) != 2 || repos[1].Name != "b" {
		t.Fatalf("list: %v %v", repos, err)
	}
	created, err := sdk.CreateRepo(ctx, "new-repo")
	if err != nil || created.ID != 3 || created.Name != "new-repo" {
		t.Fatalf("create: %+v %v", created, err)
	}

	seen := f.requests()
	if len(seen) != 2 {
		t.Fatalf("%d requests reached connectd", len(seen))
	}
	if g := seen[0]; g.method != "GET" || g.path != "/v1/proxy/github/user/repos" || g.query != "per_page=10&sort=updated" {
		t.Errorf("GET arrived as %s %s?%s", g.method, g.path, g.query)
	}
	if p := seen[1]; p.method != "POST" || p.path != "/v1/proxy/github/user/repos" || p.query != "" ||
		string(p.body) != `{"name":"new-repo","private":true}` || p.header.Get("Content-Type") != "application/json" {
		t.Errorf("POST arrived as %s %s?%s %q %v", p.method, p.path, p.query, p.body, p.header)
	}
	ids := map[string]bool{}
	for _, s := range seen {
		h := s.header
		if v := h.Values("Authorization"); len(v) != 1 || v[0] != "Bearer "+testKey {
			t.Errorf("Authorization %q: want the client key only", v)
		}
		if h.Get(client.UserTokenHeader) != testToken || h.Get(client.AccountHeader) != "cn_work" ||
			h.Get(client.ScopesHeader) != "repo read:org" {
			t.Errorf("user token %q, account %q, scopes %q", h.Get(client.UserTokenHeader), h.Get(client.AccountHeader),
				h.Get(client.ScopesHeader))
		}
		if h.Get("Accept") != "application/vnd.github+json" || h.Get("User-Agent") != "repo-sdk/1.0" {
			t.Errorf("the SDK's headers did not cross: %v", h)
		}
		for k, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, sdk.Token) {
					t.Errorf("the SDK's own credential crossed in %s", k)
				}
			}
		}
		ids[h.Get(client.RequestIDHeader)] = true
	}
	if len(ids) != 2 || ids[""] {
		t.Errorf("request ids %v: want a fresh one per call", ids)
	}
}

// TestProviderPaths: how a request's URL maps onto the proxy: any host,
// escaped segments kept, connectd's own path prefix, the SDK's prefix
// stripped with WithPathPrefix (and a path outside it refused unsent).
func TestProviderPaths(t *testing.T) {
	f, c := newProxyFake(t, "/connectd", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{})
	})
	cases := []struct {
		name, url, want string
		opts            []client.ProviderOption
	}{
		{"root base", "https://api.github.com/user", "/connectd/v1/proxy/github/user", nil},
		{"other host", "http://127.0.0.1:1/user?x=1", "/connectd/v1/proxy/github/user?x=1", nil},
		{"escaped slash", "https://api.github.com/repos/a%2Fb/issues?q=a%20b", "/connectd/v1/proxy/github/repos/a%2Fb/issues?q=a%20b", nil},
		{"prefix stripped", "https://gitlab.com/api/v4/projects/g%2Fp/issues", "/connectd/v1/proxy/gitlab/projects/g%2Fp/issues",
			[]client.ProviderOption{client.WithPathPrefix("/api/v4/")}},
		{"prefix without slashes", "https://gitlab.com/api/v4/user", "/connectd/v1/proxy/gitlab/user",
			[]client.ProviderOption{client.WithPathPrefix("api/v4")}},
	}
	for _, tc := range cases {
		provider := "github"
		if tc.opts != nil {
			provider = "gitlab"
		}
		resp, err := c.ProviderClient(testToken, provider, tc.opts...).Get(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if resp.Request.URL.String() != tc.url {
			t.Errorf("%s: Response.Request is %s, want the caller's", tc.name, resp.Request.URL)
		}
		seen := f.requests()
		g := seen[len(seen)-1]
		got := g.path
		if g.query != "" {
			got += "?" + g.query
		}
		if got != tc.want {
			t.Errorf("%s: %s arrived as %s, want %s", tc.name, tc.url, got, tc.want)
		}
	}

	n := len(f.requests())
	hc := c.ProviderClient(testToken, "gitlab", client.WithPathPrefix("/api/v4"))
	for _, u := range []string{"https://gitlab.com/oauth/token", "https://gitlab.com/api/v40/user"} {
		if _, err := hc.Get(u); err == nil || !strings.Contains(err.Error(), "not below /api/v4") {
			t.Errorf("%s: %v, want refused", u, err)
		}
	}
	if _, err := c.ProviderClient("", "github").Get("https://api.github.com/user"); !errors.Is(err, client.ErrUserToken) {
		t.Errorf("no user token: %v", err)
	}
	if _, err := c.ProviderClient(testToken, "").Get("https://api.github.com/user"); err == nil {
		t.Error("no provider: no error")
	}
	if len(f.requests()) != n {
		t.Error("a refused request was sent")
	}
}

// TestProviderRefusals: connectd's own refusals — its envelope naming the
// request's id — come back as *APIError through the SDK, matching the
// sentinels; the provider's own JSON errors, even shaped like connectd's,
// reach the SDK untouched.
func TestProviderRefusals(t *testing.T) {
	big := `{"error":"not_connected","pad":"` + strings.Repeat("x", 70<<10) + `"}`
	_, c := newProxyFake(t, "", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/proxy/github/not-connected":
			envelope(w, r, http.StatusForbidden, map[string]any{"error": "not_connected", "error_description": "connect github first"})
		case "/v1/proxy/github/accounts":
			envelope(w, r, http.StatusConflict, map[string]any{"error": "account_required",
				"accounts": []map[string]any{{"id": "cn_1", "display_name": "octo"}, {"id": "cn_2", "display_name": "work"}}})
		case "/v1/proxy/github/held":
			w.Header().Set("Retry-After", "7")
			envelope(w, r, http.StatusTooManyRequests, map[string]any{"error": "provider_rate_limited"})
		case "/v1/proxy/github/refused":
			envelope(w, r, http.StatusUnauthorized, map[string]any{"error": "provider_unauthorized"})
		case "/v1/proxy/github/replaced-id":
			// connectd did not adopt the id sent (say, a proxy in front
			// replaced it): the answer's own id is the one to match.
			w.Header().Set(client.RequestIDHeader, "0123abcd")
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "provider_unavailable", "request_id": "0123abcd"})
		case "/v1/proxy/github/provider-lookalike":
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "not_connected", "error_description": "the provider's own"})
		case "/v1/proxy/github/provider-own-id":
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "not_found", "request_id": "provider-req-1"})
		case "/v1/proxy/github/provider-github":
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com"})
		case "/v1/proxy/github/provider-google":
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": 400, "message": "bad"}})
		case "/v1/proxy/github/provider-text":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"invalid_request","request_id":%q}`, r.Header.Get(client.RequestIDHeader))
		case "/v1/proxy/github/provider-big":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, big)
		case "/v1/proxy/github/ok-lookalike":
			envelope(w, r, http.StatusOK, map[string]any{"error": "none"})
		default:
			http.NotFound(w, r)
		}
	})
	sdk := &repoSDK{BaseURL: mustURL(t, "https://api.github.com/"), HTTP: c.ProviderClient(testToken, "github"), Token: "t"}
	ctx := context.Background()

	refused := []struct {
		path   string
		status int
		code   string
		is     error
	}{
		{"not-connected", 403, "not_connected", client.ErrNotConnected},
		{"accounts", 409, "account_required", client.ErrAccountRequired},
		{"held", 429, "provider_rate_limited", client.ErrRateLimited},
		{"refused", 401, "provider_unauthorized", client.ErrReauthorizationRequired},
		{"replaced-id", 503, "provider_unavailable", client.ErrUnavailable},
	}
	for _, tc := range refused {
		_, err := sdk.do(ctx, http.MethodGet, tc.path, nil, nil)
		var ae *client.APIError
		if !errors.As(err, &ae) || !errors.Is(err, tc.is) || ae.Status != tc.status || ae.Code != tc.code || ae.RequestID == "" {
			t.Errorf("%s: %v (%#v), want an *APIError %d %s", tc.path, err, ae, tc.status, tc.code)
		}
		if err != nil && (strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), testToken)) {
			t.Errorf("%s: the error holds a secret: %v", tc.path, err)
		}
	}
	if _, err := sdk.do(ctx, http.MethodGet, "not-connected", nil, nil); !client.NeedsConnection(err) {
		t.Errorf("not_connected: NeedsConnection false for %v", err)
	}
	if _, err := sdk.do(ctx, http.MethodGet, "accounts", nil, nil); len(client.Accounts(err)) != 2 {
		t.Errorf("account_required: accounts %v", client.Accounts(err))
	}
	var ae *client.APIError
	if _, err := sdk.do(ctx, http.MethodGet, "held", nil, nil); !errors.As(err, &ae) || ae.RetryAfter != 7*time.Second {
		t.Errorf("provider_rate_limited: %v", err)
	}

	passed := []struct {
		path   string
		status int
		body   string
	}{
		{"provider-lookalike", 404, `"the provider's own"`},
		{"provider-own-id", 404, `"provider-req-1"`},
		{"provider-github", 404, `"Not Found"`},
		{"provider-google", 400, `"code":400`},
		{"provider-text", 400, `"invalid_request"`},
		{"provider-big", 400, big},
	}
	for _, tc := range passed {
		_, err := sdk.do(ctx, http.MethodGet, tc.path, nil, nil)
		var se *sdkError
		if !errors.As(err, &se) || se.Status != tc.status || !strings.Contains(se.Body, tc.body) ||
			(tc.body == big && se.Body != big) {
			t.Errorf("%s: %.200v, want the provider's %d answer to reach the SDK", tc.path, err, tc.status)
		}
		if errors.As(err, new(*client.APIError)) {
			t.Errorf("%s: the provider's answer was taken for connectd's", tc.path)
		}
	}
	resp, err := sdk.HTTP.Get("https://api.github.com/ok-lookalike")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("a 2xx answer is the provider's whatever its body: %v", err)
	} else {
		resp.Body.Close()
	}
}

// TestProviderCallRefused (issue 33): the calls connectd's proxy refuses
// before anything is looked up — a method it does not forward (lower case
// included), an override header or _method parameter, a path that is not
// plain — are sent as made (the transport keeps no copy of connectd's rule)
// and come back as an *APIError matching ErrInvalidRequest with connectd's
// code; a provider's own 405 still reaches the caller untouched.
func TestProviderCallRefused(t *testing.T) {
	forwarded := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}
	f, c := newProxyFake(t, "", func(w http.ResponseWriter, r *http.Request) {
		// A stand-in for connectd's first checks, enough for these calls.
		switch {
		case !slices.Contains(forwarded, r.Method):
			w.Header().Set("Allow", strings.Join(forwarded, ", "))
			envelope(w, r, http.StatusMethodNotAllowed, map[string]any{"error": "method_not_allowed"})
		case r.Header.Get("X-HTTP-Method-Override") != "" || r.URL.Query().Has("_method"):
			envelope(w, r, http.StatusBadRequest, map[string]any{"error": "proxy_override_refused"})
		case strings.Contains(r.URL.EscapedPath(), ";"):
			envelope(w, r, http.StatusBadRequest, map[string]any{"error": "invalid_proxy_path"})
		case r.URL.Path == "/v1/proxy/github/provider-405":
			w.Header().Set("Allow", "GET")
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "Method Not Allowed"})
		default:
			writeJSON(w, http.StatusOK, map[string]any{})
		}
	})
	hc := c.ProviderClient(testToken, "github")
	cases := []struct {
		name, method, url string
		header            string // an X-HTTP-Method-Override value, if any
		status            int
		code              string
	}{
		{"TRACE", "TRACE", "https://api.github.com/user", "", 405, "method_not_allowed"},
		{"PROPFIND", "PROPFIND", "https://api.github.com/user", "", 405, "method_not_allowed"},
		{"lower-case patch", "patch", "https://api.github.com/user", "", 405, "method_not_allowed"},
		{"override header", "POST", "https://api.github.com/user", "DELETE", 400, "proxy_override_refused"},
		{"_method parameter", "POST", "https://api.github.com/user?_method=DELETE", "", 400, "proxy_override_refused"},
		{"path parameter", "GET", "https://api.github.com/repos/o/r/..;/x", "", 400, "invalid_proxy_path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := len(f.requests())
			req, _ := http.NewRequest(tc.method, tc.url, nil)
			if tc.header != "" {
				req.Header.Set("X-HTTP-Method-Override", tc.header)
			}
			resp, err := hc.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			var ae *client.APIError
			if !errors.As(err, &ae) || !errors.Is(err, client.ErrInvalidRequest) || ae.Status != tc.status || ae.Code != tc.code {
				t.Fatalf("%v (%#v), want an *APIError %d %s", err, ae, tc.status, tc.code)
			}
			if client.NeedsConnection(err) {
				t.Error("a refused call is no reason to connect")
			}
			got := f.requests()
			if len(got) != n+1 || got[n].method != tc.method {
				t.Errorf("sent %d requests (%v), want the call as made, once", len(got)-n, got[n:])
			}
		})
	}
	req, _ := http.NewRequest(http.MethodDelete, "https://api.github.com/provider-405", nil)
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("the provider's own 405: %v", err)
	}
	resp.Body.Close()
}

// TestProviderRequestID: a request id the caller sets is kept (connectd
// adopts it for its logs) and is the one the refusal is matched against.
func TestProviderRequestID(t *testing.T) {
	f, c := newProxyFake(t, "", func(w http.ResponseWriter, r *http.Request) {
		envelope(w, r, http.StatusForbidden, map[string]any{"error": "consent_required"})
	})
	req, _ := http.NewRequest(http.MethodGet, "https://api.github.com/user", nil)
	req.Header.Set(client.RequestIDHeader, "trace-42")
	_, err := c.ProviderClient(testToken, "github").Do(req)
	var ae *client.APIError
	if !errors.As(err, &ae) || !errors.Is(err, client.ErrConsentRequired) || ae.RequestID != "trace-42" {
		t.Fatalf("%v", err)
	}
	if got := f.requests()[0].header.Get(client.RequestIDHeader); got != "trace-42" {
		t.Errorf("request id sent %q", got)
	}
	if req.Header.Get("Authorization") != "" || req.Header.Get(client.UserTokenHeader) != "" {
		t.Error("the caller's request was modified")
	}
}

// TestProviderStreaming: neither body is buffered: the request's reaches
// connectd while the caller is still writing it, and the answer's reaches
// the caller while connectd is still writing it.
func TestProviderStreaming(t *testing.T) {
	gotFirst, sendSecond := make(chan string, 1), make(chan struct{})
	_, c := newProxyFake(t, "", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/proxy/demo/upload":
			br := bufio.NewReader(r.Body)
			line, _ := br.ReadString('\n')
			gotFirst <- line // the first part arrived before the caller wrote the rest
			rest, _ := io.ReadAll(br)
			writeJSON(w, http.StatusOK, map[string]any{"rest": string(rest)})
		case "/v1/proxy/demo/events":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-sendSecond:
			case <-time.After(10 * time.Second):
			}
			io.WriteString(w, "data: two\n\n")
		}
	})
	hc := c.ProviderClient(testToken, "demo")

	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, "https://files.example.com/upload", pr)
	req.Header.Set("X-Test-Stream", "1")
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := hc.Do(req)
		done <- result{resp, err}
	}()
	io.WriteString(pw, "part one\n")
	select {
	case line := <-gotFirst:
		if line != "part one\n" {
			t.Errorf("first part %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request body was held back until complete")
	}
	io.WriteString(pw, "part two")
	pw.Close()
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	raw, _ := io.ReadAll(res.resp.Body)
	res.resp.Body.Close()
	if !strings.Contains(string(raw), `"rest":"part two"`) {
		t.Errorf("upload answer %s", raw)
	}

	resp, err := hc.Get("https://files.example.com/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || first != "data: one\n" {
		t.Fatalf("first event %q %v", first, err)
	}
	close(sendSecond) // only now does connectd write the second event
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: two\n\n" {
		t.Errorf("rest %q", rest)
	}
}

// TestProviderRedirects: a redirect comes back from connectd as the
// provider answered it; ProviderClient follows it only within the API's
// host (through connectd again), and a bare ProviderTransport never does.
func TestProviderRedirects(t *testing.T) {
	f, c := newProxyFake(t, "", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/proxy/github/repos/old/name":
			w.Header().Set("Location", "https://api.github.com/repositories/7?x=1")
			w.WriteHeader(http.StatusMovedPermanently)
		case "/v1/proxy/github/repositories/7":
			writeJSON(w, http.StatusOK, repo{7, "renamed"})
		case "/v1/proxy/github/repos/o/r/tarball":
			w.Header().Set("Location", "https://codeload.github.com/o/r/tar.gz/main?token=short-lived")
			w.WriteHeader(http.StatusFound)
		case "/v1/proxy/github/loop":
			w.Header().Set("Location", "/loop")
			w.WriteHeader(http.StatusFound)
		}
	})
	sdk := &repoSDK{BaseURL: mustURL(t, "https://api.github.com/"), HTTP: c.ProviderClient(testToken, "github"), Token: "t"}
	var r repo
	if _, err := sdk.do(context.Background(), http.MethodGet, "repos/old/name", nil, &r); err != nil || r.ID != 7 {
		t.Fatalf("same-host redirect: %+v %v", r, err)
	}
	seen := f.requests()
	if len(seen) != 2 || seen[1].path != "/v1/proxy/github/repositories/7" || seen[1].query != "x=1" ||
		seen[1].header.Get("Authorization") != "Bearer "+testKey {
		t.Fatalf("the redirect was not followed through connectd: %+v", seen)
	}

	resp, err := sdk.HTTP.Get("https://api.github.com/repos/o/r/tarball")
	if err != nil || resp.StatusCode != http.StatusFound ||
		resp.Header.Get("Location") != "https://codeload.github.com/o/r/tar.gz/main?token=short-lived" {
		t.Fatalf("cross-host redirect: %v %v", resp, err)
	}
	resp.Body.Close()
	if len(f.requests()) != 3 {
		t.Error("a cross-host redirect was followed")
	}

	if _, err := sdk.HTTP.Get("https://api.github.com/loop"); err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Errorf("redirect loop: %v", err)
	}

	req, _ := http.NewRequest(http.MethodGet, "https://api.github.com/repos/old/name", nil)
	resp, err = c.ProviderTransport(testToken, "github").RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusMovedPermanently {
		t.Fatalf("transport: %v %v", resp, err)
	}
	resp.Body.Close()
}

// A provider's SDK working through connectd: here a plain request as any
// SDK makes one, for its own base URL; connectd attaches the credential.
func ExampleClient_ProviderClient() {
	cd, err := client.New(client.Config{BaseURL: "https://connect.example.com", Key: "cks_…"})
	if err != nil {
		panic(err)
	}
	listRepos := func(ctx context.Context, userToken string) (*http.Response, error) {
		hc := cd.ProviderClient(userToken, "github") // e.g. github.NewClient(hc)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.github.com/user/repos?per_page=10", nil)
		resp, err := hc.Do(req)
		if client.NeedsConnection(err) {
			// not connected, no consent, or the provider refused the credential: RequireConnection
		}
		return resp, err
	}
	_ = listRepos
}
