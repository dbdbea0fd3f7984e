package cache

import (
	"testing"
	"time"

	"github.com/connectd/connectd/internal/testkit"
)

func TestMap(t *testing.T) {
	clk := testkit.NewClock(time.Unix(1000, 0))
	newLive := func() *Map[string, int] {
		m := New[string, int](10*time.Second, 100, clk.Now)
		m.SetLive(true)
		return m
	}
	t.Run("not live caches nothing", func(t *testing.T) {
		m := New[string, int](10*time.Second, 100, clk.Now)
		m.Put("a", 1, m.Gen(), time.Time{})
		if _, ok := m.Get("a"); ok {
			t.Fatal("a Map that is not live cached a value")
		}
	})
	t.Run("hit until ttl", func(t *testing.T) {
		m := newLive()
		m.Put("a", 1, m.Gen(), time.Time{})
		if v, ok := m.Get("a"); !ok || v != 1 {
			t.Fatalf("Get = %d, %v", v, ok)
		}
		clk.Advance(10 * time.Second)
		if _, ok := m.Get("a"); ok {
			t.Fatal("entry outlived its TTL")
		}
	})
	t.Run("notAfter shortens the ttl", func(t *testing.T) {
		m := newLive()
		m.Put("a", 1, m.Gen(), clk.Now().Add(time.Second))
		clk.Advance(time.Second)
		if _, ok := m.Get("a"); ok {
			t.Fatal("entry outlived notAfter")
		}
		m = newLive()
		m.Put("b", 1, m.Gen(), clk.Now()) // already past: not stored
		if m.Stats().Entries != 0 {
			t.Fatal("an entry already past notAfter was stored")
		}
	})
	t.Run("an invalidation during a fill drops the fill", func(t *testing.T) {
		m := newLive()
		gen := m.Gen()
		m.Delete("other") // any invalidation: the value read may be stale
		m.Put("a", 1, gen, time.Time{})
		if _, ok := m.Get("a"); ok {
			t.Fatal("a fill begun before an invalidation was stored")
		}
	})
	t.Run("delete and deletefunc", func(t *testing.T) {
		m := newLive()
		for i, k := range []string{"a", "b", "c"} {
			m.Put(k, i, m.Gen(), time.Time{})
		}
		m.Delete("a")
		m.DeleteFunc(func(_ string, v int) bool { return v == 1 })
		if _, ok := m.Get("a"); ok {
			t.Error("a survived Delete")
		}
		if _, ok := m.Get("b"); ok {
			t.Error("b survived DeleteFunc")
		}
		if _, ok := m.Get("c"); !ok {
			t.Error("c was dropped")
		}
	})
	t.Run("feed down serves until the ttl, caches nothing new", func(t *testing.T) {
		m := newLive()
		m.Put("a", 1, m.Gen(), time.Time{})
		m.Put("b", 2, m.Gen(), time.Time{})
		gen := m.Gen()
		m.SetLive(false)
		if v, ok := m.Get("a"); !ok || v != 1 {
			t.Fatalf("Get = %d, %v after the feed went down, want the cached 1", v, ok)
		}
		m.Put("c", 3, m.Gen(), time.Time{})
		m.Put("d", 4, gen, time.Time{}) // a fill begun while the feed was up
		if _, ok := m.Get("c"); ok {
			t.Fatal("cached while the feed was down")
		}
		if _, ok := m.Get("d"); ok {
			t.Fatal("a fill begun before the feed went down was stored")
		}
		m.Delete("b") // this process's own writers still invalidate
		if _, ok := m.Get("b"); ok {
			t.Fatal("b survived Delete while the feed was down")
		}
		clk.Advance(10 * time.Second)
		if _, ok := m.Get("a"); ok {
			t.Fatal("entry outlived its TTL while the feed was down")
		}
	})
	t.Run("feed back flushes and resumes", func(t *testing.T) {
		m := newLive()
		m.Put("a", 1, m.Gen(), time.Time{})
		m.SetLive(false)
		m.SetLive(true)
		if _, ok := m.Get("a"); ok {
			t.Fatal("an entry from before the gap survived the feed coming back")
		}
		m.Put("a", 1, m.Gen(), time.Time{})
		if _, ok := m.Get("a"); !ok {
			t.Fatal("not caching after the feed came back")
		}
	})
	t.Run("size cap", func(t *testing.T) {
		m := New[int, int](time.Minute, 50, clk.Now)
		m.SetLive(true)
		for i := range 1000 {
			m.Put(i, i, m.Gen(), time.Time{})
		}
		if n := m.Stats().Entries; n > 50 {
			t.Fatalf("%d entries, cap 50", n)
		}
	})
	t.Run("nil map is a disabled cache", func(t *testing.T) {
		var m *Map[string, int]
		if New[string, int](0, 10, nil) != nil || New[string, int](time.Second, 0, nil) != nil {
			t.Fatal("New with ttl or max 0 must disable the cache")
		}
		m.SetLive(true)
		m.Put("a", 1, m.Gen(), time.Time{})
		m.Delete("a")
		if _, ok := m.Get("a"); ok || m.Stats() != (Stats{}) {
			t.Fatal("nil Map held something")
		}
	})
	t.Run("stats", func(t *testing.T) {
		m := newLive()
		m.Put("a", 1, m.Gen(), time.Time{})
		m.Get("a")
		m.Get("b")
		if s := m.Stats(); s.Hits != 1 || s.Misses != 1 || s.Entries != 1 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestKey(t *testing.T) {
	// Length prefixes keep column boundaries: these must all differ.
	keys := []Digest{Key("ab", "c"), Key("a", "bc"), Key("abc"), Key("abc", ""), Key("", "abc")}
	for i := range keys {
		for j := range i {
			if keys[i] == keys[j] {
				t.Fatalf("Key %d and %d collide", i, j)
			}
		}
	}
	long := string(make([]byte, 1000))
	if Key(long) == Key(long[:999]) {
		t.Fatal("long keys collide")
	}
	d := Key("issuer", "subject", "provider")
	if got, ok := ParseDigest(d.Payload()); !ok || got != d {
		t.Fatal("payload does not round-trip")
	}
	for _, bad := range []string{"", Flush, "zz" + d.Payload()[2:], d.Payload() + "00"} {
		if _, ok := ParseDigest(bad); ok {
			t.Fatalf("ParseDigest(%q) accepted", bad)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	m := New[Digest, []byte](time.Minute, 100000, nil)
	m.SetLive(true)
	k := Key("https://issuer.example", "user-00001", "github")
	m.Put(k, make([]byte, 200), m.Gen(), time.Time{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := m.Get(Key("https://issuer.example", "user-00001", "github")); !ok {
				b.Fatal("miss")
			}
		}
	})
}

func TestEvery(t *testing.T) {
	t.Parallel()
	e := NewEvery(time.Minute)
	t0 := time.Unix(1_000_000, 0)
	for _, step := range []struct {
		key  string
		at   time.Duration
		want bool
	}{
		{"a", 0, true},
		{"a", 30 * time.Second, false},
		{"b", 30 * time.Second, true},
		{"a", 59 * time.Second, false},
		{"a", 60 * time.Second, true},
		{"a", 61 * time.Second, false},
	} {
		if got := e.Due(step.key, t0.Add(step.at)); got != step.want {
			t.Errorf("Due(%s, +%v) = %v, want %v", step.key, step.at, got, step.want)
		}
	}
}

// TestSubscribe: a digest drops its entry, Flush (or anything unknown)
// drops them all, and a disabled cache is fine.
func TestSubscribe(t *testing.T) {
	t.Parallel()
	m := New[Digest, int](time.Hour, 10, time.Now)
	sub := Subscribe("ch", m)
	sub.SetLive(true) // as the hub does once it listens
	a, b := Key("a"), Key("b")
	m.Put(a, 1, m.Gen(), time.Time{})
	m.Put(b, 2, m.Gen(), time.Time{})
	if _, ok := m.Get(b); !ok {
		t.Fatal("b not cached")
	}
	if sub.Channel != "ch" {
		t.Fatalf("channel %q", sub.Channel)
	}
	sub.Invalidate(a.Payload())
	if _, ok := m.Get(a); ok {
		t.Fatal("a survived its invalidation")
	}
	if _, ok := m.Get(b); !ok {
		t.Fatal("b went with a")
	}
	sub.Invalidate("not a digest")
	if _, ok := m.Get(b); ok {
		t.Fatal("an unknown payload did not flush")
	}
	off := Subscribe[int]("ch", nil)
	off.Invalidate(Flush)
	off.SetLive(true)
}

// TestSubscribeStrict: the feed going down empties the cache at once, and
// nothing is cached until it is back.
func TestSubscribeStrict(t *testing.T) {
	t.Parallel()
	m := New[Digest, int](time.Hour, 10, time.Now)
	sub := SubscribeStrict("ch", m)
	sub.SetLive(true)
	a := Key("a")
	m.Put(a, 1, m.Gen(), time.Time{})
	sub.Invalidate(a.Payload())
	if _, ok := m.Get(a); ok {
		t.Fatal("a survived its invalidation")
	}
	m.Put(a, 1, m.Gen(), time.Time{})
	sub.SetLive(false)
	if _, ok := m.Get(a); ok || m.Stats().Entries != 0 {
		t.Fatal("a strict cache kept an entry after the feed went down")
	}
	m.Put(a, 1, m.Gen(), time.Time{})
	if _, ok := m.Get(a); ok {
		t.Fatal("cached while the feed was down")
	}
	sub.SetLive(true)
	m.Put(a, 1, m.Gen(), time.Time{})
	if _, ok := m.Get(a); !ok {
		t.Fatal("not caching after the feed came back")
	}
	off := SubscribeStrict[int]("ch", nil)
	off.SetLive(false)
	off.Invalidate(Flush)
}
