package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/connectd/connectd/internal/egress"
)

// EgressConfig configures outbound HTTP (see docs/egress.md). Filled by
// loadEgress.
type EgressConfig struct {
	// AllowHosts (CONNECTD_EGRESS_ALLOW_HOSTS, dev mode only): exact
	// host:port pairs connectd may fetch over plain http and on loopback.
	AllowHosts []string
}

// loadEgress reads CONNECTD_EGRESS_ALLOW_HOSTS. Outside dev mode any value is
// an error rather than ignored: a production deployment must not believe it
// can reach an internal host.
func (c *Config) loadEgress(e *env) {
	const name = "CONNECTD_EGRESS_ALLOW_HOSTS"
	raw := e.str(name, "")
	if raw == "" {
		return
	}
	if !c.Dev {
		e.fail(name, "is honoured only with CONNECTD_DEV=true (outside dev mode connectd fetches public https URLs only); unset it")
		return
	}
	for i, s := range strings.Split(raw, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if err := egress.CheckHostPort(s); err != nil {
			e.fail(name, "entry %d: %s", i+1, err)
			return
		}
		c.Egress.AllowHosts = append(c.Egress.AllowHosts, s)
	}
}

// newEgressClient returns the client for everything connectd fetches from
// other servers: discovery, JWKS, token, refresh, revocation, API-key checks.
//
// self is "" except in dev mode with the development IdP, where connectd
// fetches its own discovery document and JWKS: pass the public listener's
// address, and the public URL's host:port is allow-listed and dialed there
// (an unspecified listen address becomes 127.0.0.1).
func newEgressClient(cfg *Config, self string) (*http.Client, error) {
	ec := egress.Config{AllowHosts: slices.Clone(cfg.Egress.AllowHosts)}
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
