package mcpauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
	"github.com/connectd/connectd/internal/testkit"
	"github.com/connectd/connectd/internal/web"
)

// clocked returns an IdP and a Verifier trusting it, both on one hand-moved
// clock.
func clocked(t *testing.T, cfg mcpauth.VerifierConfig) (*mcpauthtest.IDP, *mcpauth.Verifier, *testkit.Clock) {
	t.Helper()
	clk := testkit.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	a := mcpauthtest.NewIDP(t, devidp.Config{Now: clk.Now})
	cfg.Issuers, cfg.Now = []mcpauth.Issuer{a.TrustedIssuer("a")}, clk.Now
	return a, mcpauthtest.NewVerifier(t, cfg), clk
}

// verifyNew mints a token of a's current key at its clock's now and verifies it.
func verifyNew(t *testing.T, a *mcpauthtest.IDP, v *mcpauth.Verifier) error {
	t.Helper()
	tok, err := a.AccessToken("alice", mcpauthtest.Resource)
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.VerifyAccessToken(context.Background(), tok, []string{mcpauthtest.Resource})
	return err
}

// retryAfter returns the answer the API gives for err: its status and
// Retry-After.
func retryAfter(t *testing.T, err error) (int, string) {
	t.Helper()
	var we *web.Error
	if !errors.As(web.AsError(err), &we) {
		t.Fatalf("%v is no *web.Error", err)
	}
	return we.Status, we.Header.Get("Retry-After")
}

// want503 fails t unless err is a 503 jwks_unavailable whose Retry-After is
// retry: never a 401 for a kid that may be newer than the cached keys.
func want503(t *testing.T, err error, retry string) {
	t.Helper()
	if !errors.Is(err, mcpauth.ErrIssuerUnavailable) || errors.Is(err, mcpauth.ErrInvalidToken) {
		t.Fatalf("got %v, want ErrIssuerUnavailable only", err)
	}
	if status, got := retryAfter(t, err); status != http.StatusServiceUnavailable || got != retry {
		t.Fatalf("answer %d Retry-After %q, want 503 Retry-After %q", status, got, retry)
	}
}

// TestKeyRotation: after the issuer rotates its signing key, a token with the
// new kid is 503 with Retry-After (never 401) until a refresh is allowed, at
// most the default 5s after the last fetch, then accepted after one fetch.
// Unknown kids in tokens issued before the last fetch are refused without
// one; those issued after it cost one fetch per interval.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	a, v, clk := clocked(t, mcpauth.VerifierConfig{})
	ctx := context.Background()
	verify := func(tok string) error {
		_, err := v.VerifyAccessToken(ctx, tok, []string{mcpauthtest.Resource})
		return err
	}
	hits := func(want int64, when string) {
		t.Helper()
		if n := a.JWKSHits.Load(); n != want {
			t.Fatalf("%d JWKS fetches %s, want %d", n, when, want)
		}
	}
	tok1, _ := a.AccessToken("alice", mcpauthtest.Resource)
	tok1b, _ := a.AccessToken("alice", mcpauthtest.Resource) // verified after the rotation
	if err := verify(tok1); err != nil {
		t.Fatal(err)
	}
	hits(1, "after the first token")

	if err := a.Rotate(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	tok2, _ := a.AccessToken("alice", mcpauthtest.Resource)
	want503(t, verify(tok2), "3")
	hits(1, "within the interval")
	clk.Advance(3 * time.Second)
	if err := verify(tok2); err != nil {
		t.Fatalf("token signed with the rotated key, 5s after the last fetch: %v", err)
	}
	hits(2, "after rotation")
	if err := verify(tok1b); err != nil {
		t.Fatalf("token of the previous key, still published: %v", err)
	}

	// Made-up kids in tokens issued before the last fetch: refused at once,
	// however often, and no fetch, even once the interval has passed.
	clk.Advance(time.Minute)
	forger := devidpAt(t, a.Issuer(), clk)
	for range 5 {
		c := forger.AccessTokenClaims("alice", "x", "", mcpauthtest.Resource)
		c["iat"] = clk.Now().Add(-2 * time.Minute).Unix()
		forged, _ := forger.Sign("at+jwt", c)
		if err := verify(forged); !errors.Is(err, mcpauth.ErrSignature) {
			t.Fatalf("forged token issued before the last fetch: %v", err)
		}
	}
	hits(2, "after unknown kids older than the cache")

	// Issued after the last fetch: the first costs a fetch (the kid might be
	// new) and is then refused; the next ones within the interval are 503.
	forged, _ := forger.Sign("at+jwt", forger.AccessTokenClaims("alice", "x", "", mcpauthtest.Resource))
	if err := verify(forged); !errors.Is(err, mcpauth.ErrSignature) {
		t.Fatalf("new unknown kid after a fetch that did not have it: %v", err)
	}
	hits(3, "after a new unknown kid")
	clk.Advance(time.Second)
	forged, _ = forger.Sign("at+jwt", forger.AccessTokenClaims("alice", "x", "", mcpauthtest.Resource))
	want503(t, verify(forged), "4")
	hits(3, "after a new unknown kid within the interval")
}

