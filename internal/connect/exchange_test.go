package connect_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/connectd/connectd/internal/api"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth"
)

// exchangeParams are the RFC 8693 parameters of a token exchange for user's
// MCP access token tok, at target (audience).
func exchangeParams(tok, audience string) url.Values {
	return url.Values{
		"grant_type":         {api.GrantTokenExchange},
		"subject_token":      {tok},
		"subject_token_type": {api.TokenTypeAccessToken},
		"audience":           {audience},
	}
}

// postToken posts form to connectd's token endpoint at base with the
// Authorization header auth ("" sends none) and returns the status, headers
// and the JSON body.
func (e *env) postToken(base, auth string, form url.Values) (int, http.Header, map[string]any) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+api.TokenPath, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatalf("token endpoint answered %d, not JSON: %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, resp.Header, out
}

// basic is m's client_secret_basic Authorization header.
func (m *mcpServer) basic() string {
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth(url.QueryEscape(m.client.ID), url.QueryEscape(m.key))
	return req.Header.Get("Authorization")
}

// exchangeClient is golang.org/x/oauth2 as the MCP server's OAuth client.
// x/oauth2 has no RFC 8693 client of its own; its client-credentials
// client lets grant_type be overridden and sends the other parameters
// as given, so it is an independent encoder of the request (Basic or
// body client authentication, form encoding) and decoder of the answer and
// of RFC 6749 §5.2 errors.
func (e *env) exchangeClient(m *mcpServer, style oauth2.AuthStyle, params url.Values) *clientcredentials.Config {
	return &clientcredentials.Config{ClientID: m.client.ID, ClientSecret: m.key, TokenURL: e.srv.URL + api.TokenPath,
		AuthStyle: style, EndpointParams: params}
}

func (e *env) oauthContext() context.Context {
	return context.WithValue(context.Background(), oauth2.HTTPClient, e.srv.Client())
}

