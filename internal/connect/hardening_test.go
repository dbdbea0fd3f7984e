package connect_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/web"
)

// TestConsentFormActionNamesOnlyTheProvider: the consent page's CSP lets its
// form be answered by a redirect to the provider's authorize origin (Chromium
// checks form-action on that redirect) and to nowhere else; every other page
// keeps form-action 'self'.
func TestConsentFormActionNamesOnlyTheProvider(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake", "keyed")
	b := e.browser()
	u := m.mint("alice", map[string]any{"provider": "fake"})["url"].(string)
	consent := e.openAs(b, u, "alice")
	fakeOrigin := strings.TrimSuffix(e.fake.URL(), "/")
	if got := consent.header.Get("Content-Security-Policy"); got != web.ContentSecurityPolicy+" "+fakeOrigin {
		t.Fatalf("consent CSP %q", got)
	}
	for _, page := range []string{e.srv.URL + "/session", m.mint("alice", map[string]any{"provider": "keyed"})["url"].(string)} {
		if got := b.get(page).header.Get("Content-Security-Policy"); got != web.ContentSecurityPolicy {
			t.Fatalf("%s: CSP %q", page, got)
		}
	}
	// The redirect Allow answers with goes exactly to that origin.
	redirect := e.allow(b, u, consent)
	if !strings.HasPrefix(redirect.location, fakeOrigin+"/") {
		t.Fatalf("allow redirects to %s", redirect.location)
	}
}

