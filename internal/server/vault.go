package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/lifecycle"
	"github.com/connectd/connectd/internal/metrics"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/webhook"
)

// loadKeyring returns the keyring to run with. Vault keys are required; only in
// dev mode, when none are configured, an ephemeral key is generated with a
// loud warning: what it seals cannot be opened after a restart.
func loadKeyring(ctx context.Context, cfg Config) (*keyring.Keyring, error) {
	if cfg.Vault.Keyring != nil {
		return cfg.Vault.Keyring, nil
	}
	if !cfg.Dev {
		return nil, &ConfigError{Var: "CONNECTD_VAULT_KEYS",
			Problem: "is required (or CONNECTD_VAULT_KEYS_FILE): make a key with `connectd vault gen-key`"}
	}
	line, err := keyring.GenerateKey(1)
	if err != nil {
		return nil, err
	}
	k, err := keyring.Parse(line)
	if err != nil {
		return nil, err
	}
	cfg.Logger.WarnContext(ctx, "DEV MODE: no vault keys configured (CONNECTD_VAULT_KEYS); using an EPHEMERAL key. "+
		"Credentials stored now cannot be decrypted after a restart. Never run like this in production.")
	return k, nil
}

// NewCatalog builds the provider catalog of cfg.Vault.Providers (running
// discovery), as New does, for the CLI commands that act at providers. Every
// provider call goes through the egress client (SSRF guard, https only
// outside the dev allow-list, no redirects, timeouts, size cap) or
// cfg.HTTPClient.
func NewCatalog(ctx context.Context, cfg Config) (*provider.Catalog, error) {
	return catalog(ctx, cfg, nil)
}

// catalog is NewCatalog with every provider call measured by m (nil: none).
func catalog(ctx context.Context, cfg Config, m *metrics.Metrics) (*provider.Catalog, error) {
	client, err := providerClient(cfg)
	if err != nil {
		return nil, err
	}
	if m != nil {
		c := *client // cfg.HTTPClient is the caller's: measure a copy
		c.Transport = m.Transport(c.Transport)
		client = &c
	}
	pc := cfg.Vault.Providers
	if pc == nil {
		pc = &provider.Config{Dev: cfg.Dev}
	}
	cat, err := provider.New(ctx, pc, provider.Options{HTTPClient: client, Logger: cfg.Logger,
		MaxConcurrent: cfg.Vault.ProviderConcurrency})
	if err != nil {
		var pe *provider.ConfigError
		if errors.As(err, &pe) {
			return nil, &ConfigError{Var: "CONNECTD_PROVIDERS_FILE", Problem: err.Error()}
		}
		return nil, err
	}
	return cat, nil
}

// NewVaultStore is the connection store on pool, as New wires it, for the CLI
// commands: refreshes and revocations go through the app each connection was
// obtained with (org.Store.ByID over cat: an organization's own, or cat's
// shared one). Given webhooks, a connection marked reauthorization_required (a refresh
// the provider refused) is reported to its clients; nil: not.
func NewVaultStore(cfg Config, pool *pgxpool.Pool, keys *keyring.Keyring, cat *provider.Catalog, webhooks *webhook.Service) (*vault.Store, error) {
	var onReauth reauthHook
	if webhooks != nil {
		// The reauthorization events need only the enqueuer (the CLI's
		// process has no other lifecycle owner to hand).
		onReauth = (&lifecycle.Owner{Pool: pool, Webhooks: webhooks, Logger: cfg.Logger}).ReauthRequired
	}
	// No notification listener runs in the CLI: the org store caches
	// nothing, so every app is read as it is now.
	orgs := org.New(org.Config{Pool: pool, Keyring: keys, Catalog: cat, Now: cfg.Now, Logger: cfg.Logger})
	return vaultStore(cfg, pool, keys, cat, orgs, nil, onReauth)
}