// devidpAt returns a provider that is not served anywhere, signing in the
// name of issuer with keys nobody publishes, at clk's time.
func devidpAt(t *testing.T, issuer string, clk *testkit.Clock) *devidp.Provider {
	t.Helper()
	p, err := devidp.New(devidp.Config{Issuer: issuer, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRotationUnderUnknownKIDFlood: while someone sends tokens with made-up
// kids and fresh iat as fast as they can, the issuer rotates its key; a token
// of the new key is accepted within one interval (5s) of the last fetch, and
// the JWKS is fetched at most once per interval for the whole flood.
func TestRotationUnderUnknownKIDFlood(t *testing.T) {
	t.Parallel()
	a, v, clk := clocked(t, mcpauth.VerifierConfig{})
	ctx := context.Background()
	if err := verifyNew(t, a, v); err != nil {
		t.Fatal(err)
	}

	first := clk.Now() // of the first fetch
	forger := devidpAt(t, a.Issuer(), clk)
	var sent atomic.Int64
	var wrong atomic.Pointer[error]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = forger.Rotate() // a new random kid every time
			tok, _ := forger.Sign("at+jwt", forger.AccessTokenClaims("mallory", "x", "", mcpauthtest.Resource))
			if _, err := v.VerifyAccessToken(ctx, tok, []string{mcpauthtest.Resource}); err == nil ||
				!(errors.Is(err, mcpauth.ErrSignature) || errors.Is(err, mcpauth.ErrIssuerUnavailable)) {
				wrong.Store(&err) // nil: accepted
			}
			sent.Add(1)
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })
	// step moves the clock a second on and lets the flood have its go first.
	step := func() {
		clk.Advance(time.Second)
		n := sent.Load()
		eventually(t, "the flood sends a token", func() bool { return sent.Load() > n+1 })
	}

	step()
	if err := a.Rotate(); err != nil {
		t.Fatal(err)
	}
	tok, _ := a.AccessToken("alice", mcpauthtest.Resource)
	for attempt := 1; ; attempt++ {
		_, err := v.VerifyAccessToken(ctx, tok, []string{mcpauthtest.Resource})
		if err == nil {
			break
		}
		if errors.Is(err, mcpauth.ErrInvalidToken) {
			t.Fatalf("attempt %d: the rotated key's token refused as invalid: %v", attempt, err)
		}
		retryAfterOf(t, err)
		if attempt > 6 {
			t.Fatalf("the rotated key's token still refused after %d attempts a second apart: %v", attempt, err)
		}
		step()
	}
	for range 20 { // the flood goes on
		step()
	}
	// The first fetch, then at most one per 5s.
	elapsed := clk.Now().Sub(first)
	if n, most := a.JWKSHits.Load(), 1+int64(elapsed/(5*time.Second)); n > most {
		t.Fatalf("%d JWKS fetches in %s of flood, want at most %d", n, elapsed, most)
	}
	if p := wrong.Load(); p != nil {
		t.Fatalf("a token with a made-up kid: got %v, want ErrSignature or ErrIssuerUnavailable", *p)
	}
	if sent.Load() < 20 {
		t.Fatalf("the flood sent only %d tokens", sent.Load())
	}
}

// retryAfterOf checks that err is answered 503 with a Retry-After of 1 to 5
// seconds (the interval).
func retryAfterOf(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, mcpauth.ErrIssuerUnavailable) || errors.Is(err, mcpauth.ErrInvalidToken) {
		t.Fatalf("got %v, want ErrIssuerUnavailable only", err)
	}
	switch status, r := retryAfter(t, err); {
	case status != http.StatusServiceUnavailable:
		t.Fatalf("answer %d, want 503", status)
	case r < "1" || r > "5" || len(r) != 1:
		t.Fatalf("Retry-After %q, want 1-5 seconds", r)
	}
}

