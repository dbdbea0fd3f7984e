package server

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/connectd/connectd/internal/egress"
)

// outboundClient returns the client for everything connectd fetches from
// other servers: discovery, JWKS, webhooks (provider calls: providerClient).
// cfg.HTTPClient, when set, is returned instead (tests' TLS fakes). Its
// calls take the egress proxy of class ec.Class (webhooks: ClassWebhooks,
// the API proxy: ClassAPI; discovery and JWKS: the default); the provider
// client's calls are labelled per call by package provider (token, refresh,
// revoke).
func outboundClient(cfg Config) (*http.Client, error) {
	return outboundClientWith(cfg, egress.Config{})
}

// providerClient is the outbound client of provider calls (token, refresh,
// revocation, API-key checks): the egress rules with its timeouts raised to
// the vault's provider deadline, so a slow provider's answer is read until
// the vault gives up on it and not a moment less — a refresh answer dropped
// early is a rotated refresh token lost. cfg.HTTPClient, when set, is
// returned with its Timeout raised likewise.
func providerClient(cfg Config) (*http.Client, error) {
	d := providerTimeout(cfg)
	if cfg.HTTPClient != nil {
		c := *testClient(cfg)
		if c.Timeout < d {
			c.Timeout = d
		}
		return &c, nil
	}
	return outboundClientWith(cfg, egress.Config{Timeout: d, ResponseHeaderTimeout: d})
}

// providerTimeout is the one budget of a provider call (see
// VaultConfig.ProviderTimeout).
func providerTimeout(cfg Config) time.Duration {
	if cfg.Vault.ProviderTimeout > 0 {
		return cfg.Vault.ProviderTimeout
	}
	return 30 * time.Second
}

func outboundClientWith(cfg Config, ec egress.Config) (*http.Client, error) {
	if cfg.HTTPClient != nil {
		return testClient(cfg), nil
	}
	ec.AllowHosts = slices.Clone(cfg.Egress.AllowHosts)
	ec.Proxies, ec.RootCAs = cfg.Egress.Proxies, cfg.Egress.RootCAs
	c, err := egress.New(ec)
	if err != nil {
		return nil, fmt.Errorf("outbound HTTP: %w", err)
	}
	return c, nil
}

// testClient is cfg.HTTPClient, which replaces the egress client: with
// tracing on, a copy whose transport makes the client spans New's client
// makes (egress.Trace), so a test sees the spans production makes.
func testClient(cfg Config) *http.Client {
	if cfg.Tracing == nil {
		return cfg.HTTPClient
	}
	c := *cfg.HTTPClient
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = egress.Trace(base)
	return &c
}
