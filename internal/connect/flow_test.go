package connect_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
)

// mcpServer is an MCP server registered as a connectd client.
type mcpServer struct {
	e      *env
	client clientauth.Client
	key    string
}

func (e *env) newMCPServer(name string, providers ...string) *mcpServer {
	e.t.Helper()
	c, key, err := e.clients.Create(context.Background(), name, []string{"https://" + name + ".mcp.example/"}, providers)
	if err != nil {
		e.t.Fatal(err)
	}
	return &mcpServer{e: e, client: c, key: key}
}

// newProxyOnlyServer is newMCPServer registered proxy-only: it never
// receives a credential.
func (e *env) newProxyOnlyServer(name string, providers ...string) *mcpServer {
	e.t.Helper()
	m := e.newMCPServer(name, providers...)
	if err := e.server.Clients().SetProxyOnly(context.Background(), m.client.ID, true); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// token returns user's MCP access token for this MCP server (aud = its resource).
// token mints user's MCP access token at idps[0], or at idps[1] for
// "idp1:<subject>".
func (m *mcpServer) token(user string) string {
	m.e.t.Helper()
	idp := m.e.idps[0]
	if sub, ok := strings.CutPrefix(user, "idp1:"); ok {
		idp, user = m.e.idps[1], sub
	}
	tok, err := idp.AccessToken(user, m.client.Resources[0])
	if err != nil {
		m.e.t.Fatal(err)
	}
	return tok
}

// call makes a /v1 request as this MCP server for user ("" sends no user token).
func (m *mcpServer) call(method, path, user string, body any) (int, map[string]any) {
	m.e.t.Helper()
	tok := ""
	if user != "" {
		tok = m.token(user)
	}
	st, out, raw := m.send(m.e.srv.URL, method, path, tok, body)
	if out == nil {
		m.e.t.Fatalf("%s %s: %d, body not JSON: %s", method, path, st, raw)
	}
	if st >= 500 && st != http.StatusServiceUnavailable {
		m.e.t.Fatalf("%s %s: server error %d %s", method, path, st, raw)
	}
	return st, out
}

// send makes a /v1 request as this MCP server to the connectd at base, with
// the raw user token tok ("" sends none), and returns the status, the JSON
// body (nil when it is not JSON) and the raw body. The one request builder
// behind call, callAt and callToken.
func (m *mcpServer) send(base, method, path, tok string, body any) (int, map[string]any, []byte) {
	m.e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+m.key)
	if tok != "" {
		req.Header.Set(mcpauth.UserTokenHeader, tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := m.e.srv.Client().Do(req)
	if err != nil {
		m.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		out = nil
	}
	return resp.StatusCode, out, raw
}

// mint creates an elicitation and returns the answer: 201, or 200 when the
// same request is already pending (idempotent mint).
func (m *mcpServer) mint(user string, body map[string]any) map[string]any {
	m.e.t.Helper()
	st, out := m.call(http.MethodPost, "/v1/elicitations", user, body)
	if st != http.StatusCreated && st != http.StatusOK {
		m.e.t.Fatalf("mint: %d %v", st, out)
	}
	return out
}

// expectError checks an API answer's status and error code.
func expectError(t *testing.T, st int, out map[string]any, status int, code string) {
	t.Helper()
	if st != status || out["error"] != code {
		t.Fatalf("got %d %v, want %d %q", st, out, status, code)
	}
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

var offerField = regexp.MustCompile(`name="offer" value="([^"]*)"`)

// allowForm is the consent page's Allow answer: its CSRF token and the
// offer it listed.
func allowForm(t *testing.T, body string) url.Values {
	t.Helper()
	f := url.Values{"csrf_token": {csrfOf(t, body)}, "decision": {"allow"}}
	if m := offerField.FindStringSubmatch(body); m != nil {
		f.Set("offer", m[1])
	}
	return f
}

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in page: %s", body)
	}
	return m[1]
}

// openAs opens a connect URL in b, logging in as user at the first IdP when
// asked to, and returns the page the browser finally lands on.
func (e *env) openAs(b *browser, connectURL, user string) response {
	e.t.Helper()
	r := b.get(connectURL)
	if r.status != http.StatusFound || !strings.Contains(r.location, "/login?") {
		return r // already signed in
	}
	authURL := b.get(r.location)
	if authURL.status != http.StatusFound {
		e.t.Fatalf("login start: %d %s", authURL.status, authURL.body)
	}
	back := b.get(e.pick(b, authURL.location, user))
	if back.status != http.StatusSeeOther || back.location != connectURL {
		e.t.Fatalf("login did not return to the connect URL: %d %s", back.status, back.location)
	}
	return b.get(connectURL)
}

// allow submits Allow on the consent page r and returns the answer.
func (e *env) allow(b *browser, connectURL string, consent response) response {
	e.t.Helper()
	if consent.status != http.StatusOK {
		e.t.Fatalf("consent page: %d %s", consent.status, consent.body)
	}
	return b.do(http.MethodPost, connectURL, allowForm(e.t, consent.body))
}

// authorize follows the provider redirect through the fake provider and
// returns the callback URL it sends the browser back to.
func (e *env) authorize(redirect response) string {
	e.t.Helper()
	if redirect.status != http.StatusSeeOther || !strings.HasPrefix(redirect.location, e.fake.AuthorizeURL()) {
		e.t.Fatalf("allow did not redirect to the provider: %d %s %s", redirect.status, redirect.location, redirect.body)
	}
	back, err := e.fake.Approve(redirect.location)
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.HasPrefix(back.String(), e.srv.URL+"/oauth/callback?") {
		e.t.Fatalf("provider sent the browser to %s", back)
	}
	return back.String()
}

// connectFully runs alice's whole flow for m and returns the elicitation.
func (e *env) connectFully(m *mcpServer, user string, body map[string]any) map[string]any {
	e.t.Helper()
	el := m.mint(user, body)
	b := e.browser()
	u := el["url"].(string)
	done := b.get(e.authorize(e.allow(b, u, e.openAs(b, u, user))))
	if done.status != http.StatusOK || !strings.Contains(done.body, "Connected") {
		e.t.Fatalf("callback: %d %s", done.status, done.body)
	}
	return el
}

func (e *env) count(table string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) auditCount(kind string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_events WHERE kind = $1", kind).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func TestConnectFlowEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")

	// No connection yet.
	st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusNotFound, "not_connected")

	el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"files.read"},
		"message": "Files needs your Fake account."})
	id := el["elicitation_id"].(string)
	u := el["url"].(string)
	if u != e.srv.URL+"/c/"+id || len(id) < 22 || el["status"] != "pending" {
		t.Fatalf("mint: %v", el)
	}
	// The 2025-11-25 params and error, and the 2026-07-28 input request, with the spec's field names.
	wantParams := map[string]any{"mode": "url", "elicitationId": id, "url": u, "message": "Files needs your Fake account."}
	if !mapsEqual(el["elicitation"], wantParams) {
		t.Fatalf("elicitation params: %v", el["elicitation"])
	}
	rpcErr := el["url_elicitation_required_error"].(map[string]any)
	if rpcErr["code"] != float64(-32042) ||
		!mapsEqual(rpcErr["data"].(map[string]any)["elicitations"].([]any)[0], wantParams) {
		t.Fatalf("URLElicitationRequiredError: %v", rpcErr)
	}
	wantInput := map[string]any{"method": "elicitation/create",
		"params": map[string]any{"mode": "url", "message": "Files needs your Fake account.", "url": u}}
	if !mapsEqual(el["input_request"], wantInput) {
		t.Fatalf("input request: %v", el["input_request"])
	}
	if rs, _ := el["request_state"].(string); rs == "" || strings.Contains(rs, "alice") {
		t.Fatalf("request_state: %q", rs)
	}

	// Browser: not signed in → login at the elicitation's issuer → back → consent.
	b := e.browser()
	consent := e.openAs(b, u, "alice")
	for _, want := range []string{"files", "Fake fake", "files.read", strings.TrimPrefix(e.fake.URL(), "https://")} {
		if !strings.Contains(consent.body, want) {
			t.Fatalf("consent page lacks %q: %s", want, consent.body)
		}
	}
	if consent.header.Get("X-Frame-Options") != "DENY" || !strings.Contains(consent.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatal("consent page is frameable")
	}
	if e.count("oauth_states") != 0 {
		t.Fatal("state created before consent")
	}
	redirect := e.allow(b, u, consent)
	au, _ := url.Parse(redirect.location)
	q := au.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		q.Get("redirect_uri") != e.srv.URL+"/oauth/callback" || len(q.Get("state")) < 22 || q.Get("scope") != "files.read" {
		t.Fatalf("authorize request: %s", redirect.location)
	}
	var stored int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM oauth_states WHERE state_hash = sha256($1::bytea)",
		[]byte(q.Get("state"))).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 1 {
		t.Fatal("state not stored by its hash")
	}
	done := b.get(e.authorize(redirect))
	if done.status != http.StatusOK || !strings.Contains(done.body, "Connected") {
		t.Fatalf("callback: %d %s", done.status, done.body)
	}

	// The MCP server sees completion and gets a working token.
	st, out = m.call(http.MethodGet, "/v1/elicitations/"+id, "alice", nil)
	if st != 200 || out["status"] != "completed" {
		t.Fatalf("status: %d %v", st, out)
	}
	st, out = m.call(http.MethodPost, "/v1/elicitations/resolve", "alice", map[string]any{"request_state": el["request_state"]})
	if st != 200 || out["status"] != "completed" || out["request_state"] != nil {
		t.Fatalf("resolve: %d %v", st, out)
	}
	st, out = m.call(http.MethodGet, "/v1/connections/fake/token?scopes=files.read", "alice", nil)
	if st != 200 || out["kind"] != "oauth2" || !e.fake.Valid(out["access_token"].(string)) {
		t.Fatalf("token: %d %v", st, out)
	}
	st, out = m.call(http.MethodGet, "/v1/connections", "alice", nil)
	conns := out["connections"].([]any)
	if st != 200 || len(conns) != 1 || conns[0].(map[string]any)["provider"] != "fake" {
		t.Fatalf("connections: %d %v", st, out)
	}
	for _, k := range []string{"access_token", "refresh_token"} {
		if _, ok := conns[0].(map[string]any)[k]; ok {
			t.Fatalf("connection listing carries %s", k)
		}
	}
	if e.auditCount("elicitation.completed") != 1 || e.auditCount("consent.granted") != 1 {
		t.Fatal("audit events missing")
	}
	// Bob has nothing.
	st, out = m.call(http.MethodGet, "/v1/connections/fake/token", "bob", nil)
	expectError(t, st, out, http.StatusNotFound, "not_connected")

	// Unlink: revoked at the provider, gone for the MCP server.
	tok := e.fakeTokens()
	st, out = m.call(http.MethodDelete, "/v1/connections/fake", "alice", nil)
	if st != 200 || out["revoked_at_provider"] != true {
		t.Fatalf("unlink: %d %v", st, out)
	}
	if len(tok) == 0 || e.fake.Valid(tok[0]) {
		t.Fatal("token still valid at the provider after unlink")
	}
	st, out = m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusNotFound, "not_connected")
}

