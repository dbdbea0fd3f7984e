package connect_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// The proxy's request surface written as the attacks of the security review
// (issue 33): a path, a method, an override or a header that makes the
// provider act on another call than the one connectd checked, or that
// hands the caller the credential. Each is refused before anything is
// looked up (or stays behind), and the fake provider's record of every
// request it received (APIRequests) shows what reached it.

// rawProxied sends method to the exact escaped path (the whole path, from
// "/v1/") as m for user, with headers h, and returns the answer.
func (m *mcpServer) rawProxied(method, path, user string, body io.Reader, h http.Header) (*http.Response, []byte) {
	m.e.t.Helper()
	req, err := http.NewRequest(method, m.e.srv.URL+"/", body)
	if err != nil {
		m.e.t.Fatal(err)
	}
	req.URL.Opaque = path // sent as it is: no cleaning, no re-escaping
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, m.token(user))
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := m.e.srv.Client().Transport.RoundTrip(req)
	if err != nil {
		m.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

// codeOf is the error code of a JSON error answer.
func codeOf(raw []byte) string {
	var env struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(raw, &env)
	return env.Error
}

// untouched fails t if the fake provider received any request since it had
// received n, or a token request since tokens.
func untouched(t *testing.T, e *env, what string, n, tokens int) {
	t.Helper()
	if got := e.fake.APIRequests(); len(got) != n {
		last := got[len(got)-1]
		t.Errorf("%s reached the provider: %s %s?%s", what, last.Method, last.Path, last.Query)
	}
	if got := len(e.fake.TokenRequests()); got != tokens {
		t.Errorf("%s made %d token requests", what, got-tokens)
	}
}

// TestProxyPathAttacks (issue 33): every path a provider might resolve to
// another one than connectd checked — a ";" path parameter ("..;", which
// Tomcat and Spring read as ".."), a "." or ".." segment in any encoding,
// an escaped "/" or "\" around one, an empty segment, a control character,
// an escape decoded twice — is 400 before the caller is looked up (bob has
// no connection) and nothing reaches the provider; a literal "..", "." or
// "//" is the same 400, not ServeMux's redirect. The request rules match
// the path exactly as it is sent.
func TestProxyPathAttacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	const p = "/v1/proxy/fake/"
	for _, tc := range []struct{ path, code string }{
		{p + "echo/..;/token", "invalid_proxy_path"},
		{p + "..;/token", "invalid_proxy_path"},
		{p + "echo/%2e%2e;/token", "invalid_proxy_path"},
		{p + "echo/%2E%2E%3B/token", "invalid_proxy_path"},
		{p + "echo/.;/x", "invalid_proxy_path"},
		{p + "echo;x", "invalid_proxy_path"},
		{p + "echo/x;jsessionid=1", "invalid_proxy_path"},
		{p + "echo/x%3bjsessionid=1", "invalid_proxy_path"},
		{p + "echo/x%3Bjsessionid=1", "invalid_proxy_path"},
		{p + "echo/../../token", "invalid_proxy_path"},
		{p + "../token", "invalid_proxy_path"},
		{p + "echo/./x", "invalid_proxy_path"},
		{p + "./echo", "invalid_proxy_path"},
		{p + "echo/%2e%2e/x", "invalid_proxy_path"},
		{p + "echo/%2E%2E/x", "invalid_proxy_path"},
		{p + "echo/.%2e/x", "invalid_proxy_path"},
		{p + "echo/%2E./x", "invalid_proxy_path"},
		{p + "echo/%2e/x", "invalid_proxy_path"},
		{p + "echo/a%2f..%2fx", "invalid_proxy_path"},
		{p + "echo/a%2F%2E%2E%2F..%2Ftoken", "invalid_proxy_path"},
		{p + "echo/a%2F%2Fb", "invalid_proxy_path"},
		{p + "echo/a%5c..%5cx", "invalid_proxy_path"},
		{p + "echo/%5C", "invalid_proxy_path"},
		{p + `echo\..\x`, "invalid_proxy_path"},
		{p + "echo//x", "invalid_proxy_path"},
		{p + "/echo", "invalid_proxy_path"},
		{p + "echo/", "invalid_proxy_path"},
		{p, "invalid_proxy_path"},
		{"/v1/proxy/fake", "invalid_proxy_path"},
		{"/v1/proxy//fake/echo", "invalid_proxy_path"},
		{"/v1/proxy/fa%6be/echo", "invalid_proxy_path"},
		{p + "echo/%252e%252e/x", "invalid_proxy_path"},
		{p + "echo/%253b", "invalid_proxy_path"},
		{p + "echo/%00", "invalid_request"}, // not text: refused for every route (web.TextOnly)
		{p + "echo/x%0d%0aHost:%20evil.example", "invalid_request"},
		{p + "echo/%0a", "invalid_request"},
	} {
		n, tokens := len(e.fake.APIRequests()), len(e.fake.TokenRequests())
		resp, raw := a.rawProxied(http.MethodGet, tc.path, "bob", nil, nil)
		if resp.StatusCode != http.StatusBadRequest || codeOf(raw) != tc.code {
			t.Errorf("%s: %d %s %s, want 400 %s", tc.path, resp.StatusCode, resp.Header.Get("Location"), raw, tc.code)
		}
		untouched(t, e, tc.path, n, tokens)
	}

	// The request rules see the path as sent: an escape of an unreserved
	// character is decoded for the rule and the provider alike, another
	// escape's hex upper-cased for both, and ";" never reaches either.
	if err := e.server.Clients().SetProxyRules(context.Background(), a.client.ID, "fake",
		&clientauth.ProxyRules{Rules: []string{"GET /echo/open*", "GET /echo/a%2Fb"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, sent string }{
		{"echo/op%65n", "/api/echo/open"},
		{"echo/a%2fb", "/api/echo/a%2Fb"},
	} {
		resp, raw := a.rawProxied(http.MethodGet, p+tc.path, "alice", nil, nil)
		var echo providertest.EchoAnswer
		_ = json.Unmarshal(raw, &echo)
		got := e.fake.APIRequests()
		if resp.StatusCode != http.StatusOK || got[len(got)-1].Path != tc.sent {
			t.Errorf("%s: %d %s; the provider got %s, want %s", tc.path, resp.StatusCode, raw, got[len(got)-1].Path, tc.sent)
		}
	}
	n, tokens := len(e.fake.APIRequests()), len(e.fake.TokenRequests())
	for _, path := range []string{"echo/open/..;/secret", "echo/open;/../../secret", "echo/a/b", "echo/A%2Fb/x"} {
		resp, raw := a.rawProxied(http.MethodGet, p+path, "alice", nil, nil)
		if resp.StatusCode/100 != 4 || (codeOf(raw) != "invalid_proxy_path" && codeOf(raw) != "proxy_not_allowed") {
			t.Errorf("%s under the rules: %d %s", path, resp.StatusCode, raw)
		}
	}
	untouched(t, e, "a path outside the rules", n, tokens)
}

// TestProxyMethodAttacks (issue 33): only the documented methods are
// forwarded; TRACE (which an API may echo, credential and all), TRACK,
// CONNECT, OPTIONS, an unknown or a lower-case method is 405
// method_not_allowed with an Allow header, before the caller is looked up,
// and the provider never sees it — a proxy-only client's TRACE included.
// HEAD is allowed by a GET rule; a rule's method matches case-sensitively.
func TestProxyMethodAttacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newProxyOnlyServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	for _, method := range []string{"TRACE", "TRACK", "CONNECT", "OPTIONS", "PROPFIND", "DEBUG", "get", "Get", "post", "delete"} {
		for _, user := range []string{"alice", "bob"} {
			n, tokens := len(e.fake.APIRequests()), len(e.fake.TokenRequests())
			resp, raw := a.rawProxied(method, "/v1/proxy/fake/echo", user, nil, nil)
			if resp.StatusCode != http.StatusMethodNotAllowed || codeOf(raw) != "method_not_allowed" ||
				resp.Header.Get("Allow") != "GET, HEAD, POST, PUT, PATCH, DELETE" {
				t.Errorf("%s for %s: %d %v %s", method, user, resp.StatusCode, resp.Header, raw)
			}
			if strings.Contains(string(raw), "Bearer") {
				t.Errorf("%s: a credential came back: %s", method, raw)
			}
			untouched(t, e, method, n, tokens)
		}
	}
	for _, r := range e.fake.APIRequests() {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			t.Errorf("the provider saw %s %s", r.Method, r.Path)
		}
	}
	for _, method := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
		if resp, raw := a.rawProxied(method, "/v1/proxy/fake/echo", "alice", nil, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", method, resp.StatusCode, raw)
		}
	}

	// HEAD under a GET rule; a HEAD rule allows HEAD alone.
	if err := e.server.Clients().SetProxyRules(context.Background(), a.client.ID, "fake",
		&clientauth.ProxyRules{Rules: []string{"GET /echo/read", "HEAD /echo/head"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"HEAD", "echo/read", http.StatusOK}, {"GET", "echo/read", http.StatusOK}, {"HEAD", "echo/head", http.StatusOK},
		{"GET", "echo/head", http.StatusForbidden}, {"POST", "echo/read", http.StatusForbidden},
	} {
		if resp, raw := a.rawProxied(tc.method, "/v1/proxy/fake/"+tc.path, "alice", nil, nil); resp.StatusCode != tc.want {
			t.Errorf("%s %s under the rules: %d %s, want %d", tc.method, tc.path, resp.StatusCode, raw, tc.want)
		}
	}
}

