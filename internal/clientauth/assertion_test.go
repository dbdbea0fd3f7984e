package clientauth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/testkit"
)

const tokenEndpoint = "https://connectd.example/oauth/token"

// jwksServer publishes a JWK Set that a test can change (rotation), and
// counts its fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	keys    []jwkset.JWK
	fetches atomic.Int32
	failing atomic.Bool // answer 503 (the URL down, or kept down)
}

func newJWKSServer(t *testing.T) *jwksServer {
	s := &jwksServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		if s.failing.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		doc := jwkset.JWKSMarshal{}
		for _, k := range s.keys {
			doc.Keys = append(doc.Keys, k.Marshal())
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) publish(t *testing.T, keys ...*signingKey) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = nil
	for _, k := range keys {
		s.keys = append(s.keys, k.jwk(t))
	}
}

// signingKey is an MCP server's private key.
type signingKey struct {
	kid    string
	method jwt.SigningMethod
	priv   crypto.Signer
}

func newKey(t *testing.T, kid, alg string) *signingKey {
	t.Helper()
	k := &signingKey{kid: kid}
	var err error
	switch alg {
	case "ES256":
		k.method, k.priv = jwt.SigningMethodES256, must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	case "RS256":
		k.method, k.priv = jwt.SigningMethodRS256, must(rsa.GenerateKey(rand.Reader, 2048))
	case "EdDSA":
		var priv ed25519.PrivateKey
		_, priv, err = ed25519.GenerateKey(rand.Reader)
		k.method, k.priv = jwt.SigningMethodEdDSA, priv
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (k *signingKey) jwk(t *testing.T) jwkset.JWK {
	t.Helper()
	j, err := jwkset.NewJWKFromKey(k.priv.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: k.kid}})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (k *signingKey) pem(t *testing.T) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// assertion is a client assertion for client id at aud, signed by k,
// issued at now, edited by mod.
func (k *signingKey) assertion(t *testing.T, id, aud string, now time.Time, mod func(jwt.MapClaims)) string {
	t.Helper()
	c := jwt.MapClaims{"iss": id, "sub": id, "aud": aud, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(),
		"jti": rand.Text()}
	if mod != nil {
		mod(c)
	}
	tok := jwt.NewWithClaims(k.method, c)
	if k.kid != "" {
		tok.Header["kid"] = k.kid
	}
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withHeader is k's assertion for client id at aud with header members set
// (nil: deleted).
func (k *signingKey) withHeader(t *testing.T, id, aud string, now time.Time, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.method, jwt.MapClaims{"iss": id, "sub": id, "aud": aud, "iat": now.Unix(),
		"exp": now.Add(time.Minute).Unix(), "jti": rand.Text()})
	if k.kid != "" {
		tok.Header["kid"] = k.kid
	}
	for name, v := range header {
		if v == nil {
			delete(tok.Header, name)
		} else {
			tok.Header[name] = v
		}
	}
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestClientAssertions (issue 28 part 3): a client registered with public
// keys or a JWKS URL authenticates with RFC 7523 assertions, and each attack
// is refused.
func TestClientAssertions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	clock := testkit.NewClock(time.Now())
	jwks := newJWKSServer(t)
	cfg := clientauth.ClientsConfig{Pool: pool, HTTPClient: jwks.Client(), Now: clock.Now}
	clients := clientauth.NewClients(cfg)
	replica := clientauth.NewClients(cfg) // another replica: its own caches, the same database

	a, b := newKey(t, "a", "ES256"), newKey(t, "b", "ES256")
	rsaKey, edKey := newKey(t, "", "RS256"), newKey(t, "ed", "EdDSA")
	jwks.publish(t, a)
	byURL, _, err := clients.Create(ctx, "By URL", []string{"https://url.mcp.example/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := clients.SetAssertionKeys(ctx, byURL.ID, clientauth.AssertionKeys{JWKSURL: jwks.URL + "/jwks"}); err != nil {
		t.Fatal(err)
	}
	byPEM, pemKey, err := clients.Create(ctx, "By PEM", []string{"https://pem.mcp.example/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := clients.SetAssertionKeys(ctx, byPEM.ID, clientauth.AssertionKeys{PublicKey: rsaKey.pem(t), DropSecrets: true}); err != nil {
		t.Fatal(err)
	}
	byJWK, _, err := clients.Create(ctx, "By JWK", []string{"https://jwk.mcp.example/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	edJWK, _ := json.Marshal(edKey.jwk(t).Marshal())
	if err := clients.SetAssertionKeys(ctx, byJWK.ID, clientauth.AssertionKeys{PublicKey: edJWK}); err != nil {
		t.Fatal(err)
	}

	ok := func(c *clientauth.Clients, raw string, want string) {
		t.Helper()
		got, err := c.AuthenticateAssertion(ctx, raw, tokenEndpoint)
		if err != nil || got.ID != want {
			t.Fatalf("refused a good assertion: %v", err)
		}
	}
	refused := func(c *clientauth.Clients, raw string, want error) {
		t.Helper()
		if _, err := c.AuthenticateAssertion(ctx, raw, tokenEndpoint); !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
	}

	t.Run("accepted: JWKS URL, PEM, JWK", func(t *testing.T) {
		ok(clients, a.assertion(t, byURL.ID, tokenEndpoint, clock.Now(), nil), byURL.ID)
		ok(clients, rsaKey.assertion(t, byPEM.ID, tokenEndpoint, clock.Now(), nil), byPEM.ID)
		ok(clients, edKey.assertion(t, byJWK.ID, tokenEndpoint, clock.Now(), nil), byJWK.ID)
	})
	t.Run("the client key is gone with DropSecrets", func(t *testing.T) {
		if _, err := clients.Authenticate(ctx, pemKey); !errors.Is(err, clientauth.ErrInvalidClientKey) {
			t.Fatalf("the dropped client key still authenticates: %v", err)
		}
	})

	now := clock.Now()
	for _, tt := range []struct {
		name string
		raw  string
	}{
		{"wrong aud", a.assertion(t, byURL.ID, "https://connectd.example/v1", now, nil)},
		{"aud with a second value", a.assertion(t, byURL.ID, "", now, func(c jwt.MapClaims) {
			c["aud"] = []string{tokenEndpoint, "https://other.example"}
		})},
		{"expired", a.assertion(t, byURL.ID, tokenEndpoint, now.Add(-10*time.Minute), nil)},
		{"living too long", a.assertion(t, byURL.ID, tokenEndpoint, now, func(c jwt.MapClaims) {
			c["exp"] = now.Add(time.Hour).Unix()
		})},
		{"no exp", a.assertion(t, byURL.ID, tokenEndpoint, now, func(c jwt.MapClaims) { delete(c, "exp") })},
		{"no iat", a.assertion(t, byURL.ID, tokenEndpoint, now, func(c jwt.MapClaims) { delete(c, "iat") })},
		{"no jti", a.assertion(t, byURL.ID, tokenEndpoint, now, func(c jwt.MapClaims) { delete(c, "jti") })},
		{"iss is not sub", a.assertion(t, byURL.ID, tokenEndpoint, now, func(c jwt.MapClaims) { c["sub"] = byPEM.ID })},
		{"another client's key", rsaKey.assertion(t, byURL.ID, tokenEndpoint, now, nil)},
		{"signed for another client", a.assertion(t, byPEM.ID, tokenEndpoint, now, nil)},
		{"alg none", func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": byPEM.ID, "sub": byPEM.ID, "aud": tokenEndpoint,
				"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": "none-1"})
			s, _ := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
			return s
		}()},
		{"HS256 with the public key as secret", func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": byPEM.ID, "sub": byPEM.ID, "aud": tokenEndpoint,
				"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": "hs-1"})
			s, _ := tok.SignedString(rsaKey.pem(t))
			return s
		}()},
		{"unknown client", a.assertion(t, "cli_nosuchclient", tokenEndpoint, now, nil)},
		// Issue 33: a JWT made for something else, or one that depends on
		// a header extension connectd does not understand.
		{"typ dpop+jwt", a.withHeader(t, byURL.ID, tokenEndpoint, now, map[string]any{"typ": "dpop+jwt"})},
		{"typ at+jwt", a.withHeader(t, byURL.ID, tokenEndpoint, now, map[string]any{"typ": "at+jwt"})},
		{"typ not a string", a.withHeader(t, byURL.ID, tokenEndpoint, now, map[string]any{"typ": 1})},
		{"an unknown crit header", a.withHeader(t, byURL.ID, tokenEndpoint, now,
			map[string]any{"crit": []string{"urn:example:must"}, "urn:example:must": true})},
		{"an empty crit", a.withHeader(t, byURL.ID, tokenEndpoint, now, map[string]any{"crit": []string{}})},
		// Issued before the JWKS was fetched: a key it would have held.
		{"a kid not in the JWKS", newKey(t, "zzz", "ES256").assertion(t, byURL.ID, tokenEndpoint, now.Add(-40*time.Second), nil)},
	} {
		t.Run(tt.name, func(t *testing.T) { refused(clients, tt.raw, clientauth.ErrInvalidAssertion) })
	}

	t.Run("typ: absent, JWT or client-authentication+jwt", func(t *testing.T) {
		for _, typ := range []any{nil, "JWT", "jwt", "client-authentication+jwt", "application/client-authentication+jwt"} {
			ok(clients, a.withHeader(t, byURL.ID, tokenEndpoint, clock.Now(), map[string]any{"typ": typ}), byURL.ID)
		}
	})

	// Issue 33: acceptance is judged by each replica's clock, the sweep by
	// the sweeping one's. A replica whose clock runs ahead sweeping must not
	// reopen a jti that one whose clock runs behind still accepts.
	t.Run("a sweep by a replica whose clock runs ahead reopens no jti", func(t *testing.T) {
		aheadCfg := cfg
		aheadCfg.Now = func() time.Time { return clock.Now().Add(2 * time.Minute) }
		ahead := clientauth.NewClients(aheadCfg)
		raw := rsaKey.assertion(t, byPEM.ID, tokenEndpoint, clock.Now(), nil)
		ok(clients, raw, byPEM.ID)
		if _, err := ahead.SweepAssertions(ctx); err != nil {
			t.Fatal(err)
		}
		refused(replica, raw, clientauth.ErrInvalidAssertion)
	})

	t.Run("replayed on another replica", func(t *testing.T) {
		raw := rsaKey.assertion(t, byPEM.ID, tokenEndpoint, clock.Now(), nil)
		ok(clients, raw, byPEM.ID)
		refused(replica, raw, clientauth.ErrInvalidAssertion)
		refused(clients, raw, clientauth.ErrInvalidAssertion)
	})
	t.Run("replayed concurrently: one wins", func(t *testing.T) {
		raw := edKey.assertion(t, byJWK.ID, tokenEndpoint, clock.Now(), nil)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := clients
				if i%2 == 1 {
					c = replica
				}
				if _, err := c.AuthenticateAssertion(ctx, raw, tokenEndpoint); err == nil {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d of 8 concurrent uses accepted", wins.Load())
		}
	})

	t.Run("rotation: a newly published key is found", func(t *testing.T) {
		jwks.publish(t, a, b)
		fetches := jwks.fetches.Load()
		clock.Advance(11 * time.Second) // past the unknown-kid interval since the last fetch
		ok(clients, b.assertion(t, byURL.ID, tokenEndpoint, clock.Now(), nil), byURL.ID)
		if jwks.fetches.Load() != fetches+1 {
			t.Fatalf("%d fetches for the new kid, want 1", jwks.fetches.Load()-fetches)
		}
		// A flood of unknown kids costs at most one fetch per interval: one
		// that may be newer than the keys just fetched is a 503 until the
		// interval has passed (as for issuers), never accepted.
		for range 5 {
			refused(clients, newKey(t, "made-up", "ES256").assertion(t, byURL.ID, tokenEndpoint, clock.Now(), nil), mcpauth.ErrIssuerUnavailable)
		}
		if jwks.fetches.Load() > fetches+2 {
			t.Fatalf("%d fetches for a flood of unknown kids", jwks.fetches.Load()-fetches)
		}
		// The old key, no longer published, stops working: 401 for an
		// assertion older than the fetch that dropped it (a newer one may
		// name a key published since: a 503 for an interval, then 401).
		jwks.publish(t, b)
		clock.Advance(6 * time.Minute)
		ok(clients, b.assertion(t, byURL.ID, tokenEndpoint, clock.Now(), nil), byURL.ID)
		refused(clients, a.assertion(t, byURL.ID, tokenEndpoint, clock.Now().Add(-40*time.Second), nil), clientauth.ErrInvalidAssertion)
		refused(clients, a.assertion(t, byURL.ID, tokenEndpoint, clock.Now(), nil), mcpauth.ErrIssuerUnavailable)
		clock.Advance(11 * time.Second)
		refused(clients, a.assertion(t, byURL.ID, tokenEndpoint, clock.Now(), nil), clientauth.ErrInvalidAssertion)
		ok(clients, b.assertion(t, byURL.ID, tokenEndpoint, clock.Now(), nil), byURL.ID)
	})

	t.Run("a failing JWKS URL: the last keys verify for a while, not for ever", func(t *testing.T) {
		jwks.failing.Store(true)
		defer jwks.failing.Store(false)
		clock.Advance(6 * time.Minute) // past the keys' lifetime: a fetch, which fails
		ok(clients, b.assertion(t, byURL.ID, tokenEndpoint, clock.Now(), nil), byURL.ID)
		clock.Advance(61 * time.Minute) // kept failing past maxStaleKeys
		refused(clients, b.assertion(t, byURL.ID, tokenEndpoint, clock.Now(), nil), mcpauth.ErrIssuerUnavailable)
		jwks.failing.Store(false)
		clock.Advance(11 * time.Second)
		ok(clients, b.assertion(t, byURL.ID, tokenEndpoint, clock.Now(), nil), byURL.ID)
	})

	t.Run("disabled", func(t *testing.T) {
		if err := clients.SetDisabled(ctx, byJWK.ID, true); err != nil {
			t.Fatal(err)
		}
		refused(clients, edKey.assertion(t, byJWK.ID, tokenEndpoint, clock.Now(), nil), clientauth.ErrClientDisabled)
		// One not signed by its key learns nothing of that: invalid, as for
		// any client.
		if _, err := clients.AuthenticateAssertion(ctx, a.assertion(t, byJWK.ID, tokenEndpoint, clock.Now(), nil),
			tokenEndpoint); errors.Is(err, clientauth.ErrClientDisabled) || !errors.Is(err, clientauth.ErrInvalidAssertion) {
			t.Fatalf("a forged assertion for a disabled client: %v", err)
		}
	})

	t.Run("spent jtis are swept once expired", func(t *testing.T) {
		var before int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM client_assertions`).Scan(&before)
		if before == 0 {
			t.Fatal("no spent jti recorded")
		}
		clock.Advance(MaxLifetimePlus())
		if n, err := clients.SweepAssertions(ctx); err != nil || int(n) != before {
			t.Fatalf("swept %d of %d (%v)", n, before, err)
		}
	})
}

// MaxLifetimePlus is past any recorded assertion's expiry.
func MaxLifetimePlus() time.Duration { return clientauth.MaxAssertionLifetime + 2*time.Minute }

// TestAssertionKeyRegistration: what a client may register for
// private_key_jwt, and the SSRF guard on a JWKS URL, at registration and at
// fetch.
func TestAssertionKeyRegistration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	guarded, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, HTTPClient: guarded})
	c, _, err := clients.Create(ctx, "Reg", []string{"https://reg.mcp.example/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	weak := must(rsa.GenerateKey(rand.Reader, 1024))
	weakDER, _ := x509.MarshalPKIXPublicKey(&weak.PublicKey)
	privDER, _ := x509.MarshalPKCS8PrivateKey(must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)))
	ec := newKey(t, "k", "ES256")
	privJWK, _ := json.Marshal(must(jwkset.NewJWKFromKey(ec.priv, jwkset.JWKOptions{Marshal: jwkset.JWKMarshalOptions{Private: true}})).Marshal())
	for _, tt := range []struct {
		name string
		keys clientauth.AssertionKeys
	}{
		{"both", clientauth.AssertionKeys{JWKSURL: "https://keys.example/jwks", PublicKey: ec.pem(t)}},
		{"http", clientauth.AssertionKeys{JWKSURL: "http://keys.example/jwks"}},
		{"javascript", clientauth.AssertionKeys{JWKSURL: "javascript:alert(1)"}},
		{"private IP", clientauth.AssertionKeys{JWKSURL: "https://10.0.0.7/jwks"}},
		{"loopback IP", clientauth.AssertionKeys{JWKSURL: "https://127.0.0.1:8443/jwks"}},
		{"metadata IP", clientauth.AssertionKeys{JWKSURL: "https://169.254.169.254/latest"}},
		{"RSA 1024", clientauth.AssertionKeys{PublicKey: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: weakDER})}},
		{"private PEM", clientauth.AssertionKeys{PublicKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})}},
		{"private JWK", clientauth.AssertionKeys{PublicKey: privJWK}},
		{"symmetric JWK", clientauth.AssertionKeys{PublicKey: []byte(`{"kty":"oct","k":"c2VjcmV0"}`)}},
		{"garbage", clientauth.AssertionKeys{PublicKey: []byte("not a key")}},
		{"drop secrets without keys", clientauth.AssertionKeys{DropSecrets: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := clients.SetAssertionKeys(ctx, c.ID, tt.keys); !errors.Is(err, clientauth.ErrInvalidClient) {
				t.Fatalf("registered: %v", err)
			}
		})
	}

	// A name is accepted at registration (what it resolves to may change);
	// the guard refuses the dial when it resolves to loopback, and the
	// JWKS server never sees a request.
	t.Run("a name resolving to loopback is refused at fetch", func(t *testing.T) {
		jwks := newJWKSServer(t)
		jwks.publish(t, ec)
		u, _ := url.Parse(jwks.URL)
		if err := clients.SetAssertionKeys(ctx, c.ID, clientauth.AssertionKeys{JWKSURL: "https://localhost:" + u.Port() + "/jwks"}); err != nil {
			t.Fatal(err)
		}
		_, err := clients.AuthenticateAssertion(ctx, ec.assertion(t, c.ID, tokenEndpoint, time.Now(), nil), tokenEndpoint)
		if !errors.Is(err, mcpauth.ErrIssuerUnavailable) || jwks.fetches.Load() != 0 {
			t.Fatalf("got %v after %d fetches", err, jwks.fetches.Load())
		}
	})
}

// TestJWKSFetchOutlivesItsCaller: anyone can send an assertion naming a
// client; one who hangs up during the first fetch of its JWKS must not make
// that fetch fail (it would not be retried for seconds) for the client's own
// next call.
func TestJWKSFetchOutlivesItsCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := newKey(t, "a", "ES256")
	keys := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{k.jwk(t).Marshal()}}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // longer than the first caller waits
		_ = json.NewEncoder(w).Encode(keys)
	}))
	t.Cleanup(srv.Close)
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: pgtest.Pool(t), HTTPClient: srv.Client()})
	c, _, err := clients.Create(ctx, "Slow keys", []string{"https://slow.mcp.example/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := clients.SetAssertionKeys(ctx, c.ID, clientauth.AssertionKeys{JWKSURL: srv.URL + "/jwks"}); err != nil {
		t.Fatal(err)
	}
	hangUp, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, _ = clients.AuthenticateAssertion(hangUp, k.assertion(t, c.ID, tokenEndpoint, time.Now(), nil), tokenEndpoint)
	if _, err := clients.AuthenticateAssertion(ctx, k.assertion(t, c.ID, tokenEndpoint, time.Now(), nil), tokenEndpoint); err != nil {
		t.Fatalf("the client's own call after a caller hung up: %v", err)
	}
}