// fakeTokens lists the access tokens the fake provider handed to connectd, as
// stored in the vault (opened through the store).
func (e *env) fakeTokens() []string {
	e.t.Helper()
	_, cred, err := e.vault.Get(context.Background(), identity.User{Issuer: e.idps[0].Issuer(), Subject: "alice"}, "fake", "")
	if err != nil {
		return nil
	}
	return []string{cred.AccessToken}
}

func mapsEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestPhishingOtherUserIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	el := m.mint("alice", map[string]any{"provider": "fake"})
	u := el["url"].(string)

	// The attacker forwards alice's link to bob, who is signed in as himself.
	bob := e.browser()
	r := e.openAs(bob, u, "bob")
	e.refused(r, http.StatusForbidden, "identity_mismatch")
	if strings.Contains(r.body, "alice") {
		t.Fatal("the refusal reveals the intended user")
	}
	// Posting the consent form anyway (with bob's own CSRF token) changes nothing.
	sessPage := bob.get(e.srv.URL + "/session")
	post := bob.do(http.MethodPost, u, allowForm(t, sessPage.body))
	e.refused(post, http.StatusForbidden, "identity_mismatch")
	if e.count("oauth_states") != 0 || e.count("consents") != 0 || e.count("connections") != 0 {
		t.Fatal("state, consent or credential created for a mismatched user")
	}
	if e.fake.Counts().Authorize != 0 {
		t.Fatal("the provider was contacted")
	}
	if e.auditCount("security.identity_mismatch") != 2 {
		t.Fatal("identity mismatch not audited")
	}
	st, out := m.call(http.MethodGet, "/v1/elicitations/"+el["elicitation_id"].(string), "alice", nil)
	if st != 200 || out["status"] != "pending" {
		t.Fatalf("status after the attack: %v", out)
	}
}

func TestCallbackRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")

	// start returns alice's browser, the connect URL and the provider's
	// callback URL for her flow.
	n := 0
	start := func() (*browser, string, string) {
		n++ // a scope not granted yet, so every flow needs the provider
		el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"scope" + string(rune('a'+n))}})
		b := e.browser()
		u := el["url"].(string)
		return b, u, e.authorize(e.allow(b, u, e.openAs(b, u, "alice")))
	}

	t.Run("replayed", func(t *testing.T) {
		b, _, cb := start()
		if r := b.get(cb); r.status != http.StatusOK {
			t.Fatalf("first use: %d %s", r.status, r.body)
		}
		e.refused(b.get(cb), http.StatusBadRequest, "invalid_state")
	})
	t.Run("missing state", func(t *testing.T) {
		b, _, cb := start()
		cu, _ := url.Parse(cb)
		q := cu.Query()
		q.Del("state")
		cu.RawQuery = q.Encode()
		e.refused(b.get(cu.String()), http.StatusBadRequest, "missing_state")
	})
	t.Run("unknown state", func(t *testing.T) {
		b, _, cb := start()
		cu, _ := url.Parse(cb)
		q := cu.Query()
		q.Set("state", flipFirst(q.Get("state"))) // well-formed, never issued
		cu.RawQuery = q.Encode()
		e.refused(b.get(cu.String()), http.StatusBadRequest, "invalid_state")
	})
	t.Run("state of another browser session", func(t *testing.T) {
		_, _, cb := start()
		// Alice again, in another browser (her own, even): the state is bound
		// to the session that consented.
		other := e.browser()
		e.login(other, "alice", "")
		e.refused(other.get(cb), http.StatusBadRequest, "state_mismatch")
		// And without any session.
		_, _, cb2 := start()
		e.refused(e.browser().get(cb2), http.StatusBadRequest, "state_mismatch")
	})
	t.Run("code exchange failure", func(t *testing.T) {
		b, u, cb := start()
		cu, _ := url.Parse(cb)
		q := cu.Query()
		q.Set("code", "not-a-code-the-provider-issued")
		cu.RawQuery = q.Encode()
		e.refused(b.get(cu.String()), http.StatusBadGateway, "exchange_failed")
		id := strings.TrimPrefix(u, e.srv.URL+"/c/")
		st, out := m.call(http.MethodGet, "/v1/elicitations/"+id, "alice", nil)
		if st != 200 || out["status"] != "failed" || out["reason"] != "exchange_failed" {
			t.Fatalf("status: %v", out)
		}
	})
	// Only the replay test's first, legitimate callback stored a credential,
	// and with only its scope: no refused callback added one.
	var scopes []string
	if err := e.pool.QueryRow(context.Background(), "SELECT scopes FROM connections").Scan(&scopes); err != nil {
		t.Fatal(err)
	}
	if e.count("connections") != 1 || !slices.Equal(scopes, []string{"scopeb"}) {
		t.Fatalf("connections: %d with scopes %v, want one with the replay test's scope", e.count("connections"), scopes)
	}
}

func TestIssuerMixUpRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{quirks: providertest.Quirks{IssParameter: true}})
	m := e.newMCPServer("files", "fake")
	for _, iss := range []string{"https://evil.example", ""} {
		el := m.mint("alice", map[string]any{"provider": "fake"})
		b := e.browser()
		u := el["url"].(string)
		cb, _ := url.Parse(e.authorize(e.allow(b, u, e.openAs(b, u, "alice"))))
		q := cb.Query()
		if q.Get("iss") != e.fake.Issuer() {
			t.Fatalf("fake provider did not send iss: %s", cb)
		}
		if iss == "" {
			q.Del("iss")
		} else {
			q.Set("iss", iss)
		}
		cb.RawQuery = q.Encode()
		e.refused(b.get(cb.String()), http.StatusBadRequest, "issuer_mismatch")
		if e.fake.Counts().Exchange != 0 || e.count("connections") != 0 {
			t.Fatal("code exchanged despite the issuer mismatch")
		}
		_, out := m.call(http.MethodGet, "/v1/elicitations/"+el["elicitation_id"].(string), "alice", nil)
		if out["status"] != "failed" || out["reason"] != "issuer_mismatch" {
			t.Fatalf("status: %v", out)
		}
	}
}

func TestDeclines(t *testing.T) {
	t.Parallel()
	t.Run("deny at connectd", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		m := e.newMCPServer("files", "fake")
		el := m.mint("alice", map[string]any{"provider": "fake"})
		b := e.browser()
		u := el["url"].(string)
		consent := e.openAs(b, u, "alice")
		r := b.do(http.MethodPost, u, url.Values{"csrf_token": {csrfOf(t, consent.body)}, "decision": {"deny"}})
		if r.status != 200 || !strings.Contains(r.body, "declined") {
			t.Fatalf("deny: %d %s", r.status, r.body)
		}
		_, out := m.call(http.MethodGet, "/v1/elicitations/"+el["elicitation_id"].(string), "alice", nil)
		if out["status"] != "declined" || e.count("consents") != 0 || e.fake.Counts().Authorize != 0 {
			t.Fatalf("after deny: %v", out)
		}
	})
	t.Run("access_denied at the provider", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{quirks: providertest.Quirks{AccessDenied: true}})
		m := e.newMCPServer("files", "fake")
		el := m.mint("alice", map[string]any{"provider": "fake"})
		b := e.browser()
		u := el["url"].(string)
		r := b.get(e.authorize(e.allow(b, u, e.openAs(b, u, "alice"))))
		if r.status != 200 || !strings.Contains(r.body, "declined") {
			t.Fatalf("access_denied: %d %s", r.status, r.body)
		}
		_, out := m.call(http.MethodGet, "/v1/elicitations/"+el["elicitation_id"].(string), "alice", nil)
		if out["status"] != "declined" || out["reason"] != "provider_access_denied" || e.count("connections") != 0 {
			t.Fatalf("after access_denied: %v", out)
		}
	})
	t.Run("CSRF", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		m := e.newMCPServer("files", "fake")
		el := m.mint("alice", map[string]any{"provider": "fake"})
		b := e.browser()
		u := el["url"].(string)
		e.openAs(b, u, "alice")
		for _, tok := range []string{"", "forged"} {
			e.refused(b.do(http.MethodPost, u, url.Values{"csrf_token": {tok}, "decision": {"allow"}}),
				http.StatusForbidden, "csrf_failed")
		}
		if e.count("consents") != 0 || e.count("oauth_states") != 0 {
			t.Fatal("a forged form had an effect")
		}
	})
}

func TestExpiredElicitation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	el := m.mint("alice", map[string]any{"provider": "fake"})
	b := e.browser()
	u := el["url"].(string)
	consent := e.openAs(b, u, "alice")
	e.clock.Advance(16 * time.Minute)
	if r := b.get(u); r.status != http.StatusGone {
		t.Fatalf("expired link: %d", r.status)
	}
	if r := e.allow(b, u, consent); r.status != http.StatusGone || e.count("oauth_states") != 0 {
		t.Fatalf("allow on an expired link: %d", r.status)
	}
	_, out := m.call(http.MethodGet, "/v1/elicitations/"+el["elicitation_id"].(string), "alice", nil)
	if out["status"] != "expired" {
		t.Fatalf("status: %v", out)
	}
	if err := e.server.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	var st string
	e.pool.QueryRow(context.Background(), "SELECT status FROM elicitations").Scan(&st)
	if st != "expired" {
		t.Fatalf("sweep left status %q", st)
	}
}