// TestProxyOverrideAttacks (issue 33): a method override or URL rewrite —
// a header (X-HTTP-Method-Override, X-Method-Override, X-HTTP-Method,
// X-Original-Method, X-Original-URL, X-Rewrite-URL and their families), a
// _method query parameter (however escaped, cased or separated), a _method
// field of a form body — would make the provider act on another call than
// the rules allowed: 400 proxy_override_refused before the caller is looked
// up, and the provider never sees it. A form body connectd cannot read
// first (of unknown length) is 413.
func TestProxyOverrideAttacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	if err := e.server.Clients().SetProxyRules(context.Background(), a.client.ID, "fake",
		&clientauth.ProxyRules{Rules: []string{"GET /echo/*", "POST /echo/*"}}); err != nil {
		t.Fatal(err)
	}
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	for _, tc := range []struct {
		name, method, path, body string
		h                        http.Header
	}{
		{"X-HTTP-Method-Override", "GET", "echo/x", "", http.Header{"X-Http-Method-Override": {"DELETE"}}},
		{"X-Method-Override", "POST", "echo/x", "", http.Header{"X-Method-Override": {"DELETE"}}},
		{"X-HTTP-Method", "POST", "echo/x", "", http.Header{"X-Http-Method": {"PUT"}}},
		{"X-Original-Method", "GET", "echo/x", "", http.Header{"X-Original-Method": {"DELETE"}}},
		{"X-Forwarded-Method", "GET", "echo/x", "", http.Header{"X-Forwarded-Method": {"DELETE"}}},
		{"X-Original-URL", "GET", "echo/x", "", http.Header{"X-Original-Url": {"/admin/users"}}},
		{"X-Rewrite-URL", "GET", "echo/x", "", http.Header{"X-Rewrite-Url": {"/admin/users"}}},
		{"X-Original-URI", "GET", "echo/x", "", http.Header{"X-Original-Uri": {"/admin/users"}}},
		{"X-Envoy-Original-Path", "GET", "echo/x", "", http.Header{"X-Envoy-Original-Path": {"/admin"}}},
		{"_method query", "POST", "echo/x?_method=DELETE", "", nil},
		{"escaped _method query", "POST", "echo/x?%5Fmethod=DELETE", "", nil},
		{"upper-case _METHOD query", "POST", "echo/x?a=1&_METHOD=delete", "", nil},
		{"_method after ;", "POST", "echo/x?a=1;_method=DELETE", "", nil},
		{"X-HTTP-Method-Override query", "GET", "echo/x?X-HTTP-Method-Override=DELETE", "", nil},
		{"_method form field", "POST", "echo/x", "title=hi&_method=DELETE", form},
		{"_method form field after ;", "POST", "echo/x", "title=hi;_method=PUT", form},
		// Rack reads a body without a Content-Type as a form; Rack and PHP's
		// $_POST (Laravel, Symfony) read multipart/form-data fields.
		{"_method field, no Content-Type", "POST", "echo/x", "title=hi&_method=DELETE", nil},
		{"_method multipart field", "POST", "echo/x", "--b0\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhi\r\n" +
			"--b0\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b0--\r\n",
			http.Header{"Content-Type": {"multipart/form-data; boundary=b0"}}},
		{"a multipart body that does not parse", "POST", "echo/x", "--b0\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1",
			http.Header{"Content-Type": {"multipart/form-data; boundary=b0"}}},
		// CGI-style servers read "_" as "-": HTTP_X_ORIGINAL_URL either way.
		{"X_Original_URL", "GET", "echo/x", "", http.Header{"X_Original_URL": {"/admin/users"}}},
		{"X_Rewrite_URL", "GET", "echo/x", "", http.Header{"X_Rewrite_URL": {"/admin/users"}}},
		{"X_HTTP_Method_Override", "POST", "echo/x", "", http.Header{"X_HTTP_Method_Override": {"DELETE"}}},
	} {
		n, tokens := len(e.fake.APIRequests()), len(e.fake.TokenRequests())
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		resp, raw := a.rawProxied(tc.method, "/v1/proxy/fake/"+tc.path, "alice", body, tc.h)
		if resp.StatusCode != http.StatusBadRequest || codeOf(raw) != "proxy_override_refused" {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, raw)
		}
		untouched(t, e, tc.name, n, tokens)
	}
	// A form body without one crosses; one of unknown length is refused.
	if resp, raw := a.rawProxied("POST", "/v1/proxy/fake/echo/x?method=artist.getinfo", "alice",
		strings.NewReader("title=hi&methodical=1"), form); resp.StatusCode != http.StatusOK {
		t.Errorf("a plain form: %d %s", resp.StatusCode, raw)
	}
	n, tokens := len(e.fake.APIRequests()), len(e.fake.TokenRequests())
	resp, raw := a.rawProxied("POST", "/v1/proxy/fake/echo/x", "alice", io.MultiReader(strings.NewReader("_method=DELETE")), form)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || codeOf(raw) != "request_too_large" {
		t.Errorf("a chunked form: %d %s", resp.StatusCode, raw)
	}
	untouched(t, e, "a chunked form", n, tokens)
}

