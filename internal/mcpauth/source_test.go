package mcpauth_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
	"github.com/connectd/connectd/internal/pgtest"
)

// source is an IssuerSource in memory, as package org's Store answers: by
// id or URL, each issuer one organization's; down makes it fail.
type source struct {
	mu      sync.Mutex
	issuers map[string]orgIssuer
	down    atomic.Bool
	calls   atomic.Int64
}

type orgIssuer struct {
	is  mcpauth.Issuer
	org string
}

func newSource() *source { return &source{issuers: map[string]orgIssuer{}} }

func (s *source) add(org string, is mcpauth.Issuer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issuers[is.ID], s.issuers[is.URL] = orgIssuer{is, org}, orgIssuer{is, org}
}

func (s *source) remove(is mcpauth.Issuer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.issuers, is.ID)
	delete(s.issuers, is.URL)
}

func (s *source) LookupIssuer(_ context.Context, idOrURL string) (mcpauth.Issuer, string, bool, error) {
	s.calls.Add(1)
	if s.down.Load() {
		return mcpauth.Issuer{}, "", false, errors.New("database down")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.issuers[idOrURL]
	return o.is, o.org, ok, nil
}

// TestVerifyAccessTokenIn: whose tokens a client of an organization
// accepts — the deployment's issuers' while the organization allows them,
// and its own issuers', never another organization's.
func TestVerifyAccessTokenIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dep := mcpauthtest.NewIDP(t, devidp.Config{})
	acme := mcpauthtest.NewIDP(t, devidp.Config{})
	beta := mcpauthtest.NewIDP(t, devidp.Config{})
	src := newSource()
	src.add("acme", acme.TrustedIssuer("acme-idp"))
	src.add("beta", beta.TrustedIssuer("beta-idp"))
	v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{dep.TrustedIssuer("main")}, Source: src})
	aud := []string{mcpauthtest.Resource}
	tok := func(i *mcpauthtest.IDP) string { return must(i.AccessToken("alice", mcpauthtest.Resource)) }

	for _, tc := range []struct {
		name       string
		token      string
		org        string
		deployment bool
		want       error
	}{
		{"deployment issuer, organization allows it", tok(dep), "acme", true, nil},
		{"deployment issuer, organization does not allow it", tok(dep), "acme", false, mcpauth.ErrUntrustedIssuer},
		{"deployment issuer, no organization", tok(dep), "", true, nil},
		{"own issuer", tok(acme), "acme", true, nil},
		{"own issuer, deployment's off", tok(acme), "acme", false, nil},
		{"another organization's issuer", tok(acme), "beta", true, mcpauth.ErrUntrustedIssuer},
		{"an organization's issuer for the default organization", tok(acme), "default", true, mcpauth.ErrUntrustedIssuer},
		{"an organization's issuer without an organization", tok(beta), "", true, mcpauth.ErrUntrustedIssuer},
		{"iss naming an issuer by its id", must(acme.Sign("at+jwt", withIss(acme, "acme-idp"))), "acme", true, mcpauth.ErrUntrustedIssuer},
		{"own issuer's URL, signed with a key it never published", must(signer(t, acme.Issuer()).Sign("at+jwt",
			withIat(acme, time.Now().Add(-time.Hour)))), "acme", true, mcpauth.ErrSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.VerifyAccessTokenIn(ctx, tc.token, aud, tc.org, tc.deployment)
			if tc.want == nil {
				if err != nil || id.Subject != "alice" {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v (%+v), want %v", err, id, tc.want)
			}
		})
	}
	// VerifyAccessToken is the deployment's issuers only.
	if _, err := v.VerifyAccessToken(ctx, tok(acme), aud); !errors.Is(err, mcpauth.ErrUntrustedIssuer) {
		t.Fatalf("VerifyAccessToken took an organization's issuer: %v", err)
	}
}

func withIss(i *mcpauthtest.IDP, iss string) jwt.MapClaims {
	c := i.AccessTokenClaims("alice", "mcp-client", "", mcpauthtest.Resource)
	c["iss"] = iss
	return c
}

func withIat(i *mcpauthtest.IDP, iat time.Time) jwt.MapClaims {
	c := i.AccessTokenClaims("alice", "mcp-client", "", mcpauthtest.Resource)
	c["iat"] = iat.Unix()
	return c
}

