package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/web/templates"
)

// TestBrandConfig: the product name, logo and accent are read and checked;
// each bad value is a ConfigError naming its variable.
func TestBrandConfig(t *testing.T) {
	t.Parallel()
	base := func(extra map[string]string) map[string]string {
		m := map[string]string{"CONNECTD_ISSUERS": `[{"id":"main","issuer":"https://auth.example.com","login":true,"client_id":"connectd"}]`}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	c, err := loadConfig(envOf(base(nil)), needs{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Connect.Brand != (templates.Brand{}) {
		t.Fatalf("default brand: %+v", c.Connect.Brand)
	}
	c, err = loadConfig(envOf(base(map[string]string{"CONNECTD_BRAND_NAME": " Acme Connect ",
		"CONNECTD_BRAND_LOGO_URL": "https://cdn.acme.example/logo.svg", "CONNECTD_BRAND_ACCENT": "#0F7B6C"})), needs{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (templates.Brand{Name: "Acme Connect", LogoURL: "https://cdn.acme.example/logo.svg", Accent: "#0f7b6c"}); c.Connect.Brand != want {
		t.Fatalf("brand %+v, want %+v", c.Connect.Brand, want)
	}

	tests := []struct {
		name, variable, value, msg string
	}{
		{"http logo", "CONNECTD_BRAND_LOGO_URL", "http://cdn.acme.example/logo.svg", "https"},
		{"javascript logo", "CONNECTD_BRAND_LOGO_URL", "javascript:alert(1)", "not allowed"},
		{"data logo", "CONNECTD_BRAND_LOGO_URL", "data:image/png;base64,AAAA", "not allowed"},
		{"relative logo", "CONNECTD_BRAND_LOGO_URL", "/logo.svg", "absolute"},
		{"logo injecting a CSP source", "CONNECTD_BRAND_LOGO_URL", "https://a.example/x;script-src", "';'"},
		{"colour name", "CONNECTD_BRAND_ACCENT", "teal", "#rrggbb"},
		{"short colour", "CONNECTD_BRAND_ACCENT", "#abc", "#rrggbb"},
		{"not hex", "CONNECTD_BRAND_ACCENT", "#gg0000", "#rrggbb"},
		{"css injection", "CONNECTD_BRAND_ACCENT", "#000;}body{display:none", "#rrggbb"},
		{"long name", "CONNECTD_BRAND_NAME", strings.Repeat("n", 61), "at most 60"},
		{"name with a newline", "CONNECTD_BRAND_NAME", "Acme\nConnect", "one line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(envOf(base(map[string]string{tt.variable: tt.value})), needs{})
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Var != tt.variable || !strings.Contains(ce.Problem, tt.msg) {
				t.Fatalf("got %v, want a ConfigError for %s saying %q", err, tt.variable, tt.msg)
			}
		})
	}
}

// TestReceiptsRetentionConfig: CONNECTD_RECEIPTS_RETENTION defaults to 90
// days, takes days or a duration, and is bounded to 1d–400d.
func TestReceiptsRetentionConfig(t *testing.T) {
	t.Parallel()
	issuers := `[{"id":"main","issuer":"https://auth.example.com","login":true,"client_id":"connectd"}]`
	for _, tt := range []struct {
		value string
		want  time.Duration // 0: refused
	}{
		{"", 90 * 24 * time.Hour},
		{"30d", 30 * 24 * time.Hour},
		{"400d", 400 * 24 * time.Hour},
		{"48h", 48 * time.Hour},
		{"401d", 0},
		{"12h", 0},
		{"forever", 0},
	} {
		env := map[string]string{"CONNECTD_ISSUERS": issuers}
		if tt.value != "" {
			env["CONNECTD_RECEIPTS_RETENTION"] = tt.value
		}
		c, err := loadConfig(envOf(env), needs{})
		var ce *ConfigError
		switch {
		case tt.want == 0 && (!errors.As(err, &ce) || ce.Var != "CONNECTD_RECEIPTS_RETENTION"):
			t.Errorf("%q: got %v, want a ConfigError for CONNECTD_RECEIPTS_RETENTION", tt.value, err)
		case tt.want != 0 && (err != nil || c.Connect.ReceiptsRetention != tt.want):
			t.Errorf("%q: got %v, %v, want %v", tt.value, c.Connect.ReceiptsRetention, err, tt.want)
		}
	}
}
