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

// TestRefusedWindowIsPerToken (security review of issue 33): the window
// after a refresh for a 401 holds back only a 401 on the token that
// refresh issued. One client that provokes 401s on its narrowed token
// (every few minutes, keeping a shared window open) must not hold back the
// refresh of the connection's own token, which another client reads and
// the provider refused for real: that one is refreshed at once.
func TestRefusedWindowIsPerToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, p := fakeProvider(t, providertest.Options{RotateRefreshTokens: true})
	s := newStore(t, pool(t), mustParse(t, keyLine(t, 1)), p, time.Minute)
	conn, err := s.Put(ctx, alice, "fake", credOf(srv.Grant([]string{"read", "write"}, time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	own, err := s.Token(ctx, alice, "fake", conn.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	narrowed, err := s.Narrowed(ctx, alice, "fake", conn.ID, []string{"read"}, own.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	before := srv.Counts().Refresh
	// Client A provokes a 401 on its narrowed token: one fetch, and its
	// new narrowed token is held back for the window.
	again, err := s.NarrowedRefused(ctx, alice, "fake", conn.ID, []string{"read"}, own.AccountID, narrowed.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if again.AccessToken == narrowed.AccessToken {
		t.Fatal("the refused narrowed token was not fetched anew")
	}
	if _, err := s.NarrowedRefused(ctx, alice, "fake", conn.ID, []string{"read"}, own.AccountID, again.AccessToken); err != nil {
		t.Fatal(err)
	}
	afterA := srv.Counts().Refresh
	if afterA-before != 1 {
		t.Fatalf("client A's two 401s made %d fetches, want 1", afterA-before)
	}
	// Client B's token, the connection's own, refused by the provider
	// within A's window: refreshed all the same.
	if err := s.Refused(ctx, alice, "fake", conn.ID, own.AccessToken); err != nil {
		t.Fatal(err)
	}
	now, err := s.Token(ctx, alice, "fake", conn.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Counts().Refresh != afterA+1 || now.AccessToken == own.AccessToken {
		t.Fatalf("B's refused token was held back by A's window: %d refreshes, token changed: %v",
			srv.Counts().Refresh-afterA, now.AccessToken != own.AccessToken)
	}
}
