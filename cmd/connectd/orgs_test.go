package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
)

// TestOrgsCommand: organizations and their apps through the CLI, against a
// real database and a providers file naming a fake provider: every mistake
// exits 2 with a message naming the flag or what is wrong; the client secret
// is never printed, whatever is run (and a secret given as a flag value is
// refused without being repeated).
func TestOrgsCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	srv := providertest.New(t, providertest.Options{})
	entries := []map[string]any{srv.ProviderConfig("fake", "FAKE_SECRET"), {"name": "key", "kind": "api_key"}}
	providersFile := filepath.Join(dir, "providers.json")
	data, _ := json.Marshal(map[string]any{"providers": entries})
	if err := os.WriteFile(providersFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "acme-client-secret-9f8e7d"
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": pgtest.URL(t), "CONNECTD_VAULT_KEYS": genKey(t, 1),
		"CONNECTD_DEV": "true", "CONNECTD_PUBLIC_URL": "http://connect.dev.test:8080", "CONNECTD_PROVIDERS_FILE": providersFile,
		"FAKE_SECRET": srv.ClientSecret, "USER": "ops"})
	var all strings.Builder
	cli := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, args, env, &out, &errOut)
		all.WriteString(out.String() + errOut.String())
		if err != nil {
			all.WriteString(err.Error())
		}
		return out.String(), errOut.String(), err
	}
	ok := func(want string, args ...string) string {
		t.Helper()
		out, errOut, err := cli(args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut)
		}
		if !strings.Contains(out, want) {
			t.Fatalf("%v printed %q, want %q in it", args, out, want)
		}
		return out
	}
	refused := func(want string, args ...string) {
		t.Helper()
		_, _, err := cli(args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v (exit %d), want exit 2 saying %q", args, err, exitCode(err), want)
		}
	}

	ok("id: acme", "orgs", "create", "acme", "--name", "Acme Corp")
	refused("exists already", "orgs", "create", "acme", "--name", "Again")
	refused("organization id must be", "orgs", "create", "Acme", "--name", "X")
	refused("--name is required", "orgs", "create", "beta")
	refused("--name: name must be one line", "orgs", "create", "beta", "--name", "a\nb")
	ok("acme", "orgs", "list")
	ok("brand color: #1f6feb", "orgs", "update", "acme", "--brand-color", "#1F6FEB")
	refused("--brand-color: brand color must be #rrggbb", "orgs", "update", "acme", "--brand-color", "blue")
	refused("--logo-url: logo URL", "orgs", "update", "acme", "--logo-url", "javascript:alert(1)")
	refused("--logo-url: logo URL", "orgs", "update", "acme", "--logo-url", "data:image/png;base64,AAAA")
	refused("nothing to change", "orgs", "update", "acme")
	refused("no organization nope", "orgs", "update", "nope", "--name", "X")

	out := ok("redirect URI: http://connect.dev.test:8080/oauth/callback", "orgs", "apps", "set", "acme", "fake",
		"--client-id", "acme-app", "--client-secret-file", secretFile)
	if !regexp.MustCompile(`(?m)^app: app_[a-z0-9]+$`).MatchString(out) {
		t.Fatalf("apps set printed no app id: %s", out)
	}
	ok("acme-app", "orgs", "apps", "list", "acme")
	ok("1 provider app secret; 1 under the primary key", "vault", "status")
	ok("rewrapped 0 connections", "vault", "rewrap")
	show := ok("clients: 0", "orgs", "show", "acme")
	if !strings.Contains(show, "set") || !strings.Contains(show, "fake") {
		t.Fatalf("orgs show lists no app: %s", show)
	}
	refused("--client-secret: a client secret is never given as a flag value", "orgs", "apps", "set", "acme", "fake",
		"--client-id", "x", "--client-secret="+secret)
	refused("--client-secret: a client secret is never given as a flag value", "orgs", "apps", "set", "acme", "fake",
		"--client-id", "x", "-client-secret", secret)
	refused("--client-id is required", "orgs", "apps", "set", "acme", "fake", "--client-secret-file", secretFile)
	refused("api_key kind", "orgs", "apps", "set", "acme", "key", "--client-id", "x", "--client-secret-file", secretFile)
	refused("not in the catalog", "orgs", "apps", "set", "acme", "gitlab", "--client-id", "x", "--client-secret-file", secretFile)
	refused("no organization nope", "orgs", "apps", "set", "nope", "fake", "--client-id", "x", "--client-secret-file", secretFile)
	refused("--client-secret-file cannot be read (no such file)", "orgs", "apps", "set", "acme", "fake", "--client-id", "x",
		"--client-secret-file", filepath.Join(dir, "missing"))

	// Clients in the organization.
	ok("org: acme", "clients", "create", "--name", "Acme MCP", "--resource", "https://mcp.acme.example", "--org", "acme")
	refused("--org: an organization id", "clients", "create", "--name", "X", "--resource", "https://x.example", "--org", "Acme")
	refused("no organization nope", "clients", "create", "--name", "X", "--resource", "https://x.example", "--org", "nope")
	list := ok("ORG", "clients", "list")
	if !regexp.MustCompile(`Acme MCP\s+acme\s+active`).MatchString(list) {
		t.Fatalf("clients list does not show the organization: %s", list)
	}
	// --org lists one organization's only.
	if only := ok("Acme MCP", "clients", "list", "--org", "acme"); strings.Count(only, "\n") != 2 {
		t.Fatalf("clients list --org acme: %s", only)
	}
	if other := ok("ORG", "clients", "list", "--org", "default"); strings.Contains(other, "Acme MCP") {
		t.Fatalf("clients list --org default shows acme's: %s", other)
	}
	refused("is not an organization id", "clients", "list", "--org", "Acme!")
	ok("clients: 1", "orgs", "show", "acme")
	refused("still has MCP servers", "orgs", "delete", "acme", "--yes")
	refused("add --yes", "orgs", "delete", "acme")
	refused("cannot be deleted", "orgs", "delete", "default", "--yes")

	ok("removed app_", "orgs", "apps", "remove", "acme", "fake")
	refused("has no app at fake", "orgs", "apps", "remove", "acme", "fake")
	ok("apps: none", "orgs", "apps", "list", "acme")

	if strings.Contains(all.String(), secret) {
		t.Fatalf("the client secret was printed:\n%s", all.String())
	}
}

