package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/provider"
)

// TestBulkhead (issue 22): a provider that hangs holds at most its own
// slots; its next caller hears ErrUnavailable (cause ErrBusy) within about a
// second instead of queuing behind the hung calls, and another provider's
// calls are not held at all.
func TestBulkhead(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var hung atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung.Add(1)
		<-release
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(fast.Close)
	spec := func(name, base string) provider.Spec {
		return provider.Spec{Name: name, Kind: provider.KindOAuth2, ClientID: "c", ClientSecret: "s",
			AuthorizeURL: base + "/authorize", TokenURL: base + "/token"}
	}
	opts := provider.Options{HTTPClient: slow.Client(), MaxConcurrent: 2}
	ctx := context.Background()
	newOAuth := func(s provider.Spec) provider.OAuth {
		p, err := provider.NewProvider(ctx, s, true, opts)
		if err != nil {
			t.Fatal(err)
		}
		return p.(provider.OAuth)
	}
	hanging, healthy := newOAuth(spec("slow", slow.URL)), newOAuth(spec("fast", fast.URL))

	for range 2 {
		go hanging.Refresh(ctx, "rt")
	}
	for hung.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := hanging.Refresh(cctx, "rt")
	if !errors.Is(err, provider.ErrUnavailable) || !errors.Is(err, provider.ErrBusy) {
		t.Fatalf("third call to a hung provider: %v, want ErrUnavailable (ErrBusy)", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("third call waited %s", d)
	}
	if hung.Load() != 2 {
		t.Fatalf("%d calls reached the hung provider, want 2", hung.Load())
	}
	if _, err := healthy.Refresh(cctx, "rt"); err != nil {
		t.Fatalf("another provider's call while one hangs: %v", err)
	}
}
