package vault_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/vault"
)

func keyLine(t testing.TB, version uint32) string {
	t.Helper()
	l, err := keyring.GenerateKey(version)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustParse(t testing.TB, spec string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	alice = identity.User{Issuer: "https://idp.example", Subject: "alice"}
	bob   = identity.User{Issuer: "https://idp.example", Subject: "bob"}
)

// fakeProvider starts a fake OAuth provider and returns it with the
// provider-package client for it (over real HTTP).
func fakeProvider(t testing.TB, opts providertest.Options) (*providertest.Server, provider.OAuth) {
	t.Helper()
	srv := providertest.New(t, opts)
	return srv, oauthFromEntry(t, srv, srv.ProviderConfig("fake", "FAKE_SECRET"))
}

// oauthFromEntry builds the provider "fake" from a providers-file entry whose
// client secret reference resolves to srv's secret.
func oauthFromEntry(t testing.TB, srv *providertest.Server, entry map[string]any) provider.OAuth {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"providers": []any{entry}})
	cfg, err := provider.ParseConfig(data, provider.ParseOptions{Dev: true,
		Getenv: func(string) string { return srv.ClientSecret }})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := provider.New(context.Background(), cfg, provider.Options{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.OAuth("fake")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// refresher, scopedRefresher and revoker are the production wiring between
// vault and provider (internal/server), over one provider.
func refresher(p provider.OAuth) vault.RefreshFunc { return server.RefreshFunc(only(p)) }

func scopedRefresher(p provider.OAuth) vault.RefreshScopedFunc {
	return server.RefreshScopedFunc(only(p))
}

func revoker(p provider.OAuth) vault.RevokeFunc { return server.RevokeFunc(only(p)) }

func only(p provider.OAuth) server.AppOf {
	return func(context.Context, string, string, string) (provider.OAuth, error) { return p, nil }
}

func newStore(t testing.TB, pool *pgxpool.Pool, keys *keyring.Keyring, p provider.OAuth, skew time.Duration) *vault.Store {
	t.Helper()
	cfg := vault.Config{Pool: pool, Keyring: keys, Skew: skew}
	if p != nil {
		cfg.Refresh, cfg.Revoke, cfg.RefreshScoped = refresher(p), revoker(p), scopedRefresher(p)
	}
	s, err := vault.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// credOf turns tokens minted by the fake into a credential to store.
func credOf(tok providertest.Tokens) vault.Credential {
	return vault.Credential{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: "Bearer",
		Expiry: tok.Expiry, Scopes: tok.Scopes}
}

func storedCiphertext(t testing.TB, pool *pgxpool.Pool, id string) []byte {
	t.Helper()
	var ct []byte
	if err := pool.QueryRow(context.Background(), `SELECT ciphertext FROM connections WHERE id = $1`, id).Scan(&ct); err != nil {
		t.Fatal(err)
	}
	return ct
}

func pool(t testing.TB) *pgxpool.Pool { return pgtest.Pool(t) }
