package org

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/provider"
)

// Resolved is the OAuth app an organization uses at a provider.
type Resolved struct {
	// AppID is the app's id (provider_apps.id), what a connection made
	// through it records as its app_id; "" for the deployment's shared app
	// (app_id NULL).
	AppID string
	OAuth provider.OAuth
}

// cachedApp is what the resolve cache holds: the app's row as read, its
// secret still sealed (package cache holds no secret in the clear), or no
// app (the shared one, when allowed). Opening and building the provider
// from it is a few microseconds of memory work, not a query.
type cachedApp struct {
	org      string
	appID    string // "": the deployment's app
	provider string
	clientID string
	sealed   []byte
}

const (
	// One round trip: whether the organization exists, and its app at the
	// provider if it has one (the UNIQUE (org_id, provider) index).
	resolveSQL = `SELECT a.id, a.client_id, a.secret
		FROM organizations o LEFT JOIN provider_apps a ON a.org_id = o.id AND a.provider = $2
		WHERE o.id = $1`
	byIDSQL = `SELECT org_id, provider, client_id, secret FROM provider_apps WHERE id = $1`
)

// Resolve is the one answer to "which OAuth app does organization org use
// at provider prov": its own app if it has one there; else the
// deployment's (AppID "") if org is the default organization or the
// provider's shared_app is "all"; else ErrNoApp, naming the organization,
// the provider and the command that fixes it. ErrUnknownProvider for a
// provider the catalog lacks, ErrAPIKeyProvider for an api_key one,
// ErrNotFound for an organization that does not exist. A warm call answers
// from memory (see Config.CacheTTL).
func (s *Store) Resolve(ctx context.Context, org, prov string) (Resolved, error) {
	if err := checkID(org); err != nil {
		return Resolved{}, err
	}
	if err := s.checkProvider(prov); err != nil {
		return Resolved{}, err
	}
	key := "o\x00" + org + "\x00" + prov
	c, ok := s.cache.Lookup(ctx, key)
	if !ok {
		gen := s.cache.Gen()
		var id, clientID *string
		var sealed []byte
		err := s.pool.QueryRow(ctx, resolveSQL, org, prov).Scan(&id, &clientID, &sealed)
		if errors.Is(err, pgx.ErrNoRows) {
			err = problem.Detail(ErrNotFound, "no organization %s", org)
		} else if err != nil {
			err = fmt.Errorf("org: resolve the app of %s at %s: %w", org, prov, err)
		}
		switch {
		case err == nil:
			c = cachedApp{org: org, provider: prov, sealed: sealed}
			if id != nil {
				c.appID, c.clientID = *id, *clientID
			}
			s.cache.Put(key, c, gen, time.Time{})
		default:
			// The database unreachable: the app as last read, within the
			// stale-if-error time; any other answer drops it.
			if c, ok = s.cache.Fallback(ctx, key, err); !ok {
				return Resolved{}, err
			}
		}
	}
	if c.appID == "" {
		if org != names.DefaultOrg && s.catalog.SharedApp(prov) != provider.SharedAll {
			return Resolved{}, problem.Detail(ErrNoApp, "organization %s has no app of its own at %s, and %s's "+
				"shared_app lets only the default organization use the deployment's; set one with: "+
				"connectd orgs apps set %s %s --client-id ID (the secret on stdin)", org, prov, prov, org, prov)
		}
		p, err := s.catalog.OAuth(prov)
		if err != nil {
			return Resolved{}, problem.Detail(ErrUnknownProvider, "provider %s is not an oauth2 provider of the catalog", prov)
		}
		return Resolved{OAuth: p}, nil
	}
	p, err := s.build(c)
	if err != nil {
		return Resolved{}, err
	}
	return Resolved{AppID: c.appID, OAuth: p}, nil
}