// TestUnknownKIDSharesOneFetch: many tokens of a just-rotated key arriving
// together share one JWKS fetch, and all are accepted.
func TestUnknownKIDSharesOneFetch(t *testing.T) {
	t.Parallel()
	a, v, clk := clocked(t, mcpauth.VerifierConfig{})
	if err := verifyNew(t, a, v); err != nil {
		t.Fatal(err)
	}
	if err := a.Rotate(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * time.Second)
	a.JWKSDelay.Store(int64(50 * time.Millisecond)) // so that they overlap
	toks := make([]string, 32)
	for i := range toks {
		toks[i], _ = a.AccessToken("alice", mcpauthtest.Resource)
	}
	errs := make([]error, len(toks))
	var wg sync.WaitGroup
	for i, tok := range toks {
		wg.Go(func() { _, errs[i] = v.VerifyAccessToken(context.Background(), tok, []string{mcpauthtest.Resource}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
	}
	if n := a.JWKSHits.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches, want 2 (the first and one shared refresh)", n)
	}
}

// TestJWKSCacheHeaders: the JWKS is fetched again when its answer's
// Cache-Control max-age (less Age) or Expires runs out, if that is sooner
// than RefreshInterval (1h), but never sooner than a minute after the last
// fetch.
func TestJWKSCacheHeaders(t *testing.T) {
	t.Parallel()
	date := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		expiry time.Duration // when the cached answer runs out
	}{
		{"no cache headers: RefreshInterval", nil, time.Hour},
		{"max-age", http.Header{"Cache-Control": {"public, max-age=120"}}, 120 * time.Second},
		{"max-age less Age", http.Header{"Cache-Control": {"max-age=600"}, "Age": {"400"}}, 200 * time.Second},
		{"max-age=0 is a minute", http.Header{"Cache-Control": {"max-age=0"}}, time.Minute},
		{"no-store is a minute", http.Header{"Cache-Control": {"no-store"}}, time.Minute},
		{"no-cache beats max-age", http.Header{"Cache-Control": {"max-age=3000, no-cache"}}, time.Minute},
		{"max-age beyond RefreshInterval", http.Header{"Cache-Control": {"max-age=86400"}}, time.Hour},
		{"Expires, by the issuer's Date", http.Header{"Date": {date.Format(http.TimeFormat)},
			"Expires": {date.Add(5 * time.Minute).Format(http.TimeFormat)}}, 5 * time.Minute},
		{"max-age beats Expires", http.Header{"Cache-Control": {"max-age=90"}, "Date": {date.Format(http.TimeFormat)},
			"Expires": {date.Add(time.Hour).Format(http.TimeFormat)}}, 90 * time.Second},
		{"invalid Expires is a minute", http.Header{"Expires": {"0"}}, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, v, clk := clocked(t, mcpauth.VerifierConfig{})
			if tt.header != nil {
				a.JWKSHeaders.Store(&tt.header)
			}
			start := clk.Now()
			for _, step := range []struct {
				at   time.Duration
				hits int64
			}{{0, 1}, {tt.expiry - time.Second, 1}, {tt.expiry, 2}, {2*tt.expiry - time.Second, 2}, {2 * tt.expiry, 3}} {
				clk.Advance(start.Add(step.at).Sub(clk.Now()))
				if err := verifyNew(t, a, v); err != nil {
					t.Fatalf("at %s: %v", step.at, err)
				}
				if n := a.JWKSHits.Load(); n != step.hits {
					t.Fatalf("at %s: %d JWKS fetches, want %d", step.at, n, step.hits)
				}
			}
		})
	}
}

