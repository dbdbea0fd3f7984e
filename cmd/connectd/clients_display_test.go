package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/pgtest"
)

// TestClientsCreateDisplay: --logo-url and --homepage are stored with the
// client; a bad URL is a usage error that registers nothing.
func TestClientsCreateDisplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL})
	clientsRun := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"clients"}, args...), env, &out, io.Discard)
		return out.String(), err
	}
	out, err := clientsRun("create", "--name", "Files Assistant", "--resource", "https://files.mcp.example/",
		"--logo-url", "https://cdn.files.example/logo.png", "--homepage", "https://files.example/")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^id: (cli_[a-z0-9]+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("create output %q", out)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool})
	c, err := store.Get(ctx, m[1])
	if err != nil || c.LogoURL != "https://cdn.files.example/logo.png" || c.Homepage != "https://files.example/" {
		t.Fatalf("client %+v %v", c, err)
	}

	for _, args := range [][]string{
		{"--logo-url", "http://cdn.files.example/logo.png"},
		{"--logo-url", "javascript:alert(1)"},
		{"--homepage", "javascript:alert(1)"},
		{"--homepage", "http://files.example/"}, // https outside dev mode
	} {
		_, err := clientsRun(append([]string{"create", "--name", "Bad", "--resource", "https://bad.mcp.example/"}, args...)...)
		if exitCode(err) != 2 {
			t.Errorf("%v: %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
	list, err := store.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("after refused creates: %d clients, %v", len(list), err)
	}

	// update changes one and keeps the other; a bad URL changes nothing.
	if _, err := clientsRun("update", m[1], "--logo-url", "https://cdn.files.example/new.png"); err != nil {
		t.Fatal(err)
	}
	if c, err := store.Get(ctx, m[1]); err != nil || c.LogoURL != "https://cdn.files.example/new.png" || c.Homepage != "https://files.example/" {
		t.Fatalf("after update --logo-url: %+v %v", c, err)
	}
	if _, err := clientsRun("update", m[1], "--name", "Renamed", "--homepage", "javascript:alert(1)"); exitCode(err) != 2 {
		t.Fatalf("update with a bad homepage: %v", err)
	}
	if c, err := store.Get(ctx, m[1]); err != nil || c.Name != "Files Assistant" || c.Homepage != "https://files.example/" {
		t.Fatalf("a refused update changed %+v %v", c, err)
	}
	if _, err := clientsRun("update", m[1], "--logo-url", ""); err != nil {
		t.Fatal(err)
	}
	if c, err := store.Get(ctx, m[1]); err != nil || c.LogoURL != "" {
		t.Fatalf("after removing the logo: %+v %v", c, err)
	}
}
