package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/flowtest"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/session"
	"github.com/connectd/connectd/internal/testkit"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/internal/webhook"
)

// hostilePath are the values every path parameter is tried with, escaped
// as they go on the wire. The well-formed ids of every kind connectd mints
// are the wrong kind for all routes but one, and unknown for that one.
var hostilePath = []struct{ name, escaped string }{
	{"NUL", "%00"},
	{"NUL inside", "we_%00x"},
	{"invalid UTF-8", "%ff"},
	{"truncated UTF-8", "%c3%28"},
	{"overlong slash", "%c0%af"},
	{"lone surrogate", "%ed%b0%80"},
	{"10 KB", strings.Repeat("a", 10<<10)},
	{"dot-dot slash", "../"},
	{"escaped dot-dot slash", "%2e%2e%2f"},
	{"control", "%01"},
	{"DEL", "%7f"},
	{"C1", "%c2%85"},
	{"right-to-left override", "cn_%e2%80%aeabc"},
	{"SQL", url.PathEscape("'; DROP TABLE connections; --")},
	{"connection id", "cn_" + strings.Repeat("a", 26)},
	{"endpoint id", "we_" + strings.Repeat("b", 26)},
	{"delivery id", "msg_" + strings.Repeat("c", 26)},
	{"client id", "cli_" + strings.Repeat("d", 16)},
	{"admin key id", "akey_" + strings.Repeat("e", 16)},
	{"elicitation id", strings.Repeat("Zz_-", 8)},
	{"provider name", "fake"},
}

// hostileQuery are the values every query parameter is tried with.
var hostileQuery = []struct{ name, escaped string }{
	{"NUL", "%00"},
	{"invalid UTF-8", "%c0%af"},
	{"control", "%01"},
	{"10 KB", strings.Repeat("%ff", 10<<10)},
}

// queryNames are the query parameters connectd's handlers read.
var queryNames = []string{"limit", "after", "before", "user", "issuer", "provider", "status", "client", "window",
	"kind", "scopes", "state", "code", "error", "return_to", "wait", "x"}

// internalRoutes is the operators' listener's table (server.Internal is a
// plain ServeMux that cannot list itself): TestInternalRoutesListed keeps it
// honest about the routes it names, not about routes added since.
var internalRoutes = []string{
	"GET /healthz", "GET /readyz", "GET /metrics", "GET /debug/pprof/", "GET /debug/pprof/cmdline",
	"GET /debug/pprof/profile", "GET /debug/pprof/symbol", "GET /debug/pprof/trace",
}

// hostileEnv is one connectd (server.New over TLS, real Postgres) with the
// credentials that get a request past every guard to its handler: a browser
// signed in as an end user and as an admin (with both CSRF tokens), an admin
// API key, and an MCP server's client key with a user token.
type hostileEnv struct {
	srv, internal *httptest.Server
	// bare serves the public route table's handlers without web.Public's
	// chain (request ids, routing and panic recovery only): the handlers
	// must stand without TextOnly in front of them.
	bare      *httptest.Server
	client    *http.Client // trusts srv's and bare's certificate
	server    *server.Server
	logs      *testkit.LogBuffer
	browser   *flowtest.Browser
	routes    []web.Route
	adminKey  string
	clientKey string
	userToken string
	adminCSRF string
	userCSRF  string
}

