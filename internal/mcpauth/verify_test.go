package mcpauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
)

// fetchJWKS returns the raw JWKS document of i and its first public key in
// PEM: what an attacker can read and try as an HMAC secret.
func fetchJWKS(t *testing.T, i *mcpauthtest.IDP) (raw, pemBytes []byte) {
	t.Helper()
	resp, err := i.Server.Client().Get(i.Server.URL + "/jwks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ = io.ReadAll(resp.Body)
	kf, err := keyfunc.NewJWKSetJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := kf.Storage().KeyReadAll(context.Background())
	if err != nil || len(jwks) == 0 {
		t.Fatalf("jwks: %v", err)
	}
	der, err := x509.MarshalPKIXPublicKey(jwks[0].Key())
	if err != nil {
		t.Fatal(err)
	}
	return raw, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// unsigned builds "header.claims." with alg none.
func unsigned(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "at+jwt"})
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "."
}

func hmacSigned(t *testing.T, i *mcpauthtest.IDP, claims jwt.MapClaims, secret []byte) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header["typ"] = "at+jwt"
	tok.Header["kid"] = i.KeyID()
	s, err := tok.SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerifyAccessToken(t *testing.T) {
	t.Parallel()
	a := mcpauthtest.NewIDP(t, devidp.Config{})
	other := mcpauthtest.NewIDP(t, devidp.Config{}) // a real issuer connectd does not trust
	plain := mcpauthtest.NewIDP(t, devidp.Config{}) // trusted, allowed to send plain JWTs
	plainIssuer := plain.TrustedIssuer("plain")
	plainIssuer.AllowPlainJWT = true
	// The verifier's clock stands still at now: the table's times are
	// relative to it, however long a busy machine takes to run the cases.
	now := time.Now()
	v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{a.TrustedIssuer("a"), plainIssuer}, Skew: 30 * time.Second,
		Now: func() time.Time { return now }})
	jwksRaw, jwksPEM := fetchJWKS(t, a)

	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := a.AccessTokenClaims("alice", "mcp-client", "openid tools:read", mcpauthtest.Resource)
		if mod != nil {
			mod(c)
		}
		return c
	}
	sign := func(i *mcpauthtest.IDP, typ string, c jwt.MapClaims) string {
		s, err := i.Sign(typ, c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	valid := sign(a, "at+jwt", claims(nil))

	tests := []struct {
		name      string
		token     string
		audiences []string
		want      error // nil: accepted
	}{
		{"valid", valid, []string{mcpauthtest.Resource}, nil},
		{"valid, one of several registered resources", valid, []string{mcpauthtest.OtherResource, mcpauthtest.Resource}, nil},
		{"typ application/at+jwt", sign(a, "application/at+jwt", claims(nil)), []string{mcpauthtest.Resource}, nil},
		{"expired within the skew", sign(a, "at+jwt", claims(func(c jwt.MapClaims) {
			c["exp"] = now.Add(-10 * time.Second).Unix()
		})), []string{mcpauthtest.Resource}, nil},
		{"expired", sign(a, "at+jwt", claims(func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
		})), []string{mcpauthtest.Resource}, mcpauth.ErrTokenExpired},
		{"nbf in the future", sign(a, "at+jwt", claims(func(c jwt.MapClaims) {
			c["nbf"] = now.Add(time.Hour).Unix()
		})), []string{mcpauthtest.Resource}, mcpauth.ErrTokenNotYetValid},
		{"iat in the future", sign(a, "at+jwt", claims(func(c jwt.MapClaims) {
			c["iat"] = now.Add(time.Hour).Unix()
		})), []string{mcpauthtest.Resource}, mcpauth.ErrTokenNotYetValid},
		{"wrong iss, signed with a trusted key", sign(a, "at+jwt", claims(func(c jwt.MapClaims) {
			c["iss"] = "https://evil.example"
		})), []string{mcpauthtest.Resource}, mcpauth.ErrUntrustedIssuer},
		{"issued by an untrusted issuer", sign(other, "at+jwt", claims(func(c jwt.MapClaims) {
			c["iss"] = other.Issuer()
		})), []string{mcpauthtest.Resource}, mcpauth.ErrUntrustedIssuer},
		{"trusted iss forged with another key", sign(other, "at+jwt", claims(func(c jwt.MapClaims) {
			c["iat"] = now.Add(-time.Hour).Unix() // before any fetch: a 401 without one (see TestKeyRotation)
		})), []string{mcpauthtest.Resource}, mcpauth.ErrSignature},
		{"trusted iss forged with another key under the issuer's kid", forgedUnderKID(t, a, claims(nil)), []string{mcpauthtest.Resource}, mcpauth.ErrSignature},
		{"aud of another MCP server (passthrough)", sign(a, "at+jwt", claims(func(c jwt.MapClaims) {
			c["aud"] = []string{mcpauthtest.OtherResource}
		})), []string{mcpauthtest.Resource}, mcpauth.ErrWrongAudience},
		{"client has no registered resource", valid, nil, mcpauth.ErrWrongAudience},
		{"empty registered resource matches nothing", sign(a, "at+jwt", claims(func(c jwt.MapClaims) {
			c["aud"] = ""
		})), []string{""}, mcpauth.ErrWrongAudience},
		{"no aud", sign(a, "at+jwt", claims(func(c jwt.MapClaims) { delete(c, "aud") })), []string{mcpauthtest.Resource}, mcpauth.ErrMalformedToken},
		{"alg none", unsigned(t, claims(nil)), []string{mcpauthtest.Resource}, mcpauth.ErrAlgorithm},
		{"HS256 keyed with the issuer's JWKS", hmacSigned(t, a, claims(nil), jwksRaw), []string{mcpauthtest.Resource}, mcpauth.ErrAlgorithm},
		{"HS256 keyed with the issuer's PEM public key", hmacSigned(t, a, claims(nil), jwksPEM), []string{mcpauthtest.Resource}, mcpauth.ErrAlgorithm},
		{"typ JWT", sign(a, "JWT", claims(nil)), []string{mcpauthtest.Resource}, mcpauth.ErrTokenType},
		{"typ missing", sign(a, "", claims(nil)), []string{mcpauthtest.Resource}, mcpauth.ErrTokenType},
		{"typ of something else", sign(a, "dpop+jwt", claims(nil)), []string{mcpauthtest.Resource}, mcpauth.ErrTokenType},
		{"plain JWT where the issuer allows it", sign(plain, "JWT", plain.AccessTokenClaims("bob", "c", "", mcpauthtest.Resource)), []string{mcpauthtest.Resource}, nil},
		{"no typ where the issuer allows plain JWTs", sign(plain, "", plain.AccessTokenClaims("bob", "c", "", mcpauthtest.Resource)), []string{mcpauthtest.Resource}, nil},
		{"garbage", "not-a-token", []string{mcpauthtest.Resource}, mcpauth.ErrMalformedToken},
		{"three garbage segments", "a.b.c", []string{mcpauthtest.Resource}, mcpauth.ErrMalformedToken},
		{"empty", "", []string{mcpauthtest.Resource}, mcpauth.ErrMalformedToken},
		{"oversized", strings.Repeat("a", 20<<10), []string{mcpauthtest.Resource}, mcpauth.ErrMalformedToken},
		{"truncated signature", valid[:len(valid)-8], []string{mcpauthtest.Resource}, mcpauth.ErrSignature},
		{"truncated to two segments", valid[:strings.LastIndex(valid, ".")], []string{mcpauthtest.Resource}, mcpauth.ErrMalformedToken},
		{"truncated in the payload", valid[:strings.Index(valid, ".")+10], []string{mcpauthtest.Resource}, mcpauth.ErrMalformedToken},
		{"payload swapped under a valid signature", swapPayload(t, valid, claims(func(c jwt.MapClaims) { c["sub"] = "bob" })), []string{mcpauthtest.Resource}, mcpauth.ErrSignature},
		{"no sub", sign(a, "at+jwt", claims(func(c jwt.MapClaims) { delete(c, "sub") })), []string{mcpauthtest.Resource}, mcpauth.ErrMalformedToken},
		{"no exp", sign(a, "at+jwt", claims(func(c jwt.MapClaims) { delete(c, "exp") })), []string{mcpauthtest.Resource}, mcpauth.ErrMalformedToken},
		{"no iat", sign(a, "at+jwt", claims(func(c jwt.MapClaims) { delete(c, "iat") })), []string{mcpauthtest.Resource}, mcpauth.ErrMalformedToken},
		{"exp of the wrong type", sign(a, "at+jwt", claims(func(c jwt.MapClaims) { c["exp"] = "tomorrow" })), []string{mcpauthtest.Resource}, mcpauth.ErrMalformedToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := v.VerifyAccessToken(context.Background(), tt.token, tt.audiences)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if id.Subject == "" || id.Issuer == "" || id.Expiry.IsZero() {
					t.Fatalf("incomplete identity %+v", id)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if !errors.Is(err, mcpauth.ErrInvalidToken) {
				t.Fatalf("%v does not wrap ErrInvalidToken (it would not be a 401)", err)
			}
		})
	}

	t.Run("identity", func(t *testing.T) {
		t.Parallel()
		id, err := v.VerifyAccessToken(context.Background(), valid, []string{mcpauthtest.Resource})
		if err != nil {
			t.Fatal(err)
		}
		if id.Issuer != a.Issuer() || id.Subject != "alice" || id.ClientID != "mcp-client" ||
			!slices.Equal(id.Scopes, []string{"openid", "tools:read"}) || id.Expiry.Before(now) {
			t.Fatalf("identity %+v", id)
		}
	})
}

