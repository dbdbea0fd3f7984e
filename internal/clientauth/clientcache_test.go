package clientauth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
	"github.com/connectd/connectd/internal/pgtest"
)

// within polls f until it returns nil, for at most a second.
func within(t *testing.T, what string, f func() error) {
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

// TestClientKeyCacheAcrossReplicas: two registries on two pools, caching
// keys and listening like two replicas. Disabling a client or rotating its
// keys on one is honoured by the other within a second, not after the TTL;
// a key's end of overlap is honoured even while it is cached.
func TestClientKeyCacheAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newClock()
	dbURL := pgtest.URL(t)
	replica := func() *clientauth.Clients {
		pool := pgtest.NewPool(t, dbURL)
		c := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, Now: clk.Now, CacheTTL: time.Hour})
		pgtest.Listen(t, pool, c.CacheSubscriber())
		return c
	}
	a, b := replica(), replica()
	cl, key, err := a.Create(ctx, "Demo", []string{mcpauthtest.Resource}, []string{"github"})
	if err != nil {
		t.Fatal(err)
	}
	works := func(key string) func() error {
		return func() error { _, err := b.Authenticate(ctx, key); return err }
	}
	refused := func(key string, want error) func() error {
		return func() error {
			if _, err := b.Authenticate(ctx, key); !errors.Is(err, want) {
				return errors.New("b still accepts the key")
			}
			return nil
		}
	}
	if err := works(key)(); err != nil {
		t.Fatal(err)
	}
	before := b.CacheStats()
	for range 3 {
		if err := works(key)(); err != nil {
			t.Fatal(err)
		}
	}
	if s := b.CacheStats(); s.Hits-before.Hits != 3 {
		t.Fatalf("three authentications on b: %+v then %+v, want three hits", before, s)
	}

	if err := a.SetDisabled(ctx, cl.ID, true); err != nil {
		t.Fatal(err)
	}
	within(t, "b refuses the disabled client", refused(key, clientauth.ErrClientDisabled))
	if err := a.SetDisabled(ctx, cl.ID, false); err != nil {
		t.Fatal(err)
	}
	within(t, "b accepts the re-enabled client", works(key))

	// Rotation without overlap: the old key stops everywhere at once.
	key2, err := a.RotateKey(ctx, cl.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "b refuses the rotated-away key", refused(key, clientauth.ErrInvalidClientKey))
	if err := works(key2)(); err != nil {
		t.Fatal(err)
	}

	// Rotation with overlap: the old key works, cached, until the overlap
	// ends, then not.
	key3, err := a.RotateKey(ctx, cl.ID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the notification land before b caches key2 again
	for _, k := range []string{key2, key3} {
		if err := works(k)(); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	if err := refused(key2, clientauth.ErrInvalidClientKey)(); err != nil {
		t.Fatal("a cached key outlived its overlap")
	}
	if err := works(key3)(); err != nil {
		t.Fatal(err)
	}
}
