package provider_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/provider"
)

// TestScopeDescriptions: a template's scopes come described, the providers
// file overrides, adds and removes, and a description is one short line.
func TestScopeDescriptions(t *testing.T) {
	t.Parallel()
	env := map[string]string{"S": "secret-value"}
	entry := func(extra string) string {
		return `{"providers":[{"name":"gh","template":"github","client_id":"x","client_secret_env":"S"` + extra + `}]}`
	}
	cfg, err := parse(entry(`,"scope_descriptions":{"repo":"Your code, all of it","custom:scope":"Something new","gist":""},
		"logo_url":"https://cdn.example.com/gh.svg"`), false, env)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Providers[0].ScopeDescriptions
	for sc, want := range map[string]string{"repo": "Your code, all of it", "custom:scope": "Something new",
		"read:user": "Read your profile", "gist": ""} {
		if d[sc] != want {
			t.Errorf("%s: %q, want %q", sc, d[sc], want)
		}
	}
	if cfg.Providers[0].LogoURL != "https://cdn.example.com/gh.svg" {
		t.Errorf("logo %q", cfg.Providers[0].LogoURL)
	}
	// The template's table is not changed by an entry's overrides.
	again, err := parse(entry(""), false, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Providers[0].ScopeDescriptions["repo"]; !strings.Contains(got, "repositories") {
		t.Errorf("template's repo after an override elsewhere: %q", got)
	}
	cat, err := provider.New(context.Background(), cfg, provider.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Get("gh")
	if err != nil {
		t.Fatal(err)
	}
	if info := p.Info(); info.ScopeDescriptions["repo"] != "Your code, all of it" || info.LogoURL == "" || info.Template != "github" {
		t.Errorf("info: %+v", info)
	}

	bad := []struct {
		name, extra, field, msg string
	}{
		{"overlong", `,"scope_descriptions":{"repo":"` + strings.Repeat("x", provider.MaxScopeDescription+1) + `"}`, "scope_descriptions.repo", "at most 160"},
		{"newline", `,"scope_descriptions":{"repo":"one\ntwo"}`, "scope_descriptions.repo", "control characters"},
		{"control char", `,"scope_descriptions":{"repo":"bell\u0007"}`, "scope_descriptions.repo", "control characters"},
		{"line separator", `,"scope_descriptions":{"repo":"a\u2028b"}`, "scope_descriptions.repo", "control characters"},
		{"blank", `,"scope_descriptions":{"repo":"  "}`, "scope_descriptions.repo", "blank"},
		{"bad scope key", `,"scope_descriptions":{"two words":"x"}`, "scope_descriptions", "not a valid scope"},
		{"http logo", `,"logo_url":"http://cdn.example.com/gh.svg"`, "logo_url", "must use https"},
		{"javascript logo", `,"logo_url":"javascript:alert(1)"`, "logo_url", "not allowed"},
		{"data logo", `,"logo_url":"data:image/svg+xml,<svg/>"`, "logo_url", "not allowed"},
		{"logo with quote", `,"logo_url":"https://cdn.example.com/a'b.svg"`, "logo_url", "quotes"},
		{"logo with user info", `,"logo_url":"https://u:p@cdn.example.com/a.svg"`, "logo_url", "user info"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(entry(tc.extra), true, env)
			var ce *provider.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Problem, tc.msg) {
				t.Fatalf("got %v, want field %s with %q", err, tc.field, tc.msg)
			}
		})
	}
}

// TestTemplateScopeDescriptions: the built-in descriptions are short lines
// (what the file's are held to), and the families share theirs.
func TestTemplateScopeDescriptions(t *testing.T) {
	t.Parallel()
	for _, name := range provider.Templates() {
		spec, ok := provider.Template(name)
		if !ok {
			t.Fatalf("template %s", name)
		}
		for sc, text := range spec.ScopeDescriptions {
			if len([]rune(text)) > provider.MaxScopeDescription || strings.ContainsAny(text, "\n\r\t") || text == "" {
				t.Errorf("%s: %s: %q", name, sc, text)
			}
		}
	}
	for _, name := range []string{"gmail", "google-drive", "jira", "confluence"} {
		spec, _ := provider.Template(name)
		if len(spec.ScopeDescriptions) == 0 {
			t.Errorf("%s has no scope descriptions", name)
		}
		for _, sc := range spec.Scopes {
			if spec.ScopeDescriptions[sc] == "" {
				t.Errorf("%s: its default scope %s is not described", name, sc)
			}
		}
	}
}
