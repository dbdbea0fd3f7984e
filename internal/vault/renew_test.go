package vault_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/provider/providertest"
	"github.com/connectd/connectd/internal/vault"
)

// TestRenewIdle: the health job's renewal refreshes a connection idle since
// before the cut-off, whatever its access token's expiry; skips one used
// since; and, the grant dead at the provider, marks it
// reauthorization_required and says so once, with the health on record —
// however many renewals race for it.
func TestRenewIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pool(t)
	srv, p := fakeProvider(t, providertest.Options{})
	keys := mustParse(t, keyLine(t, 1))
	var told atomic.Int32
	var reasons sync.Map
	store := func(now func() time.Time) *vault.Store {
		cfg := vault.Config{Pool: db, Keyring: keys, Skew: time.Minute, Now: now, Refresh: refresher(p), Revoke: revoker(p),
			OnReauth: func(_ context.Context, _ pgx.Tx, c vault.Connection, reason string) error {
				told.Add(1)
				reasons.Store(c.ID, reason)
				return nil
			}}
		s, err := vault.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	past := store(func() time.Time { return time.Now().Add(-48 * time.Hour) })
	s := store(nil)
	// Stored two days ago; its access token is valid for another hour.
	tok := srv.Grant([]string{"files.read"}, 49*time.Hour)
	conn, err := past.Put(ctx, alice, "fake", credOf(tok))
	if err != nil {
		t.Fatal(err)
	}
	idleSince := time.Now().Add(-24 * time.Hour)
	users, err := s.Idle(ctx, "fake", idleSince, 10)
	if err != nil || len(users) != 1 || users[0].User != alice || users[0].ID != conn.ID {
		t.Fatalf("idle: %+v %v", users, err)
	}
	refreshes := srv.Counts().Refresh
	if err := s.Renew(ctx, alice, "fake", "", idleSince); err != nil {
		t.Fatal(err)
	}
	if n := srv.Counts().Refresh - refreshes; n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
	// Used now: neither idle nor renewed again.
	if users, _ := s.Idle(ctx, "fake", idleSince, 10); len(users) != 0 {
		t.Fatalf("still idle after renewal: %+v", users)
	}
	if err := s.Renew(ctx, alice, "fake", "", idleSince); err != nil || srv.Counts().Refresh-refreshes != 1 {
		t.Fatalf("renewed a connection used since the cut-off: %v", err)
	}
	got, _, err := s.Get(ctx, alice, "fake", "")
	if err != nil || got.HealthCheckedAt.IsZero() || got.LastError != "" {
		t.Fatalf("health after a renewal: %+v %v", got, err)
	}

	// The grant dies at the provider; eight renewals race for it.
	_, cred, _ := s.Get(ctx, alice, "fake", "")
	revokeAtProvider(t, srv, cred)
	later := time.Now().Add(time.Hour) // everything is idle again
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- store(nil).Renew(ctx, alice, "fake", "", later) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, vault.ErrReauthorizationRequired) {
			t.Fatalf("renewal: %v", err)
		}
	}
	got, _, err = s.Get(ctx, alice, "fake", "")
	if err != nil || got.Status != vault.StatusReauthorizationRequired || got.LastError != "invalid_grant" {
		t.Fatalf("after the refusal: %+v %v", got, err)
	}
	if r, _ := reasons.Load(conn.ID); told.Load() != 1 || r != "invalid_grant" {
		t.Fatalf("OnReauth told %d times (%v), want once", told.Load(), r)
	}
	if n := srv.Counts().Refresh - refreshes; n != 2 {
		t.Fatalf("%d refreshes in all, want 2 (one renewal, one refused)", n)
	}
	// A marked connection is no longer idle: the job leaves it alone.
	if users, _ := s.Idle(ctx, "fake", later, 10); len(users) != 0 {
		t.Fatalf("a reauthorization_required connection is listed idle: %+v", users)
	}
}