// ByID is the OAuth provider of a stored connection's app, to refresh or
// revoke it: appID "" (app_id NULL) is the deployment's app at prov, any
// other the organization's app of that id, which must be at prov.
// ErrAppNotFound when no app has that id (any more: it was removed, or its
// client id changed, so the connection must be made again), it is at
// another provider, or it is not organization org's (the connection's).
func (s *Store) ByID(ctx context.Context, org, appID, prov string) (provider.OAuth, error) {
	if err := s.checkProvider(prov); err != nil {
		return nil, err
	}
	if appID == "" {
		p, err := s.catalog.OAuth(prov)
		if err != nil {
			return nil, problem.Detail(ErrUnknownProvider, "provider %s is not an oauth2 provider of the catalog", prov)
		}
		return p, nil
	}
	key := "a\x00" + appID
	c, ok := s.cache.Lookup(ctx, key)
	if !ok {
		gen := s.cache.Gen()
		c = cachedApp{appID: appID}
		err := s.pool.QueryRow(ctx, byIDSQL, appID).Scan(&c.org, &c.provider, &c.clientID, &c.sealed)
		if errors.Is(err, pgx.ErrNoRows) {
			err = problem.Detail(ErrAppNotFound, "no provider app %s (removed, or replaced by a new client id)", appID)
		} else if err != nil {
			err = fmt.Errorf("org: app %s: %w", appID, err)
		}
		if err != nil {
			// The database unreachable: the app as last read, within the
			// stale-if-error time; any other answer drops it.
			if c, ok = s.cache.Fallback(ctx, key, err); !ok {
				return nil, err
			}
		} else {
			s.cache.Put(key, c, gen, time.Time{})
		}
	}
	if c.provider != prov {
		return nil, problem.Detail(ErrAppNotFound, "provider app %s is not at %s", appID, prov)
	}
	if c.org != org {
		// A connection names only its own organization's apps: another's
		// is not found, never used.
		return nil, problem.Detail(ErrAppNotFound, "provider app %s is not organization %s's", appID, org)
	}
	return s.build(c)
}

// build opens an app's sealed secret and makes its provider. The clear
// secret lives in the provider it builds, as the deployment's lives in the
// catalog, and nowhere else.
func (s *Store) build(c cachedApp) (provider.OAuth, error) {
	if s.keys == nil {
		return nil, fmt.Errorf("%w: %s: no vault keyring (CONNECTD_VAULT_KEYS)", ErrAppSecret, c.appID)
	}
	var secret provider.Secret
	if c.sealed != nil {
		plain, err := s.keys.Open(c.sealed, secretAAD(c.appID, c.org, c.provider, c.clientID))
		if err != nil {
			// Not wrapped: keyring.ErrDecrypt means a user's credential
			// to the error table, and this is the operator's problem.
			return nil, fmt.Errorf("%w: app %s (a key version the keyring lacks, or not sealed for this row)", ErrAppSecret, c.appID)
		}
		secret = provider.Secret(plain)
		clear(plain)
	}
	p, err := s.catalog.WithApp(c.provider, provider.AppCredentials{ID: c.appID, ClientID: c.clientID, Secret: secret})
	if err != nil {
		return nil, fmt.Errorf("org: app %s: %w", c.appID, err)
	}
	return p, nil
}

// forget drops every cached answer about organization org (cache.Flush:
// all).
func (s *Store) forget(org string) {
	s.cache.DeleteFunc(func(_ string, c cachedApp) bool { return org == cache.Flush || c.org == org })
	s.forgetTrust(org)
}

// CacheSubscriber is what the process's notification listener needs to keep
// the resolve cache fresh (see package cache): writers on any replica
// notify InvalidationChannel with the organization's id.
func (s *Store) CacheSubscriber() cache.Subscriber {
	return cache.Subscriber{Channel: InvalidationChannel, Invalidate: s.forget, Caches: []cache.Held{s.cache, s.trust},
		SetLive: func(live bool) { s.cache.SetLive(live); s.trust.SetLive(live) }}
}

// CacheStats reports the resolve cache's counters (zero when disabled).
func (s *Store) CacheStats() cache.Stats { return s.cache.Stats() }
