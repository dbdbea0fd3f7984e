package web_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/connectd/connectd/internal/web"
)

// classified registers h under the route classes the packages of connectd
// register their routes with: the /v1 API, the sign-in routes, the probes,
// and pages for everything else.
func classified(h http.Handler) []web.Route {
	return []web.Route{
		{Pattern: "/v1/", Kind: web.KindAPI, Class: web.ClassAPI, Handler: h},
		{Pattern: "/login", Kind: web.KindPage, Class: web.ClassLogin, Handler: h},
		{Pattern: "/login/", Kind: web.KindPage, Class: web.ClassLogin, Handler: h},
		{Pattern: "/dev/idp/", Kind: web.KindPage, Class: web.ClassLogin, Handler: h},
		web.AssetRoute("GET /healthz", h),
		web.AssetRoute("GET /readyz", h),
		{Pattern: "/", Kind: web.KindPage, Class: web.ClassBrowser, Handler: h},
	}
}

// publicServer serves routes, and a static asset, behind the whole public
// chain.
func publicServer(t *testing.T, limits web.RateLimits, routes ...web.Route) *httptest.Server {
	t.Helper()
	mux := web.NewMux()
	for _, rt := range routes {
		mux.Handle(rt)
	}
	mux.Handle(web.AssetRoute("GET /static/", http.StripPrefix("/static/",
		web.Static(fstest.MapFS{"style.css": {Data: []byte("body{}")}}))))
	ph, err := web.Public(mux, web.PublicConfig{Logger: slog.New(slog.DiscardHandler), HSTS: true,
		TrustedOrigins: []string{"https://connect.example.com"}, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ph)
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	status int
	header http.Header
	body   string
}

// testClient is the tests' own: http.DefaultTransport's idle connections
// are closed by every httptest.Server that closes, which breaks a request
// of a parallel test on one of them.
var testClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

func send(t *testing.T, method, u string, hdr map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// code returns the "error" of a JSON envelope, or "".
func (a answer) code() string {
	var env web.Envelope
	_ = json.Unmarshal([]byte(a.body), &env)
	return env.Error
}

// TestHeadersOnEveryResponse: pages, API answers, 404s, refusals by the
// middleware and panics all carry the security headers (JSON APIs the REST
// set, without the two only documents use); none carries CORS.
func TestHeadersOnEveryResponse(t *testing.T) {
	t.Parallel()
	discard := slog.New(slog.DiscardHandler)
	page := func(pattern string, h http.HandlerFunc) web.Route {
		return web.Route{Pattern: pattern, Kind: web.KindPage, Class: web.ClassBrowser, Handler: h}
	}
	notFound := func(w http.ResponseWriter, r *http.Request) error {
		return web.Errorf(http.StatusNotFound, "not_found", "no such API endpoint")
	}
	srv := publicServer(t, web.RateLimits{Browser: web.Rate{Requests: 6, Window: time.Minute}},
		page("GET /page", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<p>hi</p>") }),
		page("GET /boom", func(w http.ResponseWriter, r *http.Request) { panic("x") }),
		page("POST /form", func(w http.ResponseWriter, r *http.Request) {}),
		web.APIRoute("GET /v1/thing", web.ClassAPI, discard, func(w http.ResponseWriter, r *http.Request) error {
			return web.Errorf(http.StatusBadRequest, "invalid_request", "x")
		}),
		web.APIRoute("/v1/", web.ClassAPI, discard, notFound),
		web.APIRoute("/admin/api/", web.ClassBrowser, discard, notFound),
		web.Route{Pattern: "/", Kind: web.KindPage, Class: web.ClassBrowser, Handler: web.Fallback(discard)})
	html := map[string]string{"Accept": "text/html", "Origin": "https://evil.example"}
	cases := []struct {
		name, method, path string
		hdr                map[string]string
		status             int
		api                bool // registered as an API: the REST header set
	}{
		{"page", "GET", "/page", html, 200, false},
		{"api error", "GET", "/v1/thing", html, 400, true},
		{"unrouted page", "GET", "/nope", html, 404, false},
		{"unrouted api", "GET", "/v1/nope", nil, 404, true},
		{"admin api", "GET", "/admin/api/nope", nil, 404, true},
		// Decodes to an API path, routes to a page: the route, not the path,
		// says what it is — a whole page's headers.
		{"page on an escaped api path", "GET", "/admin/api%2Fnope", html, 404, false},
		{"panic", "GET", "/boom", html, 500, false},
		{"cross-origin post", "POST", "/form", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, false},
		{"preflight", "OPTIONS", "/form", map[string]string{"Origin": "https://evil.example",
			"Access-Control-Request-Method": "POST"}, 404, false},
		{"rate limited", "GET", "/page", html, 429, false},
	}
	for _, c := range cases {
		if c.status == 429 {
			for range 6 {
				send(t, "GET", srv.URL+"/page", nil)
			}
		}
		a := send(t, c.method, srv.URL+c.path, c.hdr)
		if a.status != c.status {
			t.Errorf("%s: status %d, want %d", c.name, a.status, c.status)
		}
		want := map[string]string{
			"Content-Security-Policy":    web.ContentSecurityPolicy,
			"X-Frame-Options":            "DENY",
			"X-Content-Type-Options":     "nosniff",
			"Referrer-Policy":            "no-referrer",
			"Cross-Origin-Opener-Policy": "same-origin",
			"Cache-Control":              "no-store",
			"Strict-Transport-Security":  web.StrictTransportSecurity,
		}
		if c.api {
			want["Referrer-Policy"], want["Cross-Origin-Opener-Policy"] = "", ""
		}
		for k, v := range want {
			if got := a.header.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", c.name, k, got, v)
			}
		}
		for k := range a.header {
			if strings.HasPrefix(strings.ToLower(k), "access-control-") {
				t.Errorf("%s: CORS header %s on a response", c.name, k)
			}
		}
	}
	for _, d := range []string{"default-src 'self'", "script-src 'self'", "object-src 'none'", "base-uri 'none'",
		"frame-ancestors 'none'", "form-action 'self'"} {
		if !slices.Contains(strings.Split(web.ContentSecurityPolicy, "; "), d) {
			t.Errorf("CSP %q lacks %q", web.ContentSecurityPolicy, d)
		}
	}
	if strings.Contains(web.ContentSecurityPolicy, "unsafe-") || strings.Contains(web.ContentSecurityPolicy, "*") {
		t.Fatalf("CSP %q", web.ContentSecurityPolicy)
	}
	// Static assets may be cached; they carry no state.
	if a := send(t, "GET", srv.URL+"/static/style.css", nil); a.status != 200 ||
		a.header.Get("Cache-Control") != "public, max-age=3600" || a.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("static: %d %v", a.status, a.header)
	}
	if a := send(t, "GET", srv.URL+"/static/", nil); a.status != 404 || strings.Contains(a.body, "style.css") {
		t.Fatalf("static directory listed: %d %s", a.status, a.body)
	}
}

func TestAllowFormAction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		urls []string
		want string // appended to the base policy; "" = unchanged
	}{
		{"provider origin", []string{"https://github.com/login/oauth/authorize?client_id=x&state=y"}, " https://github.com"},
		{"port kept", []string{"https://127.0.0.1:8443/authorize"}, " https://127.0.0.1:8443"},
		{"ipv6", []string{"https://[::1]:9/a"}, " https://[::1]:9"},
		{"host lower-cased", []string{"https://GitHub.com/x"}, " https://github.com"},
		{"directive injection", []string{"https://a.example;script-src *"}, ""},
		{"space injection", []string{"https://a.example%20'unsafe-inline'/x"}, ""},
		{"javascript", []string{"javascript:alert(1)"}, ""},
		{"data", []string{"data:text/html,x"}, ""},
		{"relative", []string{"/c/x"}, ""},
		{"userinfo", []string{"https://u:p@a.example/"}, ""},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set("Content-Security-Policy", web.ContentSecurityPolicy)
		web.AllowFormAction(h, tt.urls...)
		if got := h.Get("Content-Security-Policy"); got != web.ContentSecurityPolicy+tt.want {
			t.Errorf("%s: %q", tt.name, got)
		}
	}
}

