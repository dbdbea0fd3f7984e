package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connectd/connectd/client"
	mcpserver "github.com/connectd/connectd/examples/mcp-server"
	"github.com/connectd/connectd/internal/devidp"
)

const resourcePath = "/mcp"

// setup starts an identity provider, a stand-in connectd that knows no
// connection (and counts mints), and the example server, whose connectd
// client has the fallback for clients without URL mode turned off.
func setup(t *testing.T) (idp *devidp.Provider, mcpURL string, mints *atomic.Int32) {
	t.Helper()
	idpMux := http.NewServeMux()
	idpSrv := httptest.NewServer(idpMux)
	t.Cleanup(idpSrv.Close)
	idp, err := devidp.New(devidp.Config{Issuer: idpSrv.URL})
	if err != nil {
		t.Fatal(err)
	}
	idpMux.Handle("/", idp.Handler())

	mints = &atomic.Int32{}
	cdSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			mints.Add(1)
		}
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]string{"error": "not_connected"})
	}))
	t.Cleanup(cdSrv.Close)
	cd, err := client.New(client.Config{BaseURL: cdSrv.URL, Key: "cks_test", NoFallback: true})
	if err != nil {
		t.Fatal(err)
	}

	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s, err := mcpserver.New(context.Background(), mcpserver.Config{Resource: srv.URL + resourcePath, Issuer: idpSrv.URL,
		Connectd: cd, Provider: "demo-files", FilesAPI: srv.URL + "/unused"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	mux.Handle("/", s.Handler())
	return idp, srv.URL + resourcePath, mints
}

// post sends a raw tools/list with a bearer token and returns the status and
// WWW-Authenticate.
func post(t *testing.T, u, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

func TestCallerTokensAreVerified(t *testing.T) {
	t.Parallel()
	idp, mcpURL, _ := setup(t)
	other, err := devidp.New(devidp.Config{Issuer: "http://127.0.0.1:1"}) // another issuer, unknown keys
	if err != nil {
		t.Fatal(err)
	}
	sign := func(p *devidp.Provider, typ string, edit func(jwt.MapClaims)) string {
		c := p.AccessTokenClaims("alice", "mcp-client", "openid", mcpURL)
		if edit != nil {
			edit(c)
		}
		tok, err := p.Sign(typ, c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := sign(idp, "at+jwt", nil)
	unsigned := jwt.NewWithClaims(jwt.SigningMethodNone, idp.AccessTokenClaims("alice", "c", "", mcpURL))
	unsigned.Header["typ"] = "at+jwt"
	none, _ := unsigned.SignedString(jwt.UnsafeAllowNoneSignatureType)
	hmac := jwt.NewWithClaims(jwt.SigningMethodHS256, idp.AccessTokenClaims("alice", "c", "", mcpURL))
	hmac.Header["typ"] = "at+jwt"
	hs, _ := hmac.SignedString([]byte("guessable"))

	tests := []struct {
		name  string
		token string
		want  int
	}{
		{"valid", good, http.StatusOK},
		{"no token", "", http.StatusUnauthorized},
		{"another audience (passthrough)", sign(idp, "at+jwt", func(c jwt.MapClaims) { c["aud"] = []string{"https://other.example/mcp"} }), http.StatusUnauthorized},
		{"another issuer", sign(other, "at+jwt", nil), http.StatusUnauthorized},
		{"claims another issuer", sign(idp, "at+jwt", func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), http.StatusUnauthorized},
		{"expired", sign(idp, "at+jwt", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), http.StatusUnauthorized},
		{"no exp", sign(idp, "at+jwt", func(c jwt.MapClaims) { delete(c, "exp") }), http.StatusUnauthorized},
		{"ID token, not an access token", sign(idp, "JWT", nil), http.StatusUnauthorized},
		{"no sub", sign(idp, "at+jwt", func(c jwt.MapClaims) { delete(c, "sub") }), http.StatusUnauthorized},
		{"alg none", none, http.StatusUnauthorized},
		{"HMAC", hs, http.StatusUnauthorized},
		{"truncated", good[:len(good)-10], http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, challenge := post(t, mcpURL, tt.token)
			if status != tt.want {
				t.Fatalf("status %d, want %d", status, tt.want)
			}
			if status == http.StatusUnauthorized && !strings.Contains(challenge, "/.well-known/oauth-protected-resource/mcp") {
				t.Fatalf("WWW-Authenticate %q does not point at the resource metadata", challenge)
			}
		})
	}
}

func TestProtectedResourceMetadata(t *testing.T) {
	t.Parallel()
	idp, mcpURL, _ := setup(t)
	origin := strings.TrimSuffix(mcpURL, resourcePath)
	resp, err := http.Get(origin + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.Resource != mcpURL ||
		len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != idp.Issuer() {
		t.Fatalf("metadata: %+v %v", m, err)
	}
}

// TestNoURLElicitationNoLink: with the fallback off (client.Config.NoFallback),
// a client that cannot open a URL-mode elicitation (no "url" capability, or a
// protocol before 2025-11-25) gets a tool error, and no connect link is
// minted for it. (With the fallback on, e2e.TestFallbackWithoutURLMode.)
func TestNoURLElicitationNoLink(t *testing.T) {
	t.Parallel()
	idp, mcpURL, mints := setup(t)
	token, err := idp.AccessToken("alice", mcpURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version string
		caps    *mcp.ClientCapabilities
	}{
		{"2025-11-25", &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}},
		{"2025-06-18", &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}},
		{"2026-07-28", &mcp.ClientCapabilities{}},
	} {
		t.Run(tc.version, func(t *testing.T) {
			c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Capabilities: tc.caps})
			hc := &http.Client{Transport: bearer(token)}
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: mcpURL, HTTPClient: hc},
				&mcp.ClientSessionOptions{ProtocolVersion: tc.version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_files", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "cannot open a connect link") {
				t.Fatalf("result: %+v", res.Content)
			}
		})
	}
	if n := mints.Load(); n != 0 {
		t.Fatalf("%d elicitations minted for clients that cannot show them", n)
	}
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
