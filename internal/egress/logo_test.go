package egress_test

import (
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/egress"
)

func TestCheckLogoURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://cdn.acme.example/logo.svg", true},
		{"https://127.0.0.4:8443/brand.svg?v=2", true},
		{"http://cdn.acme.example/logo.svg", false}, // a page served over https loads no http image
		{"javascript:alert(1)", false},
		{"data:image/svg+xml,<svg/>", false},
		{"/static/logo.svg", false},
		{"https://u:p@cdn.acme.example/logo.svg", false},
		{"https://cdn.acme.example/logo.svg#x", false},
		{"https://[::1]/logo.svg", false}, // a CSP source cannot name it
		{"https://cdn.acme.example/a b.svg", false},
		{"https://cdn.acme.example/x;script-src", false},
		{"https://cdn.acme.example/'self'", false},
		{"https://cdn.acme.example/" + strings.Repeat("a", egress.MaxLogoURL), false},
	}
	for _, tt := range tests {
		if err := egress.CheckLogoURL(tt.url); (err == nil) != tt.ok {
			t.Errorf("CheckLogoURL(%.60q) = %v, want ok %v", tt.url, err, tt.ok)
		}
	}
}