// TestJWKSOutage: while the JWKS answers 500, tokens of cached keys keep
// verifying, a new kid is 503 with Retry-After, and the JWKS is retried on a
// backoff of seconds (not RefreshInterval later); once it answers again, a new
// kid verifies within one interval.
func TestJWKSOutage(t *testing.T) {
	t.Parallel()
	a, v, clk := clocked(t, mcpauth.VerifierConfig{})
	ctx := context.Background()
	if err := verifyNew(t, a, v); err != nil {
		t.Fatal(err)
	}
	hits := func(want int64, when string) {
		t.Helper()
		if n := a.JWKSHits.Load(); n != want {
			t.Fatalf("%d JWKS fetches %s, want %d", n, when, want)
		}
	}

	// The outage begins; the scheduled refresh an hour later fails.
	a.JWKSFails.Store(true)
	clk.Advance(time.Hour)
	var known [3]string // tokens of the cached key
	for i := range known {
		known[i], _ = a.AccessToken("alice", mcpauthtest.Resource)
	}
	if _, err := v.VerifyAccessToken(ctx, known[0], []string{mcpauthtest.Resource}); err != nil {
		t.Fatalf("cached key while the JWKS fails: %v", err)
	}
	hits(2, "at the scheduled refresh")

	if err := a.Rotate(); err != nil {
		t.Fatal(err)
	}
	fresh, _ := a.AccessToken("alice", mcpauthtest.Resource)
	_, err := v.VerifyAccessToken(ctx, fresh, []string{mcpauthtest.Resource})
	want503(t, err, "5")
	if _, err := v.VerifyAccessToken(ctx, known[1], []string{mcpauthtest.Resource}); err != nil {
		t.Fatalf("cached key while the JWKS fails: %v", err)
	}
	hits(2, "before the backoff")

	// 5s on, the retry is due: a request of a known key starts it in the
	// background; the new kid waits for that fetch rather than starting one.
	clk.Advance(5 * time.Second)
	if _, err := v.VerifyAccessToken(ctx, known[2], []string{mcpauthtest.Resource}); err != nil {
		t.Fatalf("cached key while the JWKS fails: %v", err)
	}
	_, err = v.VerifyAccessToken(ctx, fresh, []string{mcpauthtest.Resource})
	want503(t, err, "5")
	hits(3, "5s after the failure")

	// The JWKS is back: the new kid verifies one interval later.
	a.JWKSFails.Store(false)
	clk.Advance(5 * time.Second)
	if _, err := v.VerifyAccessToken(ctx, fresh, []string{mcpauthtest.Resource}); err != nil {
		t.Fatalf("new kid 5s after the JWKS came back: %v", err)
	}
	hits(4, "after the outage")
}

// TestJWKSBackoffRecovers: with no new kid to hurry it, a JWKS that failed
// its scheduled refresh is fetched again on the backoff, seconds later, and
// a good answer ends the outage: a made-up kid is a 401 again, not a 503.
func TestJWKSBackoffRecovers(t *testing.T) {
	t.Parallel()
	a, v, clk := clocked(t, mcpauth.VerifierConfig{})
	if err := verifyNew(t, a, v); err != nil {
		t.Fatal(err)
	}
	a.JWKSFails.Store(true)
	clk.Advance(time.Hour)
	if err := verifyNew(t, a, v); err != nil { // fails the refresh, served from the cache
		t.Fatal(err)
	}
	a.JWKSFails.Store(false)
	clk.Advance(5 * time.Second)
	if err := verifyNew(t, a, v); err != nil { // starts the retry in the background
		t.Fatal(err)
	}
	// Issued before that retry, so it waits for the retry or finds it done,
	// and starts no fetch of its own.
	c := a.AccessTokenClaims("alice", "x", "", mcpauthtest.Resource)
	c["iat"] = clk.Now().Add(-time.Minute).Unix()
	forged, _ := signer(t, a.Issuer()).Sign("at+jwt", c)
	if _, err := v.VerifyAccessToken(context.Background(), forged, []string{mcpauthtest.Resource}); !errors.Is(err, mcpauth.ErrSignature) {
		t.Fatalf("made-up kid after the JWKS came back: %v", err)
	}
	if n := a.JWKSHits.Load(); n != 3 {
		t.Fatalf("%d JWKS fetches, want 3 (first, failed refresh, retry)", n)
	}
}

