package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/metrics"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/vault"
)

// VaultConfig configures credential encryption and the provider catalog.
// Filled by loadVault.
type VaultConfig struct {
	// Keyring holds the vault keys from CONNECTD_VAULT_KEYS or
	// CONNECTD_VAULT_KEYS_FILE; nil when neither is set (see keyring).
	Keyring *vault.Keyring
	// Providers is the parsed CONNECTD_PROVIDERS_FILE (client secrets
	// resolved); empty when the variable is not set.
	Providers *provider.Config
	// RefreshSkew: tokens expiring within it are refreshed before use
	// (CONNECTD_REFRESH_SKEW).
	RefreshSkew time.Duration
}

// loadVault reads the vault and provider variables (see docs/vault.md and
// docs/providers.md). Messages name the variable, never a key.
func (c *Config) loadVault(e *env) {
	keys := strings.TrimSpace(e.getenv("CONNECTD_VAULT_KEYS"))
	keysFile := e.str("CONNECTD_VAULT_KEYS_FILE", "")
	switch {
	case keys != "" && keysFile != "":
		e.fail("CONNECTD_VAULT_KEYS_FILE", "set CONNECTD_VAULT_KEYS or CONNECTD_VAULT_KEYS_FILE, not both")
	case keysFile != "":
		b, err := os.ReadFile(keysFile)
		if err != nil {
			e.fail("CONNECTD_VAULT_KEYS_FILE", "cannot be read: %s", describeFileError(err))
			break
		}
		c.Vault.Keyring = parseKeyring(e, "CONNECTD_VAULT_KEYS_FILE", string(b))
		clear(b)
	case keys != "":
		c.Vault.Keyring = parseKeyring(e, "CONNECTD_VAULT_KEYS", keys)
	}

	c.Vault.Providers = &provider.Config{Dev: c.Dev}
	if path := e.str("CONNECTD_PROVIDERS_FILE", ""); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			e.fail("CONNECTD_PROVIDERS_FILE", "cannot be read: %s", describeFileError(err))
		} else if pc, err := provider.ParseConfig(data, provider.ParseOptions{Dev: c.Dev, Getenv: e.getenv}); err != nil {
			e.fail("CONNECTD_PROVIDERS_FILE", "%s", err)
		} else {
			c.Vault.Providers = pc
		}
	}
	c.Vault.RefreshSkew = e.duration("CONNECTD_REFRESH_SKEW", 2*time.Minute, time.Second, time.Hour)
}

func parseKeyring(e *env, name, spec string) *vault.Keyring {
	k, err := vault.ParseKeyring(spec)
	if err != nil {
		e.fail(name, "%s", strings.TrimPrefix(err.Error(), vault.ErrKeyring.Error()+": "))
		return nil
	}
	return k
}

// describeFileError says why a file could not be read without repeating its
// path (the variable's value).
func describeFileError(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "no such file"
	case errors.Is(err, os.ErrPermission):
		return "permission denied"
	default:
		return "read error"
	}
}

// keyring returns the keyring serve runs with. Vault keys are required; only
// in dev mode, when none are configured, an ephemeral key is generated with a
// loud warning: what it seals cannot be opened after a restart.
func (c *Config) keyring(ctx context.Context, logger *slog.Logger) (*vault.Keyring, error) {
	if c.Vault.Keyring != nil {
		return c.Vault.Keyring, nil
	}
	if !c.Dev {
		return nil, &ConfigError{Var: "CONNECTD_VAULT_KEYS",
			Problem: "is required (or CONNECTD_VAULT_KEYS_FILE): make a key with `connectd vault gen-key`"}
	}
	line, err := vault.GenerateKey(1)
	if err != nil {
		return nil, err
	}
	k, err := vault.ParseKeyring(line)
	if err != nil {
		return nil, err
	}
	logger.WarnContext(ctx, "DEV MODE: no vault keys configured (CONNECTD_VAULT_KEYS); using an EPHEMERAL key. "+
		"Credentials stored now cannot be decrypted after a restart. Never run like this in production.")
	return k, nil
}

// newCatalog builds the provider catalog (running discovery). Every provider
// call goes through the egress client (SSRF guard, https only outside the dev
// allow-list, no redirects, timeouts, size cap).
func newCatalog(ctx context.Context, cfg *Config, logger *slog.Logger) (*provider.Catalog, error) {
	return newObservedCatalog(ctx, cfg, logger, nil)
}

