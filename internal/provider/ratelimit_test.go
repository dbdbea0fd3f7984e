package provider_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/provider"
)

// TestRateLimits (issue 35): the templates carry the providers' documented
// limits, each with its source; rate_limits replaces them ([] removes
// them) and is refused with a clear message when it is not one the proxy
// can keep.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"github", "slack", "notion", "gmail", "google-drive", "google-calendar"} {
		spec, ok := provider.Template(name)
		if !ok || len(spec.RateLimits) == 0 {
			t.Fatalf("template %s has no rate limits", name)
		}
		for _, l := range spec.RateLimits {
			if !strings.HasPrefix(l.Source, "https://") || l.Requests <= 0 || l.Per < time.Second {
				t.Fatalf("template %s: %+v", name, l)
			}
		}
	}
	if gh, _ := provider.Template("github"); gh.RateLimits[0] != (provider.RateLimit{Scope: provider.PerUser, Requests: 5000,
		Per: time.Hour, Source: gh.RateLimits[0].Source}) {
		t.Fatalf("github: %+v", gh.RateLimits)
	}
	if n, _ := provider.Template("notion"); n.RateLimits[0].Scope != provider.PerApp || n.RateLimits[0].Requests != 3 {
		t.Fatalf("notion: %+v", n.RateLimits)
	}

	env := map[string]string{"S": "s"}
	entry := func(limits string) string {
		return `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"S","rate_limits":` + limits + `}]}`
	}
	cfg, err := parse(entry(`[{"scope":"app","requests":100,"per":"1m","path":"search/","per_method":true,"source":"https://example.com/limits"}]`), false, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Providers[0].RateLimits; len(got) != 1 || got[0] != (provider.RateLimit{Scope: provider.PerApp, Requests: 100,
		Per: time.Minute, Path: "search/", PerMethod: true, Source: "https://example.com/limits"}) {
		t.Fatalf("overridden: %+v", got)
	}
	if cfg, err := parse(entry(`[]`), false, env); err != nil || len(cfg.Providers[0].RateLimits) != 0 {
		t.Fatalf("removed: %v %+v", err, cfg)
	}
	for _, tc := range []struct{ limits, msg string }{
		{`[{"scope":"org","requests":1,"per":"1s"}]`, `scope: must be "user" or "app"`},
		{`[{"scope":"user","requests":0,"per":"1s"}]`, "requests: must be 1 to"},
		{`[{"scope":"user","requests":5,"per":"soon"}]`, "is not a Go duration"},
		{`[{"scope":"user","requests":5,"per":"500ms"}]`, "per: must be whole seconds from 1s to 24h"},
		{`[{"scope":"user","requests":5,"per":"48h"}]`, "per: must be whole seconds"},
		{`[{"scope":"user","requests":5,"per":"1s","path":"/search"}]`, "path: a path prefix"},
		{`{"scope":"user"}`, "rate_limits"},
	} {
		_, err := parse(entry(tc.limits), false, env)
		var ce *provider.ConfigError
		if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.msg) ||
			(ce.Field != "rate_limits" && !strings.Contains(err.Error(), "rate_limits")) {
			t.Fatalf("%s: %v", tc.limits, err)
		}
	}
}
