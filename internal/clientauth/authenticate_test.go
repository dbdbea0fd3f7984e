package clientauth_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/web"
)

// TestAuthenticateHTTP drives Authenticator.Authenticate through a real HTTP
// server and web.API, as the /v1 API will: each refusal has its status, stable
// code and WWW-Authenticate challenge, and none is ever a 500.
func TestAuthenticateHTTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := mcpauthtest.NewIDP(t, devidp.Config{})
	down := mcpauthtest.NewIDP(t, devidp.Config{}) // trusted, but its JWKS answers 500
	down.JWKSFails.Store(true)
	v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{a.TrustedIssuer("a"), down.TrustedIssuer("down")}})
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: pgtest.Pool(t)})
	auth := clientauth.NewAuthenticator(clients, v, nil, "")

	client, key, err := clients.Create(ctx, "Demo", []string{mcpauthtest.Resource}, nil)
	if err != nil {
		t.Fatal(err)
	}
	disabled, disabledKey, err := clients.Create(ctx, "Off", []string{"https://off.mcp.example.com/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := clients.SetDisabled(ctx, disabled.ID, true); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(web.API(slog.New(slog.DiscardHandler), func(w http.ResponseWriter, r *http.Request) error {
		c, id, err := auth.Authenticate(r)
		if err != nil {
			return err
		}
		web.WriteJSON(w, http.StatusOK, map[string]string{"client": c.ID, "iss": id.Issuer, "sub": id.Subject})
		return nil
	}))
	t.Cleanup(srv.Close)

	tok := func(i *mcpauthtest.IDP, mod func(jwt.MapClaims)) string {
		c := i.AccessTokenClaims("alice", "mcp-client", "", mcpauthtest.Resource)
		if mod != nil {
			mod(c)
		}
		s, err := i.Sign("at+jwt", c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	valid := tok(a, nil)
	const missing, invalid = `Bearer realm="connectd"`, `Bearer realm="connectd", error="invalid_token"`

	tests := []struct {
		name, authz, user string
		status            int
		code, challenge   string
		says              string // in the description, when set
	}{
		{"ok", "Bearer " + key, valid, 200, "", "", ""},
		{"scheme is case-insensitive", "bearer " + key, valid, 200, "", "", ""},
		{"no client key", "", valid, 401, "invalid_client", missing, ""},
		{"basic instead of bearer", "Basic " + key, valid, 401, "invalid_client", missing, ""},
		{"wrong client key", "Bearer cks_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", valid, 401, "invalid_client", invalid, ""},
		{"user token as client key", "Bearer " + valid, valid, 401, "invalid_client", invalid, ""},
		// Swapped (issue 38 item 6): said so, not "the client assertion is
		// not valid"; neither credential is used.
		{"headers swapped", "Bearer " + valid, key, 401, "invalid_client", invalid, "the headers are swapped"},
		{"disabled client", "Bearer " + disabledKey, valid, 401, "invalid_client", invalid, ""},
		{"no user token", "Bearer " + key, "", 401, "missing_user_token", missing, ""},
		{"client key as user token", "Bearer " + key, key, 401, "invalid_token", invalid, ""},
		{"expired", "Bearer " + key, tok(a, func(c jwt.MapClaims) {
			c["iat"], c["exp"] = time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
		}), 401, "token_expired", invalid, ""},
		{"not yet valid", "Bearer " + key, tok(a, func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() }),
			401, "token_not_yet_valid", invalid, ""},
		{"token for another MCP server", "Bearer " + key, tok(a, func(c jwt.MapClaims) { c["aud"] = mcpauthtest.OtherResource }),
			401, "wrong_audience", invalid, ""},
		{"untrusted issuer", "Bearer " + key, tok(a, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }),
			401, "untrusted_issuer", invalid, ""},
		{"alg none", "Bearer " + key, unsigned(t, a.AccessTokenClaims("alice", "x", "", mcpauthtest.Resource)), 401, "invalid_token", invalid, ""},
		{"garbage", "Bearer " + key, "garbage", 401, "invalid_token", invalid, ""},
		{"jwks unreachable", "Bearer " + key, tok(down, nil), 503, "jwks_unavailable", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			if tt.authz != "" {
				req.Header.Set("Authorization", tt.authz)
			}
			if tt.user != "" {
				req.Header.Set(mcpauth.UserTokenHeader, tt.user)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]string
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == 500 {
				t.Fatalf("500: %v", body)
			}
			if resp.StatusCode != tt.status || body["error"] != tt.code {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body["error"], tt.status, tt.code)
			}
			if !strings.Contains(body["error_description"], tt.says) || strings.Contains(body["error_description"], key) {
				t.Fatalf("description %q, want it to say %q (and never the key)", body["error_description"], tt.says)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Fatalf("WWW-Authenticate %q, want %q", got, tt.challenge)
			}
			if tt.status == 503 && resp.Header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
			if tt.status == 200 && (body["client"] != client.ID || body["sub"] != "alice" || body["iss"] != a.Issuer()) {
				t.Fatalf("body %v", body)
			}
		})
	}
}