// forgedUnderKID signs claims with a key of its own but the kid of i's
// signing key.
func forgedUnderKID(t *testing.T, i *mcpauthtest.IDP, claims jwt.MapClaims) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["typ"], tok.Header["kid"] = "at+jwt", i.KeyID()
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// swapPayload replaces a token's payload while keeping its header and signature.
func swapPayload(t *testing.T, token string, claims jwt.MapClaims) string {
	t.Helper()
	parts := strings.Split(token, ".")
	b, _ := json.Marshal(claims)
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

// TestJWKSUnavailable: when keys cannot be fetched the answer is
// ErrIssuerUnavailable (503), never an invalid-token 401.
func TestJWKSUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("jwks endpoint down from the start", func(t *testing.T) {
		t.Parallel()
		a := mcpauthtest.NewIDP(t, devidp.Config{})
		is := a.TrustedIssuer("a")
		is.JWKSURL = deadURL(t) + "/jwks"
		v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{is}})
		tok, _ := a.AccessToken("alice", mcpauthtest.Resource)
		for range 2 { // the second attempt is rate-limited: still 503
			_, err := v.VerifyAccessToken(ctx, tok, []string{mcpauthtest.Resource})
			if !errors.Is(err, mcpauth.ErrIssuerUnavailable) || errors.Is(err, mcpauth.ErrInvalidToken) {
				t.Fatalf("got %v, want ErrIssuerUnavailable only", err)
			}
		}
	})
	t.Run("discovery down", func(t *testing.T) {
		t.Parallel()
		dead := deadURL(t)
		ghost := signer(t, dead)
		v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{{ID: "ghost", URL: dead}}})
		tok, _ := ghost.Sign("at+jwt", ghost.AccessTokenClaims("alice", "x", "", mcpauthtest.Resource))
		_, err := v.VerifyAccessToken(ctx, tok, []string{mcpauthtest.Resource})
		if !errors.Is(err, mcpauth.ErrIssuerUnavailable) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("jwks fails after a rotation", func(t *testing.T) {
		t.Parallel()
		a := mcpauthtest.NewIDP(t, devidp.Config{})
		v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{a.TrustedIssuer("a")}})
		old, _ := a.AccessToken("alice", mcpauthtest.Resource)
		if _, err := v.VerifyAccessToken(ctx, old, []string{mcpauthtest.Resource}); err != nil {
			t.Fatal(err)
		}
		a.JWKSFails.Store(true)
		_ = a.Rotate()
		fresh, _ := a.AccessToken("alice", mcpauthtest.Resource)
		if _, err := v.VerifyAccessToken(ctx, fresh, []string{mcpauthtest.Resource}); !errors.Is(err, mcpauth.ErrIssuerUnavailable) {
			t.Fatalf("new kid while the JWKS fails: %v", err)
		}
		// Cached keys keep working while the issuer is down.
		if _, err := v.VerifyAccessToken(ctx, old, []string{mcpauthtest.Resource}); err != nil {
			t.Fatalf("cached key while the JWKS fails: %v", err)
		}
	})
	t.Run("jwks too large", func(t *testing.T) {
		t.Parallel()
		a := mcpauthtest.NewIDP(t, devidp.Config{})
		// The real JWKS, padded past 1 MiB: valid, so only the size limit refuses it.
		raw, _ := fetchJWKS(t, a)
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		doc["padding"] = strings.Repeat("A", 2<<20)
		huge := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(doc)
		}))
		t.Cleanup(huge.Close)
		is := a.TrustedIssuer("a")
		is.JWKSURL = huge.URL
		v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{is}})
		tok, _ := a.AccessToken("alice", mcpauthtest.Resource)
		if _, err := v.VerifyAccessToken(ctx, tok, []string{mcpauthtest.Resource}); !errors.Is(err, mcpauth.ErrIssuerUnavailable) {
			t.Fatalf("got %v", err)
		}
	})
}