// TestTokenExchange (issue 28 part 2): RFC 8693 token exchange answers what
// the token read answers, to an independent OAuth client, with both
// client-secret methods, and names the provider by audience or resource.
func TestTokenExchange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	id := e.connID("alice")

	// The answer is not cached, and the read is sampled into the audit
	// trail naming the connection, as the token read's is (this client has
	// made no token read).
	st, h, out := e.postToken(e.srv.URL, a.basic(), exchangeParams(a.token("alice"), "connectd:provider:fake"))
	if st != http.StatusOK || h.Get("Cache-Control") != "no-store" || out["account"].(map[string]any)["id"] != id {
		t.Fatalf("%d %v %v", st, h, out)
	}
	if err := e.server.Sweep(context.Background()); err != nil { // writes the queued first read
		t.Fatal(err)
	}
	if rows, _ := e.sampledCount("token.read", ` AND client_id = $2 AND target = $3`, a.client.ID, id); rows != 1 {
		t.Fatalf("%d token.read audit rows naming %s, want 1", rows, id)
	}
	read := tokenOf(t, a, "alice")

	for _, tt := range []struct {
		name   string
		style  oauth2.AuthStyle
		target url.Values
	}{
		{"basic, audience", oauth2.AuthStyleInHeader, url.Values{"audience": {"connectd:provider:fake"}}},
		{"post, audience with account", oauth2.AuthStyleInParams, url.Values{"audience": {"connectd:provider:fake:" + id}}},
		{"basic, resource", oauth2.AuthStyleInHeader, url.Values{"resource": {e.srv.URL + "/v1/connections/fake"}}},
		{"post, both", oauth2.AuthStyleInParams, url.Values{"resource": {e.srv.URL + "/v1/connections/fake?account=" + id},
			"audience": {"connectd:provider:fake:" + id}, "scope": {"read"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			params := url.Values{"grant_type": {api.GrantTokenExchange}, "subject_token": {a.token("alice")},
				"subject_token_type": {api.TokenTypeAccessToken}}
			for k, v := range tt.target {
				params[k] = v
			}
			tok, err := e.exchangeClient(a, tt.style, params).Token(e.oauthContext())
			if err != nil {
				t.Fatal(err)
			}
			if tok.AccessToken != read["access_token"] || tok.AccessToken == "" {
				t.Fatalf("exchange gave %q, the token read %q", tok.AccessToken, read["access_token"])
			}
			if tok.Extra("issued_token_type") != api.TokenTypeAccessToken || tok.TokenType != "Bearer" ||
				tok.Extra("scope") != "read" || tok.Expiry.IsZero() {
				t.Fatalf("answer: type %v, token_type %q, scope %v, expiry %v", tok.Extra("issued_token_type"), tok.TokenType,
					tok.Extra("scope"), tok.Expiry)
			}
		})
	}

	// The metadata says where and how.
	resp, err := e.srv.Client().Get(e.srv.URL + api.MetadataPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	if md["issuer"] != e.srv.URL || md["token_endpoint"] != e.srv.URL+api.TokenPath ||
		!strings.Contains(jsonString(md["grant_types_supported"]), api.GrantTokenExchange) ||
		!strings.Contains(jsonString(md["token_endpoint_auth_methods_supported"]), "private_key_jwt") ||
		strings.Contains(jsonString(md["token_endpoint_auth_signing_alg_values_supported"]), "HS256") {
		t.Fatalf("metadata: %v", md)
	}
}

// TestTokenExchangeRefusals: each refusal, in RFC 6749 §5.2 form with its
// code, and never a credential.
func TestTokenExchangeRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake", "keyed")
	b := e.newMCPServer("beta", "fake")
	p := e.newMCPServer("proxied", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.consentAgain(p, "alice")
	if err := e.server.Clients().SetProxyOnly(context.Background(), p.client.ID, true); err != nil {
		t.Fatal(err)
	}
	good := a.token("alice")
	tampered := good[:len(good)-4] + map[bool]string{true: "AAAA", false: "BBBB"}[!strings.HasSuffix(good, "AAAA")]
	with := func(f url.Values, k, v string) url.Values {
		g := url.Values{}
		for k, v := range f {
			g[k] = v
		}
		if v == "" {
			g.Del(k)
		} else {
			g.Set(k, v)
		}
		return g
	}
	fake := exchangeParams(good, "connectd:provider:fake")
	for _, tt := range []struct {
		name   string
		auth   string
		form   url.Values
		status int
		code   string
		v1     string // connectd_error: the /v1 code it was renamed from
	}{
		{"no client authentication", "", fake, 401, "invalid_client", ""},
		{"wrong client key", "Basic " + basicOf(a.client.ID, "cks_"+strings.Repeat("A", 43)), fake, 401, "invalid_client", ""},
		{"another client's id", "Basic " + basicOf(b.client.ID, a.key), fake, 401, "invalid_client", ""},
		{"bearer, not basic", "Bearer " + a.key, fake, 401, "invalid_client", ""},
		{"basic without the client id", "Basic " + basicOf("", a.key), fake, 401, "invalid_client", ""},
		{"two methods", a.basic(), with(with(fake, "client_id", a.client.ID), "client_secret", a.key), 400, "invalid_request", ""},
		{"post without client_id", "", with(fake, "client_secret", a.key), 401, "invalid_client", ""},
		{"grant type", a.basic(), with(fake, "grant_type", "client_credentials"), 400, "unsupported_grant_type", ""},
		{"subject token type", a.basic(), with(fake, "subject_token_type", "urn:ietf:params:oauth:token-type:id_token"), 400, "invalid_request", ""},
		{"no subject token", a.basic(), with(fake, "subject_token", ""), 400, "invalid_request", ""},
		{"actor token", a.basic(), with(fake, "actor_token", good), 400, "invalid_request", ""},
		{"bad signature", a.basic(), with(fake, "subject_token", tampered), 400, "invalid_grant", "invalid_token"},
		{"another client's user token", a.basic(), with(fake, "subject_token", b.token("alice")), 400, "invalid_grant", "wrong_audience"},
		{"a user token used by another client", b.basic(), fake, 400, "invalid_grant", "wrong_audience"},
		{"no target", a.basic(), with(fake, "audience", ""), 400, "invalid_target", ""},
		{"unknown provider", a.basic(), with(fake, "audience", "connectd:provider:nosuch"), 400, "invalid_target", ""},
		{"no consent", b.basic(), with(fake, "subject_token", b.token("alice")), 400, "consent_required", ""},
		{"provider not allowed", b.basic(), exchangeParams(b.token("alice"), "connectd:provider:keyed"), 400, "invalid_target", "provider_not_allowed"},
		{"foreign resource", a.basic(), with(with(fake, "audience", ""), "resource", "https://evil.example/v1/connections/fake"), 400, "invalid_target", ""},
		{"two audiences", a.basic(), url.Values{"grant_type": fake["grant_type"], "subject_token": {good},
			"subject_token_type": fake["subject_token_type"], "audience": {"connectd:provider:fake", "connectd:provider:keyed"}}, 400, "invalid_target", ""},
		{"audience and resource differ", a.basic(), with(fake, "resource", e.srv.URL+"/v1/connections/keyed"), 400, "invalid_target", ""},
		{"not the user's connection", a.basic(), with(fake, "audience", "connectd:provider:fake:cn_"+strings.Repeat("a", 26)), 400, "invalid_target", "not_found"},
		{"proxy-only client", p.basic(), exchangeParams(p.token("alice"), "connectd:provider:fake"), 400, "unauthorized_client", "token_release_disabled"},
		{"not connected", a.basic(), exchangeParams(a.token("bob"), "connectd:provider:fake"), 400, "not_connected", ""},
		{"insufficient scope", a.basic(), with(fake, "scope", "read write"), 400, "insufficient_scope", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, h, out := e.postToken(e.srv.URL, tt.auth, tt.form)
			if st != tt.status || out["error"] != tt.code || out["access_token"] != nil {
				t.Fatalf("got %d %v, want %d %q", st, out, tt.status, tt.code)
			}
			if tt.v1 != "" && out["connectd_error"] != tt.v1 {
				t.Fatalf("connectd_error %v, want %q", out["connectd_error"], tt.v1)
			}
			// The answers that ask for a connect link carry its mint body.
			wantMint := tt.code == "not_connected" || tt.code == "consent_required" || tt.code == "insufficient_scope"
			if _, ok := out["mint"].(map[string]any); ok != wantMint {
				t.Fatalf("mint %v in %v", out["mint"], out)
			}
			wantBasic := st == 401 && strings.HasPrefix(tt.auth, "Basic ")
			if got := h.Get("WWW-Authenticate"); wantBasic != (got == `Basic realm="connectd"`) || !wantBasic && got != "" {
				t.Fatalf("WWW-Authenticate %q", got)
			}
		})
	}

	// What an MCP server needs to send the user through a connect link
	// rides along, and x/oauth2 reads the code.
	t.Run("mint", func(t *testing.T) {
		st, _, out := e.postToken(e.srv.URL, a.basic(), with(fake, "scope", "read write"))
		mint, _ := out["mint"].(map[string]any)
		if st != 400 || mint["provider"] != "fake" || jsonString(mint["scopes"]) != `["read","write"]` || mint["account"] != e.connID("alice") {
			t.Fatalf("%d %v", st, out)
		}
		_, err := e.exchangeClient(a, oauth2.AuthStyleInHeader, exchangeParams(a.token("carol"), "connectd:provider:fake")).
			Token(e.oauthContext())
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) || re.ErrorCode != "not_connected" {
			t.Fatalf("x/oauth2 got %v", err)
		}
	})
}

