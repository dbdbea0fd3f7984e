package connect_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// hostileToken signs an access token for m's resource at the first IdP with
// iss and sub spliced into the JSON verbatim (the insides of JSON strings, as
// a hostile or broken issuer writes them: raw bytes, escapes and all).
func (m *mcpServer) hostileToken(issLiteral, subLiteral string) string {
	m.e.t.Helper()
	now := time.Now().Unix()
	payload := fmt.Appendf(nil, `{"iss":"%s","sub":"%s","aud":["%s"],"client_id":"mcp-client","scope":"openid","iat":%d,"exp":%d}`,
		issLiteral, subLiteral, m.client.Resources[0], now, now+3600)
	tok, err := m.e.idps[0].SignJSON("at+jwt", payload)
	if err != nil {
		m.e.t.Fatal(err)
	}
	return tok
}

// callToken makes a /v1 request as m with the raw user token tok. Unlike
// call, a 5xx is returned, not fatal, so the test can name the route.
func (m *mcpServer) callToken(method, path, tok string, body any) (int, map[string]any) {
	m.e.t.Helper()
	st, out, raw := m.send(m.e.srv.URL, method, path, tok, body)
	if out == nil {
		out = map[string]any{"body": string(raw)}
	}
	return st, out
}

// jsonLiteral writes s as the inside of a JSON string escaping only '"' and
// '\': control characters and invalid UTF-8 go in raw, as a careless issuer
// would sign them.
func jsonLiteral(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// TestHostileIdentityOnEveryRoute (DESIGN invariant 11, issue 14 §3): a user
// token signed by a trusted issuer whose sub (or iss) is not an identity
// connectd can use byte for byte — NUL, other control characters, invalid
// UTF-8, an escaped lone surrogate the JSON decoder would turn into U+FFFD,
// more than 255 bytes — is refused on every /v1 route with 401 and a
// documented code, before anything is read or written; never a 500, never a
// rewritten identity. A subject that is odd but printable (a right-to-left
// override) works, stored byte for byte.
func TestHostileIdentityOnEveryRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"files.read"}})
	elID, state := el["elicitation_id"].(string), el["request_state"].(string)
	iss := jsonLiteral(e.idps[0].Issuer())

	routes := []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/v1/elicitations", map[string]any{"provider": "fake", "scopes": []string{"files.read"}}},
		{http.MethodGet, "/v1/elicitations/" + elID, nil},
		{http.MethodPost, "/v1/elicitations/resolve", map[string]any{"request_state": state}},
		{http.MethodGet, "/v1/connections", nil},
		{http.MethodGet, "/v1/connections/fake/token", nil},
		{http.MethodDelete, "/v1/connections/fake", nil},
	}
	for _, tc := range []struct {
		name     string
		iss, sub string // JSON string insides, verbatim
		code     string
	}{
		{"NUL raw", iss, "alice\x00", "invalid_token"},
		{"NUL escaped", iss, `alice\u0000`, "invalid_token"},
		{"NUL alone", iss, `\u0000`, "invalid_token"},
		{"invalid UTF-8", iss, "alice\xff", "invalid_token"},
		{"invalid UTF-8 alone", iss, "\xc3", "invalid_token"},
		{"UTF-8 of a surrogate", iss, "alice\xed\xb0\x80", "invalid_token"},
		{"lone low surrogate escape", iss, `alice\udc00`, "invalid_token"},
		{"lone high surrogate escape", iss, `\ud800`, "invalid_token"},
		{"256 bytes", iss, strings.Repeat("a", 256), "invalid_token"},
		{"2049 bytes", iss, strings.Repeat("a", 2049), "invalid_token"},
		{"100 KB", iss, strings.Repeat("a", 100<<10), "invalid_token"},
		{"tab", iss, `al\tice`, "invalid_token"},
		{"newline", iss, `alice\nadmin`, "invalid_token"},
		{"escape sequence", iss, `\u001b[31malice`, "invalid_token"},
		{"DEL", iss, "alice\x7f", "invalid_token"},
		{"C1", iss, `alice\u0085`, "invalid_token"},
		{"line separator", iss, `alice\u2028`, "invalid_token"},
		{"claim Sub overriding sub", iss, `alice","Sub":"mallory`, "invalid_token"},
		{"iss with NUL", iss + `\u0000`, "alice", "untrusted_issuer"},
		{"iss with invalid UTF-8", iss + "\xff", "alice", "invalid_token"},
		{"iss with lone surrogate", iss + `\udc00`, "alice", "invalid_token"},
		{"iss over 1024 bytes", iss + "/" + strings.Repeat("a", 1100), "alice", "untrusted_issuer"},
	} {
		tok := m.hostileToken(tc.iss, tc.sub)
		for _, r := range routes {
			t.Run(tc.name+"/"+r.method+" "+r.path, func(t *testing.T) {
				st, out := m.callToken(r.method, r.path, tok, r.body)
				if st >= 500 {
					t.Fatalf("server error %d %v", st, out)
				}
				if st != http.StatusUnauthorized || out["error"] != tc.code {
					t.Fatalf("got %d %v, want 401 %s", st, out, tc.code)
				}
			})
		}
	}
	// Nothing was written for any of them: alice's elicitation is the only one.
	if n := e.count("elicitations"); n != 1 {
		t.Fatalf("%d elicitations, want alice's 1", n)
	}

	// Printable Unicode is an identity like any other, used byte for byte.
	const rtl = "alice\u202Egnp.exe"
	tok := m.hostileToken(iss, rtl)
	want := map[string]int{"/v1/elicitations": http.StatusCreated, "/v1/connections": http.StatusOK,
		"/v1/connections/fake/token": http.StatusNotFound, "/v1/connections/fake": http.StatusNotFound}
	st, mine := m.callToken(http.MethodPost, "/v1/elicitations", tok, routes[0].body)
	if st != want["/v1/elicitations"] {
		t.Fatalf("mint as %q: %d %v", rtl, st, mine)
	}
	var stored string
	if err := e.pool.QueryRow(context.Background(), `SELECT subject FROM elicitations WHERE id = $1`,
		mine["elicitation_id"]).Scan(&stored); err != nil || stored != rtl {
		t.Fatalf("stored subject %q (%v), want %q", stored, err, rtl)
	}
	for _, r := range []struct {
		method, path string
		body         any
		status       int
	}{
		{http.MethodGet, "/v1/elicitations/" + mine["elicitation_id"].(string), nil, http.StatusOK},
		{http.MethodPost, "/v1/elicitations/resolve", map[string]any{"request_state": mine["request_state"]}, http.StatusOK},
		{http.MethodGet, "/v1/elicitations/" + elID, nil, http.StatusNotFound}, // alice's is not theirs
		{http.MethodGet, "/v1/connections", nil, want["/v1/connections"]},
		{http.MethodGet, "/v1/connections/fake/token", nil, want["/v1/connections/fake/token"]},
		{http.MethodDelete, "/v1/connections/fake", nil, want["/v1/connections/fake"]},
	} {
		if st, out := m.callToken(r.method, r.path, tok, r.body); st != r.status {
			t.Errorf("%s %s as %q: %d %v, want %d", r.method, r.path, rtl, st, out, r.status)
		}
	}
}