func TestRequestState(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	other := e.newMCPServer("other", "fake")
	mint := func() string {
		return m.mint("alice", map[string]any{"provider": "fake", "request_digest": "d1"})["request_state"].(string)
	}
	resolve := func(srv *mcpServer, user, rs, digest string) (int, map[string]any) {
		return srv.call(http.MethodPost, "/v1/elicitations/resolve", user, map[string]any{"request_state": rs, "request_digest": digest})
	}

	rs := mint()
	st, out := resolve(m, "alice", rs, "d1")
	fresh, _ := out["request_state"].(string)
	if st != 200 || out["status"] != "pending" || fresh == "" || fresh == rs {
		t.Fatalf("pending resolve: %d %v", st, out)
	}
	st, out = resolve(m, "alice", rs, "d1")
	expectError(t, st, out, http.StatusConflict, "request_state_replayed")
	if st, out = resolve(m, "alice", fresh, "d1"); st != 200 {
		t.Fatalf("fresh state: %d %v", st, out)
	}

	tampered := []byte(mint())
	tampered[len(tampered)-5] ^= 0x01
	st, out = resolve(m, "alice", string(tampered), "d1")
	expectError(t, st, out, http.StatusBadRequest, "request_state_invalid")
	st, out = resolve(m, "alice", "rs1.bm90IGEgc3RhdGU", "d1")
	expectError(t, st, out, http.StatusBadRequest, "request_state_invalid")

	rs = mint()
	st, out = resolve(m, "bob", rs, "d1")
	expectError(t, st, out, http.StatusForbidden, "request_state_wrong_user")
	st, out = resolve(other, "alice", rs, "d1")
	expectError(t, st, out, http.StatusForbidden, "request_state_wrong_client")
	st, out = resolve(m, "alice", rs, "d2")
	expectError(t, st, out, http.StatusBadRequest, "request_digest_mismatch")
	// None of the refusals burned it.
	if st, _ = resolve(m, "alice", rs, "d1"); st != 200 {
		t.Fatalf("refusals consumed the request_state: %d", st)
	}

	rs = mint()
	e.clock.Advance(2 * time.Hour)
	st, out = resolve(m, "alice", rs, "d1")
	expectError(t, st, out, http.StatusBadRequest, "request_state_expired")
}

func TestHandlesAloneAuthorizeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	other := e.newMCPServer("other", "fake")
	el := e.connectFully(m, "alice", map[string]any{"provider": "fake"})
	id := el["elicitation_id"].(string)

	// Another client, even for the same user, cannot see the elicitation.
	st, out := other.call(http.MethodGet, "/v1/elicitations/"+id, "alice", nil)
	expectError(t, st, out, http.StatusNotFound, "not_found")
	// The same client for another user cannot either.
	st, out = m.call(http.MethodGet, "/v1/elicitations/"+id, "bob", nil)
	expectError(t, st, out, http.StatusNotFound, "not_found")
	// Another client without the user's consent gets no credential.
	st, out = other.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	if st, out = other.call(http.MethodGet, "/v1/connections", "alice", nil); st != http.StatusOK || len(out["connections"].([]any)) != 0 {
		t.Fatalf("unconsented client lists connections: %v", out)
	}
	st, out = other.call(http.MethodDelete, "/v1/connections/fake", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	// A user token minted for another MCP server is refused (no passthrough).
	tok := other.token("alice")
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/connections/fake/token", nil)
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, tok)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var env web.Envelope
	_ = json.NewDecoder(resp.Body).Decode(&env)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || env.Error != "wrong_audience" {
		t.Fatalf("passthrough token: %d %q", resp.StatusCode, env.Error)
	}
	// No client key at all.
	resp, err = e.srv.Client().Get(e.srv.URL + "/v1/elicitations/" + id)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no client key: %d", resp.StatusCode)
	}
	// The connect URL alone, in a fresh browser, only says it was used
	// (TestEndedLinksNeedNoSignIn), nothing of whose.
	if r := e.browser().get(el["url"].(string)); r.status != http.StatusOK || !strings.Contains(r.body, "already used") ||
		strings.Contains(r.body, "alice") {
		t.Fatalf("connect URL without a session: %d %s", r.status, r.location)
	}
}

