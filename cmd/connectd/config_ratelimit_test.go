package main

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/web"
)

func TestRateLimitConfig(t *testing.T) {
	t.Parallel()
	base := map[string]string{"CONNECTD_PUBLIC_URL": "https://connect.example.com"}
	c, err := loadConfig(envOf(base), needs{})
	if err != nil {
		t.Fatal(err)
	}
	minute := time.Minute
	want := server.RateLimitConfig{
		Public: web.RateLimits{API: web.Rate{Requests: 600, Window: minute}, APIPerIP: web.Rate{Requests: 3000, Window: minute},
			Browser: web.Rate{Requests: 300, Window: minute}, Login: web.Rate{Requests: 60, Window: minute}},
		Mint: web.Rate{Requests: 30, Window: minute},
	}
	if c.RateLimit.Public.API != want.Public.API || c.RateLimit.Public.APIPerIP != want.Public.APIPerIP ||
		c.RateLimit.Public.Browser != want.Public.Browser || c.RateLimit.Public.Login != want.Public.Login ||
		c.RateLimit.Mint != want.Mint || c.RateLimit.Public.TrustedProxies != nil {
		t.Fatalf("defaults %+v", c.RateLimit)
	}

	set := map[string]string{
		"CONNECTD_RATE_API": "10/1s", "CONNECTD_RATE_API_PER_IP": "off", "CONNECTD_RATE_BROWSER": "5/10m",
		"CONNECTD_RATE_LOGIN": "OFF", "CONNECTD_RATE_MINT": "1/1h",
		"CONNECTD_RATE_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7 ,2001:db8::/32,::ffff:198.51.100.1",
	}
	for k, v := range base {
		set[k] = v
	}
	c, err = loadConfig(envOf(set), needs{})
	if err != nil {
		t.Fatal(err)
	}
	rl := c.RateLimit
	if rl.Public.API != (web.Rate{Requests: 10, Window: time.Second}) || !rl.Public.APIPerIP.Off() || !rl.Public.Login.Off() ||
		rl.Public.Browser != (web.Rate{Requests: 5, Window: 10 * time.Minute}) || rl.Mint != (web.Rate{Requests: 1, Window: time.Hour}) {
		t.Fatalf("set %+v", rl)
	}
	wantProxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("198.51.100.1/32")}
	if !slices.Equal(rl.Public.TrustedProxies, wantProxies) {
		t.Fatalf("trusted proxies %v", rl.Public.TrustedProxies)
	}

	for name, value := range map[string]string{
		"CONNECTD_RATE_API":             "600",
		"CONNECTD_RATE_API_PER_IP":      "0/1m",
		"CONNECTD_RATE_BROWSER":         "10/forever",
		"CONNECTD_RATE_LOGIN":           "10/100ms",
		"CONNECTD_RATE_MINT":            "-1/1m",
		"CONNECTD_RATE_TRUSTED_PROXIES": "10.0.0.0/8,lb.internal",
	} {
		env := map[string]string{name: value}
		for k, v := range base {
			env[k] = v
		}
		_, err := loadConfig(envOf(env), needs{})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != name || strings.Contains(err.Error(), "lb.internal") {
			t.Errorf("%s=%s: %v", name, value, err)
		}
	}
}
