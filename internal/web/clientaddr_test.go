package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/connectd/connectd/internal/web"
)

// TestClientAddr: audit rows name the client as the trusted load balancer
// reports it, and nobody else's X-Forwarded-For is believed.
func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name, peer, xff, want string
	}{
		{"direct client", "198.51.100.4:5000", "", "198.51.100.4"},
		{"untrusted peer forging XFF", "198.51.100.4:5000", "203.0.113.7", "198.51.100.4"},
		{"trusted proxy", "10.1.2.3:443", "203.0.113.7", "203.0.113.7"},
		{"trusted proxy, client-supplied hop further left", "10.1.2.3:443", "192.0.2.1, 203.0.113.7", "203.0.113.7"},
		{"full IPv6 address kept", "[2001:db8::1:2]:443", "", "2001:db8::1:2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got string
			h := web.RequestContext(trusted, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = web.ClientAddr(r)
			}))
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.peer
			if tt.xff != "" {
				r.Header.Set("X-Forwarded-For", tt.xff)
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			if got != tt.want {
				t.Fatalf("ClientAddr = %q, want %q", got, tt.want)
			}
		})
	}
}
