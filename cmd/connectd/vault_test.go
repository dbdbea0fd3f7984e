package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/webhook"
)

func TestVaultGenKey(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"vault", "gen-key"}, envOf(nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(out.String())
	if !regexp.MustCompile(`^1:[A-Za-z0-9+/]{43}=$`).MatchString(line) {
		t.Fatalf("gen-key printed %q", line)
	}
	if _, err := keyring.Parse(line); err != nil {
		t.Fatal(err)
	}
	// With keys configured, the next version is proposed.
	out.Reset()
	env := envOf(map[string]string{"CONNECTD_VAULT_KEYS": line + ",*" + genKey(t, 5)})
	if err := run(context.Background(), []string{"vault", "gen-key"}, env, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "6:") {
		t.Fatalf("%q %v", out.String(), err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"vault", "gen-key", "-version", "9"}, envOf(nil), &out, io.Discard); err != nil ||
		!strings.HasPrefix(out.String(), "9:") || strings.TrimSpace(out.String()) == line {
		t.Fatalf("%q %v", out.String(), err)
	}
	for _, args := range [][]string{{"vault"}, {"vault", "rotate"}, {"vault", "gen-key", "extra"}, {"vault", "rewrap", "-batch", "0"}} {
		if err := run(context.Background(), args, envOf(nil), io.Discard, io.Discard); exitCode(err) != 2 {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestVaultStatusAndRewrap runs the rotation procedure through the CLI.
func TestVaultStatusAndRewrap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	l1, l2 := genKey(t, 1), genKey(t, 2)
	s, err := vault.New(vault.Config{Pool: pgtest.NewPool(t, dbURL), Keyring: mustKeyring(t, l1)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		u := identity.User{Issuer: "https://idp.example", Subject: fmt.Sprint("u", i)}
		if _, err := s.Put(ctx, u, "github", vault.Credential{AccessToken: fmt.Sprint("gho_", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// A webhook endpoint's secret, sealed under key 1 too.
	pool := pgtest.NewPool(t, dbURL)
	cl, _, err := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool}).Create(ctx, "Files", []string{"https://files.mcp.example/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wh, err := server.NewWebhooks(server.Config{Logger: slog.New(slog.DiscardHandler)}, pool, mustKeyring(t, l1))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := wh.Create(ctx, cl.ID, "https://files.mcp.example/hooks", nil); err != nil {
		t.Fatal(err)
	}
	cli := func(keys string, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		env := envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL, "CONNECTD_VAULT_KEYS": keys})
		if err := run(ctx, append([]string{"vault"}, args...), env, &out, io.Discard); err != nil {
			t.Fatalf("vault %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	rotated := l1 + ",*" + l2
	before := cli(rotated, "status")
	if !regexp.MustCompile(`(?m)^1\s+-\s+yes\s+active\s+7$`).MatchString(before) ||
		!regexp.MustCompile(`(?m)^2\s+primary\s+yes\s+-\s+0$`).MatchString(before) ||
		!strings.Contains(before, "7 connections; 0 under the primary key 2\n1 webhook endpoint secret; 0 under the primary key\n"+
			"8 under older keys you hold: run `connectd vault rewrap`") {
		t.Fatalf("status before rewrap:\n%s", before)
	}
	if out := cli(rotated, "rewrap", "-batch", "3"); !strings.Contains(out, "rewrapped 7 connections to key version 2") ||
		!strings.Contains(out, "rewrapped 1 webhook endpoint secret\n") {
		t.Fatalf("rewrap: %s", out)
	}
	after := cli(rotated, "status")
	if !regexp.MustCompile(`(?m)^2\s+primary\s+yes\s+active\s+7$`).MatchString(after) ||
		!regexp.MustCompile(`(?m)^1\s+-\s+yes\s+-\s+0$`).MatchString(after) ||
		!strings.Contains(after, "7 under the primary key 2") || !strings.Contains(after, "1 webhook endpoint secret; 1 under the primary key") ||
		!strings.Contains(after, "no longer needed") {
		t.Fatalf("status after rewrap:\n%s", after)
	}
	// Key 1 retired: everything still opens; and status run with only key 1
	// warns that rows are under a key it does not hold.
	if out := cli("*"+l2, "rewrap"); !strings.Contains(out, "rewrapped 0") {
		t.Fatalf("second rewrap: %s", out)
	}
	if counts, err := webhook.SecretKeyStatus(ctx, pool, mustKeyring(t, "*"+l2)); err != nil || len(counts) != 1 ||
		!counts[0].InKeyring || !counts[0].Primary {
		t.Fatalf("the secret under key 2 alone: %+v %v", counts, err)
	}
	// Only key 1 held now: a WARNING naming what cannot be opened (each
	// value once), advice that is not rewrap, and exit status 1.
	var out bytes.Buffer
	err = run(ctx, []string{"vault", "status"}, envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL, "CONNECTD_VAULT_KEYS": l1}),
		&out, io.Discard)
	if err == nil || exitCode(err) != 1 ||
		!strings.Contains(out.String(), "WARNING: 7 connections and 1 webhook endpoint secret are sealed under key version 2, not in CONNECTD_VAULT_KEYS") ||
		strings.Contains(out.String(), "under older keys") || !strings.Contains(out.String(), "Add the missing key back") {
		t.Fatalf("status with the old key only: %v (exit %d)\n%s", err, exitCode(err), out.String())
	}
	// Without keys, a clear configuration error.
	err = run(ctx, []string{"vault", "status"}, envOf(map[string]string{"CONNECTD_DATABASE_URL": dbURL}), io.Discard, io.Discard)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "CONNECTD_VAULT_KEYS") {
		t.Fatalf("no keys: %v", err)
	}
}

func mustKeyring(t *testing.T, spec string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestVaultProviderWiring: the refresh and revoke functions built from the
// catalog map provider outcomes to the vault's.
func TestVaultProviderWiring(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := providertest.New(t, providertest.Options{RotateRefreshTokens: true})
	data, _ := json.Marshal(map[string]any{"providers": []any{srv.ProviderConfig("fake", "FAKE_SECRET"),
		map[string]any{"name": "openai", "kind": "api_key"}}})
	cfg, err := loadConfig(envOf(map[string]string{
		"CONNECTD_DEV": "true", "CONNECTD_PROVIDERS_FILE": writeFile(t, "p.json", string(data)),
		"FAKE_SECRET": srv.ClientSecret, "CONNECTD_VAULT_KEYS": genKey(t, 1), "CONNECTD_REFRESH_SKEW": "1m",
		// The fake provider listens on http://127.0.0.1:PORT: only the dev
		// allow-list lets the egress client reach it.
		"CONNECTD_EGRESS_ALLOW_HOSTS": strings.TrimPrefix(srv.URL(), "http://"),
	}), needs{providers: true})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	pool := pgtest.Pool(t)
	cat, err := server.NewCatalog(ctx, cfg.server(pool, logger))
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.NewVaultStore(cfg.server(pool, logger), pool, cfg.Vault.Keyring, cat, nil)
	if err != nil {
		t.Fatal(err)
	}
	user := identity.User{Issuer: "https://idp.example", Subject: "alice"}
	tok := srv.Grant([]string{"files.read"}, 10*time.Second)
	if _, err := s.Put(ctx, user, "fake", vault.Credential{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
		Expiry: tok.Expiry, Scopes: tok.Scopes}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Token(ctx, user, "fake", "", []string{"files.read"})
	if err != nil || got.AccessToken == tok.AccessToken || !srv.Valid(got.AccessToken) {
		t.Fatalf("refresh through the catalog: %v", err)
	}
	// A provider outage is retryable and changes nothing (the access token
	// has expired: a token still valid would be answered through it).
	if _, err := s.Put(ctx, user, "fake", vault.Credential{AccessToken: got.AccessToken, RefreshToken: got.RefreshToken,
		Expiry: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	srv.SetQuirks(providertest.Quirks{ServerError: true})
	if _, err := s.Token(ctx, user, "fake", "", nil); !errors.Is(err, vault.ErrProviderUnavailable) || !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("outage: %v", err)
	}
	srv.SetQuirks(providertest.Quirks{})
	d, err := s.Delete(ctx, user, "fake", "")
	if err != nil || d.Revocation != vault.Revoked || srv.Valid(got.AccessToken) {
		t.Fatalf("delete: %+v %v", d, err)
	}
	if _, err := s.Put(ctx, user, "openai", vault.Credential{AccessToken: "sk-x", TokenType: "api_key"}); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Delete(ctx, user, "openai", ""); err != nil || d.Revocation != vault.RevocationNoSupport {
		t.Fatalf("api_key delete: %+v %v", d, err)
	}
}

// TestVaultStatusHelp: -h describes everything status reports, and its exit
// status.
func TestVaultStatusHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"vault", "status", "-h"}, envOf(nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"IN KEYRING", "STATUS", "CONNECTIONS", "webhook endpoint secrets", "WARNING", "Exit status", "rewrap"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("vault status -h lacks %q:\n%s", want, out.String())
		}
	}
}
