package api_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/api"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/servertest"
)

// TestProxyInFlightPerApp (issue 34: "bulkheads, rate limits and provider
// budgets are per (organization, provider app)"): acme's MCP server holds
// every proxied call its app may have in flight at the fake provider (a
// stream that does not end); acme's next call is refused at once (503
// provider_unavailable), while beta's call to the same provider, with its
// own app or with the deployment's shared one, still goes through.
func TestProxyInFlightPerApp(t *testing.T) {
	t.Parallel()
	e := newOrgEnv(t, servertest.Options{Config: func(c *server.Config) { c.Vault.ProxyMaxInFlight = 1 }})
	alice, bob := e.user("alice"), e.user("bob")
	e.connect("acme", alice, "app_acme", time.Hour, &e.acme)
	beta := e.connect("beta", alice, "app_beta", time.Hour, &e.beta)
	e.connect("beta", bob, "", time.Hour, &e.beta) // the deployment's app
	proxied := func(ctx context.Context, m member, user, path, account string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/v1/proxy/fake/"+path, nil)
		req.Header.Set("Authorization", "Bearer "+m.key)
		req.Header.Set(mcpauth.UserTokenHeader, e.token(m, user))
		if account != "" {
			req.Header.Set("Connectd-Account", account)
		}
		resp, err := e.Public.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends acme's held stream
	held := proxied(ctx, e.acme, "alice", "stream?n=1000&gap=10s", "")
	defer held.Body.Close()
	if held.StatusCode != http.StatusOK {
		t.Fatalf("acme's stream: %d", held.StatusCode)
	}
	if line, err := bufio.NewReader(held.Body).ReadString('\n'); err != nil || line != "data: 1\n" {
		t.Fatalf("acme's stream: %q %v", line, err) // in flight: its place is taken
	}
	for _, tt := range []struct {
		name       string
		m          member
		user, acct string
		want       int
	}{
		{"acme's app again", e.acme, "alice", "", http.StatusServiceUnavailable},
		{"beta's own app", e.beta, "alice", beta.ID, http.StatusOK},
		{"the deployment's app, for beta", e.beta, "bob", "", http.StatusOK},
	} {
		resp := proxied(context.Background(), tt.m, tt.user, "files", tt.acct)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s while acme's app holds its place: %d, want %d", tt.name, resp.StatusCode, tt.want)
		}
	}
}

// TestProxyTimeoutHeader (issue 35): a caller may ask for a shorter deadline
// for the provider's answer with Connectd-Timeout, a Go duration; one that
// is not a positive duration is 400 invalid_request before anything is
// looked up, and the header never reaches the provider.
func TestProxyTimeoutHeader(t *testing.T) {
	t.Parallel()
	e := newOrgEnv(t, servertest.Options{})
	alice := e.user("alice")
	e.connect("acme", alice, "app_acme", time.Hour, &e.acme)
	for _, tt := range []struct {
		value string
		want  int
		code  string
	}{
		{"5s", http.StatusOK, ""},
		{"1h", http.StatusOK, ""}, // longer than the proxy's own: that one holds
		{"soon", http.StatusBadRequest, "invalid_request"},
		{"-1s", http.StatusBadRequest, "invalid_request"},
		{"15", http.StatusBadRequest, "invalid_request"},
	} {
		req, _ := http.NewRequest(http.MethodGet, e.URL+"/v1/proxy/fake/echo", nil)
		req.Header.Set("Authorization", "Bearer "+e.acme.key)
		req.Header.Set(mcpauth.UserTokenHeader, e.token(e.acme, "alice"))
		req.Header.Set(api.TimeoutHeader, tt.value)
		a := e.do(req)
		if a.status != tt.want || !strings.Contains(string(a.body), tt.code) {
			t.Errorf("Connectd-Timeout %q: %d %s, want %d %s", tt.value, a.status, a.body, tt.want, tt.code)
		}
		if a.status == http.StatusOK && strings.Contains(strings.ToLower(string(a.body)), "connectd-timeout") {
			t.Errorf("Connectd-Timeout reached the provider: %s", a.body)
		}
	}
}