func newHostileEnv(t *testing.T) *hostileEnv {
	t.Helper()
	e := &hostileEnv{logs: &testkit.LogBuffer{}}
	e.srv = httptest.NewUnstartedServer(nil)
	t.Cleanup(e.srv.Close)
	base := "https://" + e.srv.Listener.Addr().String()

	idpMux := http.NewServeMux()
	idpSrv := httptest.NewTLSServer(idpMux)
	t.Cleanup(idpSrv.Close)
	const secret = "hostile-test-secret"
	idp, err := devidp.New(devidp.Config{Issuer: idpSrv.URL, Clients: []devidp.Client{{ID: "connectd", Secret: secret,
		RedirectURIs: []string{base + "/login/callback", base + admin.CallbackPath}}}})
	if err != nil {
		t.Fatal(err)
	}
	idpMux.Handle("/", idp.Handler())
	k, err := keyring.GenerateKey(1)
	if err != nil {
		t.Fatal(err)
	}
	keyring, err := keyring.Parse(k)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base)
	logger := web.NewLogger(e.logs, slog.LevelInfo, "json")
	s, err := server.New(context.Background(), server.Config{
		PublicURL: u, Pool: pgtest.Pool(t), Logger: logger,
		Identity: server.IdentityConfig{SessionKeys: []session.Key{session.NewKey()},
			Issuers: []mcpauth.Issuer{{ID: "idp0", URL: idpSrv.URL, Login: true, ClientID: "connectd", ClientSecret: secret}}},
		Vault:      server.VaultConfig{Keyring: keyring},
		Admin:      server.AdminConfig{Issuer: "idp0", Subjects: []string{"alice"}, SessionMaxAge: time.Hour},
		HTTPClient: idpSrv.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	e.server = s
	e.srv.Config.Handler = s.Public()
	e.srv.StartTLS()
	e.internal = httptest.NewServer(s.Internal())
	t.Cleanup(e.internal.Close)
	// Eight probes at a time: keep eight connections, not the default two
	// (a TLS handshake per request under -race is most of the test's time).
	tr := e.srv.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	e.client = &http.Client{Transport: tr}

	lister, ok := s.Public().(interface{ Routes() []web.Route })
	if !ok {
		t.Fatal("server.Public() does not list its routes (web.Public's handler has Routes)")
	}
	e.routes = lister.Routes()
	bare := web.NewMux()
	for _, rt := range e.routes {
		bare.Handle(rt)
	}
	e.bare = httptest.NewTLSServer(web.Chain(bare, web.RequestIDs, web.Routing(bare), web.Recover(logger)))
	t.Cleanup(e.bare.Close)

	ctx := context.Background()
	_, e.adminKey, err = s.AdminKeys().Create(ctx, "hostile", 0, admin.Actor{Name: "cli:test"})
	if err != nil {
		t.Fatal(err)
	}
	const resource = "https://hostile.mcp.example/"
	if _, e.clientKey, err = s.Clients().Create(ctx, "hostile", []string{resource}, nil); err != nil {
		t.Fatal(err)
	}
	if e.userToken, err = idp.AccessToken("alice", resource); err != nil {
		t.Fatal(err)
	}

	e.browser = flowtest.New(e.client)
	e.signIn(t, "/login?issuer=idp0", "/login/callback")
	e.signIn(t, admin.LoginPath, admin.CallbackPath)
	e.adminCSRF = e.csrf(t, "/admin/connections")
	e.userCSRF = e.csrf(t, "/account")
	return e
}

// signIn walks loginPath through the IdP's user picker as alice.
func (e *hostileEnv) signIn(t *testing.T, loginPath, callbackPath string) {
	t.Helper()
	r, err := e.browser.Get(e.srv.URL + loginPath)
	if err != nil || r.Status != http.StatusFound {
		t.Fatalf("%s: %d %v %s", loginPath, r.Status, err, r.Body)
	}
	authorize := r.Location
	if r, err = e.browser.Get(authorize); err != nil || r.Status != http.StatusOK {
		t.Fatalf("picker: %d %v", r.Status, err)
	}
	pu, _ := url.Parse(authorize)
	form := pu.Query()
	form.Set("user", "alice")
	pu.RawQuery = ""
	if r, err = e.browser.Do(http.MethodPost, pu.String(), form); err != nil || r.Status != http.StatusSeeOther ||
		!strings.HasPrefix(r.Location, e.srv.URL+callbackPath+"?") {
		t.Fatalf("picker answer: %d %v %s", r.Status, err, r.Location)
	}
	if r, err = e.browser.Get(r.Location); err != nil || r.Status != http.StatusSeeOther {
		t.Fatalf("%s: %d %v %s", callbackPath, r.Status, err, r.Body)
	}
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

func (e *hostileEnv) csrf(t *testing.T, page string) string {
	t.Helper()
	r, err := e.browser.Get(e.srv.URL + page)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("%s: %d %v", page, r.Status, err)
	}
	m := csrfField.FindStringSubmatch(r.Body)
	if m == nil {
		t.Fatalf("%s: no CSRF token", page)
	}
	return m[1]
}

// probe is one request of the test.
type probe struct {
	route  string // the pattern it exercises
	method string
	target string // path and query, escaped
	html   bool   // Accept: text/html
	authed bool   // the browser's cookies and the route's credentials
	body   string // for authed POSTs: "form", "json" or "{}"
	value  string // the hostile value (for the form and JSON bodies)
}

func (p probe) String() string {
	target := p.target
	if len(target) > 120 {
		target = target[:120] + "…"
	}
	return fmt.Sprintf("%s %s (route %q, html %v, authed %v, body %q)", p.method, target, p.route, p.html, p.authed, p.body)
}

// send makes p's request and returns its status and body.
func (e *hostileEnv) send(t *testing.T, base string, p probe) (int, string) {
	var body io.Reader
	var ctype string
	if p.authed && p.method == http.MethodPost {
		switch csrf := e.userCSRF; p.body {
		case "form":
			if strings.HasPrefix(p.route, "/admin") || strings.Contains(p.route, " /admin") {
				csrf = e.adminCSRF
			}
			body, ctype = strings.NewReader(url.Values{session.CSRFField: {csrf}, "confirm": {p.value}}.Encode()),
				"application/x-www-form-urlencoded"
		case "json":
			b, _ := json.Marshal(map[string]string{"confirm": p.value})
			body, ctype = bytes.NewReader(b), "application/json"
		case "{}":
			body, ctype = strings.NewReader("{}"), "application/json"
		}
	}
	req, err := http.NewRequest(p.method, base+p.target, body)
	if err != nil {
		t.Errorf("%v: %v", p, err)
		return 0, ""
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if p.html {
		req.Header.Set("Accept", "text/html,application/xhtml+xml")
	}
	if p.method != http.MethodGet {
		req.Header.Set("Origin", base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	var resp *http.Response
	if p.authed {
		switch path := req.URL.Path; {
		case strings.HasPrefix(path, "/admin/api/"):
			req.Header.Set("Authorization", "Bearer "+e.adminKey)
		case strings.HasPrefix(path, "/v1/"):
			req.Header.Set("Authorization", "Bearer "+e.clientKey)
			req.Header.Set(mcpauth.UserTokenHeader, e.userToken)
		}
		resp, err = e.browser.Send(req) // the cookies; what the answer sets is not kept
	} else {
		resp, err = e.client.Do(req)
	}
	if err != nil {
		t.Errorf("%v: %v", p, err)
		return 0, ""
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// wildcard is a ServeMux wildcard: {name}, {name...} or {$}.
var wildcard = regexp.MustCompile(`\{[^}]*\}`)

// splitPattern returns a pattern's methods (GET, POST and DELETE when it
// names none) and its path.
func splitPattern(pattern string) ([]string, string) {
	if m, path, ok := strings.Cut(pattern, " "); ok {
		return []string{m}, path
	}
	return []string{http.MethodGet, http.MethodPost, http.MethodDelete}, pattern
}

// fill substitutes v for every parameter of path; a path ending in "/"
// matches everything under it, so v is appended there too. ok is false for
// a path without parameters.
func fill(path, v string) (string, bool) {
	params := false
	out := wildcard.ReplaceAllStringFunc(path, func(w string) string {
		if w == "{$}" {
			return ""
		}
		params = true
		return v
	})
	if !strings.HasSuffix(path, "{$}") && strings.HasSuffix(out, "/") {
		out, params = out+v, true
	}
	return out, params
}

// probes lists the requests for one route: every hostile value in every
// parameter, for every method, with and without Accept: text/html,
// anonymously and with credentials; and every hostile query value in every
// query parameter, with credentials for GET (with and without Accept:
// text/html on pages: an API route always answers JSON) and anonymously for
// the other methods, so that no probe signs anyone out or ends sessions.
func probes(pattern string, api bool) []probe {
	var out []probe
	methods, path := splitPattern(pattern)
	for _, m := range methods {
		if _, params := fill(path, "x"); params {
			for _, v := range hostilePath {
				target, _ := fill(path, v.escaped)
				raw, _ := url.PathUnescape(v.escaped)
				for _, html := range []bool{false, true} {
					out = append(out, probe{route: pattern, method: m, target: target, html: html})
					bodies := []string{""}
					switch {
					case m == http.MethodPost && api:
						bodies = []string{"json", "{}"}
					case m == http.MethodPost:
						bodies = []string{"form"}
					}
					for _, b := range bodies {
						out = append(out, probe{route: pattern, method: m, target: target, html: html, authed: true, body: b, value: raw})
					}
				}
			}
		}
		target, _ := fill(path, "x")
		for _, name := range queryNames {
			for _, v := range hostileQuery {
				q := target + "?" + name + "=" + v.escaped
				if m != http.MethodGet {
					out = append(out, probe{route: pattern, method: m, target: q})
					continue
				}
				out = append(out, probe{route: pattern, method: m, target: q, authed: true})
				if !api {
					out = append(out, probe{route: pattern, method: m, target: q, authed: true, html: true})
				}
			}
		}
	}
	return out
}

// panicText is what a leaked panic or stack would show.
var panicText = regexp.MustCompile(`goroutine \d+ \[|runtime/debug\.Stack|panic\(|\.go:\d+ \+0x`)

// run sends every probe, eight at a time, and fails each answer of 500 or
// more or that shows a stack; it returns the routes probed.
func (e *hostileEnv) run(t *testing.T, base string, ps []probe) map[string]bool {
	t.Helper()
	covered := map[string]bool{}
	var mu sync.Mutex
	statuses := map[int]int{}
	work := make(chan probe)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				st, body := e.send(t, base, p)
				if st == 0 {
					continue
				}
				mu.Lock()
				covered[p.route] = true
				statuses[st]++
				mu.Unlock()
				if st >= 500 {
					t.Errorf("%v: %d %.300s", p, st, body)
				}
				if panicText.MatchString(body) {
					t.Errorf("%v: %d, the body shows a stack: %.300s", p, st, body)
				}
			}
		}()
	}
	for _, p := range ps {
		work <- p
	}
	close(work)
	wg.Wait()
	t.Logf("%d requests, statuses %v", len(ps), statuses)
	return covered
}

// TestHostileInput: every path parameter of every route of both listeners,
// and every query parameter of the GET routes, take hostile values — NUL,
// invalid or overlong UTF-8, control characters, 10 KB, path traversal, a
// right-to-left override, SQL, ids of the wrong kind — and the answer is
// never a 500 nor a stack, for every method, page or JSON, anonymous or
// with the credentials that reach the handler. A path or query that is not
// text is refused by web.TextOnly with 400 invalid_request before anything
// else; ids of a known shape are checked by their handler, which answers an
// impossible id as it answers an unknown one. The public route table is
// probed twice: behind web.Public, and its very handlers without TextOnly
// in front, so that no handler leans on the guard alone.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	e := newHostileEnv(t)

	var ps []probe
	for _, rt := range e.routes {
		ps = append(ps, probes(rt.Pattern, rt.Kind == web.KindAPI)...)
	}
	for _, l := range []struct{ name, url string }{{"public listener", e.srv.URL}, {"without TextOnly", e.bare.URL}} {
		covered := e.run(t, l.url, ps)
		t.Logf("%s: %d of %d routes probed", l.name, len(covered), len(e.routes))
		for _, rt := range e.routes {
			if !covered[rt.Pattern] {
				t.Errorf("%s: route %q was not probed", l.name, rt.Pattern)
			}
		}
	}

	// The operators' listener. Profiles and traces run for as long as
	// asked (seconds=), so they get a NUL alone, which TextOnly refuses.
	ps = nil
	for _, pattern := range internalRoutes {
		if strings.HasSuffix(pattern, "/profile") || strings.HasSuffix(pattern, "/trace") {
			ps = append(ps, probe{route: pattern, method: http.MethodGet, target: pattern[len("GET "):] + "?seconds=%00"})
			continue
		}
		for _, p := range probes(pattern, false) {
			p.authed = false // nothing to sign in to; the cookies would go to another origin
			ps = append(ps, p)
		}
	}
	covered := e.run(t, e.internal.URL, ps)
	t.Logf("internal listener: %d of %d routes probed", len(covered), len(internalRoutes))
	if len(covered) < len(internalRoutes) {
		t.Errorf("internal listener: %d of %d routes probed", len(covered), len(internalRoutes))
	}

	for _, line := range strings.Split(e.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && (m["msg"] == "panic" || m["msg"] == "request failed") {
			t.Errorf("logged: %.400s", line)
		}
	}
}

// TestTextRefusals: a path or query that is not text is refused by
// web.TextOnly on both listeners, with 400 invalid_request, as the JSON
// envelope on API routes and the error page for a browser on a page, with
// the security headers; printable Unicode passes it.
func TestTextRefusals(t *testing.T) {
	t.Parallel()
	e := newHostileEnv(t)
	for _, tc := range []struct {
		name, base, target string
		html               bool
		status             int
		page               bool
	}{
		{"API path", e.srv.URL, "/admin/api/webhooks/%00", false, http.StatusBadRequest, false},
		{"API path, browser", e.srv.URL, "/v1/elicitations/%ff", true, http.StatusBadRequest, false},
		{"API query", e.srv.URL, "/admin/api/events?kind=%c0%af", false, http.StatusBadRequest, false},
		{"page path", e.srv.URL, "/admin/deliveries/%01", true, http.StatusBadRequest, true},
		{"page query key", e.srv.URL, "/c/x?%00=1", true, http.StatusBadRequest, true},
		{"page path, JSON client", e.srv.URL, "/c/%7f", false, http.StatusBadRequest, false},
		{"unrouted", e.srv.URL, "/nowhere/%c2%85", true, http.StatusBadRequest, true},
		{"right-to-left override", e.srv.URL, "/admin/api/deliveries/%e2%80%ae", false, http.StatusNotFound, false},
		{"internal path", e.internal.URL, "/debug/pprof/%00", false, http.StatusBadRequest, false},
		{"internal query", e.internal.URL, "/metrics?x=%ff", false, http.StatusBadRequest, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := probe{method: http.MethodGet, target: tc.target, html: tc.html, authed: true}
			req, _ := http.NewRequest(p.method, tc.base+p.target, nil)
			if tc.html {
				req.Header.Set("Accept", "text/html")
			}
			req.Header.Set("Authorization", "Bearer "+e.adminKey)
			resp, err := e.browser.Send(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("%s: %d %s, want %d", tc.target, resp.StatusCode, raw, tc.status)
			}
			if resp.Header.Get(web.RequestIDHeader) == "" {
				t.Errorf("%s: no request id", tc.target)
			}
			if tc.base == e.srv.URL && resp.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("%s: no security headers: %v", tc.target, resp.Header)
			}
			if tc.status != http.StatusBadRequest {
				return
			}
			isPage := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html")
			if isPage != tc.page {
				t.Fatalf("%s: Content-Type %q, want a page: %v", tc.target, resp.Header.Get("Content-Type"), tc.page)
			}
			if tc.page {
				if !strings.Contains(string(raw), "not valid UTF-8 text") {
					t.Errorf("%s: page %s", tc.target, raw)
				}
				return
			}
			var env web.Envelope
			if err := json.Unmarshal(raw, &env); err != nil || env.Error != "invalid_request" ||
				env.Description != "the request path or query is not valid UTF-8 text" {
				t.Errorf("%s: %s", tc.target, raw)
			}
		})
	}
}