// TestCrossOriginProtection: a state-changing request another site's page
// caused is refused before the handler runs, as a page or JSON; non-browser
// callers and same-origin forms pass.
func TestCrossOriginProtection(t *testing.T) {
	t.Parallel()
	var reached int
	srv := publicServer(t, web.RateLimits{}, classified(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }))...)
	tests := []struct {
		name   string
		method string
		hdr    map[string]string
		ok     bool
		code   string // of the JSON refusal, or "" for a page
	}{
		{"same-origin form", "POST", map[string]string{"Sec-Fetch-Site": "same-origin"}, true, ""},
		{"typed into the address bar", "POST", map[string]string{"Sec-Fetch-Site": "none"}, true, ""},
		{"cross-site form", "POST", map[string]string{"Sec-Fetch-Site": "cross-site", "Accept": "text/html"}, false, ""},
		{"same-site sibling origin", "POST", map[string]string{"Sec-Fetch-Site": "same-site", "Accept": "text/html"}, false, ""},
		{"cross-site fetch", "DELETE", map[string]string{"Sec-Fetch-Site": "cross-site"}, false, "cross_origin_request"},
		{"old browser, foreign Origin", "POST", map[string]string{"Origin": "https://evil.example"}, false, "cross_origin_request"},
		{"old browser, own Origin", "POST", map[string]string{"Origin": strings.Replace(srv.URL, "http://", "https://", 1)}, true, ""},
		{"trusted public origin behind a proxy", "POST", map[string]string{"Origin": "https://connect.example.com"}, true, ""},
		{"MCP server, no browser headers", "POST", nil, true, ""},
		{"cross-site GET is safe", "GET", map[string]string{"Sec-Fetch-Site": "cross-site"}, true, ""},
	}
	for _, tt := range tests {
		before := reached
		a := send(t, tt.method, srv.URL+"/x", tt.hdr)
		if tt.ok != (a.status == 200) || tt.ok != (reached == before+1) {
			t.Errorf("%s: status %d, handler reached %v", tt.name, a.status, reached > before)
			continue
		}
		if !tt.ok {
			if a.status != http.StatusForbidden {
				t.Errorf("%s: status %d", tt.name, a.status)
			}
			if tt.code != "" && a.code() != tt.code {
				t.Errorf("%s: body %s", tt.name, a.body)
			}
			if tt.code == "" && !strings.Contains(a.body, "came from another site") {
				t.Errorf("%s: not the error page: %s", tt.name, a.body)
			}
		}
	}
}

