package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/vault"
)

// TestAdminRolesCommand: `admin roles grant|list|revoke`, `keys create
// --org --role` and `connections list --org`, against a real database.
func TestAdminRolesCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL, "USER": "ops"})
	adminRun := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"admin"}, args...), env, &out, io.Discard)
		return out.String(), err
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `INSERT INTO organizations (id, name) VALUES ('acme', 'Acme'), ('globex', 'Globex')`); err != nil {
		t.Fatal(err)
	}
	keys, err := keyring.Parse(genKey(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := vault.New(vault.Config{Pool: pool, Keyring: keys})
	if err != nil {
		t.Fatal(err)
	}
	var conns []string
	for _, sub := range []string{"alice", "bob"} {
		c, err := vs.Put(ctx, identity.User{Issuer: "https://auth.example.com", Subject: sub}, "github",
			vault.Credential{AccessToken: "gho_x", Scopes: []string{"repo"}, AccountLabel: sub})
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c.ID)
	}
	if _, err := pool.Exec(ctx, `UPDATE connections SET org_id = 'acme' WHERE id = $1`, conns[0]); err != nil {
		t.Fatal(err)
	}

	const iss = "https://auth.example.com"
	if out, err := adminRun("roles", "grant", "acme", "--issuer", iss, "--subject", "ann", "--role", "security"); err != nil ||
		!strings.Contains(out, "ann at "+iss+" is security of acme") {
		t.Fatalf("grant: %q %v", out, err)
	}
	if out, err := adminRun("roles", "grant", "globex", "--issuer", iss, "--subject", "ann", "--role", "viewer"); err != nil {
		t.Fatalf("grant globex: %q %v", out, err)
	}
	out, err := adminRun("roles", "list", "acme")
	if err != nil || !regexp.MustCompile(`(?m)^acme\s+https://auth\.example\.com\s+ann\s+security\s+.*cli:ops$`).MatchString(out) ||
		strings.Contains(out, "globex") {
		t.Fatalf("list acme: %q %v", out, err)
	}
	if out, err := adminRun("roles", "list"); err != nil || !strings.Contains(out, "globex") || !strings.Contains(out, "acme") {
		t.Fatalf("list: %q %v", out, err)
	}
	var role, org string
	if err := pool.QueryRow(ctx, `SELECT detail->>'granted_role', org_id FROM audit_events WHERE kind = 'admin.role_granted'
		AND org_id = 'acme' AND actor = 'cli:ops' AND detail->>'role' = 'operator'`).Scan(&role, &org); err != nil || role != "security" {
		t.Fatalf("grant audit row: %q %q %v", role, org, err)
	}
	if out, err := adminRun("roles", "revoke", "acme", "--issuer", iss, "--subject", "ann"); err != nil ||
		!strings.Contains(out, "no role in acme") {
		t.Fatalf("revoke: %q %v", out, err)
	}
	if out, err := adminRun("roles", "list", "acme"); err != nil || strings.Contains(out, "ann") {
		t.Fatalf("list after revoke: %q %v", out, err)
	}

	// Claim mappings.
	if out, err := adminRun("roles", "map", "globex", "--issuer", iss, "--claim", "groups=globex-sec", "--role", "security"); err != nil ||
		!strings.Contains(out, "groups=globex-sec is security of globex") {
		t.Fatalf("map: %q %v", out, err)
	}
	if out, err := adminRun("roles", "list", "globex"); err != nil ||
		!regexp.MustCompile(`(?m)^globex\s+https://auth\.example\.com\s+groups=globex-sec\s+security\s`).MatchString(out) {
		t.Fatalf("list with mappings: %q %v", out, err)
	}
	if out, err := adminRun("roles", "unmap", "globex", "--issuer", iss, "--claim", "groups=globex-sec"); err != nil ||
		!strings.Contains(out, "gives no role in globex") {
		t.Fatalf("unmap: %q %v", out, err)
	}

	// Keys of an organization, with a role; an operator key as before.
	out, err = adminRun("keys", "create", "--name", "acme audit", "--org", "acme", "--role", "viewer")
	if err != nil || !strings.Contains(out, "org: acme\nrole: viewer\n") {
		t.Fatalf("keys create --org: %q %v", out, err)
	}
	if _, err := adminRun("keys", "create", "--name", "ops"); err != nil {
		t.Fatal(err)
	}
	out, err = adminRun("keys", "list")
	if err != nil || !regexp.MustCompile(`acme audit\s+active\s+acme\s+viewer`).MatchString(out) ||
		!regexp.MustCompile(`ops\s+active\s+\(operator\)\s+-`).MatchString(out) {
		t.Fatalf("keys list: %q %v", out, err)
	}

	// Refusals: usage errors (exit 2), nothing written.
	var ue *usageError
	for _, args := range [][]string{
		{"roles", "grant", "acme", "--issuer", iss, "--subject", "bob", "--role", "root"},
		{"roles", "grant", "nope", "--issuer", iss, "--subject", "bob", "--role", "viewer"},
		{"roles", "grant", "Bad Org", "--issuer", iss, "--subject", "bob", "--role", "viewer"},
		{"roles", "grant", "acme", "--subject", "bob", "--role", "viewer"},
		{"roles", "revoke", "acme", "--issuer", iss, "--subject", "nobody"},
		{"keys", "create", "--name", "x", "--org", "acme"},
		{"keys", "create", "--name", "x", "--role", "viewer"},
		{"keys", "create", "--name", "x", "--org", "nope", "--role", "viewer"},
		{"connections", "list", "--org", "Bad Org"},
		{"roles", "map", "acme", "--issuer", iss, "--claim", "groups", "--role", "viewer"},
		{"roles", "map", "nope", "--issuer", iss, "--claim", "groups=x", "--role", "viewer"},
		{"roles", "unmap", "acme", "--issuer", iss, "--claim", "groups=never-mapped"},
	} {
		if out, err := adminRun(args...); !errors.As(err, &ue) {
			t.Errorf("%v: %q %v, want a usage error", args, out, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM org_admins WHERE subject = 'bob') +
		(SELECT count(*) FROM admin_keys WHERE name = 'x')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a refused command wrote %d rows (%v)", n, err)
	}

	// connections list --org: only that organization's.
	out, err = adminRun("connections", "list", "--org", "acme")
	if err != nil || !regexp.MustCompile(`(?m)^`+conns[0]+`\s+acme\s+alice\s`).MatchString(out) || strings.Contains(out, conns[1]) {
		t.Fatalf("connections list --org acme: %q %v", out, err)
	}
	if out, err := adminRun("connections", "list", "--org", "globex"); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("connections list --org globex (none): %q %v", out, err)
	}
	if out, err := adminRun("connections", "list"); err != nil || !strings.Contains(out, conns[0]) || !strings.Contains(out, conns[1]) {
		t.Fatalf("connections list: %q %v", out, err)
	}
}
