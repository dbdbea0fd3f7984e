package vault_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/testkit"
	"github.com/connectd/connectd/internal/vault"
)

func cachedStore(t testing.TB, pool *pgxpool.Pool, keys *keyring.Keyring, srv *providertest.Server, clock func() time.Time) *vault.Store {
	t.Helper()
	cfg := vault.Config{Pool: pool, Keyring: keys, Skew: time.Minute, CacheTTL: 30 * time.Second, Now: clock}
	if srv != nil {
		p := oauthFromEntry(t, srv, srv.ProviderConfig("fake", "FAKE_SECRET"))
		cfg.Refresh, cfg.Revoke = refresher(p), revoker(p)
	}
	s, err := vault.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Listen(t, pool, s.CacheSubscriber())
	return s
}

// eventually polls f until it returns nil or a second has passed: every
// replica must see a change within a second.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a second: %v", what, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCredentialCacheAcrossReplicas: two Stores on two pools, each caching
// and listening like a replica. Every kind of change made through one is
// seen by the other within a second, without waiting for the TTL; a change
// made behind the vault's back (no notification) is seen once the TTL ends.
func TestCredentialCacheAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := testkit.NewClock(time.Now())
	srv := providertest.New(t, providertest.Options{RotateRefreshTokens: true})
	dbURL := pgtest.URL(t)
	k1, k2 := keyLine(t, 1), keyLine(t, 2)
	keys := mustParse(t, k1)
	a := cachedStore(t, pgtest.NewPool(t, dbURL), keys, srv, clock.Now)
	bPool := pgtest.NewPool(t, dbURL)
	b := cachedStore(t, bPool, keys, srv, clock.Now)

	tok := srv.Grant([]string{"files.read"}, time.Hour)
	var connID string // the connection of the last Put
	if conn, err := a.Put(ctx, alice, "fake", credOf(tok)); err != nil {
		t.Fatal(err)
	} else {
		connID = conn.ID
	}
	accessOnB := func(want string) func() error {
		return func() error {
			c, err := b.Token(ctx, alice, "fake", connID, nil)
			if err != nil {
				return err
			}
			if c.AccessToken != want {
				return fmt.Errorf("replica b serves %.12s…, want %.12s…", c.AccessToken, want)
			}
			return nil
		}
	}
	// cachedOnB: b answers want from its cache (a's notification of the
	// write that made it may arrive after b's first read, and drop it).
	cachedOnB := func(want string) func() error {
		return func() error {
			hits := b.CacheStats().Hits
			if err := accessOnB(want)(); err != nil {
				return err
			}
			if b.CacheStats().Hits == hits {
				return errors.New("not answered from the cache yet")
			}
			return nil
		}
	}
	eventually(t, "b caches the connection", cachedOnB(tok.AccessToken))
	before := b.CacheStats()
	for range 5 {
		if err := accessOnB(tok.AccessToken)(); err != nil {
			t.Fatal(err)
		}
	}
	if s := b.CacheStats(); s.Hits-before.Hits != 5 || s.Entries != 1 {
		t.Fatalf("five reads on b: %+v then %+v, want five hits", before, s)
	}

	t.Run("put", func(t *testing.T) {
		tok = srv.Grant([]string{"files.read"}, time.Hour)
		if conn, err := a.Put(ctx, alice, "fake", credOf(tok)); err != nil {
			t.Fatal(err)
		} else {
			connID = conn.ID
		}
		eventually(t, "b sees the new credential", accessOnB(tok.AccessToken))
	})
	t.Run("refresh", func(t *testing.T) {
		tok = srv.Grant([]string{"files.read"}, 90*time.Second)
		if conn, err := a.Put(ctx, alice, "fake", credOf(tok)); err != nil {
			t.Fatal(err)
		} else {
			connID = conn.ID
		}
		eventually(t, "b caches the new credential", cachedOnB(tok.AccessToken))
		// 59 s before the token's expiry, within the one-minute skew: due for
		// a refresh on both (measured from the expiry, not from when the
		// clock was made: a slow run must not leave it short of the skew).
		clock.Advance(tok.Expiry.Add(-59 * time.Second).Sub(clock.Now()))
		c, err := a.Token(ctx, alice, "fake", connID, nil)
		if err != nil || c.AccessToken == tok.AccessToken {
			t.Fatalf("refresh on a: %v", err)
		}
		eventually(t, "b sees the refreshed token", accessOnB(c.AccessToken))
		if n := srv.Counts().Refresh; n != 1 {
			t.Fatalf("%d refreshes reached the provider, want 1", n)
		}
		tok.AccessToken = c.AccessToken
	})
	t.Run("rewrap", func(t *testing.T) {
		if _, err := b.Token(ctx, alice, "fake", connID, nil); err != nil {
			t.Fatal(err)
		}
		rw, err := vault.New(vault.Config{Pool: bPool, Keyring: mustParse(t, k1+",*"+k2)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rw.Rewrap(ctx, vault.RewrapOptions{}); err != nil {
			t.Fatal(err)
		}
		// b's keyring lacks key 2: once its cached row (under key 1) is
		// dropped, it reads the rewrapped one and cannot open it.
		eventually(t, "b drops the rewrapped row", func() error {
			if _, err := b.Token(ctx, alice, "fake", connID, nil); errors.Is(err, keyring.ErrDecrypt) {
				return nil
			}
			return errors.New("b still opens its cached copy")
		})
		// Back under key 1 for the rest.
		back, _ := vault.New(vault.Config{Pool: bPool, Keyring: mustParse(t, "*"+k1+","+k2)})
		if _, err := back.Rewrap(ctx, vault.RewrapOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "b opens the row again", accessOnB(tok.AccessToken))
	})
	t.Run("delete", func(t *testing.T) {
		if _, err := b.Token(ctx, alice, "fake", connID, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Delete(ctx, alice, "fake", ""); err != nil {
			t.Fatal(err)
		}
		eventually(t, "b answers not connected", func() error {
			if _, err := b.Token(ctx, alice, "fake", connID, nil); !errors.Is(err, vault.ErrNotConnected) {
				return errors.New("b still serves the deleted credential")
			}
			return nil
		})
	})
	t.Run("reauthorization required", func(t *testing.T) {
		tok = srv.Grant([]string{"files.read"}, time.Minute) // within the skew: every read refreshes
		if conn, err := a.Put(ctx, alice, "fake", credOf(tok)); err != nil {
			t.Fatal(err)
		} else {
			connID = conn.ID
		}
		// Kill the grant at the provider: the next refresh gets invalid_grant.
		if _, err := a.Delete(ctx, alice, "fake", ""); err != nil { // revokes tok's grant
			t.Fatal(err)
		}
		if conn, err := a.Put(ctx, alice, "fake", credOf(tok)); err != nil {
			t.Fatal(err)
		} else {
			connID = conn.ID
		}
		clock.Advance(2 * time.Minute)
		if _, err := a.Token(ctx, alice, "fake", connID, nil); !errors.Is(err, vault.ErrReauthorizationRequired) {
			t.Fatalf("a: %v, want reauthorization required", err)
		}
		eventually(t, "b sees reauthorization_required", func() error {
			if _, err := b.Token(ctx, alice, "fake", connID, nil); !errors.Is(err, vault.ErrReauthorizationRequired) {
				return errors.New("b did not see the status change")
			}
			return nil
		})
	})
	t.Run("a change without a notification lives until the TTL", func(t *testing.T) {
		tok = srv.Grant([]string{"files.read"}, 24*time.Hour)
		if conn, err := a.Put(ctx, alice, "fake", credOf(tok)); err != nil {
			t.Fatal(err)
		} else {
			connID = conn.ID
		}
		eventually(t, "b caches the connection", cachedOnB(tok.AccessToken))
		if _, err := bPool.Exec(ctx, `DELETE FROM connections`); err != nil { // behind the vault's back
			t.Fatal(err)
		}
		if err := accessOnB(tok.AccessToken)(); err != nil {
			t.Fatalf("b should still serve its cached copy until the TTL: %v", err)
		}
		clock.Advance(30 * time.Second)
		if _, err := b.Token(ctx, alice, "fake", connID, nil); !errors.Is(err, vault.ErrNotConnected) {
			t.Fatalf("after the TTL: %v, want not connected", err)
		}
	})
	t.Run("feed down: served until the TTL, nothing new cached; back up: read again", func(t *testing.T) {
		tok = srv.Grant([]string{"files.read"}, 24*time.Hour)
		if conn, err := a.Put(ctx, alice, "fake", credOf(tok)); err != nil {
			t.Fatal(err)
		} else {
			connID = conn.ID
		}
		eventually(t, "b caches the connection", cachedOnB(tok.AccessToken))
		b.CacheSubscriber().SetLive(false)
		if err := cachedOnB(tok.AccessToken)(); err != nil {
			t.Fatalf("feed down: %v, want the cached credential", err)
		}
		clock.Advance(30 * time.Second) // the TTL: b reads the row again, and keeps nothing
		hits := b.CacheStats().Hits
		for range 2 {
			if err := accessOnB(tok.AccessToken)(); err != nil {
				t.Fatal(err)
			}
		}
		if b.CacheStats().Hits != hits {
			t.Fatal("answered from the cache past the TTL, or cached while the feed was down")
		}
		b.CacheSubscriber().SetLive(true)
		// What was read while the feed was down is kept only to answer
		// while the database is unreachable (stale-if-error): never a hit.
		hits = b.CacheStats().Hits
		if err := accessOnB(tok.AccessToken)(); err != nil {
			t.Fatal(err)
		}
		if b.CacheStats().Hits != hits {
			t.Fatal("an entry from before the feed came back was a hit")
		}
		eventually(t, "b caches again", cachedOnB(tok.AccessToken))
	})
}

// BenchmarkTokenCached is BenchmarkToken answered from the credential
// cache: no database round trip, one AES-GCM open.
func BenchmarkTokenCached(b *testing.B) {
	ctx := context.Background()
	s, err := vault.New(vault.Config{Pool: pool(b), Keyring: mustParse(b, keyLine(b, 1)), CacheTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	s.CacheSubscriber().SetLive(true)
	cred := vault.Credential{AccessToken: "gho_x", RefreshToken: "ghr_x", Expiry: time.Now().Add(24 * time.Hour),
		Scopes: []string{"repo"}}
	if _, err := s.Put(ctx, alice, "github", cred); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Token(ctx, alice, "github", "", []string{"repo"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
