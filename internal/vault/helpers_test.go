package vault_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

var alice = vault.UserRef{Issuer: "https://idp.example", Subject: "alice"}

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

// refresher and revoker are the wiring between vault and provider, as
// cmd/connectd does it: provider error classes become vault's.
func refresher(p provider.OAuth) vault.RefreshFunc {
	return func(ctx context.Context, _ string, rt string) (*vault.Refreshed, error) {
		tok, err := p.Refresh(ctx, rt)
		switch {
		case errors.Is(err, provider.ErrInvalidGrant):
			return nil, fmt.Errorf("%w: %w", vault.ErrReauthorizationRequired, err)
		case errors.Is(err, provider.ErrUnavailable):
			return nil, fmt.Errorf("%w: %w", vault.ErrProviderUnavailable, err)
		case err != nil:
			return nil, err
		}
		return &vault.Refreshed{AccessToken: tok.AccessToken, TokenType: tok.TokenType,
			RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, Scopes: tok.Scopes}, nil
	}
}

// scopedRefresher is the wiring of scoped refreshes: as refresher, and the
// provider's invalid_scope means it cannot narrow to that subset.
func scopedRefresher(p provider.OAuth) vault.RefreshScopedFunc {
	return func(ctx context.Context, _ string, rt string, scopes []string) (*vault.Refreshed, error) {
		tok, err := p.RefreshScoped(ctx, rt, scopes)
		var pe *provider.Error
		switch {
		case errors.Is(err, provider.ErrInvalidGrant):
			return nil, fmt.Errorf("%w: %w", vault.ErrReauthorizationRequired, err)
		case errors.Is(err, provider.ErrUnavailable):
			return nil, fmt.Errorf("%w: %w", vault.ErrProviderUnavailable, err)
		case errors.As(err, &pe) && pe.Code == "invalid_scope":
			return nil, fmt.Errorf("%w: %w", vault.ErrCannotNarrow, err)
		case err != nil:
			return nil, err
		}
		return &vault.Refreshed{AccessToken: tok.AccessToken, TokenType: tok.TokenType,
			RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, Scopes: tok.Scopes}, nil
	}
}

func revoker(p provider.OAuth) vault.RevokeFunc {
	return func(ctx context.Context, _ string, c *vault.Credential) error {
		err := provider.RevokeGrant(ctx, p, c.AccessToken, c.RefreshToken)
		if errors.Is(err, provider.ErrNotSupported) {
			return fmt.Errorf("%w: %w", vault.ErrRevocationNotSupported, err)
		}
		return err
	}
}

func newStore(t testing.TB, pool *pgxpool.Pool, keys *vault.Keyring, p provider.OAuth, skew time.Duration) *vault.Store {
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
