package vault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/identity"
)

// The vault caches what Token reads — a connection's row with its *sealed*
// credential, never the plaintext — so a lookup opens one AES-GCM ciphertext
// without a database round trip. Every write to a connection (Put, refresh,
// reauthorization_required, delete, rewrap) sends
// pg_notify(InvalidationChannel, key of the connection) in the statement that
// changes the row (store.go), so the notification commits with the change,
// and drops its own replica's entry right after the commit; the other
// replicas drop theirs when the notification arrives (see package cache).
// The cache is live only while the process's listener is (CacheSubscriber);
// a Store nobody subscribes for never caches.

// InvalidationChannel is the NOTIFY channel of connection changes. A payload
// is the connection's key (connKey) in hex, or cache.Flush.
const InvalidationChannel = "connectd_vault"

const (
	// notifyChangedSQL ends the writes of store.go: "SELECT pg_notify(channel,
	// " followed by the payload parameter and ") FROM changed".
	notifyChangedSQL = `SELECT pg_notify('` + InvalidationChannel + `', `
	// notifyManySQL announces several changes in one round trip (rewrap).
	notifyManySQL = `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`
)

// connKey is a connection's cache key and, as its Payload, the notification
// of a change to it: its id, under its organization, user and provider (a
// lookup names all four, so an id of another user's connection, or of
// another organization's, never finds its row). The default
// organization's key is the one from before organizations (four parts;
// cache.Key's parts are length-prefixed, so it is no other organization's):
// the notifications of replicas still running that code keep reaching it.
func connKey(org string, user identity.User, provider, id string) cache.Digest {
	if org == DefaultOrg {
		return cache.Key(user.Issuer, user.Subject, provider, id)
	}
	return cache.Key(user.Issuer, user.Subject, provider, id, org)
}

// forget drops this replica's cached copy of the handle's connection id
// after a committed (or failed) write; the others learn of it from the
// notification.
func (s *Store) forget(user identity.User, provider, id string) {
	s.forgetIn(s.org, user, provider, id)
}

// forgetIn is forget for a connection of org (the deployment-wide passes:
// rewrap, backfill).
func (s *Store) forgetIn(org string, user identity.User, provider, id string) {
	if s.cache != nil && id != "" {
		s.cache.Delete(connKey(org, user, provider, id))
	}
}

// selectTokenRow reads what Token needs of a connection and nothing more:
// the sealed credential is authoritative for scopes and expiry, and issuer,
// subject and provider are the key; the row's scopes and account hash (kept
// with the credential by every write) are what a release decision is made
// on before the credential is opened.
const selectTokenRow = `SELECT id, status, ciphertext, refreshed_at, scopes, account_hash, org_id, coalesce(app_id, '') FROM connections
	WHERE issuer = $1 AND subject = $2 AND provider = $3 AND id = $4 AND org_id = $5`

// tokenRow is what Token needs of a connection, and what the credential
// cache keeps of it: the sealed credential, never the plaintext. It is held
// by value in the cache's map, so an entry costs the map slot, the id and
// the ciphertext (about 400 bytes for a small credential).
type tokenRow struct {
	id          string
	status      Status
	refreshedAt time.Time
	ciphertext  []byte // shared by every reader: never modified
	scopes      []string
	accountHash []byte // nil: a row from before account hashes were kept
	org         string // the connection's organization (the key's too)
	appID       string // its provider app ("": the deployment's); a new app is a write, which invalidates
}

// held is what r holds, for a release decision.
func (r tokenRow) held() Held {
	return Held{ID: r.id, Scopes: r.scopes, Account: r.accountHash, Org: r.org, AppID: r.appID}
}

// loadForToken is load for Token, from the cache when it holds the row. An
// empty id is the user's only connection at provider.
func (s *Store) loadForToken(ctx context.Context, user identity.User, provider, id string) (tokenRow, error) {
	if id == "" {
		var err error
		if id, err = s.onlyID(ctx, s.pool, user, provider); err != nil { // unscoped: the token read (rls.go)
			return tokenRow{}, err
		}
	}
	if s.cache == nil {
		return s.loadTokenRow(ctx, user, provider, id)
	}
	k := connKey(s.org, user, provider, id)
	if r, ok := s.cache.Lookup(ctx, k); ok && r.org == s.org {
		return r, nil
	}
	gen := s.cache.Gen()
	r, err := s.loadTokenRow(ctx, user, provider, id)
	if err != nil {
		// The database unreachable: the row as last read, within the
		// stale-if-error time (never one a notification dropped). "Not
		// connected" is not cached, and drops what was.
		if r, ok := s.cache.Fallback(ctx, k, err); ok && r.org == s.org {
			return r, nil
		}
		return tokenRow{}, err
	}
	s.cache.Put(k, r, gen, time.Time{})
	return r, nil
}

func (s *Store) loadTokenRow(ctx context.Context, user identity.User, provider, id string) (tokenRow, error) {
	var r tokenRow
	var status string
	var refreshedAt *time.Time
	// Unscoped (rls.go): the token read's statement, which names org_id. A
	// read: once more on a live connection if its own died under it (a
	// restart's, before its answer).
	err := db.Read(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, selectTokenRow, user.Issuer, user.Subject, provider, id, s.org).Scan(&r.id, &status,
			&r.ciphertext, &refreshedAt, &r.scopes, &r.accountHash, &r.org, &r.appID)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return tokenRow{}, fmt.Errorf("%w to %s", ErrNotConnected, provider)
	}
	if err != nil {
		return tokenRow{}, fmt.Errorf("vault: read connection: %w", err)
	}
	r.status = Status(status)
	if refreshedAt != nil {
		r.refreshedAt = *refreshedAt
	}
	return r, nil
}

// CacheSubscriber is what the process's notification listener needs to keep
// this Store's cache fresh (see package cache).
func (s *Store) CacheSubscriber() cache.Subscriber {
	return cache.Subscribe(InvalidationChannel, s.cache)
}

// CacheStats reports the credential cache's counters (zero when disabled).
func (s *Store) CacheStats() cache.Stats { return s.cache.Stats() }