func TestConsentOnlyAndIncrementalScopes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	first := e.newMCPServer("first", "fake")
	second := e.newMCPServer("second", "fake")
	e.connectFully(first, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	authorizations := e.fake.Counts().Authorize

	// Same scopes, another MCP server: consent only, no provider round trip.
	st, out := second.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	el := second.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	b := e.browser()
	u := el["url"].(string)
	consent := e.openAs(b, u, "alice")
	if !strings.Contains(consent.body, "will be shared") {
		t.Fatalf("consent page does not say the existing connection is shared: %s", consent.body)
	}
	done := e.allow(b, u, consent)
	if done.status != 200 || !strings.Contains(done.body, "Connected") || e.fake.Counts().Authorize != authorizations {
		t.Fatalf("consent-only: %d (authorize calls %d→%d) %s", done.status, authorizations, e.fake.Counts().Authorize, done.body)
	}
	if st, _ := second.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != 200 {
		t.Fatalf("token after consent-only: %d", st)
	}

	// More scopes: the provider is asked for the union.
	st, out = first.call(http.MethodGet, "/v1/connections/fake/token?scopes=write", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "insufficient_scope")
	if !slices.Equal(toStrings(out["missing_scopes"]), []string{"write"}) {
		t.Fatalf("missing_scopes: %v", out)
	}
	el = first.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"write"}})
	u = el["url"].(string)
	redirect := e.allow(b, u, e.openAs(b, u, "alice"))
	au, _ := url.Parse(redirect.location)
	if got := strings.Fields(au.Query().Get("scope")); !slices.Equal(got, []string{"read", "write"}) {
		t.Fatalf("incremental authorization asked for %v", got)
	}
	b.get(e.authorize(redirect))
	if st, out := first.call(http.MethodGet, "/v1/connections/fake/token?scopes=read,write", "alice", nil); st != 200 {
		t.Fatalf("token with both scopes: %d %v", st, out)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestAPIKeyFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "keyed")
	el := m.mint("alice", map[string]any{"provider": "keyed"})
	b := e.browser()
	u := el["url"].(string)
	form := e.allow(b, u, e.openAs(b, u, "alice"))
	if form.status != 200 || !strings.Contains(form.body, `type="password"`) {
		t.Fatalf("key form: %d %s", form.status, form.body)
	}
	bad := b.do(http.MethodPost, u+"/key", url.Values{"csrf_token": {csrfOf(t, form.body)}, "decision": {"save"},
		"api_key": {"sk-wrong-key"}})
	if bad.status != http.StatusBadRequest || !strings.Contains(bad.body, "did not accept") || strings.Contains(bad.body, "sk-wrong-key") {
		t.Fatalf("bad key: %d %s", bad.status, bad.body)
	}
	e.refused(b.do(http.MethodPost, u+"/key", url.Values{"csrf_token": {"x"}, "decision": {"save"}, "api_key": {goodAPIKey}}),
		http.StatusForbidden, "csrf_failed")
	good := b.do(http.MethodPost, u+"/key", url.Values{"csrf_token": {csrfOf(t, form.body)}, "decision": {"save"},
		"api_key": {goodAPIKey}})
	if good.status != 200 || !strings.Contains(good.body, "Connected") || strings.Contains(good.body, goodAPIKey) {
		t.Fatalf("good key: %d %s", good.status, good.body)
	}
	st, out := m.call(http.MethodGet, "/v1/connections/keyed/token", "alice", nil)
	if st != 200 || out["kind"] != "api_key" || out["access_token"] != goodAPIKey {
		t.Fatalf("api key token: %d %v", st, out)
	}
	if strings.Contains(e.logs.String(), goodAPIKey) || strings.Contains(e.logs.String(), "sk-wrong-key") {
		t.Fatal("an API key reached the logs")
	}
}

func TestMintValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	tests := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"unknown provider", map[string]any{"provider": "nope"}, 400, "unknown_provider"},
		{"malformed provider", map[string]any{"provider": "../etc"}, 400, "unknown_provider"},
		{"provider not allowed", map[string]any{"provider": "keyed"}, 403, "provider_not_allowed"},
		{"unknown field", map[string]any{"provider": "fake", "user": "bob"}, 400, "invalid_request"},
		{"wrong type", map[string]any{"provider": "fake", "scopes": "repo"}, 400, "invalid_request"},
		{"bad scope", map[string]any{"provider": "fake", "scopes": []string{"a b"}}, 400, "invalid_scope"},
		{"long message", map[string]any{"provider": "fake", "message": strings.Repeat("x", 501)}, 400, "invalid_request"},
		{"control in digest", map[string]any{"provider": "fake", "request_digest": "a\nb"}, 400, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, out := m.call(http.MethodPost, "/v1/elicitations", "alice", tt.body)
			expectError(t, st, out, tt.status, tt.code)
		})
	}
	for _, raw := range []string{"", "{", `{"provider":"fake"}{"provider":"fake"}`, `[]`} {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/elicitations", strings.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+m.key)
		req.Header.Set(mcpauth.UserTokenHeader, m.token("alice"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("body %q: %d", raw, resp.StatusCode)
		}
	}
	st, out := m.call(http.MethodGet, "/v1/elicitations/short", "alice", nil)
	expectError(t, st, out, http.StatusNotFound, "not_found")
	st, out = m.call(http.MethodGet, "/v1/elicitations/"+strings.Repeat("A", 32)+"?wait=61s", "alice", nil)
	expectError(t, st, out, http.StatusBadRequest, "invalid_request")
	if e.count("elicitations") != 0 {
		t.Fatal("a refused mint stored an elicitation")
	}
}

