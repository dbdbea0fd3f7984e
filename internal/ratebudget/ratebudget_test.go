package ratebudget_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/ratebudget"
	"github.com/connectd/connectd/internal/testkit"
)

// replicas are two Stores on one database, as two connectd replicas, each
// listening on the hub.
func replicas(t *testing.T, clock *testkit.Clock, onRemaining func(string, string, string, int)) (a, b *ratebudget.Store) {
	t.Helper()
	url := pgtest.URL(t)
	stores := make([]*ratebudget.Store, 2)
	for i := range stores {
		pool := pgtest.NewPool(t, url)
		stores[i] = ratebudget.New(ratebudget.Config{Pool: pool, Now: clock.Now, Logger: slog.New(slog.DiscardHandler),
			OnRemaining: onRemaining})
		pgtest.Listen(t, pool, stores[i].CacheSubscriber())
	}
	return stores[0], stores[1]
}

func take(t *testing.T, s *ratebudget.Store, user string, limits []provider.RateLimit) bool {
	t.Helper()
	until, err := s.For("fake", "app1", user, "files", limits).Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return until.IsZero()
}

// TestChunksShareOneBudget: two replicas claiming chunks of a limit of 100
// an hour (chunks of 2) get exactly 100 calls through between them, then
// none until the next window.
func TestChunksShareOneBudget(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	left := -1
	a, b := replicas(t, clock, func(p, app, source string, n int) {
		if p == "fake" && app == "app1" && source == "connectd" {
			mu.Lock()
			left = n
			mu.Unlock()
		}
	})
	limits := []provider.RateLimit{{Scope: provider.PerApp, Requests: 100, Per: time.Hour}}
	passed := map[string]int{}
	for i := range 300 {
		s, user := a, "u1"
		if i%2 == 1 {
			s, user = b, "u2"
		}
		if i%3 == 0 {
			user = "u3"
		}
		if take(t, s, user, limits) {
			passed[user]++
		}
	}
	total := passed["u1"] + passed["u2"] + passed["u3"]
	if total != 100 {
		t.Fatalf("%d calls passed (%v), want 100", total, passed)
	}
	for u, n := range passed {
		if n > 50 {
			t.Fatalf("%s spent %d of the app's 100: more than its share", u, n)
		}
	}
	mu.Lock()
	if left != 0 {
		t.Fatalf("the gauge says %d left", left)
	}
	mu.Unlock()
	clock.Advance(time.Hour)
	if !take(t, b, "u1", limits) {
		t.Fatal("the next window is spent too")
	}
}

// TestProviderHoldReachesEveryReplica: a hold opened on one replica is
// kept by the other, which had read the connection's (empty) hold before:
// the notification reaches it; another connection is not held.
func TestProviderHoldReachesEveryReplica(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	a, b := replicas(t, clock, nil)
	if !take(t, a, "u1", nil) || !take(t, b, "u1", nil) {
		t.Fatal("held before any answer")
	}
	a.For("fake", "app1", "u1", "files", nil).Spent(clock.Now().Add(time.Minute))
	deadline := time.Now().Add(10 * time.Second)
	for take(t, b, "u1", nil) {
		if time.Now().After(deadline) {
			t.Fatal("the other replica never learnt of the hold")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !take(t, b, "u2", nil) {
		t.Fatal("another connection is held")
	}
	clock.Advance(time.Minute)
	if !take(t, a, "u1", nil) || !take(t, b, "u1", nil) {
		t.Fatal("held after the window")
	}
	if err := a.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestFailsOpen: a database that cannot be reached lets calls through
// (the provider keeps its own limits).
func TestFailsOpen(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t, pgtest.URL(t))
	s := ratebudget.New(ratebudget.Config{Pool: pool, Logger: slog.New(slog.DiscardHandler)})
	pool.Close()
	if !take(t, s, "u1", []provider.RateLimit{{Scope: provider.PerUser, Requests: 1, Per: time.Hour}}) {
		t.Fatal("refused while the database is away")
	}
}

// TestPerMethod: a per_method rule (Slack's tiers) counts each method
// apart, and a path rule only the paths below it.
func TestPerMethod(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	a, _ := replicas(t, clock, nil)
	limits := []provider.RateLimit{
		{Scope: provider.PerUser, Requests: 2, Per: time.Minute, PerMethod: true},
		{Scope: provider.PerUser, Requests: 1, Per: time.Minute, Path: "search.", PerMethod: true},
	}
	for _, tc := range []struct {
		path string
		want []bool
	}{
		{"chat.postMessage", []bool{true, true, false}},
		{"conversations.list", []bool{true, true, false}},
		{"search.messages", []bool{true, false}},
		{"search.files", []bool{true, false}},
	} {
		for i, want := range tc.want {
			until, err := a.For("slack", "", "u1", tc.path, limits).Take(context.Background())
			if err != nil || until.IsZero() != want {
				t.Fatalf("%s call %d: held until %v (%v), want passed=%v", tc.path, i, until, err, want)
			}
		}
	}
}

// TestKnownHoldOutlivesAnOutage: a provider's hold this replica knows holds
// while the database cannot be read (not failed open), and after an outage
// in which its write to the table failed (the feed's return reads the table
// again without forgetting it); other connections still fail open.
func TestKnownHoldOutlivesAnOutage(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	p, url := pgtest.NewProxy(t, pgtest.URL(t))
	s := ratebudget.New(ratebudget.Config{Pool: pgtest.NewPool(t, url), Now: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	feed := s.CacheSubscriber() // the hub's calls, made by hand
	feed.SetLive(true)
	if !take(t, s, "u1", nil) || !take(t, s, "u2", nil) {
		t.Fatal("held before any answer")
	}
	s.For("fake", "app1", "u1", "files", nil).Spent(clock.Now().Add(time.Minute)) // written to the table
	p.Cut()
	feed.SetLive(false)
	if take(t, s, "u1", nil) {
		t.Fatal("a hold this replica opened was dropped while the database cannot be read")
	}
	if !take(t, s, "u2", nil) {
		t.Fatal("another connection does not fail open")
	}
	s.For("fake", "app1", "u2", "files", nil).Spent(clock.Now().Add(time.Minute)) // its write fails
	p.Restore()
	feed.SetLive(true)
	for _, u := range []string{"u1", "u2"} {
		if take(t, s, u, nil) {
			t.Fatalf("%s: a hold this replica knows was dropped when the feed came back", u)
		}
	}
	clock.Advance(time.Minute)
	if !take(t, s, "u1", nil) || !take(t, s, "u2", nil) {
		t.Fatal("held after the window")
	}
}
