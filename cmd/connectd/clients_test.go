package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/vault"
)

// TestClientsUpdateDelete: a typo in --provider is warned about at create
// and fixed by update; update refuses another client's resource and an
// unknown id; delete asks for --yes, refuses an enabled client in use, and
// then removes the client with its approvals and webhook endpoints, audited,
// keeps the user's connection, and frees its resource URI for a new client.
func TestClientsUpdateDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	dir := t.TempDir()
	providers := filepath.Join(dir, "providers.json")
	if err := os.WriteFile(providers, []byte(`{"providers": [{"name": "github", "template": "github",
		"client_id": "Iv1", "client_secret_env": "GH_SECRET"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL, "CONNECTD_PROVIDERS_FILE": providers,
		"GH_SECRET": "s3cret", "USER": "ops"})
	cli := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append([]string{"clients"}, args...), env, &out, &errOut)
		return out.String(), errOut.String(), err
	}
	out, warn, err := cli("create", "--name", "Files", "--resource", "https://files.mcp.example/mcp", "--provider", "githb")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn, `warning: provider "githb" is not in the catalog (CONNECTD_PROVIDERS_FILE has github)`) {
		t.Fatalf("create with a typo: no warning on stderr:\n%s", warn)
	}
	id := regexp.MustCompile(`id: (cli_[a-z0-9]+)`).FindStringSubmatch(out)[1]
	out, warn, err = cli("update", id, "--provider", "github", "--name", "Files Assistant")
	if err != nil || warn != "" || !strings.Contains(out, "providers: github") || !strings.Contains(out, "name: Files Assistant") {
		t.Fatalf("update: %v\n%s\n%s", err, out, warn)
	}
	pool := pgtest.NewPool(t, dbURL)
	store := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool})
	if c, err := store.Get(ctx, id); err != nil || c.Name != "Files Assistant" || strings.Join(c.Providers, ",") != "github" {
		t.Fatalf("after update: %+v %v", c, err)
	}
	var detail string
	if err := pool.QueryRow(ctx, `SELECT actor || ' ' || detail::text FROM audit_events WHERE kind = 'client.updated' AND target = $1`,
		id).Scan(&detail); err != nil || !strings.Contains(detail, "cli:ops") || !strings.Contains(detail, "githb") {
		t.Fatalf("client.updated audit row: %q %v", detail, err)
	}

	// Another client may not take the first one's resource, by update either.
	out, _, err = cli("create", "--name", "Other", "--resource", "https://other.mcp.example/mcp")
	if err != nil {
		t.Fatal(err)
	}
	other := regexp.MustCompile(`id: (cli_[a-z0-9]+)`).FindStringSubmatch(out)[1]
	_, _, err = cli("update", other, "--resource", "https://files.mcp.example/mcp/")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "https://files.mcp.example/mcp") || !strings.Contains(err.Error(), id) {
		t.Fatalf("update to a taken resource: %v (exit %d), want a usage error naming it and %s", err, exitCode(err), id)
	}
	if c, _ := store.Get(ctx, other); c.Resources[0] != "https://other.mcp.example/mcp" {
		t.Fatalf("a refused update changed the client: %+v", c)
	}
	for _, args := range [][]string{
		{"update", "cli_nope", "--name", "x"},
		{"update", id},
		{"update", id, "--provider", "github", "--no-providers"},
		{"update", id, "--resource", "javascript:alert(1)"},
		{"update", id, "--name", ""},
		{"delete", id},
		{"delete", "cli_nope", "--yes"},
		{"delete"},
	} {
		if _, _, err := cli(args...); exitCode(err) != 2 {
			t.Errorf("clients %v: %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}

	// The first client in use: a user's connection it is approved for, a
	// webhook endpoint, a key used.
	ks := mustKeyring(t, genKey(t, 1))
	vs, err := vault.New(vault.Config{Pool: pool, Keyring: ks})
	if err != nil {
		t.Fatal(err)
	}
	user := identity.User{Issuer: "https://idp.example", Subject: "alice"}
	conn, err := vs.Put(ctx, user, "github", vault.Credential{AccessToken: "gho_x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO consents (issuer, subject, client_id, provider, scopes, granted_at, updated_at, connection_id)
		VALUES ($1, $2, $3, 'github', '{repo}', now(), now(), $4)`, user.Issuer, user.Subject, id, conn.ID); err != nil {
		t.Fatal(err)
	}
	wh, err := server.NewWebhooks(server.Config{Logger: slog.New(slog.DiscardHandler)}, pool, ks)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := wh.Create(ctx, id, "https://files.mcp.example/hooks", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE clients SET last_used_at = $2 WHERE id = $1`, id, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli("delete", id, "--yes"); exitCode(err) != 2 || !strings.Contains(err.Error(), "clients disable "+id) {
		t.Fatalf("delete of an enabled client in use: %v (exit %d), want a usage error saying to disable it", err, exitCode(err))
	}
	if _, _, err := cli("disable", id); err != nil {
		t.Fatal(err)
	}
	out, note, err := cli("delete", id, "--yes")
	if err != nil || !strings.Contains(out, "deleted "+id+" (Files Assistant): 1 approval withdrawn, 1 webhook endpoint, 0 connect links") ||
		!strings.Contains(note, "connections stay") {
		t.Fatalf("delete: %v\n%s%s", err, out, note)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM consents WHERE client_id = $1) + (SELECT count(*) FROM webhook_endpoints
		WHERE client_id = $1) + (SELECT count(*) FROM client_keys WHERE client_id = $1) + (SELECT count(*) FROM clients WHERE id = $1)`,
		id).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows of the deleted client left (%v)", n, err)
	}
	if _, _, err := vs.Get(ctx, user, "github", conn.ID); err != nil {
		t.Fatalf("the user's connection went with the client: %v", err)
	}
	if err := pool.QueryRow(ctx, `SELECT detail::text FROM audit_events WHERE kind = 'client.deleted' AND target = $1 AND actor = 'cli:ops'`,
		id).Scan(&detail); err != nil || !strings.Contains(detail, `"approvals_withdrawn": 1`) {
		t.Fatalf("client.deleted audit row: %q %v", detail, err)
	}
	// Its resource URI is free: the other client (or a new one) may take it.
	if out, _, err := cli("update", other, "--resource", "https://files.mcp.example/mcp"); err != nil {
		t.Fatalf("taking the deleted client's resource: %v\n%s", err, out)
	}
	// A never-used registration (a typo) goes at once, enabled or not.
	out, _, _ = cli("create", "--name", "Typo", "--resource", "https://typo.mcp.example/mcp")
	typo := regexp.MustCompile(`id: (cli_[a-z0-9]+)`).FindStringSubmatch(out)[1]
	if _, _, err := cli("delete", typo, "--yes"); err != nil {
		t.Fatalf("delete of a never-used client: %v", err)
	}
}
