package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/connect"
	"github.com/connectd/connectd/internal/metrics"
	"github.com/connectd/connectd/internal/web"
)

// newConnect wires the connect flow: vault keys, the provider catalog, the
// credential store and the identity services; m (nil: none) counts flows,
// refreshes and provider calls.
func newConnect(ctx context.Context, cfg *Config, pool *pgxpool.Pool, logger *slog.Logger, ident *identity, m *metrics.Metrics) (*connect.Server, error) {
	keys, err := cfg.keyring(ctx, logger)
	if err != nil {
		return nil, err
	}
	cat, err := newObservedCatalog(ctx, cfg, logger, m)
	if err != nil {
		return nil, err
	}
	store, err := newObservedVaultStore(cfg, pool, keys, cat, logger, m)
	if err != nil {
		return nil, err
	}
	return connect.New(connect.Config{
		Logger: logger, Pool: pool, Sessions: ident.sessions, Login: ident.login, Auth: ident.auth,
		Clients: ident.clients, Vault: store, Keyring: keys, Catalog: cat, PublicURL: cfg.PublicURL.String(),
		ElicitationTTL: cfg.Connect.ElicitationTTL, RequestStateTTL: cfg.Connect.RequestStateTTL,
		MintLimit: web.NewLimiter(cfg.RateLimit.Mint), MintUserLimit: web.NewLimiter(cfg.RateLimit.MintUser),
		MaxWaiters:      cfg.RateLimit.MaxWaiters,
		ConsentCacheTTL: cfg.Cache.ConsentTTL, ConsentCacheSize: cfg.Cache.Size,
		ListenURL: cfg.DatabaseListenURL, OnFlow: flowObserver(m),
	})
}