func basicOf(id, secret string) string {
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// assertionKey is an MCP server's private key for private_key_jwt,
// registered at connectd as a PEM public key.
type assertionKey struct{ priv *ecdsa.PrivateKey }

func (e *env) registerAssertionKey(m *mcpServer, dropSecrets bool) *assertionKey {
	e.t.Helper()
	k := &assertionKey{priv: must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))}
	der := must(x509.MarshalPKIXPublicKey(&k.priv.PublicKey))
	err := e.clients.SetAssertionKeys(context.Background(), m.client.ID, clientauth.AssertionKeys{
		PublicKey: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), DropSecrets: dropSecrets})
	if err != nil {
		e.t.Fatal(err)
	}
	return k
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// sign is a client assertion of client id for aud, fresh (its own jti).
func (k *assertionKey) sign(t *testing.T, id, aud string, now time.Time) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": id, "sub": id, "aud": aud,
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": rand.Text()}).SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPrivateKeyJWT (issue 28 part 3): an MCP server that holds no client
// key proves itself with assertions signed by its own key, at the token
// endpoint (x/oauth2 sending client_assertion) and as the /v1 bearer; an
// assertion is good once, on any replica, and only for its audience.
func TestPrivateKeyJWT(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	read := tokenOf(t, a, "alice")
	k := e.registerAssertionKey(a, true)
	tokenURL, apiURL := e.srv.URL+api.TokenPath, e.srv.URL+"/v1"

	// The client key is gone.
	if st, out := a.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusUnauthorized {
		t.Fatalf("the dropped client key still works: %d %v", st, out)
	}

	t.Run("token endpoint, through x/oauth2", func(t *testing.T) {
		params := exchangeParams(a.token("alice"), "connectd:provider:fake")
		params.Set("client_assertion_type", clientauth.AssertionType)
		params.Set("client_assertion", k.sign(t, a.client.ID, tokenURL, e.clock.Now()))
		cfg := &clientcredentials.Config{ClientID: a.client.ID, TokenURL: tokenURL, AuthStyle: oauth2.AuthStyleInParams,
			EndpointParams: params}
		tok, err := cfg.Token(e.oauthContext())
		if err != nil {
			t.Fatal(err)
		}
		if tok.AccessToken != read["access_token"] {
			t.Fatalf("exchange gave %q, want %q", tok.AccessToken, read["access_token"])
		}
	})

	t.Run("token endpoint refusals", func(t *testing.T) {
		form := func(assertion string) url.Values {
			f := exchangeParams(a.token("alice"), "connectd:provider:fake")
			f.Set("client_assertion_type", clientauth.AssertionType)
			f.Set("client_assertion", assertion)
			return f
		}
		used := k.sign(t, a.client.ID, tokenURL, e.clock.Now())
		if st, _, out := e.postToken(e.srv.URL, "", form(used)); st != http.StatusOK {
			t.Fatalf("%d %v", st, out)
		}
		_, other := e.replica(e.cfg)
		for _, tt := range []struct {
			name, base string
			form       url.Values
			status     int
			code       string
		}{
			{"replayed on another replica", other, form(used), 401, "invalid_client"},
			{"replayed", e.srv.URL, form(used), 401, "invalid_client"},
			{"the /v1 audience", e.srv.URL, form(k.sign(t, a.client.ID, apiURL, e.clock.Now())), 401, "invalid_client"},
			{"expired", e.srv.URL, form(k.sign(t, a.client.ID, tokenURL, e.clock.Now().Add(-time.Hour))), 401, "invalid_client"},
			{"another client's id", e.srv.URL, func() url.Values {
				f := form(k.sign(t, a.client.ID, tokenURL, e.clock.Now()))
				f.Set("client_id", "cli_someoneelse")
				return f
			}(), 401, "invalid_client"},
			{"unknown assertion type", e.srv.URL, func() url.Values {
				f := form(k.sign(t, a.client.ID, tokenURL, e.clock.Now()))
				f.Set("client_assertion_type", "urn:example:saml")
				return f
			}(), 400, "invalid_request"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				st, h, out := e.postToken(tt.base, "", tt.form)
				if st != tt.status || out["error"] != tt.code || out["access_token"] != nil {
					t.Fatalf("got %d %v, want %d %q", st, out, tt.status, tt.code)
				}
				if h.Get("WWW-Authenticate") != "" {
					t.Fatalf("a challenge for a client that did not use Basic: %q", h.Get("WWW-Authenticate"))
				}
			})
		}
	})

	t.Run("/v1 bearer", func(t *testing.T) {
		bearer := func(assertion string) (int, map[string]any) {
			t.Helper()
			m := *a
			m.key = assertion
			st, out, _ := m.send(e.srv.URL, http.MethodGet, "/v1/connections/fake/token", a.token("alice"), nil)
			return st, out
		}
		once := k.sign(t, a.client.ID, apiURL, e.clock.Now())
		if st, out := bearer(once); st != http.StatusOK || out["access_token"] != read["access_token"] {
			t.Fatalf("%d %v", st, out)
		}
		if st, out := bearer(once); st != http.StatusUnauthorized || out["error"] != "invalid_client" {
			t.Fatalf("a replayed /v1 assertion: %d %v", st, out)
		}
		if st, out := bearer(k.sign(t, a.client.ID, tokenURL, e.clock.Now())); st != http.StatusUnauthorized {
			t.Fatalf("a token-endpoint assertion on /v1: %d %v", st, out)
		}
		// A long-poll with an assertion survives its own start (its jti
		// is not presented again) and answers.
		el := func() string {
			m := *a
			m.key = k.sign(t, a.client.ID, apiURL, e.clock.Now())
			st, out, _ := m.send(e.srv.URL, http.MethodPost, "/v1/elicitations", a.token("alice"),
				map[string]any{"provider": "fake", "scopes": []string{"write"}})
			if st != http.StatusCreated {
				t.Fatalf("mint: %d %v", st, out)
			}
			return out["elicitation_id"].(string)
		}()
		m := *a
		m.key = k.sign(t, a.client.ID, apiURL, e.clock.Now())
		if st, out, _ := m.send(e.srv.URL, http.MethodGet, "/v1/elicitations/"+el+"?wait=1s", a.token("alice"), nil); st != http.StatusOK ||
			out["status"] != "pending" {
			t.Fatalf("long-poll with an assertion: %d %v", st, out)
		}
	})
}

