package clientauth

import (
	"errors"
	"strings"
	"testing"
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