// TestImpossibleIDs: the admin handlers answer an id that is not the shape
// of one (NUL, invalid UTF-8, 10 KB, an id of another kind) with 404
// not_found, as an unknown id, and never ask Postgres, which would fail on
// NUL and invalid UTF-8: without TextOnly in front, and through the Store
// the CLI calls too.
func TestImpossibleIDs(t *testing.T) {
	t.Parallel()
	e := newHostileEnv(t)
	n := 0
	for _, rt := range e.routes {
		methods, path := splitPattern(rt.Pattern)
		if !strings.HasPrefix(path, "/admin/") || !strings.Contains(path, "{id}") ||
			(methods[0] != http.MethodGet && methods[0] != http.MethodDelete) {
			continue
		}
		n++
		for _, v := range []string{"%00", "we_%00", "%ff", "msg_%c3%28", "cli_%ed%b0%80", strings.Repeat("a", 10<<10),
			"cn_" + strings.Repeat("a", 26), "we_" + strings.Repeat("b", 26), "msg_" + strings.Repeat("c", 26), "cli_x"} {
			target, _ := fill(path, v)
			p := probe{route: rt.Pattern, method: methods[0], target: target, authed: true, html: rt.Kind == web.KindPage}
			st, body := e.send(t, e.bare.URL, p)
			if st != http.StatusNotFound {
				t.Errorf("%v: %d %.300s, want 404", p, st, body)
				continue
			}
			var env web.Envelope
			if rt.Kind == web.KindAPI && (json.Unmarshal([]byte(body), &env) != nil || env.Error != "not_found") {
				t.Errorf("%v: %.300s, want not_found", p, body)
			}
		}
	}
	t.Logf("%d admin id routes", n)
	if n < 10 {
		t.Errorf("%d admin GET and DELETE routes with an {id}, want at least 10", n)
	}

	ctx, by := context.Background(), admin.Actor{Name: "cli:test"}
	for _, id := range []string{"we_\x00", "\xff", "we_\xc0\xaf"} {
		if _, err := e.server.AdminStore().DeleteWebhook(ctx, id, by); !errors.Is(err, webhook.ErrNotFound) {
			t.Errorf("DeleteWebhook(%q): %v, want webhook.ErrNotFound", id, err)
		}
		if _, err := e.server.AdminStore().Redeliver(ctx, "msg_"+id, by); !errors.Is(err, webhook.ErrNotFound) {
			t.Errorf("Redeliver(%q): %v, want webhook.ErrNotFound", "msg_"+id, err)
		}
	}
}

// TestInternalRoutesListed: every route internalRoutes names is served by
// server.Internal (a renamed or removed route would leave the hostile test
// probing a 404).
func TestInternalRoutesListed(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	u, _ := url.Parse("http://localhost:8080")
	s, err := server.New(context.Background(), server.Config{Dev: true, PublicURL: u, Pool: pool,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for _, pattern := range internalRoutes {
		_, path := splitPattern(pattern)
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if slices.Contains([]string{"/debug/pprof/profile", "/debug/pprof/trace"}, path) {
			// They profile or trace until the request ends: at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			req = req.WithContext(ctx)
		}
		rec := httptest.NewRecorder()
		s.Internal().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("%s: %d %.200s", pattern, rec.Code, rec.Body)
		}
	}
}
