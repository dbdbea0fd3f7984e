package egress_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/egress"
)

func TestMetadataURLs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		issuer string
		want   []string
	}{
		{"https://idp.example", []string{
			"https://idp.example/.well-known/oauth-authorization-server",
			"https://idp.example/.well-known/openid-configuration"}},
		{"https://idp.example/", []string{
			"https://idp.example/.well-known/oauth-authorization-server",
			"https://idp.example/.well-known/openid-configuration"}},
		{"https://idp.example/tenant/1", []string{
			"https://idp.example/.well-known/oauth-authorization-server/tenant/1",
			"https://idp.example/tenant/1/.well-known/openid-configuration"}},
	}
	for _, tt := range tests {
		got, err := egress.MetadataURLs(tt.issuer)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("MetadataURLs(%q) = %q, %v; want %q", tt.issuer, got, err, tt.want)
		}
	}
	if _, err := egress.MetadataURLs("https://a b/%zz"); err == nil {
		t.Error("an unparsable issuer was accepted")
	}
}

// TestDiscover: RFC 8414 first, OIDC when RFC 8414 yields no document, and
// a document naming another issuer ends discovery at once.
func TestDiscover(t *testing.T) {
	t.Parallel()
	const rfc8414, oidc = "/.well-known/oauth-authorization-server/t", "/t/.well-known/openid-configuration"
	good := func(iss string) string {
		return fmt.Sprintf(`{"issuer":%q,"token_endpoint":"https://x.example/tok"}`, iss)
	}
	type answer struct {
		status int
		body   func(iss string) string
	}
	tests := []struct {
		name       string
		answers    map[string]answer // by path; absent: 404
		wantPaths  []string          // requested, in order
		wantFrom   string            // token_endpoint proves a document was taken; "" means an error
		wantErrHas string
	}{
		{"RFC 8414 answers", map[string]answer{rfc8414: {200, good}, oidc: {200, good}},
			[]string{rfc8414}, "https://x.example/tok", ""},
		{"only OIDC", map[string]answer{oidc: {200, good}},
			[]string{rfc8414, oidc}, "https://x.example/tok", ""},
		{"RFC 8414 fails", map[string]answer{rfc8414: {500, good}, oidc: {200, good}},
			[]string{rfc8414, oidc}, "https://x.example/tok", ""},
		{"RFC 8414 not JSON", map[string]answer{rfc8414: {200, func(string) string { return "<html>" }}, oidc: {200, good}},
			[]string{rfc8414, oidc}, "https://x.example/tok", ""},
		{"another issuer stops", map[string]answer{
			rfc8414: {200, func(string) string { return good("https://evil.example") }}, oidc: {200, good}},
			[]string{rfc8414}, "", "names another issuer"},
		{"none", nil, []string{rfc8414, oidc}, "", "HTTP 404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var paths []string
			var iss string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths = append(paths, r.URL.Path)
				mu.Unlock()
				a, ok := tt.answers[r.URL.Path]
				if !ok {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(a.status)
				fmt.Fprint(w, a.body(iss))
			}))
			t.Cleanup(srv.Close)
			iss = srv.URL + "/t"
			md, err := egress.Discover(context.Background(), egress.Bound(srv.Client(), egress.Limits{}), iss)
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(paths, tt.wantPaths) {
				t.Errorf("requested %q, want %q", paths, tt.wantPaths)
			}
			switch {
			case tt.wantFrom != "" && (err != nil || md.TokenEndpoint != tt.wantFrom || md.Issuer != iss):
				t.Fatalf("got %+v, %v", md, err)
			case tt.wantFrom == "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrHas)):
				t.Fatalf("got %+v, %v; want an error mentioning %q", md, err, tt.wantErrHas)
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw       string
		allowHTTP bool
		wantErr   string // "" means accepted
	}{
		{"https://a.example/x?y=1", false, ""},
		{"HTTPS://a.example/x", false, ""}, // url.Parse folds the scheme: one rule for every caller
		{"https://a.example:8443", false, ""},
		{"http://a.example", true, ""},
		{"http://a.example", false, "must use https (http:// is allowed only in dev mode)"},
		{"HTTP://a.example", false, "must use https"},
		{"javascript:alert(1)", true, `scheme "javascript" is not allowed`},
		{"data:text/html,x", true, `scheme "data" is not allowed`},
		{"file:///etc/passwd", true, `scheme "file" is not allowed`},
		{"/relative", true, "must be an absolute https URL"},
		{"", true, "must be an absolute https URL"},
		{"https://", false, "must name a host"},
		{"https://:443", false, "must name a host"},
		{"https:opaque", false, "must name a host"},
		{"https://u:p@a.example", false, "must not contain user info"},
		{"https://a.example/#x", false, "must not contain a fragment"},
		{"https://a.example/#", false, "must not contain a fragment"},
		{"https://a b.example/%zz", false, "is not a valid URL"},
	}
	for _, tt := range tests {
		err := egress.CheckURL(tt.raw, tt.allowHTTP)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("CheckURL(%q, %t) = %v, want %q", tt.raw, tt.allowHTTP, err, tt.wantErr)
		}
		if err != nil && tt.raw != "" && strings.Contains(err.Error(), tt.raw) {
			t.Errorf("CheckURL(%q) repeats the URL: %v", tt.raw, err)
		}
	}
}

// TestBound: a client that did not come from New (a test server's) obeys
// the same rules once bound: no redirect followed, bodies capped, a timeout.
func TestBound(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Add(1) }))
	t.Cleanup(elsewhere.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/?code=secret", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(strings.Repeat("a", 2048))
	})
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	c := egress.Bound(srv.Client(), egress.Limits{MaxResponseBytes: 1024})
	if _, _, err := get(c, srv.URL+"/redirect"); !errors.Is(err, egress.ErrRedirect) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("redirect: %v", err)
	}
	if followed.Load() != 0 {
		t.Fatal("a redirect was followed")
	}
	if _, _, err := get(c, srv.URL+"/big"); !errors.Is(err, egress.ErrTooLarge) {
		t.Fatalf("big body: %v", err)
	}
	if status, body, err := get(c, srv.URL+"/small"); err != nil || status != 200 || string(body) != "ok" {
		t.Fatalf("small body: %d %q %v", status, body, err)
	}
	if c.Timeout != egress.DefaultTimeout {
		t.Fatalf("timeout %v, want the default", c.Timeout)
	}
	if got := egress.Bound(&http.Client{Timeout: time.Second}, egress.Limits{Timeout: time.Minute}).Timeout; got != time.Second {
		t.Fatalf("the client's own timeout was replaced: %v", got)
	}
	if got := egress.Bound(nil, egress.Limits{Timeout: time.Minute}).Timeout; got != time.Minute {
		t.Fatalf("nil client: timeout %v", got)
	}
}
