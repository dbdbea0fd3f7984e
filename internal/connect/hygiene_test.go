package connect_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
)

// secrets collects every secret a flow handled, by kind.
type secrets struct {
	t    *testing.T
	list []secret
}

type secret struct {
	kind, value string
	// owner is the only third party (by host) a Location may carry it to,
	// e.g. the provider's own state in its authorize URL; "" for none.
	owner string
}

func (s *secrets) add(kind, value, owner string) {
	s.t.Helper()
	if len(value) < 8 {
		s.t.Fatalf("%s %q is too short to search for", kind, value)
	}
	s.list = append(s.list, secret{kind, value, owner})
}

// in reports the secrets found in text, except those owned by allowHost.
func (s *secrets) in(text, allowHost string) []string {
	var out []string
	for _, x := range s.list {
		if x.owner != "" && x.owner == allowHost {
			continue
		}
		for _, form := range []string{x.value, url.QueryEscape(x.value)} {
			if strings.Contains(text, form) {
				out = append(out, x.kind)
				break
			}
		}
	}
	return out
}

// TestNoSecretsInLogsPagesOrRedirects runs whole flows — login at the IdP,
// consent, the OAuth round trip with PKCE, token use and a rotating refresh,
// an API key, logout — and a series of refusals, with every log line
// captured, and asserts that no access token, refresh token, authorization
// code, state, PKCE verifier, cookie value, client key, user token or API key
// appears in a log line, a page, an API error body, the audit trail, or a
// Location header, beyond the one state a third party's own authorize URL
// must carry. Every page also tells the browser to send no Referer.
func TestNoSecretsInLogsPagesOrRedirects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{rotate: true})
	m := e.newMCPServer("files", "fake", "keyed")
	sec := &secrets{t: t}
	sec.add("client key", m.key, "")
	userToken := m.token("alice")
	sec.add("user token", userToken, "")
	connectd, _ := url.Parse(e.srv.URL)

	var pages []response
	var apiErrors []string
	b := e.browser()
	get := func(u string) response {
		r := b.get(u)
		pages = append(pages, r)
		return r
	}
	post := func(u string, form url.Values) response {
		r := b.do(http.MethodPost, u, form)
		pages = append(pages, r)
		return r
	}
	api := func(method, path, key, token string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = strings.NewReader(string(raw))
		}
		req, _ := http.NewRequest(method, e.srv.URL+path, rd)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set(mcpauth.UserTokenHeader, token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 400 {
			apiErrors = append(apiErrors, string(raw))
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return resp.StatusCode, out
	}

	// Mint, then log in at the IdP: its state and code are secrets.
	_, el := api(http.MethodPost, "/v1/elicitations", m.key, userToken, map[string]any{"provider": "fake", "scopes": []string{"files.read"}})
	u := el["url"].(string)
	sec.add("request_state", el["request_state"].(string), "")
	toLogin := get(u)
	toIdP := get(toLogin.location)
	idpURL, _ := url.Parse(toIdP.location)
	sec.add("login state", idpURL.Query().Get("state"), idpURL.Host)
	loginCB, _ := url.Parse(e.pick(b, toIdP.location, "alice"))
	sec.add("IdP authorization code", loginCB.Query().Get("code"), "")
	if r := get(loginCB.String()); r.location != u {
		t.Fatalf("login returned to %q", r.location)
	}
	consent := get(u)

	// Allow: the provider's state, and the PKCE verifier sealed beside it.
	redirect := post(u, allowForm(t, consent.body))
	authz, _ := url.Parse(redirect.location)
	state := authz.Query().Get("state")
	sec.add("provider state", state, authz.Host)
	sh := sha256.Sum256([]byte(state))
	var sealed []byte
	if err := e.pool.QueryRow(context.Background(), "SELECT verifier_sealed FROM oauth_states WHERE state_hash = $1", sh[:]).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	verifierAAD := keyring.Binding("connectd/pkce_verifier/v1", string(sh[:]))
	verifier, err := e.keyring.Purpose("connectd/connect/pkce-verifier/v1").Open(sealed, verifierAAD)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.keyring.Open(sealed, verifierAAD); err == nil { // DESIGN invariant 13
		t.Fatal("the PKCE verifier opens under the configured key: it was not sealed under its purpose key")
	}
	sec.add("PKCE verifier", string(verifier), "")
	callback := e.authorize(redirect)
	cbURL, _ := url.Parse(callback)
	sec.add("provider authorization code", cbURL.Query().Get("code"), "")
	if done := get(callback); !strings.Contains(done.body, "Connected") {
		t.Fatalf("callback: %d %s", done.status, done.body)
	}
	get(callback) // replayed: refused

	// The credential, used and then refreshed with rotation.
	user := identity.User{Issuer: e.idps[0].Issuer(), Subject: "alice"}
	_, cred, err := e.vault.Get(context.Background(), user, "fake", "")
	if err != nil {
		t.Fatal(err)
	}
	sec.add("access token", cred.AccessToken, "")
	sec.add("refresh token", cred.RefreshToken, "")
	if st, out := api(http.MethodGet, "/v1/connections/fake/token", m.key, userToken, nil); st != 200 || out["access_token"] != cred.AccessToken {
		t.Fatalf("token: %d", st)
	}
	e.clock.Advance(59*time.Minute + 30*time.Second) // within the vault's 1-minute refresh skew
	if st, _ := api(http.MethodGet, "/v1/connections/fake/token", m.key, userToken, nil); st != 200 {
		t.Fatalf("token after refresh: %d", st)
	}
	_, cred2, err := e.vault.Get(context.Background(), user, "fake", "")
	if err != nil || cred2.RefreshToken == cred.RefreshToken {
		t.Fatalf("the refresh did not rotate: %v", err)
	}
	sec.add("refreshed access token", cred2.AccessToken, "")
	sec.add("rotated refresh token", cred2.RefreshToken, "")

	// An API key, a wrong one first.
	_, kel := api(http.MethodPost, "/v1/elicitations", m.key, userToken, map[string]any{"provider": "keyed"})
	ku := kel["url"].(string)
	form := post(ku, allowForm(t, get(ku).body))
	sec.add("API key", goodAPIKey, "")
	sec.add("wrong API key", "sk-wrong-but-secret-key", "")
	post(ku+"/key", url.Values{"csrf_token": {csrfOf(t, form.body)}, "decision": {"save"}, "api_key": {"sk-wrong-but-secret-key"}})
	post(ku+"/key", url.Values{"csrf_token": {csrfOf(t, form.body)}, "decision": {"save"}, "api_key": {goodAPIKey}})

	// Refusals: a client key one character off, a token for another MCP
	// server, a tampered request_state, a forged state, a bad CSRF token.
	badKey := m.key[:len(m.key)-1] + string("AB"[strings.IndexByte("AB", m.key[len(m.key)-1])+1&1])
	sec.add("wrong client key", badKey, "")
	api(http.MethodGet, "/v1/connections", badKey, userToken, nil)
	other := e.newMCPServer("other", "fake")
	otherToken := other.token("alice")
	sec.add("other MCP server's user token", otherToken, "")
	api(http.MethodGet, "/v1/connections", m.key, otherToken, nil)
	rs := el["request_state"].(string)
	api(http.MethodPost, "/v1/elicitations/resolve", m.key, userToken, map[string]any{"request_state": rs[:len(rs)-2]})
	forged := *cbURL
	fq := forged.Query()
	fq.Set("state", strings.Repeat("Z", 43))
	fq.Set("code", "code_forged-but-secret-value")
	sec.add("forged code", "code_forged-but-secret-value", "")
	forged.RawQuery = fq.Encode()
	get(forged.String())
	post(u, url.Values{"csrf_token": {"forged-csrf-token-value"}, "decision": {"allow"}})

	// Every cookie value the browser ever held, then log out.
	for _, r := range pages {
		for _, sc := range r.setCookies {
			if c, err := http.ParseSetCookie(sc); err == nil && c.Value != "" {
				sec.add("cookie "+c.Name, c.Value, "")
			}
		}
	}
	post(e.srv.URL+"/logout", url.Values{"csrf_token": {"x"}})

	logs := e.logs.String()
	if !strings.Contains(logs, `"msg":"request"`) || !strings.Contains(logs, "/oauth/callback") {
		t.Fatalf("the access log was not captured:\n%s", logs)
	}
	for _, line := range strings.Split(logs, "\n") {
		if found := sec.in(line, "-"); len(found) > 0 {
			t.Errorf("log line carries %v: %s", found, line)
		}
	}
	for _, r := range pages {
		// A redirect's Location (and the link net/http puts in its body)
		// may carry only the state of the third party it goes to; one back
		// to connectd carries nothing.
		allow := "-"
		if r.location != "" {
			lu, err := url.Parse(r.location)
			if err != nil {
				t.Fatalf("bad Location %q", r.location)
			}
			if lu.Host != connectd.Host {
				allow = lu.Host
			}
			if found := sec.in(r.location, allow); len(found) > 0 {
				t.Errorf("Location to %s carries %v", lu.Host, found)
			}
		}
		if found := sec.in(r.body, allow); len(found) > 0 {
			t.Errorf("page (%d) carries %v", r.status, found)
		}
		if r.header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("response (%d) lets the browser send a Referer", r.status)
		}
		if r.location == "" && !strings.Contains(r.body, `<meta name="referrer" content="no-referrer"`) {
			t.Errorf("page (%d) lacks the no-referrer meta tag", r.status)
		}
	}
	for _, body := range apiErrors {
		if found := sec.in(body, "-"); len(found) > 0 {
			t.Errorf("API error body carries %v: %s", found, body)
		}
	}
	rows, err := e.pool.Query(context.Background(), "SELECT kind, coalesce(target,'') || ' ' || detail::text FROM audit_events")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var kind, text string
		if err := rows.Scan(&kind, &text); err != nil {
			t.Fatal(err)
		}
		n++
		if found := sec.in(text, "-"); len(found) > 0 {
			t.Errorf("audit event %s carries %v", kind, found)
		}
	}
	rows.Close()
	if n < 5 || len(pages) < 12 || len(apiErrors) < 3 || len(sec.list) < 18 {
		t.Fatalf("the flow did less than intended: %d audit events, %d pages, %d API errors, %d secrets",
			n, len(pages), len(apiErrors), len(sec.list))
	}
}
