package clientauth

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestProxyRulesAllow(t *testing.T) {
	t.Parallel()
	r := ProxyRules{Rules: []string{"GET /repos/*/issues*", "POST /repos/*/issues/*/comments", "* /rate_limit",
		"HEAD /status", "GET /projects/a%2Fb/issues"}}
	for _, tt := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/repos/octo/hello/issues", true},
		{"GET", "/repos/octo/hello/issues/7", true},
		{"HEAD", "/repos/octo/hello/issues", true},
		{"POST", "/repos/octo/hello/issues", false},
		{"POST", "/repos/octo/hello/issues/7/comments", true},
		{"DELETE", "/repos/octo/hello/issues/7/comments", false},
		{"GET", "/repos/octo/hello/contents/README.md", false},
		{"GET", "/user/repos", false},
		{"PUT", "/rate_limit", true},
		{"GET", "/rate_limit/x", false},
		{"GET", "/reposX/issues", false},
		// HEAD: under a GET rule or a HEAD one; a HEAD rule allows no GET.
		{"HEAD", "/status", true},
		{"GET", "/status", false},
		// Methods and paths match byte for byte, as sent (package proxy's
		// Clean form): case counts, an escaped slash is not a slash.
		{"get", "/repos/octo/hello/issues", false},
		{"GET", "/Repos/octo/hello/issues", false},
		{"GET", "/projects/a%2Fb/issues", true},
		{"GET", "/projects/a/b/issues", false},
		{"GET", "/projects/a%2fb/issues", false},
	} {
		if got := r.Allows(tt.method, tt.path); got != tt.want {
			t.Errorf("%s %s: %v, want %v", tt.method, tt.path, got, tt.want)
		}
	}
}

func TestCheckProxyRules(t *testing.T) {
	t.Parallel()
	for _, bad := range []ProxyRules{
		{},
		{Rules: []string{"GET"}},
		{Rules: []string{"get /x"}},
		{Rules: []string{"GET x"}},
		{Rules: []string{"GET /a b"}},
		{Rules: []string{"GET /a\n"}},
		{Rules: []string{"GET /" + strings.Repeat("a", 600)}},
		{Rules: []string{"GET /x"}, Description: "line\nforged"},
		{Rules: []string{"GET /x"}, Description: strings.Repeat("d", 301)},
		// Patterns no path the proxy sends can match (its path rule).
		{Rules: []string{"GET /x;jsessionid=*"}},
		{Rules: []string{"GET /x/../admin"}},
		{Rules: []string{"GET /x/./y"}},
		{Rules: []string{"GET /x//y"}},
		{Rules: []string{"GET /projects/a%2fb/*"}},
		{Rules: []string{"GET /fil%65s"}},
	} {
		if err := CheckProxyRules(bad); !errors.Is(err, ErrInvalidClient) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if err := CheckProxyRules(ProxyRules{Rules: []string{"GET /repos/*/issues*", "* /x", "GET /projects/a%2Fb/*",
		"GET /v1.2/a..b/.well-known", "GET /users/%40me"}, Description: "reads your issues; cannot change code"}); err != nil {
		t.Fatal(err)
	}
}

// TestParseRule: the forms of a rule, and what is refused with a reason.
func TestParseRule(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		text string
		want Rule
		err  bool
	}{
		{text: "GET /repos/*", want: Rule{Method: "GET", Pattern: "/repos/*"}},
		{text: `POST /repos/*/issues ask "open issues"`, want: Rule{Method: "POST", Pattern: "/repos/*/issues", Ask: true, Words: "open issues"}},
		{text: `POST /x ask:1h "open issues in your repositories"`, want: Rule{Method: "POST", Pattern: "/x", Ask: true,
			Words: "open issues in your repositories", Standing: time.Hour}},
		{text: `POST /x ask:24h "w"`, want: Rule{Method: "POST", Pattern: "/x", Ask: true, Words: "w", Standing: 24 * time.Hour}},
		{text: `POST /x ask:25h "w"`, err: true},
		{text: `POST /x ask:30s "w"`, err: true},
		{text: `POST /x ask:soon "w"`, err: true},
		{text: `POST /x ask ""`, err: true},
		{text: `POST /x ask`, err: true},
		{text: `POST /x ask words`, err: true},
		{text: `POST /x ask "a "quoted" word"`, err: true},
		{text: `POST /x ask " padded"`, err: true},
		{text: `POST /x allow "w"`, err: true},
		{text: `POST /x ask "` + strings.Repeat("w", 201) + `"`, err: true},
		{text: "post /x", err: true},
		{text: "GET x", err: true},
	} {
		got, err := ParseRule(tt.text)
		if (err != nil) != tt.err || !tt.err && got != tt.want {
			t.Errorf("ParseRule(%q) = %+v, %v", tt.text, got, err)
		}
	}
}

// TestMatchAsks: a call under an ask rule asks, whatever broader rule
// allows it too; other calls are allowed or refused as before.
func TestMatchAsks(t *testing.T) {
	t.Parallel()
	for _, r := range []ProxyRules{
		{Rules: []string{"* /repos/*", `POST /repos/*/issues ask "open issues"`}},
		mustDecode(t, `{"fake": {"rules": ["* /repos/*", "POST /repos/*/issues ask \"open issues\""]}}`)["fake"],
	} {
		if rule, ok := r.Match("POST", "/repos/a/b/issues"); !ok || !rule.Ask || rule.Words != "open issues" {
			t.Errorf("%v: POST issues: %+v %v", r.parsed != nil, rule, ok)
		}
		if rule, ok := r.Match("GET", "/repos/a/b/issues"); !ok || rule.Ask {
			t.Errorf("GET issues: %+v %v", rule, ok)
		}
		if _, ok := r.Match("GET", "/user"); ok {
			t.Error("GET /user allowed")
		}
		if !r.Asks() {
			t.Error("Asks is false")
		}
	}
	if (ProxyRules{Rules: []string{"GET /x"}}).Asks() {
		t.Error("a set without ask asks")
	}
}

func mustDecode(t *testing.T, raw string) map[string]ProxyRules {
	t.Helper()
	m, err := decodeRules([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// BenchmarkMatch is the request rules' cost on a proxied call, rules as
// loaded (parsed once) and parsed on each call: a few tens of nanoseconds
// against a proxied call's ~0.3–0.6 CPU-ms (docs/performance.md).
func BenchmarkMatch(b *testing.B) {
	raw := `{"fake": {"rules": ["GET /repos/*/issues*", "POST /repos/*/issues ask:1h \"open issues\"", "DELETE /repos/*/issues/* ask \"delete an issue\""]}}`
	m, err := decodeRules([]byte(raw))
	if err != nil {
		b.Fatal(err)
	}
	loaded := m["fake"]
	unparsed := ProxyRules{Rules: loaded.Rules}
	for _, c := range []struct {
		name string
		r    ProxyRules
	}{{"loaded", loaded}, {"unparsed", unparsed}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := c.r.Match("GET", "/repos/acme/app/issues?state=open"); !ok {
					b.Fatal("no match")
				}
			}
		})
	}
}