// TestDeclineGrantsNoConsent: the user already connected a provider through
// MCP server B. MCP server A asks for it too, the user clicks Allow and then
// declines — at the provider, or on the API-key form. A must get no consent,
// and so not the credential B's flow stored.
func TestDeclineGrantsNoConsent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	alice := func(e *env) identity.User { return identity.User{Issuer: e.idps[0].Issuer(), Subject: "alice"} }
	// connectedThroughB stores alice's credential and B's consent, as B's
	// completed flow would have.
	connectedThroughB := func(e *env, prov, token string, scopes []string) {
		t.Helper()
		b := e.newMCPServer("files-b", prov)
		conn, err := e.vault.Put(ctx, alice(e), prov, vault.Credential{AccessToken: token, TokenType: "Bearer",
			Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.pool.Exec(ctx, `INSERT INTO consents (issuer, subject, client_id, provider, scopes, granted_at, updated_at, connection_id)
			VALUES ($1, 'alice', $2, $3, $4, now(), now(), $5)`, alice(e).Issuer, b.client.ID, prov, scopes, conn.ID); err != nil {
			t.Fatal(err)
		}
	}
	refusedA := func(e *env, a *mcpServer, prov string) {
		t.Helper()
		st, out := a.call(http.MethodGet, "/v1/connections/"+prov+"/token", "alice", nil)
		expectError(t, st, out, http.StatusForbidden, "consent_required")
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM consents WHERE client_id = $1`, a.client.ID).Scan(&n); err != nil || n != 0 {
			t.Fatalf("A holds %d consents (%v)", n, err)
		}
	}
	t.Run("access_denied at the provider", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{quirks: providertest.Quirks{AccessDenied: true}})
		connectedThroughB(e, "fake", "at_from_b", []string{"files.read"})
		a := e.newMCPServer("files-a", "fake")
		el := a.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"files.write"}})
		b := e.browser()
		u := el["url"].(string)
		if r := b.get(e.authorize(e.allow(b, u, e.openAs(b, u, "alice")))); r.status != 200 || !strings.Contains(r.body, "declined") {
			t.Fatalf("access_denied: %d %s", r.status, r.body)
		}
		refusedA(e, a, "fake")
	})
	t.Run("deny on the API-key form", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		connectedThroughB(e, "keyed", goodAPIKey, []string{})
		a := e.newMCPServer("files-a", "keyed")
		el := a.mint("alice", map[string]any{"provider": "keyed"})
		b := e.browser()
		u := el["url"].(string)
		form := e.allow(b, u, e.openAs(b, u, "alice"))
		r := b.do(http.MethodPost, u+"/key", url.Values{"csrf_token": {csrfOf(t, form.body)}, "decision": {"deny"}})
		if r.status != 200 || !strings.Contains(r.body, "declined") {
			t.Fatalf("deny on the key form: %d %s", r.status, r.body)
		}
		refusedA(e, a, "keyed")
	})
}

// TestPhishingSameSubjectOtherIssuer: a session for "alice" at another
// trusted issuer is another user; alice@idp0's link refuses it as it refuses
// bob, before any state exists or the provider is contacted.
func TestPhishingSameSubjectOtherIssuer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{issuers: 2})
	m := e.newMCPServer("files", "fake")
	el := m.mint("alice", map[string]any{"provider": "fake"}) // alice at idps[0]
	u := el["url"].(string)

	b := e.browser()
	b.get(e.pick(b, e.startLogin(b, url.Values{"issuer": {"idp1"}}.Encode()), "alice"))
	if s, err := e.session(b); err != nil || s.Issuer != e.idps[1].Issuer() || s.Subject != "alice" {
		t.Fatalf("session %+v %v", s, err)
	}
	e.refused(b.get(u), http.StatusForbidden, "identity_mismatch")
	sessPage := b.get(e.srv.URL + "/session")
	post := b.do(http.MethodPost, u, allowForm(t, sessPage.body))
	e.refused(post, http.StatusForbidden, "identity_mismatch")
	if e.count("oauth_states") != 0 || e.count("consents") != 0 || e.fake.Counts().Authorize != 0 {
		t.Fatal("state, consent or a provider round trip for a user of another issuer")
	}
}

// TestHandlesCheckTheIssuer: an MCP user token for "alice" at another trusted
// issuer is another user for the /v1 handles too: alice@idp0's elicitation
// and request_state refuse it.
func TestHandlesCheckTheIssuer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{issuers: 2})
	m := e.newMCPServer("files", "fake")
	el := m.mint("alice", map[string]any{"provider": "fake", "request_digest": "d1"})
	st, out := m.call(http.MethodGet, "/v1/elicitations/"+el["elicitation_id"].(string), "idp1:alice", nil)
	expectError(t, st, out, http.StatusNotFound, "not_found")
	st, out = m.call(http.MethodPost, "/v1/elicitations/resolve", "idp1:alice",
		map[string]any{"request_state": el["request_state"], "request_digest": "d1"})
	expectError(t, st, out, http.StatusForbidden, "request_state_wrong_user")
	if st, out = m.call(http.MethodGet, "/v1/elicitations/"+el["elicitation_id"].(string), "alice", nil); st != 200 {
		t.Fatalf("alice@idp0: %d %v", st, out)
	}
}

// TestSuccessPageIsReloadable (issue 38 item 2): a completed flow ends on
// a clean URL — the provider's callback answers a 303 to the link's own
// success page, so the one-time code leaves the address bar and history —
// and reloading that page shows the same success, with the way back to
// the application, not a used-up state's 400. The consent-only path ends
// there too. The page names an account only if it is the signed-in user's;
// another user opening it is refused as on the link.
func TestSuccessPageIsReloadable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("alpha", "fake")
	if err := e.clients.SetDisplay(context.Background(), m.client.ID, "", "https://alpha.example/app"); err != nil {
		t.Fatal(err)
	}
	el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	b := e.browser()
	u := el["url"].(string)
	callback := e.authorize(e.allow(b, u, e.openAs(b, u, "alice")))
	raw := b.Request(http.MethodGet, callback, nil) // as sent, the redirect not followed
	if raw.Status != http.StatusSeeOther || !strings.HasPrefix(raw.Location, u+"?account=cn_") ||
		strings.Contains(raw.Location, "code=") || strings.Contains(raw.Location, "state=") {
		t.Fatalf("callback: %d %q, want a 303 to %s?account=…", raw.Status, raw.Location, u)
	}
	if cc := raw.Header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
		t.Fatalf("callback Cache-Control %q", cc)
	}
	for i := range 2 { // the page, then a reload
		page := b.get(raw.Location)
		text := pageText(page.body)
		if page.status != http.StatusOK || !strings.Contains(text, "alpha can now use your") ||
			!strings.Contains(page.body, `href="https://alpha.example/app"`) {
			t.Fatalf("success page, load %d: %d\n%s", i+1, page.status, text)
		}
	}
	// Reloading the callback itself (from an old tab) still says what it
	// always did: the state is used up. The history holds the clean URL.
	if again := b.Request(http.MethodGet, callback, nil); again.Status != http.StatusBadRequest {
		t.Fatalf("the callback reused: %d", again.Status)
	}
	// Bob, with the URL: refused as on the link, nothing of alice's shown.
	bob := e.browser()
	e.openAs(bob, u, "bob")
	// (Bob could not sign in on the used link: it says only that it was
	// used. Signed in on another link of his, alice's page refuses him.)
	if page := bob.get(raw.Location); page.status != http.StatusOK || !strings.Contains(page.body, "already used") ||
		strings.Contains(page.body, "can now use") {
		t.Fatalf("bob, not signed in, on alice's success page: %d\n%s", page.status, pageText(page.body))
	}
	e.openAs(bob, e.newMCPServer("delta", "fake").mint("bob", map[string]any{"provider": "fake"})["url"].(string), "bob")
	if page := bob.get(raw.Location); page.status != http.StatusForbidden || strings.Contains(page.body, "can now use") {
		t.Fatalf("bob, signed in, on alice's success page: %d\n%s", page.status, pageText(page.body))
	}
	// A connection that is not alice's named in the URL: no account shown.
	e.connectFully(e.newMCPServer("beta", "fake"), "bob", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	bobConn := connectionIDOf(t, e, "bob")
	if page := b.get(u + "?account=" + bobConn); page.status != http.StatusOK ||
		strings.Contains(pageText(page.body), "can now use your") || !strings.Contains(pageText(page.body), "already completed") {
		t.Fatalf("alice's link naming bob's connection: %d\n%s", page.status, pageText(page.body))
	}

	// Consent only (the account is connected, another server asks for the
	// same scopes): Allow answers the same 303.
	g := e.newMCPServer("gamma", "fake")
	el = g.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	u = el["url"].(string)
	consent := e.openAs(b, u, "alice")
	r := b.Request(http.MethodPost, u, allowForm(t, consent.body))
	if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, u+"?account=cn_") {
		t.Fatalf("consent-only Allow: %d %q", r.Status, r.Location)
	}
	if page := b.get(r.Location); page.status != http.StatusOK || !strings.Contains(pageText(page.body), "gamma can now use your") {
		t.Fatalf("consent-only success page: %d\n%s", page.status, pageText(page.body))
	}
}

// TestEndedLinksNeedNoSignIn (issue 38 item 10): a link that is no longer
// pending tells a browser that is not signed in so at once — expired (410),
// or already used, never how or for whom — instead of asking it to sign in
// first; and every page that ends a link leads back to the application
// (its homepage).
func TestEndedLinksNeedNoSignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("alpha", "fake")
	if err := e.clients.SetDisplay(context.Background(), m.client.ID, "", "https://alpha.example/app"); err != nil {
		t.Fatal(err)
	}
	done := e.connectFully(m, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	used := done["url"].(string)
	expired := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"write"}})["url"].(string)
	e.clock.Advance(2 * time.Hour)

	anon := e.browser()
	r := anon.get(expired)
	if text := pageText(r.body); r.status != http.StatusGone || !strings.Contains(text, "This link has expired") ||
		!strings.Contains(r.body, `href="https://alpha.example/app"`) || !strings.Contains(text, "Back to alpha") {
		t.Fatalf("an expired link, not signed in: %d %q\n%s", r.status, r.location, text)
	}
	r = anon.get(used + "?account=" + connectionIDOf(t, e, "alice"))
	if text := pageText(r.body); r.status != http.StatusOK || !strings.Contains(text, "This link was already used") ||
		strings.Contains(text, "can now use") || strings.Contains(text, "alice") {
		t.Fatalf("a used link, not signed in: %d %q\n%s", r.status, r.location, text)
	}
	// Signed in as its user, an expired link says the same, with the way back.
	b := e.browser()
	e.openAs(b, m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string), "alice")
	if r := b.get(expired); r.status != http.StatusGone || !strings.Contains(r.body, "Back to alpha") {
		t.Fatalf("an expired link, signed in: %d\n%s", r.status, pageText(r.body))
	}
}

// connectionIDOf is user's one connection's id.
func connectionIDOf(t *testing.T, e *env, user string) string {
	t.Helper()
	var id string
	if err := e.pool.QueryRow(context.Background(), `SELECT id FROM connections WHERE subject = $1`, user).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
