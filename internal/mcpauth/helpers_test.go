package mcpauth_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/devidp"
)

// deadURL returns the URL of a TLS server that has already stopped.
func deadURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
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
