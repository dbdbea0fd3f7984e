package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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
	mints = &atomic.Int32{}
	idp, mcpURL = setupWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mints.Add(1)
		}
		writeError(w, r, http.StatusNotFound, map[string]any{"error": "not_connected"})
	}), mcpserver.CredentialProxy)
	return idp, mcpURL, mints
}

// setupWith is setup with connectd played by cd and the tool in credential
// mode cred; the example's file service answers GET /files with the owner
// its bearer token names ("Bearer tok-work" → "work").
func setupWith(t *testing.T, cd http.Handler, cred mcpserver.Credential, edits ...func(*mcpserver.Config)) (idp *devidp.Provider, mcpURL string) {
	t.Helper()
	idpMux := http.NewServeMux()
	idpSrv := httptest.NewServer(idpMux)
	t.Cleanup(idpSrv.Close)
	idp, err := devidp.New(devidp.Config{Issuer: idpSrv.URL})
	if err != nil {
		t.Fatal(err)
	}
	idpMux.Handle("/", idp.Handler())

	cdSrv := httptest.NewServer(cd)
	t.Cleanup(cdSrv.Close)
	cdc, err := client.New(client.Config{BaseURL: cdSrv.URL, Key: "cks_test", NoFallback: true})
	if err != nil {
		t.Fatal(err)
	}

	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cfg := mcpserver.Config{Resource: srv.URL + resourcePath, Issuer: idpSrv.URL,
		Connectd: cdc, Provider: "demo-files", Credential: cred, FilesAPI: srv.URL + "/files", WaitTimeout: 10 * time.Second}
	for _, edit := range edits {
		edit(&cfg)
	}
	s, err := mcpserver.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	mux.HandleFunc("GET /files", func(w http.ResponseWriter, r *http.Request) {
		owner, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer tok-")
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"owner": owner, "files": []any{map[string]any{"name": "a.txt", "size": 1}}})
	})
	mux.Handle("/", s.Handler())
	return idp, srv.URL + resourcePath
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers connectd's error envelope, naming the request's id
// as connectd does (the proxy's client tells connectd's refusals from the
// provider's answers by it).
func writeError(w http.ResponseWriter, r *http.Request, status int, body map[string]any) {
	body["request_id"] = r.Header.Get(client.RequestIDHeader)
	writeJSON(w, status, body)
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

const (
	workID = "cn_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	homeID = "cn_bbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// accountsConnectd is a stand-in connectd for a user with two accounts at
// demo-files this server is approved for: a token read without account
// answers account_required, with one the account's token. home's grant is
// dead until the user reconnects it (a mint for it, then completion).
type accountsConnectd struct {
	t        *testing.T
	mu       sync.Mutex
	reads    []string // the account of each token read
	mints    []string // the account of each mint
	homeDead bool
}

func (c *accountsConnectd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	base := "http://" + r.Host
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/connections/demo-files/token":
		account := r.URL.Query().Get("account")
		c.reads = append(c.reads, account)
		if name, ok := c.decide(w, r, account); ok {
			writeJSON(w, http.StatusOK, map[string]any{"provider": "demo-files", "kind": "oauth2", "access_token": "tok-" + name,
				"account": map[string]any{"id": account, "display_name": "alice@" + name + ".example"}})
		}
	case "GET /v1/proxy/demo-files/files":
		// The proxy decides as the token read, then answers as the file
		// service would with the account's credential.
		account := r.Header.Get(client.AccountHeader)
		c.reads = append(c.reads, account)
		if r.Header.Get("Authorization") != "Bearer cks_test" || r.Header.Get(client.UserTokenHeader) == "" {
			c.t.Errorf("proxied call without the client key and user token: %v", r.Header)
		}
		if name, ok := c.decide(w, r, account); ok {
			writeJSON(w, http.StatusOK, map[string]any{"owner": name, "files": []any{map[string]any{"name": "a.txt", "size": 1}}})
		}
	case "POST /v1/elicitations":
		var req struct {
			Account string `json:"account"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		c.mints = append(c.mints, req.Account)
		u := base + "/c/EID"
		el := map[string]any{"mode": "url", "elicitationId": "EID", "url": u, "message": "Reconnect it."}
		writeJSON(w, http.StatusCreated, map[string]any{"elicitation_id": "EID", "status": "pending", "provider": "demo-files",
			"expires_at": time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339), "url": u, "request_state": "rs1.STATE",
			"elicitation": el, "url_elicitation_required_error": map[string]any{"code": -32042, "message": "m",
				"data": map[string]any{"elicitations": []any{el}}},
			"input_request": map[string]any{"method": "elicitation/create", "params": map[string]any{"mode": "url", "message": "Reconnect it.", "url": u}}})
	case "GET /v1/elicitations/EID", "POST /v1/elicitations/resolve":
		c.homeDead = false // the user reconnected home in the browser
		writeJSON(w, http.StatusOK, map[string]any{"elicitation_id": "EID", "status": "completed", "provider": "demo-files",
			"expires_at": time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)})
	default:
		c.t.Errorf("unexpected call %s %s", r.Method, r.URL)
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "not_found"})
	}
}

// decide answers the refusal connectd would give for account, or reports
// the account's name.
func (c *accountsConnectd) decide(w http.ResponseWriter, r *http.Request, account string) (string, bool) {
	switch {
	case account == "":
		writeError(w, r, http.StatusConflict, map[string]any{"error": "account_required", "accounts": []any{
			map[string]any{"id": workID, "display_name": "alice@work.example", "label": "work"},
			map[string]any{"id": homeID, "display_name": "alice@home.example"}}})
	case account == homeID && c.homeDead:
		writeError(w, r, http.StatusConflict, map[string]any{"error": "reauthorization_required"})
	case account == workID || account == homeID:
		return map[string]string{workID: "work", homeID: "home"}[account], true
	default:
		writeError(w, r, http.StatusNotFound, map[string]any{"error": "not_found"})
	}
	return "", false
}

func (c *accountsConnectd) seen() (reads, mints []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reads), slices.Clone(c.mints)
}

// callAs calls list_files as an MCP client of version with caps, whose
// elicitation handler answers a form with pick (the option's title → its
// value) and accepts every URL.
func callAs(t *testing.T, idp *devidp.Provider, mcpURL, version string, caps *mcp.ClientCapabilities, pick func(*mcp.ElicitParams) *mcp.ElicitResult, args map[string]any) (*mcp.CallToolResult, []*mcp.ElicitParams) {
	t.Helper()
	token, err := idp.AccessToken("alice", mcpURL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Capabilities: caps,
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, r.Params)
			mu.Unlock()
			if r.Params.Mode == "form" {
				return pick(r.Params), nil
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		}})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: mcpURL,
		HTTPClient: &http.Client{Transport: bearer(token)}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_files", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return res, asked
}

// pickTitled answers the account form with the option titled title.
func pickTitled(t *testing.T, title string) func(*mcp.ElicitParams) *mcp.ElicitResult {
	return func(p *mcp.ElicitParams) *mcp.ElicitResult {
		var schema struct {
			Properties map[string]struct {
				OneOf []struct{ Const, Title string } `json:"oneOf"`
			} `json:"properties"`
		}
		b, _ := json.Marshal(p.RequestedSchema)
		json.Unmarshal(b, &schema)
		for _, o := range schema.Properties[client.AccountField].OneOf {
			if o.Title == title {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{client.AccountField: o.Const}}
			}
		}
		t.Errorf("no option %q in %s", title, b)
		return &mcp.ElicitResult{Action: "cancel"}
	}
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// credentials are the example's two modes: each account test runs in both,
// since connectd's refusals come the same way through the proxy as from the
// token read.
var credentials = []mcpserver.Credential{mcpserver.CredentialProxy, mcpserver.CredentialToken}

var (
	formAndURL = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{
		Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}}
	urlOnly = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
)

// TestSeveralAccounts (issue 24): a user with two accounts this server may
// use is asked which, in a form when the MCP client has form mode (both
// protocol generations), else in a tool error that lists the accounts for
// the tool's account argument; the token read (or the proxied call) names
// the one chosen, in both credential modes.
func TestSeveralAccounts(t *testing.T) {
	t.Parallel()
	for _, cred := range credentials {
		t.Run(cred.String(), func(t *testing.T) {
			t.Parallel()
			for _, version := range []string{"2025-11-25", "2026-07-28"} {
				t.Run("form "+version, func(t *testing.T) {
					t.Parallel()
					cd := &accountsConnectd{t: t}
					idp, mcpURL := setupWith(t, cd, cred)
					res, asked := callAs(t, idp, mcpURL, version, formAndURL, pickTitled(t, "alice@home.example"), map[string]any{})
					if res.IsError || !strings.Contains(text(res), "files for home") {
						t.Fatalf("result: %s", text(res))
					}
					if len(asked) != 1 || asked[0].Mode != "form" || !strings.Contains(fmt.Sprint(asked[0].RequestedSchema), "work (alice@work.example)") {
						t.Fatalf("asked %+v", asked)
					}
					if reads, _ := cd.seen(); fmt.Sprint(reads) != fmt.Sprint([]string{"", homeID}) {
						t.Fatalf("token reads for accounts %q", reads)
					}
				})
			}
			t.Run("no form mode", func(t *testing.T) {
				t.Parallel()
				cd := &accountsConnectd{t: t}
				idp, mcpURL := setupWith(t, cd, cred)
				res, asked := callAs(t, idp, mcpURL, "2025-11-25", urlOnly, nil, map[string]any{})
				if txt := text(res); !res.IsError || len(asked) != 0 || !strings.Contains(txt, "- work (alice@work.example): "+workID) ||
					!strings.Contains(txt, "- alice@home.example: "+homeID) || !strings.Contains(txt, "list_files again with account") {
					t.Fatalf("result %s, asked %+v", txt, asked)
				}
				// The model calls again with the account the user named.
				res, _ = callAs(t, idp, mcpURL, "2025-11-25", urlOnly, nil, map[string]any{"account": workID})
				if res.IsError || !strings.Contains(text(res), "files for work") {
					t.Fatalf("with account: %s", text(res))
				}
				res, _ = callAs(t, idp, mcpURL, "2025-11-25", urlOnly, nil, map[string]any{"account": "cn_cccccccccccccccccccccccccc"})
				if !res.IsError || !strings.Contains(text(res), "is not one of your file-service accounts") {
					t.Fatalf("unknown account: %s", text(res))
				}
			})
			t.Run("declined", func(t *testing.T) {
				t.Parallel()
				cd := &accountsConnectd{t: t}
				idp, mcpURL := setupWith(t, cd, cred)
				decline := func(*mcp.ElicitParams) *mcp.ElicitResult { return &mcp.ElicitResult{Action: "decline"} }
				res, _ := callAs(t, idp, mcpURL, "2026-07-28", formAndURL, decline, map[string]any{})
				if !res.IsError || !strings.Contains(text(res), "No file-service account was chosen") {
					t.Fatalf("result: %s", text(res))
				}
			})
		})
	}
}

// TestReconnectTheChosenAccount: when the account the user chose needs
// reauthorizing, the link is minted for that account, and once connected
// its token is read — on 2026-07-28 across the retry, whose input key
// carries the account (client.ConnectKey).
func TestReconnectTheChosenAccount(t *testing.T) {
	t.Parallel()
	for _, cred := range credentials {
		t.Run(cred.String(), func(t *testing.T) {
			t.Parallel()
			for _, version := range []string{"2025-11-25", "2026-07-28"} {
				t.Run(version, func(t *testing.T) {
					t.Parallel()
					cd := &accountsConnectd{t: t, homeDead: true}
					idp, mcpURL := setupWith(t, cd, cred)
					res, asked := callAs(t, idp, mcpURL, version, formAndURL, pickTitled(t, "alice@home.example"), map[string]any{})
					if res.IsError || !strings.Contains(text(res), "files for home") {
						t.Fatalf("result: %s", text(res))
					}
					if len(asked) != 2 || asked[0].Mode != "form" || asked[1].Mode != "url" {
						t.Fatalf("asked %+v", asked)
					}
					reads, mints := cd.seen()
					if fmt.Sprint(mints) != fmt.Sprint([]string{homeID}) || fmt.Sprint(reads) != fmt.Sprint([]string{"", homeID, homeID}) {
						t.Fatalf("mints for %q, token reads for %q", mints, reads)
					}
				})
			}
		})
	}
}

// TestConnectAnotherAccount: list_files with account "new" mints a link for
// another account without reading a token first; once connected, the token
// is read naming none, so the user is asked which of her accounts — on
// 2026-07-28 across the retry too.
func TestConnectAnotherAccount(t *testing.T) {
	t.Parallel()
	for _, cred := range credentials {
		t.Run(cred.String(), func(t *testing.T) {
			t.Parallel()
			for _, version := range []string{"2025-11-25", "2026-07-28"} {
				t.Run(version, func(t *testing.T) {
					t.Parallel()
					cd := &accountsConnectd{t: t}
					idp, mcpURL := setupWith(t, cd, cred)
					res, asked := callAs(t, idp, mcpURL, version, formAndURL, pickTitled(t, "alice@home.example"),
						map[string]any{"account": "new"})
					if res.IsError || !strings.Contains(text(res), "files for home") {
						t.Fatalf("result: %s", text(res))
					}
					if len(asked) < 2 || asked[0].Mode != "url" || asked[len(asked)-1].Mode != "form" {
						t.Fatalf("asked %+v", asked)
					}
					reads, mints := cd.seen()
					if fmt.Sprint(mints) != fmt.Sprint([]string{"new"}) || len(reads) == 0 || reads[0] != "" {
						t.Fatalf("mints for %q, token reads for %q", mints, reads)
					}
				})
			}
		})
	}
}

// TestProxyAnswers: through the proxy, the file service's own errors are
// its answer (even JSON naming an error code: connectd's envelope is told
// apart by the request's id), a credential the provider refuses even
// refreshed (provider_unauthorized) unlinks that account as a refused token
// does in token mode, and connectd's other refusals say what connectd said.
func TestProxyAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		want   string
		unlink bool
	}{
		{"the provider's error", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusForbidden, map[string]any{"error": "not_connected", "request_id": "the provider's"})
		}, "The file service answered 403.", false},
		{"provider_unauthorized", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, r, http.StatusUnauthorized, map[string]any{"error": "provider_unauthorized"})
		}, "refused the stored authorization, so it was removed", true},
		{"provider_rate_limited", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3")
			writeError(w, r, http.StatusTooManyRequests, map[string]any{"error": "provider_rate_limited"})
		}, "cannot be reached through connectd right now (provider_rate_limited)", false},
		{"proxy_not_supported", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, r, http.StatusNotFound, map[string]any{"error": "proxy_not_supported"})
		}, "cannot reach the file service through connectd", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var unlinked atomic.Bool
			idp, mcpURL := setupWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.Method + " " + r.URL.Path {
				case "GET /v1/proxy/demo-files/files":
					tc.answer(w, r)
				case "DELETE /v1/connections/demo-files":
					unlinked.Store(true)
					writeJSON(w, http.StatusOK, map[string]any{"provider": "demo-files", "revoked": true})
				default:
					t.Errorf("unexpected call %s %s", r.Method, r.URL)
					writeError(w, r, http.StatusNotFound, map[string]any{"error": "not_found"})
				}
			}), mcpserver.CredentialProxy)
			res, _ := callAs(t, idp, mcpURL, "2025-11-25", urlOnly, nil, map[string]any{})
			if !res.IsError || !strings.Contains(text(res), tc.want) {
				t.Fatalf("result %q, want %q", text(res), tc.want)
			}
			if unlinked.Load() != tc.unlink {
				t.Fatalf("unlinked: %v, want %v", unlinked.Load(), tc.unlink)
			}
		})
	}
}
