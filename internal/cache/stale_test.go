package cache_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/testkit"
)

// unreachable is what a read gets from a database that is down.
var unreachable = fmt.Errorf("vault: read connection: %w", syscall.ECONNREFUSED)

func TestStaleIfError(t *testing.T) {
	ctx := context.Background()
	clk := testkit.NewClock(time.Unix(1000, 0))
	newMap := func() *cache.Map[string, int] {
		m := cache.New[string, int](10*time.Second, 100, clk.Now)
		cache.WithStaleIfError(m, time.Minute)
		m.SetLive(true)
		m.Put("a", 1, m.Gen(), time.Time{})
		return m
	}
	tests := []struct {
		name   string
		before func(m *cache.Map[string, int]) // after the put
		wait   time.Duration                   // then, past the TTL
		err    error
		want   bool // answered from the entry
	}{
		{"unreachable, within the stale time", nil, 30 * time.Second, unreachable, true},
		{"unreachable, the feed down", func(m *cache.Map[string, int]) { m.SetLive(false) }, 30 * time.Second, unreachable, true},
		{"an acquire deadline", nil, 30 * time.Second, fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{"unreachable, past the stale time", nil, 70 * time.Second, unreachable, false},
		{"no such row", nil, 30 * time.Second, errors.New("not connected"), false},
		{"invalidated before the outage", func(m *cache.Map[string, int]) { m.Delete("a") }, 30 * time.Second, unreachable, false},
		{"flushed before the outage", func(m *cache.Map[string, int]) { m.DeleteFunc(func(string, int) bool { return true }) },
			30 * time.Second, unreachable, false},
		{"read again since, not live (kept for the outage)", func(m *cache.Map[string, int]) {
			m.SetLive(false)
			m.Put("a", 2, m.Gen(), time.Time{})
		}, 0, unreachable, true},
		{"a fill that raced an invalidation drops the entry", func(m *cache.Map[string, int]) {
			gen := m.Gen()
			m.Delete("other")
			m.Put("a", 2, gen, time.Time{})
		}, 30 * time.Second, unreachable, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMap()
			if tt.before != nil {
				tt.before(m)
			}
			clk.Advance(tt.wait)
			if tt.wait >= 10*time.Second {
				if _, ok := m.Get("a"); ok {
					t.Fatal("Get answered past the TTL")
				}
			}
			_, got := m.Fallback(ctx, "a", tt.err)
			if got != tt.want {
				t.Fatalf("Fallback answered %v, want %v", got, tt.want)
			}
			if got && m.Stats().Stale != 1 {
				t.Fatalf("stats %+v, want 1 stale answer", m.Stats())
			}
		})
	}
	t.Run("the database's answer drops the entry for good", func(t *testing.T) {
		m := newMap()
		clk.Advance(20 * time.Second)
		if _, ok := m.Fallback(ctx, "a", errors.New("no such row")); ok {
			t.Fatal("answered stale after the database said no")
		}
		if _, ok := m.Fallback(ctx, "a", unreachable); ok {
			t.Fatal("an entry the database denied answered once it became unreachable")
		}
	})
	t.Run("a caller gone away changes nothing", func(t *testing.T) {
		m := newMap()
		clk.Advance(20 * time.Second)
		m.Fallback(ctx, "a", context.Canceled)
		if v, ok := m.Fallback(ctx, "a", unreachable); !ok || v != 1 {
			t.Fatal("a cancelled read dropped the entry")
		}
	})
	t.Run("never past notAfter", func(t *testing.T) {
		m := newMap()
		m.Put("k", 1, m.Gen(), clk.Now().Add(15*time.Second)) // a client key ending its overlap
		clk.Advance(16 * time.Second)
		if _, ok := m.Fallback(ctx, "k", unreachable); ok {
			t.Fatal("answered past notAfter")
		}
		m.Put("s", 1, m.Gen(), clk.Now().Add(5*time.Second)) // notAfter within the TTL
		clk.Advance(6 * time.Second)
		if _, ok := m.Fallback(ctx, "s", unreachable); ok {
			t.Fatal("answered past a notAfter within the TTL")
		}
	})
	t.Run("the feed back: read again before a hit, stale until then", func(t *testing.T) {
		m := newMap()
		m.SetLive(false)
		m.SetLive(true)
		if _, ok := m.Get("a"); ok {
			t.Fatal("an entry from before the gap was a hit after the feed came back")
		}
		if v, ok := m.Fallback(ctx, "a", unreachable); !ok || v != 1 {
			t.Fatal("an entry from before the gap did not answer while the database is unreachable")
		}
	})
	t.Run("no policy, no stale answer", func(t *testing.T) {
		m := cache.New[string, int](10*time.Second, 100, clk.Now)
		m.SetLive(true)
		m.Put("a", 1, m.Gen(), time.Time{})
		clk.Advance(11 * time.Second)
		if _, ok := m.Fallback(ctx, "a", unreachable); ok {
			t.Fatal("a Map no Hub keeps answered stale")
		}
	})
}