// vaultStore is NewVaultStore with refreshes counted by m (nil: none). Its
// credential cache (Cache.CredentialTTL) stays empty until the hub keeps it
// fresh (Run).
func vaultStore(cfg Config, pool *pgxpool.Pool, keys *keyring.Keyring, cat *provider.Catalog, orgs *org.Store,
	m *metrics.Metrics, onReauth reauthHook) (*vault.Store, error) {
	vc := vault.Config{
		Pool: pool, Keyring: keys, Logger: cfg.Logger, Skew: cfg.Vault.RefreshSkew, Now: cfg.Now,
		ProviderTimeout: providerTimeout(cfg), ReuseGrace: ReuseGraceFunc(cat),
		Refresh: observeRefresh(RefreshFunc(orgs.ByID), m), Revoke: RevokeFunc(orgs.ByID),
		RefreshScoped: RefreshScopedFunc(orgs.ByID),
		CacheTTL:      cfg.Cache.CredentialTTL, CacheSize: cfg.Cache.Size, OnReauth: onReauth,
		MaxAccounts: cfg.Vault.MaxAccounts,
	}
	return vault.New(vc)
}

// observeRefresh counts the refreshes f sends to providers, by outcome.
func observeRefresh(f vault.RefreshFunc, m *metrics.Metrics) vault.RefreshFunc {
	if m == nil {
		return f
	}
	return func(ctx context.Context, app vault.App, refreshToken string) (*vault.Refreshed, error) {
		r, err := f(ctx, app, refreshToken)
		outcome := "ok"
		switch {
		case errors.Is(err, vault.ErrReauthorizationRequired):
			outcome = "reauthorization_required"
		case errors.Is(err, vault.ErrProviderUnavailable):
			outcome = "unavailable"
		case err != nil:
			outcome = "error"
		}
		m.Refresh(app.Provider, outcome)
		return r, err
	}
}

// AppOf finds the OAuth provider of a stored connection's app: its app id
// ("": the deployment's shared app at prov) and provider (org.Store.ByID).
// An app that is gone — removed, or replaced by a new client id — is an
// error wrapping org.ErrAppNotFound.
type AppOf func(ctx context.Context, org, appID, prov string) (provider.OAuth, error)

// appGone reports an app that can no longer be had: the refresh token was
// issued to it, and no other app may use it (its client id and secret are
// not the connection's), so the user must connect again.
func appGone(err error) bool { return errors.Is(err, org.ErrAppNotFound) }

// ReuseGraceFunc is each catalog provider's refresh-token reuse grace
// (the template's refresh_reuse_grace), as the vault asks for it.
func ReuseGraceFunc(cat *provider.Catalog) func(string) time.Duration {
	return func(name string) time.Duration {
		p, err := cat.Get(name)
		if err != nil {
			return 0
		}
		return p.Info().RefreshReuseGrace
	}
}

// RefreshFunc is the one mapping of provider refreshes, and their error
// classes, to what the vault expects: a dead grant means reauthorization, a
// provider with no refresh token support needs the user too, and anything
// else — an outage, a refusal of connectd's own client, an answer that is
// garbage, empty, oversized or a redirect — is retryable with the stored
// credential kept (provider_unavailable), the provider's trouble and not the
// user's. A call that was sent and got no usable answer is also marked
// vault.ErrOutcomeUnknown: the provider may have rotated the refresh token.
// The vault's own tests use it too, so they test this mapping.
//
// The refresh goes to the app the connection was obtained with (app.AppID,
// through appOf), with that app's client id and secret, never another's:
// an app that is gone (org.ErrAppNotFound) is reauthorization_required —
// no app that may use the refresh token is left, so only the user connecting
// again helps, and retrying would only wait for nothing; any other failure
// to find it (a catalog without the provider, a secret that does not open,
// the database) is provider_unavailable, the operator's to fix.
func RefreshFunc(appOf AppOf) vault.RefreshFunc {
	return func(ctx context.Context, app vault.App, refreshToken string) (*vault.Refreshed, error) {
		p, err := appOf(ctx, app.Org, app.AppID, app.Provider)
		switch {
		case appGone(err):
			return nil, fmt.Errorf("%w: refresh: %w", vault.ErrReauthorizationRequired, err)
		case err != nil:
			// Not a dead grant: the operator may put the provider back.
			return nil, fmt.Errorf("%w: refresh: %w", vault.ErrProviderUnavailable, err)
		}
		tok, err := p.Refresh(ctx, refreshToken)
		switch {
		case errors.Is(err, provider.ErrInvalidGrant), errors.Is(err, provider.ErrNotSupported):
			return nil, fmt.Errorf("%w: %w", vault.ErrReauthorizationRequired, err)
		case err != nil && outcomeUnknown(err):
			return nil, fmt.Errorf("%w: %w: %w", vault.ErrProviderUnavailable, vault.ErrOutcomeUnknown, err)
		case err != nil:
			return nil, fmt.Errorf("%w: %w", vault.ErrProviderUnavailable, err)
		}
		return &vault.Refreshed{AccessToken: tok.AccessToken, TokenType: tok.TokenType,
			RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, Scopes: tok.Scopes}, nil
	}
}

