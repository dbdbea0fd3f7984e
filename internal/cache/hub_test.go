package cache_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/testkit"
)

const testChannel = "connectd_cache_test"

// hubRun is a running Hub with one subscriber, as the test sees it: every
// SetLive the hub makes arrives on live, every notification handed over on
// invalidated, and every wait between connection attempts on waits, where
// the hub blocks until the test receives it (so the test decides when the
// hub may reconnect, and sees each backoff without timing it).
type hubRun struct {
	live        chan bool
	invalidated chan string
	waits       chan time.Duration
}

// runHub runs a Hub on conn with sub as its one subscriber until the test
// ends.
func runHub(t *testing.T, conn *pgx.ConnConfig, sub cache.Subscriber) *hubRun {
	t.Helper()
	r := &hubRun{live: make(chan bool, 100), invalidated: make(chan string, 100), waits: make(chan time.Duration)}
	setLive, invalidate := sub.SetLive, sub.Invalidate
	sub.SetLive = func(v bool) { setLive(v); r.live <- v }
	sub.Invalidate = func(p string) { invalidate(p); r.invalidated <- p }
	hub := cache.NewHub(conn, slog.New(slog.DiscardHandler))
	cache.SetSleep(hub, func(ctx context.Context, d time.Duration) bool {
		select {
		case r.waits <- d:
			return true
		case <-ctx.Done():
			return false
		}
	})
	hub.Add(sub)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// feed waits for the hub's next SetLive and checks it says want.
func (r *hubRun) feed(t *testing.T, want bool) {
	t.Helper()
	select {
	case v := <-r.live:
		if v != want {
			t.Fatalf("the hub said live=%v, want %v", v, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the hub did not say live=%v within 10s", want)
	}
}

// wait lets the hub through its next wait between connection attempts and
// returns how long it would have waited.
func (r *hubRun) wait(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-r.waits:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("the hub did not try to reconnect within 10s")
		return 0
	}
}

// killListener ends the hub's connection from the server side, as a
// restart or a network fault would.
func killListener(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var (
		n    int
		pids []int32
	)
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)), coalesce(array_agg(pid), '{}')
		FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
		cache.ListenerApplicationName).Scan(&n, &pids); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d listener connections terminated, want 1", n)
	}
	// A terminated backend stays in pg_stat_activity until it has exited:
	// wait for that, so that the next kill counts only the hub's new
	// connection (on a loaded machine the hub reconnects first).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminated listener connection %v was still there after 10s", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHubOutage: while the listener's connection is down, a cache serves
// what it holds (within its TTL) and caches nothing new; once the hub
// listens again the cache is flushed and caching resumes.
func TestHubOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t, pgtest.EmptyURL(t))
	clk := testkit.NewClock(time.Now())
	m := cache.New[cache.Digest, string](time.Minute, 10, clk.Now)
	r := runHub(t, pool.Config().ConnConfig, cache.Subscribe(testChannel, m))
	r.feed(t, true)

	a, b, c := cache.Key("a"), cache.Key("b"), cache.Key("c")
	m.Put(a, "A", m.Gen(), time.Time{})
	if _, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, testChannel, a.Payload()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.invalidated:
	case <-time.After(10 * time.Second):
		t.Fatal("the notification did not arrive within 10s")
	}
	if _, ok := m.Get(a); ok {
		t.Fatal("a survived its notification")
	}

	m.Put(a, "A", m.Gen(), time.Time{})
	m.Put(b, "B", m.Gen(), time.Time{})
	killListener(t, pool)
	r.feed(t, false)
	// The hub now waits to reconnect, until the test lets it.
	if v, ok := m.Get(a); !ok || v != "A" {
		t.Fatalf("Get(a) = %q, %v while the listener is down, want the cached A", v, ok)
	}
	m.Put(c, "C", m.Gen(), time.Time{})
	if _, ok := m.Get(c); ok {
		t.Fatal("cached while the listener was down")
	}
	m.Delete(b)
	if _, ok := m.Get(b); ok {
		t.Fatal("a local invalidation did not apply while the listener was down")
	}

	r.wait(t)
	r.feed(t, true)
	if _, ok := m.Get(a); ok {
		t.Fatal("an entry from before the outage survived the reconnection")
	}
	m.Put(c, "C", m.Gen(), time.Time{})
	if _, ok := m.Get(c); !ok {
		t.Fatal("not caching after the reconnection")
	}

	// Down again, for longer than the TTL: the entry expires as usual.
	killListener(t, pool)
	r.feed(t, false)
	clk.Advance(time.Minute)
	if _, ok := m.Get(c); ok {
		t.Fatal("an entry outlived its TTL while the listener was down")
	}
}

// TestHubBackoffResets: every time a working listener connection is lost,
// the hub waits the first backoff before reconnecting, however often it
// happens.
func TestHubBackoffResets(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t, pgtest.EmptyURL(t))
	r := runHub(t, pool.Config().ConnConfig, cache.Subscriber{Channel: testChannel, SetLive: func(bool) {}})
	r.feed(t, true)
	for i := range 4 {
		killListener(t, pool)
		r.feed(t, false)
		if d := r.wait(t); d != cache.FirstBackoff {
			t.Fatalf("restart %d: waited %v before reconnecting, want %v", i+1, d, cache.FirstBackoff)
		}
		r.feed(t, true)
	}
}

// TestHubBackoffGrows: while connecting fails, the hub waits twice as long
// each time, up to its cap.
func TestHubBackoffGrows(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().(*net.TCPAddr)
	ln.Close()
	conn, err := pgx.ParseConfig("postgres://nobody@127.0.0.1/none?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	conn.Port = uint16(refused.Port)
	r := runHub(t, conn, cache.Subscriber{Channel: testChannel, SetLive: func(bool) {}})
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		r.feed(t, false)
		if d := r.wait(t); d != w {
			t.Fatalf("attempt %d: waited %v, want %v", i+1, d, w)
		}
	}
}