// dpop is a DPoP proof (RFC 9449) by k for method at u, its jwk in the
// header, bound to the Authorization credential cred (ath).
func (k *assertionKey) dpop(t *testing.T, method, u, cred string, now time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"htm": method, "htu": u, "iat": now.Unix(), "jti": rand.Text(),
		"ath": clientauth.AccessTokenHash(cred)})
	tok.Header["typ"] = "dpop+jwt"
	jwk, err := jwkset.NewJWKFromKey(&k.priv.PublicKey, jwkset.JWKOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok.Header["jwk"] = jwk.Marshal()
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDPoP (issue 28 stretch): a client registered with dpop_required must
// prove every /v1 call, the proxy's included, with a DPoP proof signed by
// one of its registered keys; its client key alone gets nothing, here or at
// the token endpoint.
func TestDPoP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	k := e.registerAssertionKey(a, false) // keeps its client key
	if err := e.clients.SetDPoPRequired(context.Background(), a.client.ID, true); err != nil {
		t.Fatal(err)
	}
	other := &assertionKey{priv: must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))}
	path := "/v1/connections/fake/token"
	call := func(method, path, proof string) (int, http.Header, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+a.key)
		req.Header.Set(mcpauth.UserTokenHeader, a.token("alice"))
		if proof != "" {
			req.Header.Set(clientauth.DPoPHeader, proof)
		}
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, resp.Header, out
	}
	now := e.clock.Now()
	good := k.dpop(t, "GET", e.srv.URL+path, a.key, now)
	if st, _, out := call("GET", path, good); st != http.StatusOK || out["access_token"] == nil {
		t.Fatalf("with a proof: %d %v", st, out)
	}
	for _, tt := range []struct{ name, proof string }{
		{"no proof", ""},
		{"replayed", good},
		{"another key", other.dpop(t, "GET", e.srv.URL+path, a.key, now)},
		{"another method", k.dpop(t, "POST", e.srv.URL+path, a.key, now)},
		{"another URL", k.dpop(t, "GET", e.srv.URL+"/v1/connections", a.key, now)},
		{"old", k.dpop(t, "GET", e.srv.URL+path, a.key, now.Add(-10*time.Minute))},
		{"a client assertion, not a proof", k.sign(t, a.client.ID, e.srv.URL+"/v1", now)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, h, out := call("GET", path, tt.proof)
			if st != http.StatusUnauthorized || out["error"] != "invalid_dpop_proof" || out["access_token"] != nil ||
				!strings.HasPrefix(h.Get("WWW-Authenticate"), "DPoP ") {
				t.Fatalf("got %d %v %q", st, out, h.Get("WWW-Authenticate"))
			}
		})
	}
	t.Run("the proxy", func(t *testing.T) {
		p := "/v1/proxy/fake/echo/x"
		if st, _, out := call("GET", p, ""); st != http.StatusUnauthorized || out["error"] != "invalid_dpop_proof" {
			t.Fatalf("proxy without a proof: %d %v", st, out)
		}
		st, _, out := call("GET", p, k.dpop(t, "GET", e.srv.URL+p, a.key, now))
		headers, _ := out["headers"].(map[string]any)
		if st != http.StatusOK || out["path"] != "/api/echo/x" || headers == nil {
			t.Fatalf("proxy with a proof: %d %v", st, out)
		}
		if headers[clientauth.DPoPHeader] != nil || headers["Dpop"] != nil {
			t.Fatal("the DPoP proof reached the provider")
		}
	})
	t.Run("token endpoint: the client key alone is refused", func(t *testing.T) {
		if st, _, out := e.postToken(e.srv.URL, a.basic(), exchangeParams(a.token("alice"), "connectd:provider:fake")); st != 401 ||
			out["error"] != "invalid_client" {
			t.Fatalf("%d %v", st, out)
		}
		f := exchangeParams(a.token("alice"), "connectd:provider:fake")
		f.Set("client_assertion_type", clientauth.AssertionType)
		f.Set("client_assertion", k.sign(t, a.client.ID, e.srv.URL+api.TokenPath, now))
		if st, _, out := e.postToken(e.srv.URL, "", f); st != http.StatusOK {
			t.Fatalf("with private_key_jwt: %d %v", st, out)
		}
	})
	t.Run("off", func(t *testing.T) {
		if err := e.clients.SetDPoPRequired(context.Background(), a.client.ID, false); err != nil {
			t.Fatal(err)
		}
		if st, _, out := call("GET", path, ""); st != http.StatusOK {
			t.Fatalf("after dpop off: %d %v", st, out)
		}
	})
}
