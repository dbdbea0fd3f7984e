// Package cache is the in-memory cache connectd keeps in front of Postgres on
// its hot path (client keys, sealed credentials, consents): a size-capped map
// whose entries live at most a TTL and are dropped early when the database
// announces a change (Postgres LISTEN/NOTIFY, see Subscriber).
//
// The owner of a table owns its cache: vault caches connections, mcpauth
// client keys, connect consents. Each owner's writers send
// pg_notify(channel, Key(...)) in the transaction that changes a row, and one
// listener per process (Hub, run by internal/server) hands every notification
// to the owner's Subscriber.
//
// What a cached entry is worth depends on that listener. A Map caches
// nothing until the listener says the feed is live. While the listener is
// up, a change made on another replica reaches this cache within about a
// second (milliseconds in practice: when its notification arrives). When the
// listener's connection drops (noticed at once, or within about twice
// pingEvery if it dies without a word), the Map stops caching, since
// invalidations are no longer heard, but keeps serving the entries it holds
// until their own TTL, so that lookups keep working through a database
// outage: an entry is then stale for at most its TTL
// (CONNECTD_CREDENTIAL_CACHE_TTL and CONNECTD_CONSENT_CACHE_TTL, 30 s by
// default; CONNECTD_CLIENT_CACHE_TTL, 10 s). The moment LISTEN works again
// every entry's TTL ends, since whatever changed in the gap was announced to
// nobody: each is read again before it is a hit, and caching resumes. This
// process's own writers still drop their entries (Delete, DeleteFunc) while
// the feed is down. A cache that must not outlive the feed even within its
// TTL subscribes with SubscribeStrict.
//
// Stale-if-error: when a lookup's read from the database fails because the
// database cannot serve (db.Unavailable), Fallback answers from the entry
// still held for up to the Hub's stale-if-error time past its TTL
// (CONNECTD_CACHE_STALE_IF_ERROR, 60 s), never past the notAfter it was put
// with; an entry an invalidation dropped is not held, and any other answer
// of the database drops the entry. Once one read has found the database
// unreachable, Lookup answers such entries at once, without a read that
// would wait out its deadline again, letting one read a second through
// (the probe) until the database answers.
//
// It must never hold a secret in the clear: what vault caches is the sealed
// ciphertext, and keys are SHA-256 digests.
package cache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connectd/connectd/internal/db"
)

// Map is a TTL cache from K to V, safe for concurrent use. A nil *Map is a
// valid cache that never holds anything (caching disabled).
type Map[K comparable, V any] struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu   sync.RWMutex
	m    map[K]entry[V]
	gen  uint64 // bumped by every invalidation: fills begun before it are dropped
	live bool   // the invalidation feed is up

	hits, misses, stale, atOnce atomic.Uint64

	// policy is the stale-if-error policy of the Hub that keeps this Map
	// fresh (nil: none, no entry is ever answered past its TTL).
	policy atomic.Pointer[staleness]
}

type entry[V any] struct {
	v V
	// Unix nanoseconds (8 bytes an entry rather than time.Time's 24):
	// expires ends the entry's TTL (a hit); staleUntil ends the time it may
	// still answer a lookup whose read failed because the database is
	// unreachable (Fallback), never after notAfter.
	expires, staleUntil int64
}

// New returns a Map whose entries live at most ttl, holding at most max
// entries; nil (no caching) when ttl or max is not positive. now defaults to
// time.Now. The Map starts not live: SetLive(true) starts caching.
func New[K comparable, V any](ttl time.Duration, max int, now func() time.Time) *Map[K, V] {
	if ttl <= 0 || max <= 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	return &Map[K, V]{ttl: ttl, max: max, now: now, m: make(map[K]entry[V], min(max, 1024))}
}

// Get returns the value cached for k, if there is one and it has not expired.
func (c *Map[K, V]) Get(k K) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || c.now().UnixNano() >= e.expires {
		c.misses.Add(1)
		return zero, false
	}
	c.hits.Add(1)
	return e.v, true
}

// Lookup is Get, and while the database is known to be unreachable it also
// answers, at once, an entry past its TTL within its stale-if-error time:
// the answer Fallback would give once a read of k had failed, without
// making the caller wait for that read's deadline (2 s for an acquire, 5 s
// for a statement, on a database that hangs).
//
// The database is known unreachable from the moment a Fallback of any of
// the Hub's caches is given a db.Unavailable error until one of them is
// given the database's answer (Put, or another error: a probe's), or the
// Hub's listener is back. While it is, a lookup that finds only a stale
// entry a second after the last read that failed (or the last probe) answers
// not ok, so that its caller reads the database: the probe that finds it
// back, one a second at most. A
// lookup answered this way is counted as stale (and as a miss), like
// Fallback's.
func (c *Map[K, V]) Lookup(ctx context.Context, k K) (V, bool) {
	if v, ok := c.Get(k); ok {
		return v, true
	}
	return c.staleAtOnce(ctx, k)
}

