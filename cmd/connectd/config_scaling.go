package main

import (
	"net/url"
	"time"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/server"
)

// loadScaling reads the variables of docs/scaling.md: the caches, and the
// listener's own database URL.
func (c *Config) loadScaling(e *env) {
	c.DatabaseListenURL = e.str("CONNECTD_DATABASE_LISTEN_URL", "")
	if c.DatabaseListenURL != "" {
		if u, err := url.Parse(c.DatabaseListenURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			e.fail("CONNECTD_DATABASE_LISTEN_URL", "must be a postgres:// or postgresql:// URL")
		}
	}
	c.Cache = server.CacheConfig{
		CredentialTTL: e.duration("CONNECTD_CREDENTIAL_CACHE_TTL", 30*time.Second, 0, time.Hour),
		ConsentTTL:    e.duration("CONNECTD_CONSENT_CACHE_TTL", 30*time.Second, 0, time.Hour),
		Size:          int(e.int32("CONNECTD_CACHE_SIZE", 50_000, 1, 10_000_000)),
		ClientKeyTTL:  e.duration("CONNECTD_CLIENT_CACHE_TTL", 10*time.Second, 0, time.Hour),
		StaleIfError:  e.duration("CONNECTD_CACHE_STALE_IF_ERROR", cache.DefaultStaleIfError, 0, time.Hour),
	}
	if c.Cache.StaleIfError == 0 {
		c.Cache.StaleIfError = -1 // 0 turns it off; the zero Config field means the default
	}
	if !e.bool("CONNECTD_CREDENTIAL_CACHE", true) {
		c.Cache.CredentialTTL = 0
	}
}
