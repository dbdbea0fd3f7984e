package main

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/connectd/connectd/internal/connect"
	"github.com/connectd/connectd/internal/metrics"
	"github.com/connectd/connectd/internal/vault"
)

// newMetrics returns serve's metrics on a registry of their own (served as
// /metrics on the operators' listener).
func newMetrics() *metrics.Metrics {
	return metrics.New(prometheus.NewRegistry())
}

// observeMetrics registers what is read at scrape time: the caches' counters
// and the database pool's statistics.
func observeMetrics(m *metrics.Metrics, pool *pgxpool.Pool, ident *identity, conn *connect.Server) {
	m.Pool(pool)
	m.Cache("user_token", ident.verifier.TokenCacheStats)
	m.Cache("client_key", ident.clients.CacheStats)
	m.Cache("credential", conn.Vault().CacheStats)
	m.Cache("consent", conn.CacheStats)
}

// flowObserver counts finished elicitations.
func flowObserver(m *metrics.Metrics) func(connect.Status) {
	if m == nil {
		return nil
	}
	return func(st connect.Status) { m.Flow(string(st)) }
}

// observeRefresh counts the refreshes f sends to providers, by outcome.
func observeRefresh(f vault.RefreshFunc, m *metrics.Metrics) vault.RefreshFunc {
	if m == nil {
		return f
	}
	return func(ctx context.Context, name, refreshToken string) (*vault.Refreshed, error) {
		r, err := f(ctx, name, refreshToken)
		outcome := "ok"
		switch {
		case errors.Is(err, vault.ErrReauthorizationRequired):
			outcome = "reauthorization_required"
		case errors.Is(err, vault.ErrProviderUnavailable):
			outcome = "unavailable"
		case err != nil:
			outcome = "error"
		}
		m.Refresh(name, outcome)
		return r, err
	}
}
