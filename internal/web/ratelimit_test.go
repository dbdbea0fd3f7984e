package web_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/web"
)

// TestRetryAfterOnce: a 429 carries exactly one Retry-After value, whichever
// route class refused it and whether the refusal came from the middleware or
// from a handler's own Limiter (httprate sets the header on the writer and
// the error adapter used to add the same header again).
func TestRetryAfterOnce(t *testing.T) {
	t.Parallel()
	limits := web.RateLimits{
		API:      web.Rate{Requests: 1, Window: time.Minute},
		APIPerIP: web.Rate{Requests: 100, Window: time.Minute},
		Browser:  web.Rate{Requests: 1, Window: time.Minute},
		Login:    web.Rate{Requests: 1, Window: time.Minute},
	}
	own := web.NewLimiter(web.Rate{Requests: 1, Window: 30 * time.Second})
	minted := web.APIRoute("GET /v1/minted", web.ClassAPI, slog.New(slog.DiscardHandler), func(w http.ResponseWriter, r *http.Request) error {
		return own.Allow(w, r, "user:alice")
	})
	srv := publicServer(t, limits, append(classified(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})), minted)...)
	// Handler-level limits sit behind the middleware; give them their own server.
	bare := httptest.NewServer(minted.Handler)
	t.Cleanup(bare.Close)

	tests := []struct {
		name string
		url  string
		hdr  map[string]string
		want string
	}{
		{"api per key", srv.URL + "/v1/x", map[string]string{"Authorization": "Bearer cks_a"}, "60"},
		{"api without a key, per IP", srv.URL + "/v1/y", nil, "60"},
		{"browser page", srv.URL + "/c/x", map[string]string{"Accept": "text/html"}, "60"},
		{"login", srv.URL + "/login", map[string]string{"Accept": "text/html"}, "60"},
		{"handler limiter", bare.URL + "/v1/minted", nil, "30"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			send(t, "GET", tt.url, tt.hdr)
			a := send(t, "GET", tt.url, tt.hdr)
			if a.status != http.StatusTooManyRequests {
				t.Fatalf("status %d, want 429", a.status)
			}
			if got := a.header.Values("Retry-After"); len(got) != 1 || got[0] != tt.want {
				t.Fatalf("Retry-After %q, want exactly [%q]", got, tt.want)
			}
		})
	}
}

// TestAssertionsShareTheirClientsBudget: a client assertion is new on every
// call (its jti is single-use), so keying the /v1 budget by the credential
// would give each call a fresh budget; assertions of one client from one
// address share one, and another client's are apart.
func TestAssertionsShareTheirClientsBudget(t *testing.T) {
	t.Parallel()
	limits := web.RateLimits{API: web.Rate{Requests: 2, Window: time.Minute}, APIPerIP: web.Rate{Requests: 100, Window: time.Minute}}
	srv := publicServer(t, limits, classified(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))...)
	assertion := func(iss, jti string) map[string]string {
		tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": iss, "sub": iss, "jti": jti}).SignedString([]byte("k"))
		return map[string]string{"Authorization": "Bearer " + tok}
	}
	for i, jti := range []string{"1", "2", "3"} {
		st := send(t, "GET", srv.URL+"/v1/x", assertion("cli_a", jti)).status
		if want := map[bool]int{true: http.StatusTooManyRequests, false: http.StatusOK}[i == 2]; st != want {
			t.Fatalf("assertion %d of cli_a: %d, want %d", i+1, st, want)
		}
	}
	if st := send(t, "GET", srv.URL+"/v1/x", assertion("cli_b", "1")).status; st != http.StatusOK {
		t.Fatalf("another client's assertion: %d", st)
	}
}
