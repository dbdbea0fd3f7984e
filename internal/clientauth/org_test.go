package clientauth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
	"github.com/connectd/connectd/internal/pgtest"
)

// TestClientOrganization: a client is created in an organization (the
// default one unless CreateIn names another), and every way of reading it —
// Get, List, Authenticate cold and warm (cached), Update — carries it; an
// unknown or malformed organization registers nothing.
func TestClientOrganization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, Now: newClock().Now, CacheTTL: time.Hour})
	pgtest.Listen(t, pool, clients.CacheSubscriber())
	if _, err := pool.Exec(ctx, `INSERT INTO organizations (id, name) VALUES ('acme', 'Acme')`); err != nil {
		t.Fatal(err)
	}
	def, _, err := clients.Create(ctx, "Default MCP", []string{mcpauthtest.Resource}, nil)
	if err != nil || def.Org != "default" {
		t.Fatalf("Create: org %q, %v; want default", def.Org, err)
	}
	acme, key, err := clients.CreateIn(ctx, "acme", "Acme MCP", []string{"https://mcp.acme.example"}, []string{"github"})
	if err != nil || acme.Org != "acme" {
		t.Fatalf("CreateIn acme: org %q, %v", acme.Org, err)
	}
	var stored string
	if err := pool.QueryRow(ctx, `SELECT org_id FROM clients WHERE id = $1`, acme.ID).Scan(&stored); err != nil || stored != "acme" {
		t.Fatalf("clients.org_id = %q (%v)", stored, err)
	}
	if got, err := clients.Get(ctx, acme.ID); err != nil || got.Org != "acme" {
		t.Fatalf("Get: org %q, %v", got.Org, err)
	}
	list, err := clients.List(ctx)
	orgOf := map[string]string{}
	for _, c := range list {
		orgOf[c.ID] = c.Org
	}
	if err != nil || len(list) != 2 || orgOf[def.ID] != "default" || orgOf[acme.ID] != "acme" {
		t.Fatalf("List: %+v, %v", list, err)
	}
	for _, pass := range []string{"cold", "warm"} {
		got, err := clients.Authenticate(ctx, key)
		if err != nil || got.Org != "acme" {
			t.Fatalf("Authenticate (%s): org %q, %v", pass, got.Org, err)
		}
	}
	if s := clients.CacheStats(); s.Hits == 0 {
		t.Fatalf("the warm Authenticate was not answered from the cache: %+v", s)
	}
	name := "Acme MCP 2"
	if got, err := clients.Update(ctx, acme.ID, clientauth.ClientUpdate{Name: &name}, "test"); err != nil || got.Org != "acme" {
		t.Fatalf("Update: org %q, %v", got.Org, err)
	}
	for _, org := range []string{"nope", "Acme", "-x", ""} {
		_, _, err := clients.CreateIn(ctx, org, "X", []string{"https://x.example"}, nil)
		if !errors.Is(err, clientauth.ErrInvalidClient) {
			t.Errorf("CreateIn(%q): %v, want ErrInvalidClient", org, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM clients`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d clients after refused registrations (%v)", n, err)
	}
}
