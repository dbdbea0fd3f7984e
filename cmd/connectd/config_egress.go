package main

import (
	"strings"

	"github.com/connectd/connectd/internal/egress"
)

// loadEgress reads the egress proxies (loadEgressProxies) and
// CONNECTD_EGRESS_ALLOW_HOSTS. Outside dev mode any value is
// an error rather than ignored: a production deployment must not believe it
// can reach an internal host.
func (c *Config) loadEgress(e *env) {
	c.loadEgressProxies(e)
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

// egressProxyVars are the per-class egress proxy variables, each overriding
// CONNECTD_EGRESS_PROXY for its class ("none": that class goes direct).
var egressProxyVars = []struct {
	name  string
	class egress.Class
}{
	{"CONNECTD_EGRESS_PROXY_TOKEN", egress.ClassToken},
	{"CONNECTD_EGRESS_PROXY_REFRESH", egress.ClassRefresh},
	{"CONNECTD_EGRESS_PROXY_REVOKE", egress.ClassRevoke},
	{"CONNECTD_EGRESS_PROXY_API", egress.ClassAPI},
	{"CONNECTD_EGRESS_PROXY_WEBHOOKS", egress.ClassWebhooks},
}

// loadEgressProxies reads CONNECTD_EGRESS_PROXY (every outbound call), the
// per-class overrides and CONNECTD_EGRESS_PROXY_USER/_PASSWORD (the Basic
// credential of every proxy whose URL carries none). A bad value is refused
// naming the variable, never repeating it (it may hold a password).
func (c *Config) loadEgressProxies(e *env) {
	user, password := e.str("CONNECTD_EGRESS_PROXY_USER", ""), e.getenv("CONNECTD_EGRESS_PROXY_PASSWORD")
	if password != "" && user == "" {
		e.fail("CONNECTD_EGRESS_PROXY_USER", "is required with CONNECTD_EGRESS_PROXY_PASSWORD")
	}
	used := false
	parse := func(name string) (p *egress.Proxy, set bool) {
		raw := e.str(name, "")
		if raw == "" {
			return nil, false
		}
		if strings.EqualFold(raw, "none") {
			return nil, true
		}
		p, err := egress.ParseProxy(raw)
		if err != nil {
			e.fail(name, "%s", err)
			return nil, false
		}
		used = true
		if user != "" && !p.HasCredential() {
			p = p.WithCredential(user, password)
		}
		return p, true
	}
	c.Egress.Proxies.Default, _ = parse("CONNECTD_EGRESS_PROXY")
	for _, v := range egressProxyVars {
		if p, set := parse(v.name); set {
			if c.Egress.Proxies.Class == nil {
				c.Egress.Proxies.Class = map[egress.Class]*egress.Proxy{}
			}
			c.Egress.Proxies.Class[v.class] = p
		}
	}
	if user != "" && !used && !e.failed("CONNECTD_EGRESS_PROXY_USER") {
		e.fail("CONNECTD_EGRESS_PROXY_USER", "is set but no CONNECTD_EGRESS_PROXY* variable names a proxy")
	}
}
