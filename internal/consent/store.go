package consent

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/identity"
)

// Consents are cached per (user, provider): the list of clients the user
// consented to, with their scopes, so the token endpoint checks consent
// without a query. Granting and withdrawing consent sends
// pg_notify(Channel, key) in the statement that changes the row; the hub
// hands it to every replica's cache (see package cache). A user with no
// consent for a provider at all is not cached, so a first grant is seen at
// once; a grant to one more client is seen once its notification arrives —
// on every replica before the completion that wakes the MCP server's
// long-poll, since both travel on the same connection in commit order.

// Channel is the NOTIFY channel of consent changes; the payload is
// cache.Key(issuer, subject, provider) in hex, or cache.Flush.
const Channel = "connectd_consents"

// inOrg is what every read of approvals reads (as c): the approvals whose
// connection is of their client's organization. One of another (which
// Record never writes) is found through nobody.
const inOrg = `consents c JOIN connections cn ON cn.id = c.connection_id
	JOIN clients cl ON cl.id = c.client_id AND cl.org_id = cn.org_id`

const (
	selectConsents = `SELECT c.scopes, c.account_hash, c.connection_id FROM ` + inOrg + `
		WHERE c.issuer = $1 AND c.subject = $2 AND c.provider = $3 AND c.client_id = $4 ORDER BY c.granted_at, c.connection_id`
	selectConsentedProviders = `SELECT c.provider, c.scopes, c.account_hash, c.connection_id FROM ` + inOrg + `
		WHERE c.issuer = $1 AND c.subject = $2 AND c.client_id = $3 ORDER BY c.provider, c.granted_at, c.connection_id`
	selectConsentsOf = `SELECT c.client_id, c.scopes, c.account_hash, c.connection_id FROM ` + inOrg + `
		WHERE c.issuer = $1 AND c.subject = $2 AND c.provider = $3 ORDER BY c.granted_at, c.connection_id`
)

// clientApproval is one client's approval, as cached.
type clientApproval struct {
	client string
	Approval
}

func key(u identity.User, provider string) cache.Digest {
	return cache.Key(u.Issuer, u.Subject, provider)
}

// Store reads approvals, from its cache where it can.
type Store struct {
	pool  *pgxpool.Pool
	cache *cache.Map[cache.Digest, []clientApproval] // nil: disabled
}

// NewStore returns a Store over pool whose cache keeps a user's approvals for
// a provider up to ttl, for at most size pairs (ttl or size ≤ 0: no cache).
func NewStore(pool *pgxpool.Pool, ttl time.Duration, size int, now func() time.Time) *Store {
	return &Store{pool: pool, cache: cache.New[cache.Digest, []clientApproval](ttl, size, now)}
}

// For returns what the user approved client for at provider: one approval
// per connection (provider account), the oldest first; ErrNotGiven when
// there is none.
func (s *Store) For(ctx context.Context, u identity.User, clientID, provider string) ([]Approval, error) {
	var out []Approval
	if s.cache != nil {
		set, err := s.cached(ctx, u, provider)
		if err != nil {
			return nil, err
		}
		for _, c := range set {
			if c.client == clientID {
				out = append(out, c.Approval)
			}
		}
	}
	if len(out) == 0 {
		// None in the cached set (or no cache): the database says. A set
		// cached before this client's grant is stale until the grant's
		// notification arrives, and an MCP server can hear of the
		// completion first (a status read from the database, not the
		// wake-up that travels behind the notification): a refusal is
		// never answered from the cache alone. Approvals are, and a
		// withdrawal drops them by its notification, as before.
		rows, err := s.pool.Query(ctx, selectConsents, u.Issuer, u.Subject, provider, clientID)
		if err != nil {
			return nil, fmt.Errorf("consent: load: %w", err)
		}
		if out, err = pgx.CollectRows(rows, scanApproval); err != nil {
			return nil, fmt.Errorf("consent: load: %w", err)
		}
	}
	if len(out) == 0 {
		return nil, ErrNotGiven
	}
	return out, nil
}

