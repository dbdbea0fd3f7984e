package main

import (
	"net/netip"
	"strings"

	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/web"
)

// loadRateLimit reads the CONNECTD_RATE_* variables.
func (c *Config) loadRateLimit(e *env) {
	rate := func(name, def string) web.Rate {
		r, err := web.ParseRate(e.str(name, def))
		if err != nil {
			e.fail(name, "%s", err)
		}
		return r
	}
	c.RateLimit = server.RateLimitConfig{
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
