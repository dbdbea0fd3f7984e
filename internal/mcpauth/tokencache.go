package mcpauth

import (
	"crypto/sha256"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connectd/connectd/internal/cache"
)

// tokenCache remembers access tokens that verified, keyed by their SHA-256,
// until they expire, so a token an MCP server presents on every tool call costs
// one signature check, not one per call. It never holds the raw token. A hit
// re-checks everything that can differ between two presentations of the same
// token: the audience (the calling client's resources) and the time window.
type tokenCache struct {
	mu  sync.Mutex
	max int
	m   map[[32]byte]cachedToken

	hits, misses atomic.Uint64 // for metrics
}

type cachedToken struct {
	id  Identity
	aud []string
	nbf time.Time // zero when the token had none
}

func newTokenCache(max int) *tokenCache {
	if max <= 0 {
		return nil
	}
	return &tokenCache{max: max, m: make(map[[32]byte]cachedToken, min(max, 1024))}
}

// get returns the identity of a cached token still valid at now (with skew)
// for one of audiences. ok is false on a miss; wrongAudience reports a hit
// whose audience does not match, which must be refused like a fresh check would.
func (c *tokenCache) get(key [32]byte, audiences []string, now time.Time, skew time.Duration) (id Identity, ok, wrongAudience bool) {
	if c == nil {
		return Identity{}, false, false
	}
	c.mu.Lock()
	e, found := c.m[key]
	c.mu.Unlock()
	if !found {
		c.misses.Add(1)
		return Identity{}, false, false
	}
	if !now.Before(e.id.Expiry.Add(skew)) || (!e.nbf.IsZero() && now.Add(skew).Before(e.nbf)) {
		c.mu.Lock()
		delete(c.m, key)
		c.mu.Unlock()
		c.misses.Add(1)
		return Identity{}, false, false // let the full check say why
	}
	for _, a := range audiences {
		if slices.Contains(e.aud, a) {
			c.hits.Add(1)
			return e.id, true, false
		}
	}
	c.hits.Add(1) // answered from the cache: refused
	return Identity{}, false, true
}

// stats reports the cache's counters (zero when disabled).
func (c *tokenCache) stats() cache.Stats {
	if c == nil {
		return cache.Stats{}
	}
	c.mu.Lock()
	n := len(c.m)
	c.mu.Unlock()
	return cache.Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Entries: n}
}

// put remembers a verified token. When full it drops expired entries, then
// arbitrary ones (map order), so memory stays bounded under any load.
func (c *tokenCache) put(key [32]byte, e cachedToken, now time.Time) {
	if c == nil || e.id.Expiry.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, v := range c.m {
			if !now.Before(v.id.Expiry) {
				delete(c.m, k)
			}
		}
		for k := range c.m {
			if len(c.m) < c.max*9/10 {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[key] = e
}

func tokenKey(raw string) [32]byte { return sum256(raw) }

// sum256 is sha256.Sum256 of a string without the copy to the heap that
// []byte(s) costs for anything longer than 32 bytes: a token or key hashed on
// every request is copied to the stack instead.
func sum256(s string) [32]byte {
	var buf [2048]byte
	if len(s) <= len(buf) {
		return sha256.Sum256(buf[:copy(buf[:], s)])
	}
	return sha256.Sum256([]byte(s))
}