// TestHostileIdentityAtLogin: the browser login applies the same identity
// rule to the ID token's sub (mcpauth verifies both token kinds alike), so a
// session never holds an identity the /v1 API would refuse: such a login is
// refused with 400 invalid_id_token and no session; a printable one signs in
// byte for byte.
func TestHostileIdentityAtLogin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		sub  string
		ok   bool
	}{
		{"NUL", "alice\x00", false},
		{"newline", "alice\nadmin", false},
		{"C1", "alice\u0085", false},
		{"line separator", "alice\u2028", false},
		{"256 bytes", strings.Repeat("a", 256), false},
		{"2049 bytes", strings.Repeat("a", 2049), false},
		{"right-to-left override", "alice\u202Egnp.exe", true},
		{"255 bytes", strings.Repeat("a", 255), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{idTokenClaims: func(c jwt.MapClaims) { c["sub"] = tc.sub }})
			b := e.browser()
			r := e.login(b, "alice", "/session")
			if r.status >= 500 {
				t.Fatalf("login: %d %s", r.status, r.body)
			}
			if !tc.ok {
				e.refused(r, http.StatusBadRequest, "invalid_id_token")
				return
			}
			s, err := e.session(b)
			if r.status != http.StatusSeeOther || err != nil || s.Subject != tc.sub {
				t.Fatalf("login: %d, session %.60q (%v), want %.60q", r.status, s.Subject, err, tc.sub)
			}
		})
	}
}
