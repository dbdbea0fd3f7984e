package vault_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/testkit"
	"github.com/connectd/connectd/internal/vault"
)

// TestRefusedOncePerWindow (issue 33): a provider's 401 refreshes a
// connection at most once per RefusedRefreshWindow, on every replica (two
// stores on one database): the token refreshed for the first 401 and
// refused again is left as it is — the caller finds the token it had —
// however many callers and replicas report it; once the window is over, a
// 401 refreshes again. Concurrent reports of one token still make one
// refresh.
func TestRefusedOncePerWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pool(t)
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true})
	keys := mustParse(t, keyLine(t, 1))
	clock := testkit.NewClock(time.Now())
	replica := func() *vault.Store {
		s, err := vault.New(vault.Config{Pool: db, Keyring: keys, Now: clock.Now, Refresh: refresher(p), Revoke: revoker(p)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	r1, r2 := replica(), replica()
	conn, err := r1.Put(ctx, alice, "fake", credOf(srv.Grant([]string{"files.read"}, time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	token := func() string {
		t.Helper()
		c, err := r1.Token(ctx, alice, "fake", conn.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.AccessToken
	}
	first := token()
	before := srv.Counts().Refresh
	var wg sync.WaitGroup
	for i := range 6 { // one token refused on both replicas at once: one refresh
		s := r1
		if i%2 == 1 {
			s = r2
		}
		wg.Go(func() {
			if err := s.Refused(ctx, alice, "fake", conn.ID, first); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	second := token()
	if n := srv.Counts().Refresh - before; n != 1 || second == first {
		t.Fatalf("after a 401: %d refreshes (want 1), token changed: %v", n, second != first)
	}
	for i := range 20 { // the token in use refused again and again, within the window
		s := r1
		if i%2 == 1 {
			s = r2
		}
		if err := s.Refused(ctx, alice, "fake", conn.ID, token()); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.Counts().Refresh - before; n != 1 || token() != second {
		t.Fatalf("20 401s within the window: %d refreshes in all, want 1; the token must stay", n)
	}
	clock.Advance(vault.RefusedRefreshWindow + time.Second)
	if err := r2.Refused(ctx, alice, "fake", conn.ID, second); err != nil {
		t.Fatal(err)
	}
	if n := srv.Counts().Refresh - before; n != 2 || token() == second {
		t.Fatalf("after the window: %d refreshes in all, want 2", n)
	}
}
