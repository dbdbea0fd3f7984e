package connect_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/api"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// proxied makes a call as m for user through connectd's proxy, with the
// extra request headers h, and returns the raw answer.
func (m *mcpServer) proxied(method, path, user string, body io.Reader, h http.Header) (*http.Response, []byte) {
	m.e.t.Helper()
	req, _ := http.NewRequest(method, m.e.srv.URL+"/v1/proxy/fake/"+path, body)
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, m.token(user))
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := m.e.srv.Client().Transport.RoundTrip(req) // a redirect is the answer, not followed here either
	if err != nil {
		m.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

// TestProxy (issue 25): a client approved for alice's connection calls the
// provider's API through connectd, which attaches her credential: the
// answer comes back, and neither the client's connectd key, the user
// token, cookies nor forwarding headers reach the provider; the provider's
// cookies do not come back; a redirect is answered, not followed; a
// provider's 401 is a refresh and one retry; its 429 is passed and then
// held. The credential is never in an answer, and the call is decided as
// the token read is.
func TestProxy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	tok := tokenOf(t, a, "alice")["access_token"].(string)

	resp, raw := a.proxied(http.MethodPost, "echo/x?q=1", "alice", strings.NewReader("hello"), http.Header{
		"Cookie": {"connectd_session=abc"}, "X-Forwarded-For": {"10.1.2.3"}, "X-Custom": {"kept"},
		"Content-Type": {"text/plain"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("echo: %d %s", resp.StatusCode, raw)
	}
	var echo providertest.EchoAnswer
	if err := json.Unmarshal(raw, &echo); err != nil {
		t.Fatal(err)
	}
	if echo.Method != "POST" || echo.Path != "/api/echo/x" || echo.RawQuery != "q=1" || echo.BodyLength != 5 {
		t.Fatalf("forwarded %+v", echo)
	}
	h := http.Header(echo.Headers)
	if h.Get("X-Custom") != "kept" || len(h.Values("Authorization")) != 1 {
		t.Fatalf("forwarded headers %v", h)
	}
	for _, k := range []string{mcpauth.UserTokenHeader, "Cookie", "X-Forwarded-For", api.AccountHeader} {
		if h.Get(k) != "" {
			t.Errorf("%s reached the provider", k)
		}
	}
	if strings.Contains(string(raw), a.key) || strings.Contains(string(raw), tok) {
		t.Fatal("a secret came back in the answer")
	}

	resp, _ = a.proxied(http.MethodGet, "cookie", "alice", nil, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("cookie: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = a.proxied(http.MethodGet, "redirect?to=https://elsewhere.example/x", "alice", nil, nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://elsewhere.example/x" {
		t.Fatalf("redirect: %d %v", resp.StatusCode, resp.Header)
	}
	// Paths that climb out of the API base: refused (the router does not
	// clean them into a redirect either); none reaches the provider.
	// TestProxyPathAttacks has every variant.
	exchanges := e.fake.Counts().Exchange + e.fake.Counts().Refresh
	for _, p := range []string{"../token", "echo/../../token", "echo/%2e%2e/%2e%2e/token", "echo/..%2f..%2ftoken"} {
		resp, raw := a.proxied(http.MethodGet, p, "alice", nil, nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), `"invalid_proxy_path"`) {
			t.Errorf("%s: %d %v %s", p, resp.StatusCode, resp.Header, raw)
		}
	}
	if e.fake.Counts().Exchange+e.fake.Counts().Refresh != exchanges {
		t.Fatal("a climbing path reached the provider's token endpoint")
	}

	// Decided as the token read: B is not approved; bob has nothing.
	resp, raw = b.proxied(http.MethodGet, "files", "alice", nil, nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(raw), "consent_required") {
		t.Fatalf("beta: %d %s", resp.StatusCode, raw)
	}
	resp, raw = a.proxied(http.MethodGet, "files", "bob", nil, nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(raw), "not_connected") {
		t.Fatalf("bob: %d %s", resp.StatusCode, raw)
	}

	// Scopes the call needs (Connectd-Scopes, as the token read's scopes=):
	// held, the call goes and the header stays behind; not held, 403
	// insufficient_scope naming them, before the provider is called.
	resp, raw = a.proxied(http.MethodGet, "echo", "alice", nil, http.Header{api.ScopesHeader: {"read"}})
	if resp.StatusCode != http.StatusOK || strings.Contains(string(raw), api.ScopesHeader) {
		t.Fatalf("with a held scope: %d %s", resp.StatusCode, raw)
	}
	echoes := e.fake.Counts().Echo
	resp, raw = a.proxied(http.MethodGet, "echo", "alice", nil, http.Header{api.ScopesHeader: {"read, nope"}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(raw), "insufficient_scope") ||
		!strings.Contains(string(raw), "nope") || e.fake.Counts().Echo != echoes {
		t.Fatalf("with a scope the connection lacks: %d %s", resp.StatusCode, raw)
	}

	// 401: the provider revoked the access token; connectd refreshes once
	// and sends the call again.
	e.fake.RevokeAccessToken(tok)
	refreshes := e.fake.Counts().Refresh
	resp, raw = a.proxied(http.MethodPut, "echo", "alice", strings.NewReader("again"), nil)
	if resp.StatusCode != http.StatusOK || e.fake.Counts().Refresh != refreshes+1 {
		t.Fatalf("after a 401: %d %s, %d refreshes", resp.StatusCode, raw, e.fake.Counts().Refresh-refreshes)
	}

	// 429 with Retry-After: passed through, then answered by connectd
	// without calling the provider until the window ends.
	resp, _ = a.proxied(http.MethodGet, "limited?after=30", "alice", nil, nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("limited: %d %v", resp.StatusCode, resp.Header)
	}
	echoes = e.fake.Counts().Echo
	resp, raw = a.proxied(http.MethodGet, "echo", "alice", nil, nil)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(raw), "provider_rate_limited") ||
		resp.Header.Get("Retry-After") == "" || e.fake.Counts().Echo != echoes {
		t.Fatalf("within the window: %d %s (%d calls reached the provider)", resp.StatusCode, raw, e.fake.Counts().Echo-echoes)
	}

	// Nothing of the credential in the logs, nor in any audit row (the
	// proxy.call rows, sampled, included: written by the sweep).
	if err := e.server.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	refreshed := tokenOf(t, a, "alice")["access_token"].(string)
	rows, err := e.pool.Query(context.Background(), `SELECT kind, row_to_json(e)::text FROM audit_events e`)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for rows.Next() {
		var kind, row string
		if err := rows.Scan(&kind, &row); err != nil {
			t.Fatal(err)
		}
		kinds[kind] = true
		for _, secret := range []string{tok, refreshed, a.key} {
			if strings.Contains(row, secret) {
				t.Fatalf("a secret is in a %s audit row", kind)
			}
		}
	}
	if rows.Err() != nil || !kinds["proxy.call"] {
		t.Fatalf("audit kinds %v (%v): no proxy.call row", kinds, rows.Err())
	}
	for _, secret := range []string{tok, refreshed, a.key} {
		if strings.Contains(e.logs.String(), secret) {
			t.Fatal("a secret is in the logs")
		}
	}
}

// TestProxyStreams: a server-sent-events or chunked answer arrives piece by piece,
// not buffered until the provider is done.
func TestProxyStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	for _, tc := range []struct{ name, query, first, last string }{
		{"server-sent events", "", "data: 1", "data: 3"},
		{"chunked JSON lines", "&type=ndjson", `{"n":1}`, `{"n":3}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/proxy/fake/stream?n=3&gap=400ms"+tc.query, nil)
			req.Header.Set("Authorization", "Bearer "+a.key)
			req.Header.Set(mcpauth.UserTokenHeader, a.token("alice"))
			start := time.Now()
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			rd := bufio.NewReader(resp.Body)
			first, err := rd.ReadString('\n')
			firstAt := time.Since(start)
			if err != nil || !strings.HasPrefix(first, tc.first) {
				t.Fatalf("first piece %q %v", first, err)
			}
			rest, _ := io.ReadAll(rd)
			if !strings.Contains(string(rest), tc.last) {
				t.Fatalf("rest %q", rest)
			}
			// The provider takes two gaps (800 ms) after its first piece; the
			// first must have come before the end, not with it.
			if total := time.Since(start); total-firstAt < 600*time.Millisecond {
				t.Fatalf("the first piece came %s before the end (%s in all): buffered", total-firstAt, total)
			}
		})
	}
}

// TestProxyOnlyClient (issue 25): a client registered proxy-only never
// receives a credential — its token read is 403 token_release_disabled
// before anything is looked up — while its proxied calls work; its consent
// page says it never receives the credential; switching it back takes
// effect at once.
func TestProxyOnlyClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newProxyOnlyServer("alpha", "fake")
	u := a.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
	br := e.browser()
	page := e.openAs(br, u, "alice")
	if !strings.Contains(page.body, "never receives your") {
		t.Fatalf("the consent page does not say so:\n%s", page.body)
	}
	if done := br.get(e.authorize(e.allow(br, u, page))); done.status != http.StatusOK {
		t.Fatalf("connect: %d %s", done.status, done.body)
	}
	st, out := a.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "token_release_disabled")
	st, out = a.call(http.MethodGet, "/v1/connections/fake/token", "nobody", nil)
	expectError(t, st, out, http.StatusForbidden, "token_release_disabled") // before any lookup
	if resp, raw := a.proxied(http.MethodGet, "files", "alice", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("proxied: %d %s", resp.StatusCode, raw)
	}
	// The refused read is in the audit trail (a proxy-only client asking
	// for a credential may be a compromised one).
	if err := e.server.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rows, _ := e.sampledCount("security.token_release_refused", aliceFiles, a.client.ID); rows != 1 {
		t.Fatalf("%d security.token_release_refused rows for alice, want 1", rows)
	}
	if err := e.server.Clients().SetProxyOnly(context.Background(), a.client.ID, false); err != nil {
		t.Fatal(err)
	}
	tokenOf(t, a, "alice")
}

// TestProxyRemoveAccessEverywhere: the user's Remove access on the account
// page stops the next proxied call on another, caching replica within a
// second.
func TestProxyRemoveAccessEverywhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	r2 := e.cachingReplica()
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	call := func() int {
		req, _ := http.NewRequest(http.MethodGet, r2.url+"/v1/proxy/fake/files", nil)
		req.Header.Set("Authorization", "Bearer "+a.key)
		req.Header.Set(mcpauth.UserTokenHeader, a.token("alice"))
		resp, err := e.srv.Client().Transport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := 0; call() != http.StatusOK; i++ { // warm r2's caches
		if i > 100 {
			t.Fatal("the replica never proxied")
		}
		time.Sleep(10 * time.Millisecond)
	}
	br := e.browser()
	page := e.accountPage(br, "alice")
	if r := e.accountPost(br, page, "/account/withdraw", url.Values{"confirm": {"yes"}, "provider": {"fake"}, "client": {a.client.ID}}); r.status != http.StatusSeeOther {
		t.Fatalf("withdraw: %d", r.status)
	}
	deadline := time.Now().Add(time.Second)
	for call() != http.StatusForbidden {
		if time.Now().After(deadline) {
			t.Fatal("r2 still proxies a second after the user removed access")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestProxyRequestRules (issue 25): the operator's rules for a client at a
// provider allow only the calls they name — anything else is 403
// proxy_not_allowed before the provider is called — and the consent page
// says, in the operator's words, what the client may do; clearing them
// lifts them at once.
func TestProxyRequestRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	clients := e.server.Clients()
	ctx := context.Background()
	if err := clients.SetProxyRules(ctx, a.client.ID, "fake", &clientauth.ProxyRules{Rules: []string{"GET /files*", "POST /echo/comments"},
		Description: "reads your files; cannot change them"}); err != nil {
		t.Fatal(err)
	}
	u := a.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
	br := e.browser()
	page := e.openAs(br, u, "alice")
	if !strings.Contains(page.body, "reads your files; cannot change them") {
		t.Fatalf("the consent page does not show the rules:\n%s", page.body)
	}
	if done := br.get(e.authorize(e.allow(br, u, page))); done.status != http.StatusOK {
		t.Fatalf("connect: %d %s", done.status, done.body)
	}
	if resp, raw := a.proxied(http.MethodGet, "files", "alice", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("an allowed call: %d %s", resp.StatusCode, raw)
	}
	if resp, raw := a.proxied(http.MethodPost, "echo/comments", "alice", strings.NewReader("x"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("an allowed POST: %d %s", resp.StatusCode, raw)
	}
	echoes := e.fake.Counts().Echo
	for _, c := range []struct{ method, path string }{{http.MethodGet, "echo"}, {http.MethodDelete, "files"},
		{http.MethodPost, "echo/comments/x"}, {http.MethodPut, "echo/comments"}} {
		resp, raw := a.proxied(c.method, c.path, "alice", nil, nil)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(raw), "proxy_not_allowed") {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, raw)
		}
	}
	if e.fake.Counts().Echo != echoes {
		t.Fatal("a refused call reached the provider")
	}
	// Refused before anything about the user is looked up: bob, who has no
	// connection, gets the same answer.
	if resp, raw := a.proxied(http.MethodGet, "echo", "bob", nil, nil); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(string(raw), "proxy_not_allowed") {
		t.Fatalf("bob outside the rules: %d %s", resp.StatusCode, raw)
	}
	// The refusals are in the audit trail (sampled): alice's four calls in
	// one row for the minute, bob's in another, with the client as actor.
	if err := e.server.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute + time.Second)
	if err := e.server.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string]int{"alice": 4, "bob": 1} {
		if _, n := e.sampledCount("security.proxy_not_allowed", ` AND client_id = $2 AND subject = $3 AND provider = 'fake'`,
			a.client.ID, user); n != want {
			t.Errorf("security.proxy_not_allowed rows for %s stand for %d calls, want %d", user, n, want)
		}
	}
	if err := clients.SetProxyRules(ctx, a.client.ID, "fake", nil); err != nil {
		t.Fatal(err)
	}
	if resp, raw := a.proxied(http.MethodGet, "echo", "alice", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("after clearing the rules: %d %s", resp.StatusCode, raw)
	}
}

// proxiedAt makes m's proxied GET of path for user at the replica base.
func (m *mcpServer) proxiedAt(base, path, user string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/proxy/fake/"+path, nil)
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, m.token(user))
	resp, err := m.e.srv.Client().Transport.RoundTrip(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// refreshesOf counts the refresh requests that reached the provider with a
// scope (narrowing) and without (the connection's own).
func refreshesOf(e *env) (scoped, whole int) {
	for _, r := range e.fake.TokenRequests() {
		switch {
		case r.GrantType != "refresh_token":
		case r.Scope != "":
			scoped++
		default:
			whole++
		}
	}
	return scoped, whole
}

// TestProxyRefusedTokenAcrossReplicas (issue 25): the provider refuses the
// token it was sent (401) while calls are in flight on two replicas, with
// rotating refresh tokens: every call succeeds after exactly one refresh,
// and no refresh token is used twice (the fake provider would revoke the
// grant). For a client approved for less than the connection, at a
// provider that narrows tokens, the narrowed token is fetched anew — the
// connection's own token is left alone — where before the retry sent the
// same narrowed token again and the 401 stood.
func TestProxyRefusedTokenAcrossReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{rotate: true, fakeEntry: narrowing})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read", "write"}})
	u := b.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
	br := e.browser()
	if r := e.allow(br, u, e.openAs(br, u, "alice")); r.status != http.StatusOK { // consent only: connected already
		t.Fatalf("beta's consent: %d %s", r.status, r.body)
	}
	other := e.secondReplica()
	parallel := func(m *mcpServer) {
		t.Helper()
		const callers = 8
		statuses, bodies := make([]int, callers), make([]string, callers)
		var wg sync.WaitGroup
		for i := range callers {
			base := e.srv.URL
			if i%2 == 1 {
				base = other
			}
			wg.Go(func() { statuses[i], bodies[i] = m.proxiedAt(base, "files", "alice") })
		}
		wg.Wait()
		for i, st := range statuses {
			if st != http.StatusOK {
				t.Fatalf("%s's call %d: %d %s", m.client.Name, i, st, bodies[i])
			}
		}
	}
	for _, tc := range []struct {
		name         string
		m            *mcpServer
		scoped, full int // refreshes the refusal costs
	}{
		{"the connection's own token", a, 0, 1},
		{"a narrowed token", b, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each refusal outside the window of the one before (a 401
			// makes one refresh a window per connection: TestProxy401Cooldown).
			e.clock.Advance(vault.RefusedRefreshWindow + time.Second)
			if st, body := tc.m.proxiedAt(e.srv.URL, "files", "alice"); st != http.StatusOK {
				t.Fatalf("first call: %d %s", st, body)
			}
			tok := tokenOf(t, tc.m, "alice")["access_token"].(string)
			e.fake.RevokeAccessToken(tok)
			scoped, whole := refreshesOf(e)
			parallel(tc.m)
			s2, w2 := refreshesOf(e)
			if s2-scoped != tc.scoped || w2-whole != tc.full {
				t.Fatalf("refreshes after the 401: %d scoped, %d whole; want %d and %d", s2-scoped, w2-whole, tc.scoped, tc.full)
			}
			if again := tokenOf(t, tc.m, "alice")["access_token"].(string); again == tok || !e.fake.Valid(again) {
				t.Fatal("the refused token is still the one released")
			}
		})
	}
	// Alpha's token was left alone by beta's renewal.
	if st, body := a.proxiedAt(other, "files", "alice"); st != http.StatusOK {
		t.Fatalf("alpha after beta's renewal: %d %s", st, body)
	}
}

// TestProxyStreamEndsWhenClientDisabled (issue 25): a client disabled on
// one replica (a cut-off) has the proxied stream it holds open on another,
// caching replica cut off within a couple of seconds, not when the
// provider is done; its next call is refused like any request with its key.
func TestProxyStreamEndsWhenClientDisabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	r2 := e.cachingReplica()
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	req, _ := http.NewRequest(http.MethodGet, r2.url+"/v1/proxy/fake/stream?n=100&gap=100ms", nil)
	req.Header.Set("Authorization", "Bearer "+a.key)
	req.Header.Set(mcpauth.UserTokenHeader, a.token("alice"))
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if first, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(first, "data: 1") {
		t.Fatalf("first event %q %v", first, err)
	}
	time.Sleep(watchAfterForTest) // the call now watches its client
	if err := e.server.Clients().SetDisabled(context.Background(), a.client.ID, true); err != nil {
		t.Fatal(err)
	}
	disabled := time.Now()
	rest, _ := io.ReadAll(rd) // ends when connectd cuts the stream
	if strings.Contains(string(rest), "data: 100") {
		t.Fatalf("the stream ran to its end (%s) after the client was disabled", time.Since(disabled))
	}
	if took := time.Since(disabled); took > 3*time.Second {
		t.Fatalf("the stream ended %s after the client was disabled", took)
	}
	st, body := a.proxiedAt(r2.url, "files", "alice")
	if st != http.StatusUnauthorized || !strings.Contains(body, "invalid_client") {
		t.Fatalf("a call after: %d %s", st, body)
	}
}

// watchAfterForTest is a little more than connect's watchAfter.
const watchAfterForTest = 700 * time.Millisecond