// TestRateLimits: each route class has its own budget and key; a spent
// budget answers 429 with Retry-After and the JSON envelope or the page.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	limits := web.RateLimits{
		API:            web.Rate{Requests: 3, Window: time.Minute},
		APIPerIP:       web.Rate{Requests: 6, Window: time.Minute},
		Browser:        web.Rate{Requests: 2, Window: time.Minute},
		Login:          web.Rate{Requests: 1, Window: time.Minute},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}
	srv := publicServer(t, limits, classified(ok)...)
	get := func(path string, hdr map[string]string) answer { return send(t, "GET", srv.URL+path, hdr) }
	as := func(ip string, more map[string]string) map[string]string {
		h := map[string]string{"X-Forwarded-For": ip, "Accept": "text/html"}
		for k, v := range more {
			h[k] = v
		}
		return h
	}

	t.Run("browser per IP", func(t *testing.T) {
		for range 2 {
			if a := get("/c/x", as("198.51.100.1", nil)); a.status != 200 {
				t.Fatalf("within budget: %d", a.status)
			}
		}
		a := get("/c/x", as("198.51.100.1", nil))
		if a.status != 429 || a.header.Get("Retry-After") != "60" || !strings.Contains(a.body, "Too many requests") {
			t.Fatalf("over budget: %d %v %s", a.status, a.header, a.body)
		}
		if a := get("/oauth/callback", as("198.51.100.2", nil)); a.status != 200 {
			t.Fatalf("another IP shares the budget: %d", a.status)
		}
		// The login class has its own budget.
		if a := get("/login", as("198.51.100.1", nil)); a.status != 200 {
			t.Fatalf("login shares the browser budget: %d", a.status)
		}
		if a := get("/login/callback", as("198.51.100.1", nil)); a.status != 429 {
			t.Fatalf("login over budget: %d", a.status)
		}
		// Probes and assets are never limited.
		for range 5 {
			if a := get("/healthz", as("198.51.100.1", nil)); a.status != 200 {
				t.Fatalf("probe limited: %d", a.status)
			}
		}
	})
	t.Run("IPv6 clients by /64", func(t *testing.T) {
		get("/session", as("2001:db8:1:2::1", nil))
		get("/session", as("2001:db8:1:2::2", nil))
		if a := get("/session", as("2001:db8:1:2:ffff::9", nil)); a.status != 429 {
			t.Fatalf("a new address in the same /64 got a fresh budget: %d", a.status)
		}
	})
	t.Run("API per client key", func(t *testing.T) {
		key := func(k string) map[string]string {
			return map[string]string{"X-Forwarded-For": "203.0.113.1", "Authorization": "Bearer " + k}
		}
		for range 3 {
			get("/v1/elicitations/x", key("cks_a"))
		}
		a := get("/v1/elicitations/x", key("cks_a"))
		if a.status != 429 || a.code() != "rate_limited" || a.header.Get("Retry-After") == "" {
			t.Fatalf("over budget: %d %s", a.status, a.body)
		}
		if a := get("/v1/elicitations/x", key("cks_b")); a.status != 200 {
			t.Fatalf("another key shares the budget: %d", a.status)
		}
		// Spraying made-up keys from one address hits the per-IP ceiling.
		var last answer
		for i := range 6 {
			last = get("/v1/x", key("cks_spray"+string(rune('a'+i))))
		}
		if last.status != 429 || last.code() != "rate_limited" {
			t.Fatalf("key spraying not bounded: %d %s", last.status, last.body)
		}
	})
	t.Run("forwarded-for believed only from trusted proxies", func(t *testing.T) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.7:1234"
		r.Header.Set("X-Forwarded-For", "198.51.100.9")
		if ip := web.ClientIP(r, limits.TrustedProxies); ip != "192.0.2.7" {
			t.Fatalf("untrusted peer's X-Forwarded-For believed: %s", ip)
		}
	})
}

