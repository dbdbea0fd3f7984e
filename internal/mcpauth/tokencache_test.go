package mcpauth_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
)

// TestTokenCacheKeepsEveryCheck: a token verified once (and so cached) is
// still refused for another audience and once it expires, exactly as an
// uncached token would be.
func TestTokenCacheKeepsEveryCheck(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	i := mcpauthtest.NewIDP(t, devidp.Config{AccessTokenTTL: 10 * time.Minute, Now: clock})
	v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{i.TrustedIssuer("a")}, Now: clock, Skew: time.Second})
	tok, err := i.AccessToken("alice", mcpauthtest.Resource)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 { // first call verifies and caches, the others hit the cache
		id, err := v.VerifyAccessToken(ctx, tok, []string{mcpauthtest.Resource})
		if err != nil || id.Subject != "alice" {
			t.Fatalf("valid token: %v %v", id, err)
		}
	}
	if _, err := v.VerifyAccessToken(ctx, tok, []string{mcpauthtest.OtherResource}); !errors.Is(err, mcpauth.ErrWrongAudience) {
		t.Fatalf("cached token for another audience: %v", err)
	}
	// A token differing in one byte of its signature is another cache key and
	// fails verification.
	b := []byte(tok)
	if b[len(b)-10] == 'A' {
		b[len(b)-10] = 'B'
	} else {
		b[len(b)-10] = 'A'
	}
	if _, err := v.VerifyAccessToken(ctx, string(b), []string{mcpauthtest.Resource}); err == nil {
		t.Fatal("forged signature accepted")
	}
	mu.Lock()
	now = now.Add(11 * time.Minute)
	mu.Unlock()
	if _, err := v.VerifyAccessToken(ctx, tok, []string{mcpauthtest.Resource}); !errors.Is(err, mcpauth.ErrTokenExpired) {
		t.Fatalf("cached token after expiry: %v", err)
	}
}

// TestTokenCacheSavesSignatureChecks: with the cache, repeated verification
// of the same token does not re-fetch or re-verify; with it disabled, every
// call verifies. Measured as allocations per call, a proxy for the work done.
func TestTokenCacheSavesSignatureChecks(t *testing.T) { // not parallel: AllocsPerRun
	i := mcpauthtest.NewIDP(t, devidp.Config{})
	tok, err := i.AccessToken("alice", mcpauthtest.Resource)
	if err != nil {
		t.Fatal(err)
	}
	allocs := func(size int) float64 {
		v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{i.TrustedIssuer("a")}, TokenCacheSize: size})
		if _, err := v.VerifyAccessToken(context.Background(), tok, []string{mcpauthtest.Resource}); err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(50, func() {
			if _, err := v.VerifyAccessToken(context.Background(), tok, []string{mcpauthtest.Resource}); err != nil {
				t.Fatal(err)
			}
		})
	}
	cached, uncached := allocs(0), allocs(-1)
	if cached*5 > uncached {
		t.Fatalf("cache hit allocates %.0f, full verification %.0f: the cache is not used", cached, uncached)
	}
}

func BenchmarkVerifyAccessToken(b *testing.B) {
	for _, tc := range []struct {
		name string
		size int
	}{{"cached", 0}, {"uncached", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			i := mcpauthtest.NewIDP(&testing.T{}, devidp.Config{})
			v, err := mcpauth.NewVerifier(mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{i.TrustedIssuer("a")},
				HTTPClient: mcpauthtest.TLSClient(), TokenCacheSize: tc.size})
			if err != nil {
				b.Fatal(err)
			}
			defer v.Close()
			tok, _ := i.AccessToken("alice", mcpauthtest.Resource)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := v.VerifyAccessToken(ctx, tok, []string{mcpauthtest.Resource}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