// TestCrossOriginConsentRefused: a consent form posted from another origin
// (a page of the attacker's, even one that somehow has the victim's CSRF
// token) is refused by cross-origin protection before any handler runs.
func TestCrossOriginConsentRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	b := e.browser()
	u := m.mint("alice", map[string]any{"provider": "fake"})["url"].(string)
	consent := e.openAs(b, u, "alice")
	for _, site := range []string{"cross-site", "same-site"} {
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(url.Values{
			"csrf_token": {csrfOf(t, consent.body)}, "decision": {"allow"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", site)
		req.Header.Set("Accept", "text/html")
		resp, err := b.Send(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
			t.Fatalf("%s form post: %d %s", site, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if e.count("consents") != 0 || e.count("oauth_states") != 0 {
		t.Fatal("a cross-origin form post had an effect")
	}
	// The same form from connectd's own page still works.
	if r := e.allow(b, u, consent); r.status != http.StatusSeeOther {
		t.Fatalf("same-origin allow: %d", r.status)
	}
}

// TestRedirectParamsCheckedBeforeUse: a callback whose state is malformed, or
// whose state, code or iss is repeated, is refused without consuming the
// state (nothing reached the database), so the genuine callback still works.
func TestRedirectParamsCheckedBeforeUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	u := m.mint("alice", map[string]any{"provider": "fake"})["url"].(string)
	b := e.browser()
	cb := e.authorize(e.allow(b, u, e.openAs(b, u, "alice")))
	cu, _ := url.Parse(cb)
	q := cu.Query()
	for name, mod := range map[string]func(url.Values){
		"state repeated": func(v url.Values) { v.Add("state", v.Get("state")) },
		"code repeated":  func(v url.Values) { v.Add("code", "other") },
		"code with a space": func(v url.Values) {
			v.Set("code", v.Get("code")+" x")
		},
		"state too long": func(v url.Values) { v.Set("state", v.Get("state")+"A") },
		"state with a newline": func(v url.Values) {
			v.Set("state", v.Get("state")[:42]+"\n")
		},
	} {
		v := url.Values{}
		for k, vs := range q {
			v[k] = append([]string(nil), vs...)
		}
		mod(v)
		bad := *cu
		bad.RawQuery = v.Encode()
		code := "invalid_state"
		if strings.ContainsAny(v.Get("state"), "\n") {
			code = "invalid_request" // a control character: refused before routing (web.TextOnly)
		}
		e.refused(b.get(bad.String()), http.StatusBadRequest, code)
		if e.count("oauth_states") != 1 {
			t.Fatalf("%s: the state was consumed", name)
		}
	}
	if r := b.get(cb); r.status != http.StatusOK || !strings.Contains(r.body, "Connected") {
		t.Fatalf("genuine callback after the refusals: %d %s", r.status, r.body)
	}
	// The login callback applies the same rules.
	lb := e.browser()
	lcb, _ := url.Parse(e.pick(lb, e.startLogin(lb, "issuer=idp0"), "alice"))
	lq := lcb.Query()
	lq.Add("state", lq.Get("state"))
	lcb.RawQuery = lq.Encode()
	e.refused(lb.get(lcb.String()), http.StatusBadRequest, "invalid_state")
}

// TestRateLimitsInTheFlow: browser pages are limited per client IP with the
// error page, minting per user with the JSON envelope; both say when to
// retry, and a refused mint stores nothing.
func TestRateLimitsInTheFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{limits: web.RateLimits{Browser: web.Rate{Requests: 3, Window: time.Minute}},
		mintLimit: web.Rate{Requests: 2, Window: time.Minute}})
	m := e.newMCPServer("files", "fake")
	// Distinct requests (digests), so each would mint a link of its own.
	m.mint("alice", map[string]any{"provider": "fake", "request_digest": "r1"})
	m.mint("alice", map[string]any{"provider": "fake", "request_digest": "r2"})
	st, out := m.call(http.MethodPost, "/v1/elicitations", "alice", map[string]any{"provider": "fake", "request_digest": "r3"})
	expectError(t, st, out, http.StatusTooManyRequests, "rate_limited")
	if e.count("elicitations") != 2 {
		t.Fatal("a rate-limited mint stored an elicitation")
	}
	// Per user: bob, through the same MCP server, is not affected.
	m.mint("bob", map[string]any{"provider": "fake"})

	b := e.browser()
	for range 3 {
		if r := b.get(e.srv.URL + "/session"); r.status != http.StatusOK {
			t.Fatalf("within budget: %d", r.status)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/session", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := b.Send(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("over budget: %d %v", resp.StatusCode, resp.Header)
	}
	// The /v1 API is a separate class: still answered.
	if st, _ := m.call(http.MethodGet, "/v1/connections", "alice", nil); st != http.StatusOK {
		t.Fatalf("API limited by the browser budget: %d", st)
	}
}

// TestMalformedHandlesRefusedBeforeLookup: ids and names in paths are checked
// against their formats and answered with their documented 4xx codes.
func TestMalformedHandlesRefusedBeforeLookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	id := strings.Repeat("A", 31)
	for _, tt := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/v1/elicitations/" + id + "%0A", 400, "invalid_request"}, // a control character: web.TextOnly
		{"GET", "/v1/elicitations/" + id + "=", 404, "not_found"},
		{"GET", "/v1/elicitations/" + strings.Repeat("A", 32) + "?wait=forever", 400, "invalid_request"},
		{"GET", "/v1/connections/..%2Fetc/token", 404, "not_connected"},
		{"GET", "/v1/connections/fake/token?scopes=a%20b,%22", 400, "invalid_scope"},
		{"DELETE", "/v1/connections/FAKE", 404, "not_connected"},
		{"PUT", "/v1/elicitations", 404, "not_found"},
	} {
		st, out := m.call(tt.method, tt.path, "alice", nil)
		expectError(t, st, out, tt.status, tt.code)
	}
	b := e.browser()
	e.refused(b.get(e.srv.URL+"/c/"+id+"%0A"), http.StatusBadRequest, "invalid_request")
	e.refused(b.get(e.srv.URL+"/c/"+id+"="), http.StatusNotFound, "unknown_link")
	e.refused(b.get(e.srv.URL+"/c/"+strings.Repeat("A", 200)), http.StatusNotFound, "unknown_link")
	// A body that is not JSON, or JSON with a mis-cased or repeated member.
	for body, status := range map[string]int{
		`{"provider":"fake","Provider":"keyed"}`: 400,
		`{"PROVIDER":"fake"}`:                    400,
		`{"provider":"fake","provider":"keyed"}`: 400,
	} {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/elicitations", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+m.key)
		req.Header.Set(mcpauth.UserTokenHeader, m.token("alice"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != status {
			t.Fatalf("%s: %d", body, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/elicitations", strings.NewReader(`provider=fake`))
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, m.token("alice"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("form body: %d", resp.StatusCode)
	}
	if e.count("elicitations") != 0 {
		t.Fatal("a refused request stored an elicitation")
	}
}

// TestOAuthStateExpires: a provider round trip that outlives its state's ten
// minutes is refused, and nothing is exchanged.
func TestOAuthStateExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	u := m.mint("alice", map[string]any{"provider": "fake"})["url"].(string)
	b := e.browser()
	cb := e.authorize(e.allow(b, u, e.openAs(b, u, "alice")))
	e.clock.Advance(10*time.Minute + time.Second)
	e.refused(b.get(cb), http.StatusBadRequest, "state_expired")
	if e.fake.Counts().Exchange != 0 || e.count("connections") != 0 || e.count("oauth_states") != 0 {
		t.Fatal("an expired state was exchanged, or survived its use")
	}
}

// TestCodeInjectionRefused: an authorization code from another flow (the
// attacker's own, for his own account) injected into the victim's callback,
// with the victim's valid state, is refused: the code is bound to the other
// flow's PKCE challenge, and the verifier connectd holds for this state does
// not redeem it. Nothing is stored for the victim.
func TestCodeInjectionRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	flow := func(user string) (*browser, *url.URL) {
		u := m.mint(user, map[string]any{"provider": "fake"})["url"].(string)
		b := e.browser()
		cb, _ := url.Parse(e.authorize(e.allow(b, u, e.openAs(b, u, user))))
		return b, cb
	}
	victim, victimCB := flow("alice")
	_, attackerCB := flow("bob")
	q := victimCB.Query()
	q.Set("code", attackerCB.Query().Get("code"))
	victimCB.RawQuery = q.Encode()
	e.refused(victim.get(victimCB.String()), http.StatusBadGateway, "exchange_failed")
	if e.count("connections") != 0 {
		t.Fatal("the injected code produced a connection")
	}
}