// TestLookupAtOnceWhileUnreachable (issue 35): once a read has found the
// database unreachable, Lookup answers an entry past its TTL at once — not
// after another read waits out its deadline — except for one lookup a
// second, the probe, whose caller reads the database; the database's answer
// (a Put, or an error of its own) ends it. Entries invalidated before, past
// their stale-if-error time, or never held are not answered.
func TestLookupAtOnceWhileUnreachable(t *testing.T) {
	ctx := context.Background()
	clk := testkit.NewClock(time.Unix(1000, 0))
	setup := func() (*cache.Map[string, int], *cache.Map[string, int]) {
		a := cache.New[string, int](10*time.Second, 100, clk.Now)
		b := cache.New[string, int](10*time.Second, 100, clk.Now)
		cache.WithStaleIfError2(a, b, time.Minute) // one Hub's two caches
		for _, m := range []*cache.Map[string, int]{a, b} {
			m.SetLive(true)
			m.Put("k", 1, m.Gen(), time.Time{})
			m.Put("gone", 1, m.Gen(), time.Time{})
		}
		clk.Advance(11 * time.Second) // past every TTL
		return a, b
	}
	t.Run("reachable: a miss reads the database", func(t *testing.T) {
		a, _ := setup()
		if _, ok := a.Lookup(ctx, "k"); ok {
			t.Fatal("answered stale before any read failed")
		}
	})
	t.Run("unreachable: at once, one probe a second", func(t *testing.T) {
		a, b := setup()
		b.Delete("gone")
		if _, ok := a.Fallback(ctx, "k", unreachable); !ok { // the first read waits, and finds it down
			t.Fatal("Fallback")
		}
		// The other cache of the same Hub knows too: its lookups answer at
		// once, for a second after the read that failed.
		for i := range 5 {
			if v, ok := b.Lookup(ctx, "k"); !ok || v != 1 {
				t.Fatalf("lookup %d while unreachable: %v %v", i, v, ok)
			}
		}
		if v, ok := a.Lookup(ctx, "k"); !ok || v != 1 {
			t.Fatalf("a: %v %v", v, ok)
		}
		if _, ok := b.Lookup(ctx, "gone"); ok {
			t.Fatal("an entry invalidated before the outage answered")
		}
		if _, ok := b.Lookup(ctx, "never"); ok {
			t.Fatal("a key never held answered")
		}
		if s := b.Stats(); s.StaleAtOnce != 5 || s.Stale != 5 {
			t.Fatalf("stats %+v, want 5 stale answers at once", s)
		}
		clk.Advance(time.Second)
		if _, ok := a.Lookup(ctx, "k"); ok {
			t.Fatal("no probe in the next second")
		}
		if _, ok := a.Lookup(ctx, "k"); !ok {
			t.Fatal("a second probe in the same second")
		}
		// The probe's read fails again: still at once, the next probe a
		// second after that failure.
		clk.Advance(1500 * time.Millisecond)
		a.Fallback(ctx, "k", unreachable)
		clk.Advance(900 * time.Millisecond)
		if _, ok := b.Lookup(ctx, "k"); !ok {
			t.Fatal("not at once after the probe failed")
		}
		clk.Advance(100 * time.Millisecond)
		if _, ok := b.Lookup(ctx, "k"); ok {
			t.Fatal("no probe a second after the last failure")
		}
		clk.Advance(60 * time.Second) // past the stale-if-error time (put at +0, TTL 10 s, 60 s more)
		if _, ok := b.Lookup(ctx, "k"); ok {
			t.Fatal("answered past the stale-if-error time")
		}
	})
	for _, end := range []struct {
		name string
		fn   func(a *cache.Map[string, int])
	}{
		{"the probe's read answered", func(a *cache.Map[string, int]) { a.Put("k", 2, a.Gen(), time.Time{}) }},
		{"the database said no", func(a *cache.Map[string, int]) { a.Fallback(ctx, "other", errors.New("no such row")) }},
	} {
		t.Run("ended by "+end.name, func(t *testing.T) {
			a, b := setup()
			a.Fallback(ctx, "k", unreachable)
			end.fn(a)
			for range 3 {
				if _, ok := b.Lookup(ctx, "k"); ok {
					t.Fatal("answered stale at once after the database answered")
				}
			}
		})
	}
	t.Run("no policy, never", func(t *testing.T) {
		m := cache.New[string, int](10*time.Second, 100, clk.Now)
		m.SetLive(true)
		m.Put("k", 1, m.Gen(), time.Time{})
		clk.Advance(11 * time.Second)
		m.Fallback(ctx, "k", unreachable)
		m.Lookup(ctx, "k")
		if _, ok := m.Lookup(ctx, "k"); ok {
			t.Fatal("a Map no Hub keeps answered stale")
		}
	})
}
