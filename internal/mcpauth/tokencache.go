package mcpauth

import (
	"crypto/sha256"
	"slices"
	"time"
	"unsafe"

	"github.com/connectd/connectd/internal/cache"
)

// tokenCache remembers access tokens that verified, keyed by their SHA-256,
// until they expire, so a token an MCP server presents on every tool call costs
// one signature check, not one per call. It never holds the raw token. A hit
// re-checks everything that can differ between two presentations of the same
// token: the audience (the calling client's resources) and the time window.
// It is a cache.Map that is live from the start: nothing in the database can
// change a verified token, so there is nothing to be notified of.
type tokenCache struct {
	m    *cache.Map[[32]byte, cachedToken]
	skew time.Duration
}

type cachedToken struct {
	id  Identity
	aud []string
	nbf int64 // Unix nanoseconds; 0 when the token had none
}

// maxTokenCacheTTL bounds an entry whatever the token's exp says.
const maxTokenCacheTTL = 24 * time.Hour

func newTokenCache(max int, skew time.Duration, now func() time.Time) *tokenCache {
	m := cache.New[[32]byte, cachedToken](maxTokenCacheTTL, max, now)
	if m == nil {
		return nil
	}
	m.SetLive(true)
	return &tokenCache{m: m, skew: skew}
}

// get returns the identity of a cached token still valid at now for one of
// audiences. ok is false on a miss; wrongAudience reports a hit whose audience
// does not match, which must be refused like a fresh check would.
func (c *tokenCache) get(key [32]byte, audiences []string, now time.Time) (id Identity, ok, wrongAudience bool) {
	if c == nil {
		return Identity{}, false, false
	}
	e, found := c.m.Get(key) // entries expire at exp + skew, as the full check does
	if !found || (e.nbf != 0 && now.Add(c.skew).UnixNano() < e.nbf) {
		return Identity{}, false, false // let the full check say why
	}
	for _, a := range audiences {
		if slices.Contains(e.aud, a) {
			return e.id, true, false
		}
	}
	return Identity{}, false, true
}

// stats reports the cache's counters (zero when disabled).
func (c *tokenCache) stats() cache.Stats {
	if c == nil {
		return cache.Stats{}
	}
	return c.m.Stats()
}

// put remembers a verified token until its exp (plus the skew the full check
// allows).
func (c *tokenCache) put(key [32]byte, e cachedToken) {
	if c == nil || e.id.Expiry.IsZero() {
		return
	}
	c.m.Put(key, e, c.m.Gen(), e.id.Expiry.Add(c.skew))
}

// tokenKey is the SHA-256 of raw, hashed where it lies: []byte(raw) would
// copy the token to the heap first (~0.7 KB on every lookup, the largest
// allocation of a warm token read), and sha256 only reads its input.
func tokenKey(raw string) [32]byte {
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(raw), len(raw)))
}