// TestDiscovery: the metadata must describe exactly the configured issuer
// and use https; it is found at either well-known path (egress.Discover
// tries RFC 8414 first, then OIDC discovery).
func TestDiscovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := mcpauthtest.NewIDP(t, devidp.Config{})
	// meta serves a metadata document at path, built by doc from its own URL.
	meta := func(t *testing.T, path string, doc func(self string) map[string]any) *httptest.Server {
		t.Helper()
		var self string
		mux := http.NewServeMux()
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(doc(self))
		})
		srv := httptest.NewTLSServer(mux)
		t.Cleanup(srv.Close)
		self = srv.URL
		return srv
	}
	tests := []struct {
		name string
		path string
		doc  func(self string) map[string]any
		ok   bool
	}{
		{"RFC 8414 only", "/.well-known/oauth-authorization-server", func(self string) map[string]any {
			return map[string]any{"issuer": self, "jwks_uri": a.Issuer() + "/jwks"}
		}, true},
		{"document names another issuer", "/.well-known/openid-configuration", func(self string) map[string]any {
			return map[string]any{"issuer": a.Issuer(), "jwks_uri": a.Issuer() + "/jwks"}
		}, false},
		{"http jwks_uri", "/.well-known/openid-configuration", func(self string) map[string]any {
			return map[string]any{"issuer": self, "jwks_uri": strings.Replace(a.Issuer(), "https:", "http:", 1) + "/jwks"}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := meta(t, tt.path, tt.doc)
			v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{{ID: "m", URL: srv.URL}}})
			// The JWKS is a's; sign with a's key under this issuer's name.
			c := a.AccessTokenClaims("alice", "x", "", mcpauthtest.Resource)
			c["iss"] = srv.URL
			tok, _ := a.Sign("at+jwt", c)
			_, err := v.VerifyAccessToken(ctx, tok, []string{mcpauthtest.Resource})
			if tt.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tt.ok && !errors.Is(err, mcpauth.ErrIssuerUnavailable) {
				t.Fatalf("got %v, want ErrIssuerUnavailable", err)
			}
		})
	}
}

func TestIssuerConfigValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		is    []mcpauth.Issuer
		allow bool
		want  string // the refusal names the defect
	}{
		{"http issuer outside dev", []mcpauth.Issuer{{ID: "a", URL: "http://idp.example"}}, false, "url must use https"},
		{"javascript issuer", []mcpauth.Issuer{{ID: "a", URL: "javascript:alert(1)"}}, true, `url scheme "javascript" is not allowed`},
		{"relative issuer", []mcpauth.Issuer{{ID: "a", URL: "/idp"}}, true, "url must be an absolute"},
		{"http jwks outside dev", []mcpauth.Issuer{{ID: "a", URL: "https://idp.example", JWKSURL: "http://idp.example/jwks"}}, false, "jwks_url must use https"},
		{"bad id", []mcpauth.Issuer{{ID: "A B", URL: "https://idp.example"}}, false, "id must be"},
		{"login without client id", []mcpauth.Issuer{{ID: "a", URL: "https://idp.example", Login: true}}, false, "login needs a client_id"},
		{"duplicate", []mcpauth.Issuer{{ID: "a", URL: "https://idp.example"}, {ID: "b", URL: "https://idp.example"}}, false, "configured twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := mcpauth.NewVerifier(mcpauth.VerifierConfig{Issuers: tt.is, AllowHTTP: tt.allow})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error naming %q", err, tt.want)
			}
		})
	}
	// The same shape without the defect is accepted.
	v, err := mcpauth.NewVerifier(mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{{ID: "a", URL: "https://idp.example"}}})
	if err != nil {
		t.Fatalf("valid issuer refused: %v", err)
	}
	v.Close()
}