// staleAtOnce is Lookup past a miss.
func (c *Map[K, V]) staleAtOnce(ctx context.Context, k K) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	p := c.policy.Load()
	if p.window() <= 0 || p.down.Load() == 0 {
		return zero, false
	}
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	now := c.now()
	if !ok || now.UnixNano() >= e.staleUntil || p.probe(now) {
		return zero, false
	}
	c.stale.Add(1)
	c.atOnce.Add(1)
	p.served(ctx, now)
	return e.v, true
}

// Gen returns the current generation. Read it before loading what will be
// passed to Put: if anything is invalidated in between, Put drops the value,
// which may predate the change.
func (c *Map[K, V]) Gen() uint64 {
	if c == nil {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// Put caches v under k for the TTL, or until notAfter when that is earlier
// and not zero; past its TTL the entry may still answer for the
// stale-if-error time (Fallback), never past notAfter.
//
// v is what the database answered just now, so it replaces whatever the
// Map held for k in every case. When an invalidation happened since gen was
// read, v may predate it: it is not stored, and the old entry is dropped.
// When the Map is not live (an invalidation of v could not be heard), v is
// kept for Fallback only, never answered by Get.
func (c *Map[K, V]) Put(k K, v V, gen uint64, notAfter time.Time) {
	if c == nil {
		return
	}
	now := c.now()
	expires := now.Add(c.ttl)
	if !notAfter.IsZero() && notAfter.Before(expires) {
		expires = notAfter
	}
	staleUntil := expires
	p := c.policy.Load()
	p.answered()
	if w := p.window(); w > 0 && expires.Equal(now.Add(c.ttl)) {
		staleUntil = expires.Add(w)
		if !notAfter.IsZero() && notAfter.Before(staleUntil) {
			staleUntil = notAfter
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || !now.Before(staleUntil) || (!c.live && p.window() <= 0) {
		delete(c.m, k)
		return
	}
	if !c.live {
		expires = now // not a hit: only an answer while the database is unreachable
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		c.evictLocked(now)
	}
	c.m[k] = entry[V]{v: v, expires: expires.UnixNano(), staleUntil: staleUntil.UnixNano()}
}

// evictLocked drops the entries past their stale-if-error time, then those
// past their TTL, then arbitrary ones (map order) down to 90 % of the cap,
// so memory stays bounded under any load.
func (c *Map[K, V]) evictLocked(now time.Time) {
	t := now.UnixNano()
	for k, e := range c.m {
		if t >= e.staleUntil {
			delete(c.m, k)
		}
	}
	for k, e := range c.m {
		if len(c.m) < c.max*9/10 {
			return
		}
		if t >= e.expires {
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

// Fallback is what a lookup of k answers when reading k from the database
// failed with err, after a Get that missed.
//
// When err says the database cannot serve now (db.Unavailable: refused or
// reset connections, an acquire or statement deadline) and the Map holds an
// entry for k within its stale-if-error time — past its TTL by less than
// the Hub's StaleIfError, never past the notAfter it was put with — that
// entry is the answer (ok), counted as a stale answer and logged once per
// outage. An entry an invalidation dropped is not held, so it is never
// answered.
//
// Any other error is the database's own answer (no such row, a refusal, a
// row that does not decode): whatever the Map holds for k is dropped, so it
// is never answered stale once the database said otherwise. A caller that
// went away (context.Canceled) changes nothing.
func (c *Map[K, V]) Fallback(ctx context.Context, k K, err error) (V, bool) {
	var zero V
	if c == nil || err == nil || errors.Is(err, context.Canceled) {
		return zero, false
	}
	p := c.policy.Load()
	if !db.Unavailable(err) {
		p.answered()
		c.mu.RLock()
		_, held := c.m[k]
		c.mu.RUnlock()
		if held {
			c.mu.Lock()
			delete(c.m, k)
			c.mu.Unlock()
		}
		return zero, false
	}
	if p.window() <= 0 {
		return zero, false
	}
	now := c.now()
	p.unreachable(now)
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || now.UnixNano() >= e.staleUntil {
		return zero, false
	}
	c.stale.Add(1)
	p.served(ctx, now)
	return e.v, true
}

// Delete drops k.
func (c *Map[K, V]) Delete(k K) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.m, k)
}

// DeleteFunc drops every entry for which drop returns true.
func (c *Map[K, V]) DeleteFunc(drop func(K, V) bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k, e := range c.m {
		if drop(k, e.v) {
			delete(c.m, k)
		}
	}
}

// SetLive tells the Map whether the feed of invalidations is up. The
// listener calls it with true once it is listening and with false as soon as
// its connection drops.
//
// SetLive(false) stops caching but keeps the entries held, served until their
// own TTL (and by Fallback for their stale-if-error time): they may miss a
// change made elsewhere for that long, which is the price of answering
// through a database outage. Delete and DeleteFunc still apply.
// SetLive(true) starts caching again and ends the TTL of every entry held:
// the notifications sent while nobody listened are lost, so nothing cached
// before the gap is answered again before it is read again from the
// database. Until then an entry may still answer a lookup whose read fails
// because the database is unreachable (Fallback), within its stale-if-error
// time.
func (c *Map[K, V]) SetLive(live bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++ // a fill begun before the change is not stored
	c.live = live
	if live {
		now := c.now().UnixNano()
		for k, e := range c.m {
			if e.expires > now {
				e.expires = now
				c.m[k] = e
			}
		}
	}
}

// Stats are a Map's counters, for metrics.
type Stats struct {
	Hits, Misses uint64 // lookups since start
	// Stale counts the lookups answered past their entry's TTL because the
	// database was unreachable (Fallback, Lookup); they are counted as
	// misses too. StaleAtOnce counts those among them Lookup answered
	// without a read, the database being known unreachable.
	Stale, StaleAtOnce uint64
	Entries            int // entries held now (expired ones included until evicted)
}

// Stats returns the Map's counters; zero for a nil Map.
func (c *Map[K, V]) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.RLock()
	n := len(c.m)
	c.mu.RUnlock()
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Stale: c.stale.Load(), StaleAtOnce: c.atOnce.Load(), Entries: n}
}

// Digest names a cached row by the SHA-256 of its key columns, each
// length-prefixed so that no two column lists share a digest. It is both the
// Map key and, hex-encoded (Payload), the notification payload: fixed-size
// whatever the columns hold, and far below NOTIFY's 8000-byte limit.
type Digest [sha256.Size]byte

// Key returns the Digest of parts.
func Key(parts ...string) Digest {
	n := 0
	for _, p := range parts {
		n += 4 + len(p)
	}
	var stack [256]byte
	b := stack[:0]
	if n > len(stack) {
		b = make([]byte, 0, n)
	}
	for _, p := range parts {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return sha256.Sum256(b)
}

// Payload is d as a notification payload.
func (d Digest) Payload() string { return hex.EncodeToString(d[:]) }

// ParseDigest reads a notification payload made by Payload.
func ParseDigest(payload string) (Digest, bool) {
	var d Digest
	if len(payload) != 2*len(d) {
		return d, false
	}
	if _, err := hex.Decode(d[:], []byte(payload)); err != nil {
		return d, false
	}
	return d, true
}

// Subscriber is what the owner of a cache hands the process's notification
// listener: the channel its writers notify on, what to do with one
// notification, and what to do when the feed comes up or goes down
// (normally Map.SetLive).
type Subscriber struct {
	Channel    string
	Invalidate func(payload string)
	SetLive    func(live bool)
	// Caches are the Maps the subscriber keeps fresh that may answer past
	// their TTL while the database is unreachable (Map.Fallback): the Hub
	// gives them its stale-if-error time (Hub.SetStaleIfError). A Map not
	// listed never answers past its TTL.
	Caches []Held
}

// Held is a cache a Subscriber lists in Caches: a *Map.
type Held interface{ attach(*staleness) }

func (c *Map[K, V]) attach(p *staleness) {
	if c != nil {
		c.policy.Store(p)
	}
}

// Flush is the payload that makes a subscriber drop everything it caches
// (sent, for instance, after a bulk change too large to name row by row).
const Flush = "*"

// Subscribe is the Subscriber of a cache keyed by Digest whose writers notify
// on channel with the changed key's digest (Digest.Payload) or Flush: a
// digest drops that entry; Flush, or anything this version does not
// understand, drops them all. While the feed is down m serves what it holds
// until its TTL (Map.SetLive). m may be nil (the cache is disabled).
func Subscribe[V any](channel string, m *Map[Digest, V]) Subscriber {
	return Subscriber{Channel: channel, SetLive: m.SetLive, Caches: []Held{m}, Invalidate: func(payload string) {
		if d, ok := ParseDigest(payload); ok {
			m.Delete(d)
			return
		}
		m.DeleteFunc(func(Digest, V) bool { return true })
	}}
}

// SubscribeStrict is Subscribe for a cache that must not answer from memory
// once the feed that keeps it fresh is down: m is also emptied the moment the
// feed drops, so every lookup goes to the database until LISTEN works again,
// and a change made elsewhere is missed for no longer than the listener
// takes to notice the drop (about a second). Browser sessions need this
// (DESIGN invariant 12: ending a session takes effect on every replica
// within a second, whatever the fault); it costs them little, since a page
// needs the database for its own work anyway.
func SubscribeStrict[V any](channel string, m *Map[Digest, V]) Subscriber {
	s := Subscribe(channel, m)
	s.Caches = nil // never answered past the feed, so never stale either
	s.SetLive = func(live bool) {
		m.SetLive(live)
		if !live {
			m.DeleteFunc(func(Digest, V) bool { return true })
		}
	}
	return s
}
