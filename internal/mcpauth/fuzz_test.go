package mcpauth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
)

// FuzzVerifyToken: whatever string arrives as a user token (X-User-Token) or
// an ID token, verification never panics, refuses with one of the documented
// error classes, and accepts only what the trusted issuer signed, unchanged
// in meaning: the identity that comes out is the one that went in. Run longer
// with
//
//	go test -run '^$' -fuzz FuzzVerifyToken -fuzztime 1m ./internal/mcpauth
func FuzzVerifyToken(f *testing.F) {
	a := mcpauthtest.NewIDP(f, devidp.Config{})
	v := mcpauthtest.NewVerifier(f, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{a.TrustedIssuer("a")}})
	now := time.Now()
	sign := func(typ string, c jwt.MapClaims) string {
		s, err := a.Sign(typ, c)
		if err != nil {
			f.Fatal(err)
		}
		return s
	}
	access := sign("at+jwt", a.AccessTokenClaims("alice", "mcp-client", "tools:read", mcpauthtest.Resource))
	id := sign("JWT", jwt.MapClaims{"iss": a.Issuer(), "sub": "alice", "aud": "connectd", "nonce": "n-1",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	otherAud := sign("at+jwt", a.AccessTokenClaims("alice", "mcp-client", "", mcpauthtest.OtherResource))
	// The seeds that should pass do, so the property below is not vacuous.
	if _, err := v.VerifyAccessToken(context.Background(), access, []string{mcpauthtest.Resource}); err != nil {
		f.Fatal(err)
	}
	if _, err := v.VerifyIDToken(context.Background(), a.Issuer(), id, "connectd", "n-1"); err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(access, ".")
	for _, seed := range []string{
		access, id, otherAud, "", "a.b.c", "not-a-token", parts[0] + "." + parts[1] + ".",
		parts[0] + "." + parts[1], strings.Replace(access, parts[2], parts[2][:10], 1),
		`eyJhbGciOiJub25lIiwidHlwIjoiYXQrand0In0.` + parts[1] + ".", access + "=", access + "\n",
		parts[0] + "." + parts[1] + "=." + parts[2],
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		ctx := context.Background()
		ident, err := v.VerifyAccessToken(ctx, raw, []string{mcpauthtest.Resource})
		switch {
		case err == nil:
			if ident.Issuer != a.Issuer() || ident.Subject != "alice" || ident.ClientID != "mcp-client" {
				t.Fatalf("accepted as %+v: %q", ident, raw)
			}
		case !errors.Is(err, mcpauth.ErrInvalidToken) && !errors.Is(err, mcpauth.ErrIssuerUnavailable):
			t.Fatalf("undocumented refusal %v", err)
		}
		tok, err := v.VerifyIDToken(ctx, a.Issuer(), raw, "connectd", "n-1")
		switch {
		case err == nil:
			if tok.Issuer != a.Issuer() || tok.Subject != "alice" {
				t.Fatalf("ID token accepted as %+v: %q", tok, raw)
			}
		case !errors.Is(err, mcpauth.ErrInvalidToken) && !errors.Is(err, mcpauth.ErrIssuerUnavailable):
			t.Fatalf("undocumented ID-token refusal %v", err)
		}
	})
}
