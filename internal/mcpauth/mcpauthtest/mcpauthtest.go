// Package mcpauthtest is test support for the tests of internal/mcpauth and
// internal/clientauth: a development identity provider (internal/devidp)
// served over TLS whose JWKS answers can be counted, failed, delayed and
// given extra headers, and a Verifier that reaches it. It is imported only
// from _test.go files and is never linked into connectd (cmd/connectd's
// TestNoTestCodeLinked checks).
package mcpauthtest

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

// Resource and OtherResource are the MCP servers the tests' tokens are for.
const (
	Resource      = "https://mcp.example.com/mcp"
	OtherResource = "https://other-mcp.example.com/mcp"
)

// IDP is a development identity provider served over TLS, with a count of
// the JWKS requests it answered.
type IDP struct {
	*devidp.Provider
	Server      *httptest.Server
	JWKSHits    atomic.Int64
	JWKSFails   atomic.Bool                 // answer the JWKS with 500 while set
	JWKSHeaders atomic.Pointer[http.Header] // added to every JWKS answer
	JWKSDelay   atomic.Int64                // nanoseconds each JWKS answer takes
}

// NewIDP starts an IDP with cfg (its Issuer is the server's URL) and stops
// it when t ends.
func NewIDP(t testing.TB, cfg devidp.Config) *IDP {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	cfg.Issuer = srv.URL
	p, err := devidp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	i := &IDP{Provider: p, Server: srv}
	h := p.Handler()
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jwks" {
			i.JWKSHits.Add(1)
			time.Sleep(time.Duration(i.JWKSDelay.Load()))
			if h := i.JWKSHeaders.Load(); h != nil {
				maps.Copy(w.Header(), *h)
			}
			if i.JWKSFails.Load() {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	return i
}

// TrustedIssuer is the trusted-issuer entry for this IdP, named id.
func (i *IDP) TrustedIssuer(id string) mcpauth.Issuer {
	return mcpauth.Issuer{ID: id, URL: i.Server.URL}
}

// NewVerifier returns a Verifier with cfg, reaching issuers through the TLS
// test client (all httptest TLS servers share one certificate) unless cfg
// names a client, and closes it when t ends.
func NewVerifier(t testing.TB, cfg mcpauth.VerifierConfig) *mcpauth.Verifier {
	t.Helper()
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = TLSClient()
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

// TLSClient returns an HTTP client that trusts the httptest certificate.
func TLSClient() *http.Client {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	return srv.Client()
}
