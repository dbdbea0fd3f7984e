package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/pgtest"
)

func TestClientsCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL})
	clientsRun := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"clients"}, args...), env, &out, io.Discard)
		return out.String(), err
	}
	out, err := clientsRun("create", "--name", "Demo MCP", "--resource", "https://mcp.example.com/mcp",
		"--resource", "https://mcp.example.com/alt", "--provider", "github")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^id: (cli_[a-z0-9]+)\nkey: (cks_[A-Za-z0-9_-]{43})\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("create output %q", out)
	}
	id, key := m[1], m[2]

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := mcpauth.NewClients(mcpauth.ClientsConfig{Pool: pool})
	if c, err := store.Authenticate(ctx, key); err != nil || c.ID != id || len(c.Resources) != 2 || c.Providers[0] != "github" {
		t.Fatalf("created client: %+v %v", c, err)
	}

	if out, err = clientsRun("list"); err != nil || !strings.Contains(out, id) || !strings.Contains(out, "Demo MCP") ||
		!strings.Contains(out, "active") || strings.Contains(out, key[4:]) {
		t.Fatalf("list: %q %v", out, err)
	}
	// Flags after the id are honoured: no overlap, the old key stops now.
	if out, err = clientsRun("rotate-key", id, "--overlap", "0s"); err != nil {
		t.Fatal(err)
	}
	newKey := regexp.MustCompile(`key: (cks_\S+)`).FindStringSubmatch(out)
	if newKey == nil {
		t.Fatalf("rotate-key output %q", out)
	}
	if _, err := store.Authenticate(ctx, key); !errors.Is(err, mcpauth.ErrInvalidClientKey) {
		t.Fatalf("old key after rotate-key --overlap 0s: %v", err)
	}
	if _, err := store.Authenticate(ctx, newKey[1]); err != nil {
		t.Fatalf("new key: %v", err)
	}
	if _, err := clientsRun("disable", id); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Authenticate(ctx, newKey[1]); !errors.Is(err, mcpauth.ErrClientDisabled) {
		t.Fatalf("after disable: %v", err)
	}
	if out, _ := clientsRun("list"); !strings.Contains(out, "disabled") {
		t.Fatalf("list after disable: %q", out)
	}
	// Resource URIs are unique (DESIGN invariant 14): a second client with
	// the (disabled) first one's resource, even with a trailing slash, would
	// accept its users' tokens. A usage error naming the resource and holder.
	for _, res := range []string{"https://mcp.example.com/alt", "https://mcp.example.com/mcp/"} {
		_, err := clientsRun("create", "--name", "Copycat", "--resource", "https://copycat.example.com/mcp", "--resource", res)
		if exitCode(err) != 2 ||
			!strings.Contains(err.Error(), strings.TrimSuffix(res, "/")) || !strings.Contains(err.Error(), id) {
			t.Errorf("create with the taken resource %s: %v (exit %d), want a usage error naming it and %s", res, err, exitCode(err), id)
		}
	}
	if out, _ := clientsRun("list"); strings.Contains(out, "Copycat") {
		t.Fatalf("a refused create left a client: %q", out)
	}

	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"create", "--resource", "https://mcp.example.com"},
		{"create", "--name", "x", "--resource", "javascript:alert(1)"},
		{"create", "--name", "x", "--resource", "http://mcp.example.com"},
		{"disable"},
		{"disable", "cli_nope"},
		{"rotate-key", "cli_nope"},
	} {
		if _, err := clientsRun(args...); exitCode(err) != 2 {
			t.Errorf("clients %v: %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
}

// TestServeDevIdPLogin runs connectd as main does, with the development IdP,
// and logs a browser in through it: the login routes and the IdP are wired,
// and the IdP's back channel reaches it even though the public URL's port is
// not the listener's.
func TestServeDevIdPLogin(t *testing.T) {
	t.Parallel()
	in := start(t, map[string]string{
		"CONNECTD_DATABASE_URL": pgtest.URL(t),
		"CONNECTD_DEV_IDP":      "true",
	})
	public := "127.0.0.1:8080" // CONNECTD_PUBLIC_URL of start; the browser reaches it at in.base
	actual := strings.TrimPrefix(in.base, "http://")
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == public {
			addr = actual
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	client := &http.Client{Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cookies := map[string]string{}
	do := func(method, u string, form url.Values) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, u, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range cookies {
			req.AddCookie(&http.Cookie{Name: k, Value: v})
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, c := range resp.Cookies() {
			cookies[c.Name] = c.Value
		}
		return resp, string(b)
	}

	resp, _ := do("GET", "http://"+public+"/login?issuer=dev&return_to=/session", nil)
	authz := resp.Header.Get("Location")
	if resp.StatusCode != 302 || !strings.HasPrefix(authz, "http://"+public+"/dev/idp/authorize?") {
		t.Fatalf("/login: %d %q", resp.StatusCode, authz)
	}
	resp, page := do("GET", authz, nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "Sign in as Alice") || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("picker: %d %s", resp.StatusCode, page)
	}
	u, _ := url.Parse(authz)
	form := u.Query()
	form.Set("user", "alice")
	resp, _ = do("POST", "http://"+public+"/dev/idp/authorize", form)
	callback := resp.Header.Get("Location")
	if resp.StatusCode != 303 || !strings.HasPrefix(callback, "http://"+public+"/login/callback?") {
		t.Fatalf("picker answer: %d %q", resp.StatusCode, callback)
	}
	resp, body := do("GET", callback, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/session" {
		t.Fatalf("callback: %d %q %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body, in.logs.String())
	}
	if _, page = do("GET", "http://"+public+"/session", nil); !strings.Contains(page, "alice") {
		t.Fatalf("/session: %s", page)
	}
	cb, _ := url.Parse(callback)
	for _, secret := range []string{cb.Query().Get("state"), cb.Query().Get("code"), cookies["__Host-connectd_session"]} {
		if secret == "" || strings.Contains(in.logs.String(), secret) {
			t.Fatal("a state, code or cookie is missing or reached the log")
		}
	}
}

func TestServeIdentityWiring(t *testing.T) {
	t.Parallel()
	// Without CONNECTD_DEV_IDP the development IdP is not mounted.
	in := start(t, map[string]string{"CONNECTD_DATABASE_URL": pgtest.URL(t)})
	resp, err := http.Get(in.base + "/dev/idp/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("dev IdP reachable without CONNECTD_DEV_IDP: %d", resp.StatusCode)
	}

	// Outside dev mode: no dev IdP, and session keys are required.
	for _, tt := range []struct {
		env     map[string]string
		wantVar string
	}{
		{map[string]string{"CONNECTD_DEV_IDP": "true"}, "CONNECTD_DEV_IDP"},
		{map[string]string{}, "CONNECTD_SESSION_KEYS"},
	} {
		full := map[string]string{
			"CONNECTD_PUBLIC_URL":    "https://connect.example.com",
			"CONNECTD_DATABASE_URL":  "postgres://u:p@127.0.0.1:1/x",
			"CONNECTD_ADDR":          "127.0.0.1:0",
			"CONNECTD_INTERNAL_ADDR": "127.0.0.1:0",
		}
		for k, v := range tt.env {
			full[k] = v
		}
		err := run(context.Background(), []string{"serve"}, envOf(full), io.Discard, io.Discard)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != tt.wantVar || exitCode(err) != 2 {
			t.Errorf("%v: got %v, want a ConfigError for %s", tt.env, err, tt.wantVar)
		}
	}
}
