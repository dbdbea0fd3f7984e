package main

import (
	"net/url"
	"time"
)

// CacheConfig configures the in-memory caches of the token path (see
// docs/scaling.md). Changes reach every replica's caches through Postgres
// LISTEN/NOTIFY within milliseconds; a TTL only bounds staleness should a
// notification be lost in a way the listener cannot see. A TTL of 0 disables
// that cache.
type CacheConfig struct {
	// CredentialTTL: how long a connection's sealed credential (never the
	// plaintext) may be used from memory. CONNECTD_CREDENTIAL_CACHE=false
	// sets it to 0 (CONNECTD_CREDENTIAL_CACHE_TTL).
	CredentialTTL time.Duration
	// ConsentTTL: how long a user's consents for a provider may be used from
	// memory (CONNECTD_CONSENT_CACHE_TTL).
	ConsentTTL time.Duration
	// Size caps the credential and the consent cache, in entries each
	// (CONNECTD_CACHE_SIZE).
	Size int
	// ClientKeyTTL: how long an authenticated client key is remembered
	// (CONNECTD_CLIENT_CACHE_TTL).
	ClientKeyTTL time.Duration
}

// loadScaling reads the variables of docs/scaling.md: the caches, and the
// listener's own database URL.
func (c *Config) loadScaling(e *env) {
	c.DatabaseListenURL = e.str("CONNECTD_DATABASE_LISTEN_URL", "")
	if c.DatabaseListenURL != "" {
		if u, err := url.Parse(c.DatabaseListenURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			e.fail("CONNECTD_DATABASE_LISTEN_URL", "must be a postgres:// or postgresql:// URL")
		}
	}
	c.Cache = CacheConfig{
		CredentialTTL: e.duration("CONNECTD_CREDENTIAL_CACHE_TTL", 30*time.Second, 0, time.Hour),
		ConsentTTL:    e.duration("CONNECTD_CONSENT_CACHE_TTL", 30*time.Second, 0, time.Hour),
		Size:          int(e.int32("CONNECTD_CACHE_SIZE", 50_000, 1, 10_000_000)),
		ClientKeyTTL:  e.duration("CONNECTD_CLIENT_CACHE_TTL", 10*time.Second, 0, time.Hour),
	}
	if !e.bool("CONNECTD_CREDENTIAL_CACHE", true) {
		c.Cache.CredentialTTL = 0
	}
}
