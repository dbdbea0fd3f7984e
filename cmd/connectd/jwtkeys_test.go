package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/pgtest"
)

// TestClientsJWTKeys: clients create --public-key / --jwks-url registers a
// private_key_jwt client with no client key, and clients jwt-keys changes
// (or clears) its keys; a JWKS URL at a private address is refused.
func TestClientsJWTKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	env := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL})
	clientsRun := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"clients"}, args...), env, &out, io.Discard)
		return out.String(), err
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	keyFile := filepath.Join(t.TempDir(), "mcp.pub")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := clientsRun("create", "--name", "Keyed MCP", "--resource", "https://keyed.mcp.example/", "--public-key", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^id: (cli_[a-z0-9]+)\nauth: private_key_jwt\n$`).FindStringSubmatch(out)
	if m == nil || strings.Contains(out, "cks_") {
		t.Fatalf("create output %q", out)
	}
	id := m[1]
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool})
	c, err := store.Get(ctx, id)
	if err != nil || len(c.JWKS) == 0 || c.JWKSURL != "" {
		t.Fatalf("registered: %+v %v", c, err)
	}
	var live int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM client_keys WHERE client_id = $1 AND (expires_at IS NULL OR expires_at > now())`,
		id).Scan(&live); err != nil || live != 0 {
		t.Fatalf("%d live client keys for a private_key_jwt client (%v)", live, err)
	}

	if _, err := clientsRun("jwt-keys", id, "--jwks-url", "https://keys.mcp.example/jwks.json"); err != nil {
		t.Fatal(err)
	}
	if c, _ := store.Get(ctx, id); c.JWKSURL != "https://keys.mcp.example/jwks.json" || len(c.JWKS) != 0 {
		t.Fatalf("after jwt-keys --jwks-url: %+v", c)
	}
	if out, err := clientsRun("dpop", id); err != nil || !strings.Contains(out, "DPoP") {
		t.Fatalf("dpop: %q %v", out, err)
	}
	if c, _ := store.Get(ctx, id); !c.DPoPRequired {
		t.Fatal("dpop did not take")
	}
	if _, err := clientsRun("jwt-keys", id, "--clear"); err != nil {
		t.Fatal(err)
	}
	if c, _ := store.Get(ctx, id); c.JWKSURL != "" || len(c.JWKS) != 0 || c.DPoPRequired {
		t.Fatalf("after jwt-keys --clear (DPoP goes with the keys): %+v", c)
	}

	for _, args := range [][]string{
		{"jwt-keys", id},
		{"jwt-keys", id, "--clear", "--jwks-url", "https://keys.mcp.example/jwks.json"},
		{"jwt-keys", id, "--jwks-url", "https://10.0.0.7/jwks"},
		{"jwt-keys", id, "--jwks-url", "https://169.254.169.254/jwks"},
		{"jwt-keys", id, "--jwks-url", "http://keys.mcp.example/jwks"},
		{"jwt-keys", id, "--public-key", filepath.Join(t.TempDir(), "missing.pem")},
		{"jwt-keys", id, "--clear", "--drop-keys"},
		{"jwt-keys", "cli_nope", "--jwks-url", "https://keys.mcp.example/jwks.json"},
		{"dpop", id}, // no keys any more: DPoP cannot be required
		{"dpop", "cli_nope"},
		{"create", "--name", "x", "--resource", "https://x.mcp.example/", "--jwks-url", "https://k.example/j", "--public-key", keyFile},
	} {
		if _, err := clientsRun(args...); exitCode(err) != 2 {
			t.Errorf("clients %v: %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
	if _, err := store.Get(ctx, "cli_nope"); !errors.Is(err, clientauth.ErrClientNotFound) {
		t.Fatal(err)
	}
}