// newObservedCatalog is newCatalog with every provider call measured by m.
func newObservedCatalog(ctx context.Context, cfg *Config, logger *slog.Logger, m *metrics.Metrics) (*provider.Catalog, error) {
	client, err := newEgressClient(cfg, "")
	if err != nil {
		return nil, err
	}
	if m != nil {
		client.Transport = m.Transport(client.Transport)
	}
	cat, err := provider.New(ctx, cfg.Vault.Providers, provider.Options{HTTPClient: client, Logger: logger})
	if err != nil {
		var pe *provider.ConfigError
		if errors.As(err, &pe) {
			return nil, &ConfigError{Var: "CONNECTD_PROVIDERS_FILE", Problem: err.Error()}
		}
		return nil, err
	}
	return cat, nil
}

// newVaultStore wires the connection store to the provider catalog: refreshes
// and revocations go through the catalog's OAuth providers.
func newVaultStore(cfg *Config, pool *pgxpool.Pool, keys *vault.Keyring, cat *provider.Catalog, logger *slog.Logger) (*vault.Store, error) {
	return newObservedVaultStore(cfg, pool, keys, cat, logger, nil)
}

// newObservedVaultStore is newVaultStore with refreshes counted by m. Its
// credential cache (CONNECTD_CREDENTIAL_CACHE_TTL) stays empty until a
// listener keeps it fresh: connect.Server.Run in serve.
func newObservedVaultStore(cfg *Config, pool *pgxpool.Pool, keys *vault.Keyring, cat *provider.Catalog, logger *slog.Logger, m *metrics.Metrics) (*vault.Store, error) {
	return vault.New(vault.Config{
		Pool: pool, Keyring: keys, Logger: logger, Skew: cfg.Vault.RefreshSkew,
		Refresh: observeRefresh(vaultRefreshFunc(cat), m), Revoke: vaultRevokeFunc(cat),
		RefreshScoped: vaultRefreshScopedFunc(cat),
		CacheTTL:      cfg.Cache.CredentialTTL, CacheSize: cfg.Cache.Size,
	})
}

// vaultRefreshFunc maps provider refreshes, and their error classes, to what
// the vault expects: a dead grant means reauthorization, an outage is
// retryable, and a provider with no refresh token support needs the user too.
func vaultRefreshFunc(cat *provider.Catalog) vault.RefreshFunc {
	return func(ctx context.Context, name, refreshToken string) (*vault.Refreshed, error) {
		p, err := cat.OAuth(name)
		if err != nil {
			// Not a dead grant: the operator may put the provider back.
			return nil, fmt.Errorf("refresh: %w", err)
		}
		tok, err := p.Refresh(ctx, refreshToken)
		switch {
		case errors.Is(err, provider.ErrInvalidGrant), errors.Is(err, provider.ErrNotSupported):
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

// vaultRefreshScopedFunc maps scoped refreshes (narrowed tokens) as
// vaultRefreshFunc does; the provider's invalid_scope means it will not
// narrow to that subset.
func vaultRefreshScopedFunc(cat *provider.Catalog) vault.RefreshScopedFunc {
	return func(ctx context.Context, name, refreshToken string, scopes []string) (*vault.Refreshed, error) {
		p, err := cat.OAuth(name)
		if err != nil {
			return nil, fmt.Errorf("refresh: %w", err)
		}
		tok, err := p.RefreshScoped(ctx, refreshToken, scopes)
		var pe *provider.Error
		switch {
		case errors.Is(err, provider.ErrInvalidGrant), errors.Is(err, provider.ErrNotSupported):
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

// vaultRevokeFunc revokes a deleted credential through the catalog.
func vaultRevokeFunc(cat *provider.Catalog) vault.RevokeFunc {
	return func(ctx context.Context, name string, c *vault.Credential) error {
		p, err := cat.OAuth(name)
		if err != nil {
			// api_key providers (and removed ones) have nothing to call.
			return fmt.Errorf("%w: %w", vault.ErrRevocationNotSupported, err)
		}
		err = provider.RevokeGrant(ctx, p, c.AccessToken, c.RefreshToken)
		if errors.Is(err, provider.ErrNotSupported) {
			return fmt.Errorf("%w: %w", vault.ErrRevocationNotSupported, err)
		}
		return err
	}
}
