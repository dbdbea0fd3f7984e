package connect

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/vault"
)

// Consents are cached per (user, provider): the list of clients the user
// consented to, with their scopes, so the token endpoint checks consent
// without a query. Granting and withdrawing consent sends
// pg_notify(consentChannel, key) in the transaction that changes the row; the
// hub hands it to every replica's cache (see package cache). A user with no
// consent for a provider at all is not cached, so a first grant is seen at
// once; a grant to one more client is seen once its notification arrives —
// on every replica before the completion that wakes the MCP server's
// long-poll, since both travel on the same connection in commit order.

// consentChannel is the NOTIFY channel of consent changes; the payload is
// cache.Key(issuer, subject, provider) in hex, or cache.Flush.
const consentChannel = "connectd_consents"

const (
	selectConsentsOf = `SELECT client_id, scopes, account_hash FROM consents
		WHERE issuer = $1 AND subject = $2 AND provider = $3`
)

// clientConsent is one client's approval, as cached.
type clientConsent struct {
	client string
	approval
}

func consentKey(u vault.UserRef, provider string) cache.Digest {
	return cache.Key(u.Issuer, u.Subject, provider)
}

// cachedConsent is consent served from the cache, filling it on a miss.
func (s *Server) cachedConsent(ctx context.Context, u vault.UserRef, clientID, provider string) (approval, error) {
	k := consentKey(u, provider)
	set, ok := s.consents.Get(k)
	if !ok {
		gen := s.consents.Gen()
		rows, err := s.pool.Query(ctx, selectConsentsOf, u.Issuer, u.Subject, provider)
		if err != nil {
			return approval{}, fmt.Errorf("connect: load consent: %w", err)
		}
		set, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (clientConsent, error) {
			var c clientConsent
			err := r.Scan(&c.client, &c.scopes, &c.account)
			return c, err
		})
		if err != nil {
			return approval{}, fmt.Errorf("connect: load consent: %w", err)
		}
		if len(set) > 0 {
			s.consents.Put(k, set, gen, time.Time{})
		}
	}
	i := slices.IndexFunc(set, func(c clientConsent) bool { return c.client == clientID })
	if i < 0 {
		return approval{}, errNoConsent
	}
	return set[i].approval, nil
}

func (s *Server) invalidateConsents(payload string) {
	if d, ok := cache.ParseDigest(payload); ok {
		s.consents.Delete(d)
		return
	}
	s.consents.DeleteFunc(func(cache.Digest, []clientConsent) bool { return true })
}

// CacheStats reports the consent cache's counters (zero when disabled).
func (s *Server) CacheStats() cache.Stats { return s.consents.Stats() }