// TestTokenCacheRechecksTrust is the attack on the verified-token cache: a
// token one organization's client presented (verified, cached) is presented
// by another organization's client whose resources its aud names too. The
// cache must not answer for the trust the first client's organization had.
func TestTokenCacheRechecksTrust(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dep := mcpauthtest.NewIDP(t, devidp.Config{})
	acme := mcpauthtest.NewIDP(t, devidp.Config{})
	src := newSource()
	acmeIssuer := acme.TrustedIssuer("acme-idp")
	src.add("acme", acmeIssuer)
	v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{dep.TrustedIssuer("main")}, Source: src})
	both := []string{mcpauthtest.Resource, mcpauthtest.OtherResource}
	acmeTok := must(acme.AccessToken("alice", both...))
	depTok := must(dep.AccessToken("alice", both...))

	if _, err := v.VerifyAccessTokenIn(ctx, acmeTok, []string{mcpauthtest.Resource}, "acme", true); err != nil {
		t.Fatal(err)
	}
	if _, err := v.VerifyAccessTokenIn(ctx, depTok, []string{mcpauthtest.Resource}, "acme", true); err != nil {
		t.Fatal(err)
	}
	hits := v.TokenCacheStats().Hits
	if _, err := v.VerifyAccessTokenIn(ctx, acmeTok, []string{mcpauthtest.OtherResource}, "beta", true); !errors.Is(err, mcpauth.ErrUntrustedIssuer) {
		t.Fatalf("acme's issuer's cached token for beta's client: %v", err)
	}
	if _, err := v.VerifyAccessTokenIn(ctx, depTok, []string{mcpauthtest.OtherResource}, "beta", false); !errors.Is(err, mcpauth.ErrUntrustedIssuer) {
		t.Fatalf("a deployment token, cached, for an organization without the deployment's issuers: %v", err)
	}
	if v.TokenCacheStats().Hits == hits {
		t.Fatal("the refusals were not answered from the cache: the test tests nothing")
	}
	// The cache still answers for the organization that trusts them.
	jwks := acme.JWKSHits.Load()
	if _, err := v.VerifyAccessTokenIn(ctx, acmeTok, []string{mcpauthtest.Resource}, "acme", false); err != nil {
		t.Fatal(err)
	}
	// Removed from the source: its cached tokens are refused too.
	src.remove(acmeIssuer)
	if _, err := v.VerifyAccessTokenIn(ctx, acmeTok, []string{mcpauthtest.Resource}, "acme", true); !errors.Is(err, mcpauth.ErrUntrustedIssuer) {
		t.Fatalf("a removed issuer's cached token: %v", err)
	}
	if acme.JWKSHits.Load() != jwks {
		t.Fatal("the cached token was verified again")
	}
}

// TestSourceUnavailable: while the source cannot say whose an issuer is, or
// an organization's issuer's discovery is down, its tokens (cached ones
// too) are 503 with a Retry-After, never refused; the deployment's issuers'
// tokens are unaffected.
func TestSourceUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dep := mcpauthtest.NewIDP(t, devidp.Config{})
	acme := mcpauthtest.NewIDP(t, devidp.Config{})
	src := newSource()
	src.add("acme", acme.TrustedIssuer("acme-idp"))
	dead := mcpauth.Issuer{ID: "dead", URL: deadURL(t)}
	src.add("acme", dead)
	v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{dep.TrustedIssuer("main")}, Source: src})
	aud := []string{mcpauthtest.Resource}
	acmeTok := must(acme.AccessToken("alice", mcpauthtest.Resource))
	if _, err := v.VerifyAccessTokenIn(ctx, acmeTok, aud, "acme", true); err != nil {
		t.Fatal(err)
	}
	deadTok := must(signer(t, dead.URL).AccessToken("alice", mcpauthtest.Resource))
	_, err := v.VerifyAccessTokenIn(ctx, deadTok, aud, "acme", true)
	if retry, ok := mcpauth.RetryAfter(err); !errors.Is(err, mcpauth.ErrIssuerUnavailable) || !ok || retry <= 0 {
		t.Fatalf("issuer discovery down: %v (retry %v %t)", err, retry, ok)
	}
	src.down.Store(true)
	for name, tok := range map[string]string{"cached": acmeTok, "new": must(acme.AccessToken("bob", mcpauthtest.Resource))} {
		_, err := v.VerifyAccessTokenIn(ctx, tok, aud, "acme", true)
		if retry, ok := mcpauth.RetryAfter(err); !errors.Is(err, mcpauth.ErrIssuerUnavailable) || !ok || retry <= 0 {
			t.Fatalf("source down, %s token: %v (retry %v %t)", name, err, retry, ok)
		}
	}
	if _, err := v.VerifyAccessTokenIn(ctx, must(dep.AccessToken("carol", mcpauthtest.Resource)), aud, "acme", true); err != nil {
		t.Fatalf("a deployment token while the source is down: %v", err)
	}
	if _, _, _, err := v.LookupIn(ctx, "acme-idp"); !errors.Is(err, mcpauth.ErrIssuerUnavailable) {
		t.Fatalf("LookupIn while the source is down: %v", err)
	}
	// What could be no issuer is never asked about (the database would
	// refuse NUL or bad UTF-8: a 503 for junk).
	for _, junk := range []string{"", "\x00", "\xc0\xaf", "https://a.test/\n"} {
		if _, _, ok, err := v.LookupIn(ctx, junk); ok || err != nil {
			t.Fatalf("LookupIn(%q): %t %v", junk, ok, err)
		}
	}
	// The deployment's issuers are found without asking the source.
	calls := src.calls.Load()
	if is, org, ok, err := v.LookupIn(ctx, "main"); !ok || err != nil || org != "" || is.URL != dep.Issuer() {
		t.Fatalf("LookupIn(main): %v %q %t %v", is, org, ok, err)
	}
	if src.calls.Load() != calls {
		t.Fatal("a deployment issuer was looked up in the source")
	}
}

