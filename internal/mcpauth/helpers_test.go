package mcpauth_test

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
)

const (
	resource      = "https://mcp.example.com/mcp"
	otherResource = "https://other-mcp.example.com/mcp"
)

// idp is a development identity provider served over TLS, with a count of
// the JWKS requests it answered.
type idp struct {
	*devidp.Provider
	srv         *httptest.Server
	jwksHits    atomic.Int64
	jwksFails   atomic.Bool                 // answer the JWKS with 500 while set
	jwksHeaders atomic.Pointer[http.Header] // added to every JWKS answer
	jwksDelay   atomic.Int64                // nanoseconds each JWKS answer takes
}

func newIDP(t testing.TB, cfg devidp.Config) *idp {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	cfg.Issuer = srv.URL
	p, err := devidp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	i := &idp{Provider: p, srv: srv}
	h := p.Handler()
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jwks" {
			i.jwksHits.Add(1)
			time.Sleep(time.Duration(i.jwksDelay.Load()))
			if h := i.jwksHeaders.Load(); h != nil {
				maps.Copy(w.Header(), *h)
			}
			if i.jwksFails.Load() {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	return i
}

// issuer is the trusted-issuer entry for this IdP.
func (i *idp) issuer(id string) mcpauth.Issuer {
	return mcpauth.Issuer{ID: id, URL: i.srv.URL}
}

// newVerifier returns a Verifier trusting issuers, reaching them through the
// TLS test client (all httptest TLS servers share one certificate).
func newVerifier(t testing.TB, cfg mcpauth.VerifierConfig) *mcpauth.Verifier {
	t.Helper()
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = tlsClient()
	}
	if cfg.HTTPTimeout == 0 {
		cfg.HTTPTimeout = 3 * time.Second
	}
	v, err := mcpauth.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

// deadURL returns the URL of a TLS server that has already stopped.
func deadURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
}

// tlsClient returns an HTTP client that trusts the httptest certificate.
func tlsClient() *http.Client {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	return srv.Client()
}

// signer returns a provider that is not served anywhere: it signs tokens in
// the name of issuer with keys nobody publishes.
func signer(t *testing.T, issuer string) *devidp.Provider {
	t.Helper()
	p, err := devidp.New(devidp.Config{Issuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// eventually fails t unless cond becomes true within a generous deadline: for
// what happens in a background goroutine, never to measure how fast.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not true after 10s: %s", what)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