// Get returns what the user approved client for at provider for connection
// connID, or ErrNotGiven.
func (s *Store) Get(ctx context.Context, u identity.User, clientID, provider, connID string) (Approval, error) {
	all, err := s.For(ctx, u, clientID, provider)
	if err != nil {
		return Approval{}, err
	}
	if i := slices.IndexFunc(all, func(a Approval) bool { return a.ConnectionID == connID }); i >= 0 {
		return all[i], nil
	}
	return Approval{}, ErrNotGiven
}

func scanApproval(r pgx.CollectableRow) (Approval, error) {
	var a Approval
	err := r.Scan(&a.Scopes, &a.Account, &a.ConnectionID)
	return a, err
}

// OfClient maps each provider the user approved clientID for to the
// approvals there (one per connection).
func (s *Store) OfClient(ctx context.Context, u identity.User, clientID string) (map[string][]Approval, error) {
	rows, err := s.pool.Query(ctx, selectConsentedProviders, u.Issuer, u.Subject, clientID)
	if err != nil {
		return nil, fmt.Errorf("consent: list: %w", err)
	}
	out := map[string][]Approval{}
	for rows.Next() {
		var p string
		var a Approval
		if err := rows.Scan(&p, &a.Scopes, &a.Account, &a.ConnectionID); err != nil {
			rows.Close()
			return nil, fmt.Errorf("consent: list: %w", err)
		}
		out[p] = append(out[p], a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("consent: list: %w", err)
	}
	return out, nil
}

// cached is every client's approvals of the user at provider, from the
// cache, filling it on a miss.
func (s *Store) cached(ctx context.Context, u identity.User, provider string) ([]clientApproval, error) {
	k := key(u, provider)
	if set, ok := s.cache.Lookup(ctx, k); ok {
		return set, nil
	}
	gen := s.cache.Gen()
	set, err := s.load(ctx, u, provider)
	if err != nil {
		// The database unreachable: the approvals as last read, within the
		// stale-if-error time (never a set a notification dropped).
		if set, ok := s.cache.Fallback(ctx, k, err); ok {
			return set, nil
		}
		return nil, err
	}
	if len(set) == 0 {
		s.cache.Fallback(ctx, k, ErrNotGiven) // none now: what was held is dropped
		return nil, nil
	}
	s.cache.Put(k, set, gen, time.Time{})
	return set, nil
}

// load reads every client's approvals of the user at provider.
func (s *Store) load(ctx context.Context, u identity.User, provider string) ([]clientApproval, error) {
	rows, err := s.pool.Query(ctx, selectConsentsOf, u.Issuer, u.Subject, provider)
	if err != nil {
		return nil, fmt.Errorf("consent: load: %w", err)
	}
	set, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (clientApproval, error) {
		var c clientApproval
		err := r.Scan(&c.client, &c.Scopes, &c.Account, &c.ConnectionID)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("consent: load: %w", err)
	}
	return set, nil
}

// CacheSubscriber is what keeps the cache fresh: hand it to the process's
// LISTEN hub.
func (s *Store) CacheSubscriber() cache.Subscriber {
	return cache.Subscribe(Channel, s.cache)
}

// CacheStats reports the cache's counters (zero when disabled).
func (s *Store) CacheStats() cache.Stats { return s.cache.Stats() }

const selectConsentsOfUser = `SELECT c.provider, c.client_id, c.scopes, c.account_hash, c.connection_id, c.granted_at, c.updated_at
	FROM ` + inOrg + `
	WHERE c.issuer = $1 AND c.subject = $2 ORDER BY c.provider, c.granted_at, c.client_id, c.connection_id`

// Listed is one approval as the user's account page shows it.
type Listed struct {
	Provider string
	ClientID string
	Approval
	GrantedAt time.Time // first approval of this client for the connection
	UpdatedAt time.Time // the latest one (what the page listed then)
}

// OfUser returns every approval the user has given, by provider, oldest
// first, from the database (never the cache: the page must show what is).
func (s *Store) OfUser(ctx context.Context, u identity.User) ([]Listed, error) {
	rows, err := s.pool.Query(ctx, selectConsentsOfUser, u.Issuer, u.Subject)
	if err != nil {
		return nil, fmt.Errorf("consent: list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Listed, error) {
		var l Listed
		err := r.Scan(&l.Provider, &l.ClientID, &l.Scopes, &l.Account, &l.ConnectionID, &l.GrantedAt, &l.UpdatedAt)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("consent: list: %w", err)
	}
	return out, nil
}
