package web

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkPublic is one warm /v1 token read's trip through the public
// chain (request id, access log with an observer that matches the route
// table again when r.Pattern is empty, as the metrics' does, recovery,
// security headers, cross-origin check, both /v1 rate limits) to a handler
// that answers a token-sized JSON document: what the chain itself costs a
// request, in allocations above all (the CPU figure moves with whatever else
// runs on the machine).
func BenchmarkPublic(b *testing.B) {
	m := NewMux()
	doc := struct {
		Provider    string   `json:"provider"`
		Kind        string   `json:"kind"`
		TokenType   string   `json:"token_type"`
		AccessToken string   `json:"access_token"`
		Scopes      []string `json:"scopes"`
	}{"bench", "oauth2", "Bearer", "bench-access-" + strings.Repeat("x", 40), []string{"repo", "read:user"}}
	m.Handle(Route{Pattern: "GET /v1/connections/{provider}/token", Kind: KindAPI, Class: ClassAPI,
		Handler: API(slog.New(slog.DiscardHandler), func(w http.ResponseWriter, r *http.Request) error {
			WriteJSON(w, http.StatusOK, doc)
			return nil
		})})
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
	h, err := Public(m, PublicConfig{Logger: logger,
		Limits: RateLimits{API: Rate{Requests: 1_000_000, Window: time.Minute}, APIPerIP: Rate{Requests: 1_000_000, Window: time.Minute}},
		Observe: func(r *http.Request, status int, d time.Duration) {
			if r.Pattern == "" {
				_, _ = m.Handler(r)
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/connections/bench/token", nil)
	req.RemoteAddr = "192.0.2.1:4711"
	req.Header.Set("Authorization", "Bearer cks_"+strings.Repeat("k", 43))
	req.Header.Set("X-User-Token", strings.Repeat("t", 700))
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