// TestProxyHeadersDropped (issue 33): no header saying who the caller is
// or where it came from crosses — forwarding headers of any name
// (X-Forwarded-Server, -User, -Email...), client-address headers of CDNs
// and proxies, Forwarded — nor any Connectd-* header; the caller's other
// headers do.
func TestProxyHeadersDropped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	dropped := []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Server", "X-Forwarded-User",
		"X-Forwarded-Email", "X-Forwarded-Groups", "X-Forwarded-Access-Token", "X-Real-Ip", "X-Client-Ip", "True-Client-Ip",
		"Cf-Connecting-Ip", "Cf-Ipcountry", "X-Cluster-Client-Ip", "Fastly-Client-Ip", "Client-Ip", "X-Originating-Ip",
		"Connectd-Anything", "Connectd-Debug", "Via", "X-Envoy-External-Address", "Proxy-Authorization"}
	h := http.Header{"X-Custom": {"kept"}, "Accept": {"application/json"}}
	for _, k := range dropped {
		h.Set(k, "203.0.113.7")
	}
	// CGI-style servers read "_" as "-": X_Forwarded_For is X-Forwarded-For.
	underscored := []string{"X_User_Token", "X_Forwarded_For", "X_Forwarded_Host", "Cf_Connecting_Ip", "X_Real_IP", "True_Client_IP",
		"Connectd_Account", "X_Envoy_External_Address"}
	for _, k := range underscored {
		h[k] = []string{"203.0.113.7"}
	}
	resp, raw := a.rawProxied(http.MethodGet, "/v1/proxy/fake/echo", "alice", nil, h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	got := e.fake.APIRequests()
	sent := got[len(got)-1].Header
	for _, k := range dropped {
		if v := sent.Values(k); len(v) > 0 {
			t.Errorf("%s reached the provider: %q", k, v)
		}
	}
	for k, v := range sent {
		for _, u := range underscored {
			if strings.EqualFold(k, u) {
				t.Errorf("%s reached the provider as %s: %q", u, k, v)
			}
		}
	}
	if sent.Get("X-Custom") != "kept" || sent.Get("Accept") != "application/json" || len(sent.Values("Authorization")) != 1 {
		t.Errorf("the provider got %v", sent)
	}
}