func TestClientIP(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name, remote, xff, want string
	}{
		{"direct", "203.0.113.5:443", "", "203.0.113.5"},
		{"direct ignores xff", "203.0.113.5:443", "1.2.3.4", "203.0.113.5"},
		{"behind proxy", "10.0.0.2:80", "198.51.100.7", "198.51.100.7"},
		{"spoofed left entry ignored", "10.0.0.2:80", "1.1.1.1, 198.51.100.7", "198.51.100.7"},
		{"two proxies", "10.0.0.2:80", "198.51.100.7, 10.0.0.9", "198.51.100.7"},
		{"garbage hop stops", "10.0.0.2:80", "198.51.100.7, nonsense", "10.0.0.2"},
		{"mapped v4", "[::ffff:203.0.113.5]:443", "", "203.0.113.5"},
		{"v6 by /64", "[2001:db8::1234]:443", "", "2001:db8::"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		if tt.xff != "" {
			r.Header.Set("X-Forwarded-For", tt.xff)
		}
		if got := web.ClientIP(r, trusted); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	good := map[string]web.Rate{
		"120/1m": {Requests: 120, Window: time.Minute},
		" 5/30s": {Requests: 5, Window: 30 * time.Second},
		"off":    {},
		"OFF":    {},
	}
	for in, want := range good {
		got, err := web.ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "120", "0/1m", "-1/1m", "x/1m", "1/0s", "1/500ms", "1/48h", "1/x", "2000000/1m"} {
		if _, err := web.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) accepted", in)
		}
	}
}

// TestAllowImages: img-src is created from 'self' and widened by exact
// origins only (deduplicated, never a path, wildcard or another directive),
// and a form-action widened on the same response keeps both.
func TestAllowImages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		urls []string
		want string // the img-src directive; "" = the policy unchanged
	}{
		{"one logo", []string{"https://cdn.acme.example/logo.svg"}, "img-src 'self' https://cdn.acme.example"},
		{"several, deduplicated", []string{"https://a.example/x.png", "https://b.example:8443/y", "https://A.example/z"},
			"img-src 'self' https://a.example https://b.example:8443"},
		{"same-origin asset", []string{"/static/providers/github.svg"}, ""},
		{"empty", []string{""}, ""},
		{"directive injection", []string{"https://a.example;script-src *"}, ""},
		{"data", []string{"data:image/svg+xml,<svg/>"}, ""},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set("Content-Security-Policy", web.ContentSecurityPolicy)
		web.AllowImages(h, tt.urls...)
		got := h.Get("Content-Security-Policy")
		if tt.want == "" {
			if got != web.ContentSecurityPolicy {
				t.Errorf("%s: %q", tt.name, got)
			}
			continue
		}
		if got != web.ContentSecurityPolicy+"; "+tt.want {
			t.Errorf("%s: %q", tt.name, got)
		}
	}
	h := http.Header{}
	web.AllowImages(h, "https://cdn.acme.example/logo.svg") // no policy yet: the base one
	web.AllowImages(h, "https://cdn.acme.example/other.svg", "https://files.example/l.png")
	web.AllowFormAction(h, "https://github.com/login/oauth/authorize")
	want := strings.Replace(web.ContentSecurityPolicy, "form-action 'self'", "form-action 'self' https://github.com", 1) +
		"; img-src 'self' https://cdn.acme.example https://files.example"
	if got := h.Get("Content-Security-Policy"); got != want {
		t.Errorf("combined:\n got %q\nwant %q", got, want)
	}
}