// outcomeUnknown reports a provider call that may have reached the provider
// and got no usable answer: a timeout or a broken connection after the
// request went out, or a success status with a body that is not a token
// answer. A status the provider chose (a 5xx, a 429, an OAuth error), a call
// this process never sent (no bulkhead slot) and a failed dial are known
// outcomes: nothing was done.
func outcomeUnknown(err error) bool {
	var pe *provider.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, provider.ErrBusy), errors.As(err, &oe) && oe.Op == "dial":
		return false
	case errors.Is(err, provider.ErrBadResponse):
		return true
	case errors.As(err, &pe) && pe.Status != 0:
		return false
	}
	return errors.Is(err, provider.ErrUnavailable)
}

// RefreshScopedFunc maps scoped refreshes (narrowed tokens) as RefreshFunc
// does, with the connection's own app as RefreshFunc finds it (gone:
// reauthorization_required); the provider's invalid_scope means it will not
// narrow to that subset.
func RefreshScopedFunc(appOf AppOf) vault.RefreshScopedFunc {
	return func(ctx context.Context, app vault.App, refreshToken string, scopes []string) (*vault.Refreshed, error) {
		p, err := appOf(ctx, app.Org, app.AppID, app.Provider)
		switch {
		case appGone(err):
			return nil, fmt.Errorf("%w: refresh: %w", vault.ErrReauthorizationRequired, err)
		case err != nil:
			return nil, fmt.Errorf("refresh: %w", err)
		}
		tok, err := p.RefreshScoped(ctx, refreshToken, scopes)
		var pe *provider.Error
		switch {
		case errors.Is(err, provider.ErrInvalidGrant), errors.Is(err, provider.ErrNotSupported):
			return nil, fmt.Errorf("%w: %w", vault.ErrReauthorizationRequired, err)
		case err != nil && outcomeUnknown(err):
			// Sent, and no usable answer (a garbled body included): the
			// provider may have rotated the refresh token, as for a refresh.
			return nil, fmt.Errorf("%w: %w: %w", vault.ErrProviderUnavailable, vault.ErrOutcomeUnknown, err)
		case errors.Is(err, provider.ErrUnavailable):
			return nil, fmt.Errorf("%w: %w", vault.ErrProviderUnavailable, err)
		case errors.As(err, &pe) && pe.Code == "invalid_scope", errors.Is(err, provider.ErrRejected):
			// The provider will not narrow this grant: the client must be
			// approved for the whole connection, which consent_required
			// tells it.
			return nil, fmt.Errorf("%w: %w", vault.ErrCannotNarrow, err)
		case err != nil:
			return nil, fmt.Errorf("%w: %w", vault.ErrProviderUnavailable, err)
		}
		return &vault.Refreshed{AccessToken: tok.AccessToken, TokenType: tok.TokenType,
			RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, Scopes: tok.Scopes}, nil
	}
}

// RevokeFunc revokes a deleted credential at its provider (RFC 7009), with
// the app it was obtained with (app.AppID, through appOf) and no other.
func RevokeFunc(appOf AppOf) vault.RevokeFunc {
	return func(ctx context.Context, app vault.App, c *vault.Credential) error {
		p, err := appOf(ctx, app.Org, app.AppID, app.Provider)
		switch {
		case appGone(err), errors.Is(err, org.ErrUnknownProvider), errors.Is(err, org.ErrAPIKeyProvider):
			// api_key providers, removed providers and apps that are gone
			// have nothing to call it with.
			return fmt.Errorf("%w: %w", vault.ErrRevocationNotSupported, err)
		case err != nil:
			return fmt.Errorf("revoke: %w", err) // the database, a secret that does not open: failed
		}
		err = provider.RevokeGrant(ctx, p, c.AccessToken, c.RefreshToken)
		if errors.Is(err, provider.ErrNotSupported) {
			return fmt.Errorf("%w: %w", vault.ErrRevocationNotSupported, err)
		}
		return err
	}
}
