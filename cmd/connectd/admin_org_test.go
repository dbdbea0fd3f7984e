package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/vault"
)

// TestCLIOrgScope is the CLI's row of the isolation matrix: every command
// that reads an organization's data with --org shows that organization's
// rows only — connections, MCP servers and the audit trail — and never
// another's, even where the other's rows are the newer or the only ones of
// their kind; a malformed --org is a usage error (exit 2), not an empty
// answer that looks like "nothing there".
func TestCLIOrgScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	keyLine := genKey(t, 1)
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL, "CONNECTD_VAULT_KEYS": keyLine, "USER": "ops"})
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, args, env, &out, io.Discard)
		return out.String(), err
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, o := range []string{"acme", "globex"} {
		if out, err := cli("orgs", "create", o, "--name", strings.ToUpper(o)); err != nil {
			t.Fatalf("orgs create %s: %v\n%s", o, err, out)
		}
	}
	keys, err := keyring.Parse(keyLine)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := vault.New(vault.Config{Pool: pool, Keyring: keys})
	if err != nil {
		t.Fatal(err)
	}
	// The same user at the same provider in both organizations.
	user := identity.User{Issuer: "https://auth.example.com", Subject: "alice"}
	conns := map[string]string{}
	clients := map[string]string{}
	cs := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool})
	for _, o := range []string{"acme", "globex"} {
		c, err := vs.In(o).Put(ctx, user, "github", vault.Credential{AccessToken: "gho_" + o + "_token", Scopes: []string{"repo"}})
		if err != nil {
			t.Fatal(err)
		}
		conns[o] = c.ID
		cl, _, err := cs.CreateIn(ctx, o, o+" tools", []string{"https://mcp." + o + ".example/"}, []string{"github"})
		if err != nil {
			t.Fatal(err)
		}
		clients[o] = cl.ID
		// A refusal in each organization's trail, attributed through its client.
		if _, err := pool.Exec(ctx, `INSERT INTO audit_events (kind, actor, client_id, org_id) VALUES ('security.identity_mismatch', $1, $2, $3)`,
			"marker-"+o, cl.ID, o); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		args []string
		mine string // acme's id or marker, which must show
	}{
		{[]string{"admin", "connections", "list", "--org", "acme"}, conns["acme"]},
		{[]string{"clients", "list", "--org", "acme"}, clients["acme"]},
		{[]string{"admin", "events", "--org", "acme"}, "marker-acme"},
		{[]string{"admin", "events", "--all", "--org", "acme"}, "marker-acme"},
	} {
		out, err := cli(tc.args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, out)
		}
		if !strings.Contains(out, tc.mine) {
			t.Errorf("%v does not show acme's %s:\n%s", tc.args, tc.mine, out)
		}
		for _, theirs := range []string{conns["globex"], clients["globex"], "marker-globex", "globex tools"} {
			if strings.Contains(out, theirs) {
				t.Errorf("%v, scoped to acme, shows globex's %s:\n%s", tc.args, theirs, out)
			}
		}
	}
	// Unscoped, the operator sees both: the scope above is the filter's, not an accident of the data.
	out, err := cli("admin", "events", "--all")
	if err != nil || !strings.Contains(out, "marker-acme") || !strings.Contains(out, "marker-globex") {
		t.Fatalf("admin events --all: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"admin", "events", "--org", "Not An Org"},
		{"admin", "connections", "list", "--org", "Not An Org"},
	} {
		if _, err := cli(args...); exitCode(err) != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, exitCode(err), err)
		}
	}
}