// TestJWKSOutageIsBounded (issue 33, security review): an issuer's key
// taken off its JWKS while the JWKS URL fails — a leaked key, and someone
// keeping the URL failing — keeps verifying new tokens for at most an hour
// past the last answer's lifetime, as a client's key does; then they are 503
// jwks_unavailable, and once the JWKS answers again the key is unknown.
func TestJWKSOutageIsBounded(t *testing.T) {
	t.Parallel()
	a, v, clk := clocked(t, mcpauth.VerifierConfig{})
	ctx := context.Background()
	// Each check is a token the leaked key signs now: none is in the
	// verified-token cache.
	verify := func(when string, want error) {
		t.Helper()
		err := verifyNew(t, a, v)
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Fatalf("%s: got %v, want %v", when, err, want)
		}
		if want == mcpauth.ErrIssuerUnavailable {
			want503AnyRetry(t, err)
		}
	}
	verify("fetched", nil)

	// From now on the key is no longer published, but the JWKS URL fails.
	a.JWKSFails.Store(true)
	clk.Advance(time.Hour) // the answer's lifetime (RefreshInterval) ends: the refresh fails
	verify("at the failed refresh", nil)
	clk.Advance(59 * time.Minute)
	verify("failing for 59 minutes", nil)
	clk.Advance(time.Minute)
	verify("failing for an hour past the lifetime", nil)
	clk.Advance(time.Second)
	verify("failing for an hour and a second", mcpauth.ErrIssuerUnavailable)
	clk.Advance(10 * time.Hour)
	verify("failing for longer", mcpauth.ErrIssuerUnavailable)

	// The JWKS answers again, without the key.
	leaked, err := a.AccessToken("alice", mcpauthtest.Resource)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := a.Rotate(); err != nil {
			t.Fatal(err)
		}
	}
	a.JWKSFails.Store(false)
	clk.Advance(time.Minute)
	if _, err := v.VerifyAccessToken(ctx, leaked, []string{mcpauthtest.Resource}); !errors.Is(err, mcpauth.ErrSignature) {
		t.Fatalf("the key taken off the JWKS, once it answers: %v", err)
	}
	verify("a token of the published key", nil)
}

// want503AnyRetry fails t unless err is answered 503 with a Retry-After.
func want503AnyRetry(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, mcpauth.ErrInvalidToken) {
		t.Fatalf("%v is a refusal, want only ErrIssuerUnavailable", err)
	}
	if status, got := retryAfter(t, err); status != http.StatusServiceUnavailable || got == "" {
		t.Fatalf("answer %d Retry-After %q, want 503 with Retry-After", status, got)
	}
}

// TestIssuerJWKSPublicKeysOnly (issue 33): the JWKS cache holds public keys
// only, for issuers as for clients: an issuer's JWKS answer carrying a
// private or symmetric key is refused whole (its keys are unavailable: 503),
// never used to verify.
func TestIssuerJWKSPublicKeysOnly(t *testing.T) {
	t.Parallel()
	priv := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	privJWK := must(jwkset.NewJWKFromKey(priv, jwkset.JWKOptions{Marshal: jwkset.JWKMarshalOptions{Private: true},
		Metadata: jwkset.JWKMetadataOptions{KID: "k"}})).Marshal()
	pubJWK := must(jwkset.NewJWKFromKey(&priv.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k"}})).Marshal()
	for _, tt := range []struct {
		name string
		keys []any
		want error // nil: verified
	}{
		{"public keys", []any{pubJWK}, nil},
		{"the private key", []any{privJWK}, mcpauth.ErrIssuerUnavailable},
		{"a symmetric key beside the public one", []any{pubJWK, map[string]string{"kty": "oct", "kid": "s", "k": "c2VjcmV0"}},
			mcpauth.ErrIssuerUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(map[string]any{"keys": tt.keys})
			}))
			t.Cleanup(srv.Close)
			iss := srv.URL + "/issuer"
			v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{{ID: "x", URL: iss, JWKSURL: srv.URL + "/jwks"}}})
			now := time.Now()
			tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": iss, "sub": "alice", "aud": mcpauthtest.Resource,
				"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
			tok.Header["typ"], tok.Header["kid"] = "at+jwt", "k"
			raw := must(tok.SignedString(priv))
			_, err := v.VerifyAccessToken(context.Background(), raw, []string{mcpauthtest.Resource})
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}