// TestReadClientSecret: stdin or a file, one line, trimmed; a terminal, an
// empty or multi-line secret refused, never quoting it.
func TestReadClientSecret(t *testing.T) {
	t.Parallel()
	got, err := readClientSecret(strings.NewReader("  s3cret\n"), "")
	if err != nil || got.Reveal() != "s3cret" {
		t.Fatalf("from stdin: %v", err)
	}
	for _, in := range []string{"", "\n", "a\nb", strings.Repeat("x", 9000)} {
		_, err := readClientSecret(strings.NewReader(in), "")
		var u *usageError
		if !errors.As(err, &u) || (strings.TrimSpace(in) != "" && strings.Contains(err.Error(), strings.TrimSpace(in))) {
			t.Errorf("stdin %.10q: %v", in, err)
		}
	}
}

// TestCallbackPathIsConnects: the redirect URI the CLI prints is the route
// connect serves the provider callback on (until connect names
// provider.CallbackPath itself).
func TestCallbackPathIsConnects(t *testing.T) {
	t.Parallel()
	found := false
	err := filepath.WalkDir(filepath.Join("..", "..", "internal", "connect"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if regexp.MustCompile(`callbackPath\s*=\s*"` + regexp.QuoteMeta(provider.CallbackPath) + `"`).Match(b) {
			found = true
		}
		return err
	})
	if err != nil || !found {
		t.Fatalf("internal/connect declares no callbackPath = %q (%v): the printed redirect URI would be wrong", provider.CallbackPath, err)
	}
}

// TestOperatorCommandsWithoutProviderSecrets (issue 38 item 5): on the
// demo's environment without the providers' secrets, the commands that
// call no provider run — `vault status`, `admin connections list`,
// `clients list`, `migrate status` — and the ones that call providers say
// which secret they need.
func TestOperatorCommandsWithoutProviderSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := providertest.New(t, providertest.Options{})
	data, _ := json.Marshal(map[string]any{"providers": []map[string]any{srv.ProviderConfig("fake", "FAKE_SECRET")}})
	providersFile := filepath.Join(t.TempDir(), "providers.json")
	if err := os.WriteFile(providersFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": pgtest.URL(t), "CONNECTD_VAULT_KEYS": genKey(t, 1),
		"CONNECTD_DEV": "true", "CONNECTD_PUBLIC_URL": "http://connect.dev.test:8080", "CONNECTD_PROVIDERS_FILE": providersFile,
		"USER": "ops"}) // FAKE_SECRET unset
	cli := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, args, env, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	if out, err := cli("migrate", "up"); err != nil {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"vault", "status"}, {"admin", "connections", "list"}, {"clients", "list"},
		{"migrate", "status"}, {"webhooks", "list", "cli_nope"}} {
		if out, err := cli(args...); err != nil && strings.Contains(err.Error(), "FAKE_SECRET") {
			t.Errorf("%v needs a provider secret it does not use: %v\n%s", args, err, out)
		} else if err != nil && args[0] != "webhooks" {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	if _, err := cli("admin", "connections", "revoke", "cn_nope", "--yes"); err == nil || !strings.Contains(err.Error(), "FAKE_SECRET") {
		t.Errorf("revoke (it calls the provider) without the provider's secret: %v, want it to name FAKE_SECRET", err)
	}
}
