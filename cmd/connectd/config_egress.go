package main

import (
	"strings"

	"github.com/connectd/connectd/internal/egress"
)

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
