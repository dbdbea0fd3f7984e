package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/devidp"
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
	store := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool})
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
	if _, err := store.Authenticate(ctx, key); !errors.Is(err, clientauth.ErrInvalidClientKey) {
		t.Fatalf("old key after rotate-key --overlap 0s: %v", err)
	}
	if _, err := store.Authenticate(ctx, newKey[1]); err != nil {
		t.Fatalf("new key: %v", err)
	}
	if _, err := clientsRun("disable", id); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Authenticate(ctx, newKey[1]); !errors.Is(err, clientauth.ErrClientDisabled) {
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

// withDevIdP runs the development identity provider (internal/devidp) for
// instances that start runs, as connectd-demo does: on a listener of its own,
// trusted as the login issuer "dev" through CONNECTD_ISSUERS and reached
// through the egress allow-list. It returns env with those variables added.
func withDevIdP(t *testing.T, env map[string]string) map[string]string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	secret := rand.Text()
	idp, err := devidp.New(devidp.Config{Issuer: srv.URL, Clients: []devidp.Client{{ID: "connectd", Secret: secret,
		RedirectURIs: []string{"http://" + devPublic + "/login/callback", "http://" + devPublic + admin.CallbackPath}}}})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/", idp.Handler())
	issuers, _ := json.Marshal([]map[string]any{{"id": "dev", "issuer": srv.URL, "login": true,
		"client_id": "connectd", "client_secret_env": "CONNECTD_TEST_IDP_SECRET"}})
	out := map[string]string{
		"CONNECTD_ISSUERS":            string(issuers),
		"CONNECTD_TEST_IDP_SECRET":    secret,
		"CONNECTD_EGRESS_ALLOW_HOSTS": strings.TrimPrefix(srv.URL, "http://"),
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// TestServeDevIdPLogin runs connectd as main does, trusting the development
// IdP on its own listener as connectd-demo runs it, and logs a browser in
// through it: the login routes are wired, and connectd reaches the IdP's
// back channel through its egress client.
func TestServeDevIdPLogin(t *testing.T) {
	t.Parallel()
	in := start(t, withDevIdP(t, map[string]string{"CONNECTD_DATABASE_URL": pgtest.URL(t)}))
	b := newDevBrowser(t, in)
	resp, _ := b.do("GET", "/login?issuer=dev&return_to=/session", nil)
	authz, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != 302 || err != nil || authz.Path != "/authorize" || authz.Host == devPublic {
		t.Fatalf("/login: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, page := b.do("GET", authz.String(), nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "Sign in as Alice") {
		t.Fatalf("picker: %d %s", resp.StatusCode, page)
	}
	form := authz.Query()
	form.Set("user", "alice")
	authz.RawQuery = ""
	resp, _ = b.do("POST", authz.String(), form)
	callback := resp.Header.Get("Location")
	if resp.StatusCode != 303 || !strings.HasPrefix(callback, "http://"+devPublic+"/login/callback?") {
		t.Fatalf("picker answer: %d %q", resp.StatusCode, callback)
	}
	resp, body := b.do("GET", callback, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/session" {
		t.Fatalf("callback: %d %q %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body, in.logs.String())
	}
	if _, page = b.do("GET", "/session", nil); !strings.Contains(page, "alice") {
		t.Fatalf("/session: %s", page)
	}
	cb, _ := url.Parse(callback)
	for _, secret := range []string{cb.Query().Get("state"), cb.Query().Get("code"), b.cookies["__Host-connectd_session"]} {
		if secret == "" || strings.Contains(in.logs.String(), secret) {
			t.Fatal("a state, code or cookie is missing or reached the log")
		}
	}
}

func TestServeIdentityWiring(t *testing.T) {
	t.Parallel()
	// connectd serves no identity provider, even in dev mode: the
	// development one is connectd-demo's.
	in := start(t, map[string]string{"CONNECTD_DATABASE_URL": pgtest.URL(t)})
	resp, err := http.Get(in.base + "/dev/idp/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("connectd serves the development IdP: %d", resp.StatusCode)
	}

	// CONNECTD_DEV_IDP=true is refused in dev mode and out of it; outside
	// dev mode session keys are required.
	for _, tt := range []struct {
		env     map[string]string
		wantVar string
	}{
		{map[string]string{"CONNECTD_DEV_IDP": "true"}, "CONNECTD_DEV_IDP"},
		{map[string]string{"CONNECTD_DEV_IDP": "true", "CONNECTD_DEV": "true", "CONNECTD_PUBLIC_URL": "http://127.0.0.1:8080"}, "CONNECTD_DEV_IDP"},
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
