package main

import "time"

// CacheConfig configures the in-memory caches of the token path (see
// docs/scaling.md): changes reach every replica's caches by Postgres
// LISTEN/NOTIFY within milliseconds; the TTLs only bound staleness should a
// notification be lost unnoticed.
type CacheConfig struct {
	// CredentialTTL is how long a connection's sealed credential and the
	// user's consents may be used from memory; 0 (or
	// CONNECTD_CREDENTIAL_CACHE=false) disables both caches
	// (CONNECTD_CREDENTIAL_CACHE_TTL).
	CredentialTTL time.Duration
	// CredentialSize caps each of the two caches, in entries
	// (CONNECTD_CREDENTIAL_CACHE_SIZE).
	CredentialSize int
	// ClientKeyTTL is how long an authenticated client key is remembered; 0
	// disables the cache (CONNECTD_CLIENT_CACHE_TTL).
	ClientKeyTTL time.Duration
}

// loadCache reads the cache variables.
func (c *Config) loadCache(e *env) {
	c.Cache = CacheConfig{
		CredentialTTL:  e.duration("CONNECTD_CREDENTIAL_CACHE_TTL", 30*time.Second, 0, time.Hour),
		CredentialSize: int(e.int32("CONNECTD_CREDENTIAL_CACHE_SIZE", 50_000, 1, 10_000_000)),
		ClientKeyTTL:   e.duration("CONNECTD_CLIENT_CACHE_TTL", 10*time.Second, 0, time.Hour),
	}
	if !e.bool("CONNECTD_CREDENTIAL_CACHE", true) {
		c.Cache.CredentialTTL = 0
	}
}