// TestProxy401Cooldown (issue 33): an endpoint that answers 401 whatever
// the token lets a client provoke refusals at will; 20 sequential calls
// (and more on a second replica) cost the user exactly one refresh — the
// token refreshed for the first 401 and refused again is the provider's
// answer, 401 provider_unauthorized — and another once the window is over.
// The refreshed token is the one everyone then reads.
func TestProxy401Cooldown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{rotate: true})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	other := e.secondReplica()
	_, before := refreshesOf(e)
	denied := func(base string) {
		t.Helper()
		st, body := a.proxiedAt(base, "denied", "alice")
		if st != http.StatusUnauthorized || !strings.Contains(body, `"provider_unauthorized"`) {
			t.Fatalf("denied: %d %s", st, body)
		}
	}
	for range 20 {
		denied(e.srv.URL)
	}
	for range 5 {
		denied(other)
	}
	if _, n := refreshesOf(e); n-before != 1 {
		t.Fatalf("25 calls answered 401 made %d refreshes, want 1", n-before)
	}
	if c := e.fake.Counts().Denied; c != 26 {
		t.Fatalf("the provider was called %d times, want 26 (one retry, after the one refresh)", c)
	}
	// The refreshed token works (and is what a token read gets).
	tok := tokenOf(t, a, "alice")["access_token"].(string)
	if st, body := a.proxiedAt(other, "files", "alice"); st != http.StatusOK || !e.fake.Valid(tok) {
		t.Fatalf("files: %d %s", st, body)
	}
	e.clock.Advance(vault.RefusedRefreshWindow + time.Second)
	denied(other)
	denied(e.srv.URL)
	if _, n := refreshesOf(e); n-before != 2 {
		t.Fatalf("after the window: %d refreshes in all, want 2", n-before)
	}
}

// TestProxy401CooldownNarrowed: the window holds for a narrowed token too
// (a client approved for less than the connection, at a provider that
// narrows): one scoped refresh for any number of 401s.
func TestProxy401CooldownNarrowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{rotate: true, fakeEntry: narrowing})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read", "write"}})
	u := b.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
	br := e.browser()
	if r := e.allow(br, u, e.openAs(br, u, "alice")); r.status != http.StatusOK {
		t.Fatalf("beta's consent: %d %s", r.status, r.body)
	}
	if st, body := b.proxiedAt(e.srv.URL, "files", "alice"); st != http.StatusOK {
		t.Fatalf("first call: %d %s", st, body)
	}
	scoped, whole := refreshesOf(e)
	for range 10 {
		if st, body := b.proxiedAt(e.srv.URL, "denied", "alice"); st != http.StatusUnauthorized {
			t.Fatalf("denied: %d %s", st, body)
		}
	}
	if s2, w2 := refreshesOf(e); s2-scoped != 1 || w2 != whole {
		t.Fatalf("10 calls answered 401: %d scoped and %d whole refreshes, want 1 and 0", s2-scoped, w2-whole)
	}
}
