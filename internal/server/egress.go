package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/egress"
)

// outboundClient returns the client for everything connectd fetches from
// other servers: discovery, JWKS, token, refresh, revocation, API-key checks.
//
// self is "" except in dev mode with the development IdP, where connectd
// fetches its own discovery document and JWKS: pass the public listener's
// address, and the public URL's host:port is allow-listed and dialed there
// (an unspecified listen address becomes 127.0.0.1).
//
// cfg.HTTPClient, when set, is returned instead (tests' TLS fakes).
func outboundClient(cfg Config, self string) (*http.Client, error) {
	return outboundClientWith(cfg, self, egress.Config{})
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
		c := *cfg.HTTPClient
		if c.Timeout < d {
			c.Timeout = d
		}
		return &c, nil
	}
	return outboundClientWith(cfg, "", egress.Config{Timeout: d, ResponseHeaderTimeout: d})
}

// providerTimeout is the one budget of a provider call (see
// VaultConfig.ProviderTimeout).
func providerTimeout(cfg Config) time.Duration {
	if cfg.Vault.ProviderTimeout > 0 {
		return cfg.Vault.ProviderTimeout
	}
	return 30 * time.Second
}

func outboundClientWith(cfg Config, self string, ec egress.Config) (*http.Client, error) {
	if cfg.HTTPClient != nil {
		return cfg.HTTPClient, nil
	}
	ec.AllowHosts = slices.Clone(cfg.Egress.AllowHosts)
	if self != "" {
		if !cfg.Dev || cfg.PublicURL == nil {
			return nil, errors.New("outbound HTTP: reaching connectd's own listener needs dev mode and CONNECTD_PUBLIC_URL")
		}
		pub := publicHostPort(cfg.PublicURL.Scheme, cfg.PublicURL.Host)
		ec.AllowHosts = append(ec.AllowHosts, pub)
		ec.DialOverride = map[string]string{pub: loopbackAddr(self)}
	}
	c, err := egress.New(ec)
	if err != nil {
		return nil, fmt.Errorf("outbound HTTP: %w", err)
	}
	return c, nil
}

// publicHostPort is host with the scheme's default port when it has none.
func publicHostPort(scheme, host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	port := "443"
	if scheme == "http" {
		port = "80"
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port)
}

// loopbackAddr turns a listener address into one to dial: a wildcard host
// (":8080", "0.0.0.0:8080", "[::]:8080") is reached on 127.0.0.1, which
// connectd's dual-stack listener accepts.
func loopbackAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if a, err := netip.ParseAddr(host); host == "" || (err == nil && a.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return listen
}
