package main

import (
	"net/netip"
	"strings"

	"github.com/connectd/connectd/internal/web"
)

// RateLimitConfig holds the request budgets (see docs/configuration.md). Each
// is "N/WINDOW" (e.g. 120/1m) or "off", and counts per replica.
type RateLimitConfig struct {
	// Public are the budgets of the public listener by route class:
	// CONNECTD_RATE_API (per client key on /v1), CONNECTD_RATE_API_PER_IP,
	// CONNECTD_RATE_BROWSER and CONNECTD_RATE_LOGIN (per client IP), and
	// CONNECTD_RATE_TRUSTED_PROXIES (load balancers whose X-Forwarded-For is
	// believed).
	Public web.RateLimits
	// Mint (CONNECTD_RATE_MINT) is per (user, client) on POST
	// /v1/elicitations; MintUser (CONNECTD_RATE_MINT_USER) is the ceiling per
	// user over all clients.
	Mint, MintUser web.Rate
	// MaxWaiters (CONNECTD_MAX_WAITERS_PER_CLIENT) caps the long-polls one
	// client key holds open at once.
	MaxWaiters int
}

// loadRateLimit reads the CONNECTD_RATE_* variables.
func (c *Config) loadRateLimit(e *env) {
	rate := func(name, def string) web.Rate {
		r, err := web.ParseRate(e.str(name, def))
		if err != nil {
			e.fail(name, "%s", err)
		}
		return r
	}
	c.RateLimit = RateLimitConfig{
		Public: web.RateLimits{
			API:      rate("CONNECTD_RATE_API", "600/1m"),
			APIPerIP: rate("CONNECTD_RATE_API_PER_IP", "3000/1m"),
			Browser:  rate("CONNECTD_RATE_BROWSER", "300/1m"),
			Login:    rate("CONNECTD_RATE_LOGIN", "60/1m"),
		},
		Mint:     rate("CONNECTD_RATE_MINT", "30/1m"),
		MintUser: rate("CONNECTD_RATE_MINT_USER", "120/1m"),
	}
	c.RateLimit.MaxWaiters = int(e.int32("CONNECTD_MAX_WAITERS_PER_CLIENT", 64, 1, 100000))
	const proxies = "CONNECTD_RATE_TRUSTED_PROXIES"
	for i, s := range strings.Split(e.str(proxies, ""), ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				e.fail(proxies, "entry %d must be an IP address or CIDR prefix such as 10.0.0.0/8", i+1)
				return
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		c.RateLimit.Public.TrustedProxies = append(c.RateLimit.Public.TrustedProxies, p.Masked())
	}
}