func TestVerifyIDToken(t *testing.T) {
	t.Parallel()
	a, b := mcpauthtest.NewIDP(t, devidp.Config{}), mcpauthtest.NewIDP(t, devidp.Config{})
	v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{a.TrustedIssuer("a"), b.TrustedIssuer("b")}})
	now := time.Now()
	claims := func(i *mcpauthtest.IDP, mod func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": i.Issuer(), "sub": "alice", "aud": "connectd", "azp": "connectd",
			"nonce": "n-123", "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	sign := func(i *mcpauthtest.IDP, typ string, c jwt.MapClaims) string {
		s, err := i.Sign(typ, c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		name  string
		token string
		want  error
	}{
		{"valid", sign(a, "JWT", claims(a, nil)), nil},
		{"valid without typ", sign(a, "", claims(a, nil)), nil},
		{"an access token (typ at+jwt)", sign(a, "at+jwt", claims(a, nil)), mcpauth.ErrTokenType},
		{"from another trusted issuer (mix-up)", sign(b, "JWT", claims(b, nil)), mcpauth.ErrUntrustedIssuer},
		{"wrong nonce", sign(a, "JWT", claims(a, func(c jwt.MapClaims) { c["nonce"] = "n-456" })), mcpauth.ErrNonce},
		{"for another client", sign(a, "JWT", claims(a, func(c jwt.MapClaims) { c["aud"], c["azp"] = "x", "x" })), mcpauth.ErrWrongAudience},
		{"azp of another client", sign(a, "JWT", claims(a, func(c jwt.MapClaims) { c["aud"], c["azp"] = []string{"connectd", "x"}, "x" })), mcpauth.ErrWrongAudience},
		{"expired", sign(a, "JWT", claims(a, func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() })), mcpauth.ErrTokenExpired},
		{"alg none", unsigned(t, claims(a, nil)), mcpauth.ErrAlgorithm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := v.VerifyIDToken(context.Background(), a.Issuer(), tt.token, "connectd", "n-123")
			if tt.want == nil {
				if err != nil || id.Subject != "alice" || id.Issuer != a.Issuer() {
					t.Fatalf("got %+v %v", id, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// TestIssuerHidesSecret: an Issuer printed or logged by mistake does not
// reveal the client secret.
func TestIssuerHidesSecret(t *testing.T) {
	t.Parallel()
	is := mcpauth.Issuer{ID: "a", URL: "https://a.example", Login: true, ClientID: "c", ClientSecret: "s3cret-value"}
	var logs strings.Builder
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", slog.Any("issuer", is), slog.Any("list", []mcpauth.Issuer{is}))
	for _, out := range []string{fmt.Sprint(is), fmt.Sprintf("%+v", is), fmt.Sprintf("%v", []mcpauth.Issuer{is}), logs.String()} {
		if strings.Contains(out, "s3cret-value") {
			t.Fatalf("secret printed: %s", out)
		}
	}
}
