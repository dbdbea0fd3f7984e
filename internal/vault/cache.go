package vault

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/cache"
)

// The vault caches what Token reads — a connection's row with its *sealed*
// credential, never the plaintext — so a lookup opens one AES-GCM ciphertext
// without a database round trip. Every write to a connection (Put, refresh,
// reauthorization_required, delete, rewrap) sends, in its own transaction,
// pg_notify(InvalidationChannel, key of the connection), and drops its own
// replica's entry right after the commit; the other replicas drop theirs when
// the notification arrives (see package cache). The cache is live only while
// the process's listener is (CacheSubscriber); a Store nobody subscribes for
// never caches.

// InvalidationChannel is the NOTIFY channel of connection changes. A payload
// is the connection's cache.Key(issuer, subject, provider) in hex, or
// cache.Flush.
const InvalidationChannel = "connectd_vault"

const (
	notifySQL = `SELECT pg_notify($1, $2)`
	// notifyManySQL announces several changes in one round trip.
	notifyManySQL = `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`
)

func connKey(user UserRef, provider string) cache.Digest {
	return cache.Key(user.Issuer, user.Subject, provider)
}

// notifyChanged announces in tx that the user's connection to provider
// changed; the notification is delivered to every replica on commit.
func notifyChanged(ctx context.Context, tx pgx.Tx, user UserRef, provider string) error {
	if _, err := tx.Exec(ctx, notifySQL, InvalidationChannel, connKey(user, provider).Payload()); err != nil {
		return fmt.Errorf("vault: notify change: %w", err)
	}
	return nil
}

// forget drops this replica's cached copy after a committed (or failed)
// write; the others learn of it from the notification.
func (s *Store) forget(user UserRef, provider string) {
	if s.cache != nil {
		s.cache.Delete(connKey(user, provider))
	}
}

// loadCached is load for Token: from the cache when it holds the row.
func (s *Store) loadCached(ctx context.Context, user UserRef, provider string) (*row, error) {
	if s.cache == nil {
		return s.load(ctx, s.pool, user, provider, false)
	}
	k := connKey(user, provider)
	if r, ok := s.cache.Get(k); ok {
		return r, nil
	}
	gen := s.cache.Gen()
	r, err := s.load(ctx, s.pool, user, provider, false)
	if err != nil {
		return nil, err // "not connected" is not cached: a Put needs no invalidation to be seen
	}
	r.ad = associated(r) // before the row is shared
	s.cache.Put(k, r, gen, time.Time{})
	return r, nil
}

// CacheSubscriber is what the process's notification listener needs to keep
// this Store's cache fresh (see package cache).
func (s *Store) CacheSubscriber() cache.Subscriber {
	return cache.Subscriber{Channel: InvalidationChannel, Invalidate: s.invalidate, SetLive: s.cache.SetLive}
}

func (s *Store) invalidate(payload string) {
	if d, ok := cache.ParseDigest(payload); ok {
		s.cache.Delete(d)
		return
	}
	// cache.Flush, or anything this version does not understand.
	s.cache.DeleteFunc(func(cache.Digest, *row) bool { return true })
}

// CacheStats reports the credential cache's counters (zero when disabled).
func (s *Store) CacheStats() cache.Stats { return s.cache.Stats() }