// TestSourceIssuerChanged: a changed configuration (here a JWKS URL that no
// longer publishes the key) is a fresh state, used at once.
func TestSourceIssuerChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	acme := mcpauthtest.NewIDP(t, devidp.Config{})
	src := newSource()
	is := acme.TrustedIssuer("acme-idp")
	src.add("acme", is)
	v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Source: src})
	aud := []string{mcpauthtest.Resource}
	if _, err := v.VerifyAccessTokenIn(ctx, must(acme.AccessToken("alice", mcpauthtest.Resource)), aud, "acme", true); err != nil {
		t.Fatal(err)
	}
	other := mcpauthtest.NewIDP(t, devidp.Config{})
	is.JWKSURL = other.Server.URL + "/jwks"
	src.add("acme", is)
	tok := must(acme.Sign("at+jwt", withIat(acme, time.Now().Add(-time.Minute))))
	if _, err := v.VerifyAccessTokenIn(ctx, tok, aud, "acme", true); !errors.Is(err, mcpauth.ErrSignature) {
		t.Fatalf("after the JWKS URL changed: %v", err)
	}
	if other.JWKSHits.Load() == 0 {
		t.Fatal("the new JWKS URL was never fetched")
	}
	if is, org, ok, err := v.LookupIn(ctx, acme.Issuer()); !ok || err != nil || org != "acme" || is.JWKSURL == "" {
		t.Fatalf("LookupIn: %v %q %t %v", is, org, ok, err)
	}
	if _, _, ok, err := v.LookupIn(ctx, "nope"); ok || err != nil {
		t.Fatalf("LookupIn(nope): %t %v", ok, err)
	}
}

// TestLoginAtSourceIssuer: a login starts at an organization's issuer by id
// or URL; one without login, an unknown one, or a source that cannot say
// is refused (unknown issuer) or 503, never another issuer.
func TestLoginAtSourceIssuer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	acme := mcpauthtest.NewIDP(t, devidp.Config{})
	noLogin := mcpauthtest.NewIDP(t, devidp.Config{})
	src := newSource()
	is := acme.TrustedIssuer("acme-idp")
	is.Login, is.ClientID = true, "connectd"
	src.add("acme", is)
	src.add("acme", noLogin.TrustedIssuer("nologin"))
	v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Source: src})
	l, err := mcpauth.NewLogin(mcpauth.LoginConfig{Pool: pool, Verifier: v, RedirectURL: "https://connect.example.com/login/callback"})
	if err != nil {
		t.Fatal(err)
	}
	binding := make([]byte, 32)
	for _, name := range []string{"acme-idp", acme.Issuer()} {
		u, err := l.Start(ctx, name, "/", binding, false)
		if err != nil {
			t.Fatalf("Start(%s): %v", name, err)
		}
		if q := mustQuery(t, u); q.Get("client_id") != "connectd" || u[:len(acme.Issuer())] != acme.Issuer() {
			t.Fatalf("authorize URL %s", u)
		}
	}
	if len(l.Issuers()) != 0 {
		t.Fatalf("the chooser lists an organization's issuer: %v", l.Issuers())
	}
	for _, name := range []string{"nologin", "nope", noLogin.Issuer()} {
		if _, err := l.Start(ctx, name, "/", binding, false); !errors.Is(err, mcpauth.ErrUnknownIssuer) {
			t.Fatalf("Start(%s): %v", name, err)
		}
	}
	src.down.Store(true)
	if _, err := l.Start(ctx, "acme-idp", "/", binding, false); !errors.Is(err, mcpauth.ErrIssuerUnavailable) {
		t.Fatalf("Start with the source down: %v", err)
	}
}
