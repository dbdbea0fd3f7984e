package clientauth

import (
	"context"
	"time"

	"github.com/connectd/connectd/internal/cache"
)

// Client keys are remembered briefly (ClientsConfig.CacheTTL), by the key's
// SHA-256 as the database stores it, so the /v1 hot path authenticates a
// client without a query. Unknown keys are never remembered. An entry lives
// no longer than its key (a rotated-away key stops at the end of its
// overlap), and disabling a client or rotating its keys sends
// pg_notify(InvalidationChannel, client id) in the same statement or
// transaction: this process forgets the client at once, the others when the
// notification arrives (see package cache). Last-use bookkeeping (touch) is
// unchanged: at most one write per client per minute.

// InvalidationChannel is the NOTIFY channel of client changes; the payload is
// the client id, or cache.Flush.
const InvalidationChannel = "connectd_clients"

const notifySQL = `SELECT pg_notify($1, $2)`

// cachedKey is an authenticated key's client, as of when it was read.
type cachedKey struct {
	client Client
}

func (c *Clients) cached(ctx context.Context, hash [32]byte) (Client, bool) {
	e, ok := c.cache.Lookup(ctx, hash)
	return e.client, ok
}

// stale is the key's cached client when its read failed with err because
// the database is unreachable (cache.Map.Fallback); any other error drops
// what the cache held for it.
func (c *Clients) stale(ctx context.Context, hash [32]byte, err error) (Client, bool) {
	e, ok := c.cache.Fallback(ctx, hash, err)
	return e.client, ok
}

// remember caches a key read at generation gen, until the key expires.
func (c *Clients) remember(hash [32]byte, cl Client, keyExpires *time.Time, gen uint64) {
	var notAfter time.Time
	if keyExpires != nil {
		notAfter = *keyExpires
	}
	c.cache.Put(hash, cachedKey{client: cl}, gen, notAfter)
}

// forget drops every cached key of client id, then tells the OnChange
// watchers, so whoever asks again reads the change.
func (c *Clients) forget(id string) {
	c.cache.DeleteFunc(func(_ [32]byte, e cachedKey) bool { return id == cache.Flush || e.client.ID == id })
	c.changed(id)
}

// changed tells the OnChange watchers that client id (or cache.Flush: any)
// may have changed.
func (c *Clients) changed(id string) {
	c.watchMu.Lock()
	watchers := c.watchers
	c.watchMu.Unlock()
	for _, fn := range watchers {
		fn(id)
	}
}

// OnChange registers fn to be told of every change of a client (disabled,
// keys rotated, switched proxy-only, rules changed) made through any
// replica: its id, or cache.Flush when any client may have changed. fn
// runs on the notification listener's goroutine, after this process's key
// cache forgot the client: it must not block. The hub has one subscriber per
// channel (this cache), so those who hold state per client — connect's
// long-polls — learn of changes here.
func (c *Clients) OnChange(fn func(id string)) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	c.watchers = append(c.watchers, fn)
}

// CacheSubscriber is what the process's notification listener needs to keep
// the client-key cache fresh (see package cache).
func (c *Clients) CacheSubscriber() cache.Subscriber {
	return cache.Subscriber{Channel: InvalidationChannel, Invalidate: c.forget, Caches: []cache.Held{c.cache}, SetLive: func(live bool) {
		c.cache.SetLive(live)
		if live { // changes made while nobody listened were not announced
			c.changed(cache.Flush)
		}
	}}
}

// CacheStats reports the client-key cache's counters (zero when disabled).
func (c *Clients) CacheStats() cache.Stats { return c.cache.Stats() }
