package connect_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/vault"
)

// TestCachedReadsRideOutAnOutage (issue 35): a caching replica whose
// database goes away for real (its pool and its listener behind a proxy
// that is cut) keeps answering the token reads it holds in its caches past
// every TTL — the client key's first — for the stale-if-error time; an
// entry invalidated before the outage is never answered, nor a client
// disabled before it; past the stale-if-error time the reads are 503
// database_unavailable with Retry-After; once the database is back the
// replica reads everything again (a credential changed during the outage is
// the new one).
func TestCachedReadsRideOutAnOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	off := e.newMCPServer("disabled", "fake")
	ctx := context.Background()
	e.connectFully(m, "alice", map[string]any{"provider": "fake"})
	e.connectFully(m, "bob", map[string]any{"provider": "fake"})
	e.consentAgain(off, "alice") // the connection is alice's: consent only

	const (
		keyTTL = time.Second // the client key's, the shortest
		ttl    = 2 * time.Second
		stale  = 4 * time.Second
	)
	proxy, url := pgtest.NewProxy(t, e.pool.Config().ConnString())
	pool := pgtest.NewPool(t, url)
	cfg := e.cfg
	cfg.Pool, cfg.Logger, cfg.Now = pool, slog.New(slog.NewJSONHandler(e.logs, nil)), nil
	cfg.Cache = server.CacheConfig{CredentialTTL: ttl, ConsentTTL: ttl, ClientKeyTTL: keyTTL, StaleIfError: stale}
	cfg.RateLimit = server.RateLimitConfig{}
	r := &replica{pool: pool}
	r.srv, r.url = e.replica(cfg)
	r.vault, r.client = r.srv.Vault(), r.srv.Clients()
	e.run(r.srv)

	read := func(who *mcpServer, user string) answer {
		return e.get(r.url+"/v1/connections/fake/token", who.tokenHeaders(user))
	}
	// Bob's connection is revoked and the client "disabled" is disabled
	// before the outage, on the other pool: the replica hears of both.
	waitCached(t, m, r)
	if a := read(m, "bob"); a.status != http.StatusOK {
		t.Fatalf("bob before: %d %s", a.status, a.body)
	}
	if a := read(off, "alice"); a.status != http.StatusOK {
		t.Fatalf("off before: %d %s", a.status, a.body)
	}
	bob := identity.User{Issuer: e.idps[0].Issuer(), Subject: "bob"}
	if _, err := e.vault.DeleteWith(ctx, bob, "fake", "", func(ctx context.Context, tx pgx.Tx, gone vault.Connection) error {
		_, err := consent.Withdraw(ctx, tx, bob, "fake", gone.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.clients.SetDisabled(ctx, off.client.ID, true); err != nil {
		t.Fatal(err)
	}
	withinASecondAt(t, func() answer { return read(m, "bob") }, http.StatusNotFound, "not_connected")
	withinASecondAt(t, func() answer { return read(off, "alice") }, http.StatusUnauthorized, "invalid_client")
	alice := identity.User{Issuer: e.idps[0].Issuer(), Subject: "alice"}
	_, old, err := e.vault.Get(ctx, alice, "fake", "")
	if err != nil {
		t.Fatal(err)
	}
	if a := read(m, "alice"); a.status != http.StatusOK {
		t.Fatalf("alice before: %d %s", a.status, a.body)
	}
	filled := time.Now() // every entry alice's read needs was read by now

	proxy.Cut()
	cut := time.Now()
	// A change the replica cannot hear of: alice's credential replaced.
	cred := *old
	cred.AccessToken = "at_after_the_outage"
	if _, err := e.vault.Put(ctx, alice, "fake", cred); err != nil {
		t.Fatal(err)
	}
	// Past every TTL, within the stale-if-error time: answered. (Each
	// entry was read at most its TTL before filled, and at the latest at
	// filled: all of them answer until filled+stale, none after
	// filled+ttl+stale.)
	var n int
	for time.Since(filled) < stale-200*time.Millisecond {
		a := read(m, "alice")
		if a.status != http.StatusOK {
			t.Fatalf("alice %s into the outage (%d reads answered): %d %s", time.Since(cut).Round(time.Millisecond), n, a.status, a.body)
		}
		n++
		time.Sleep(50 * time.Millisecond)
	}
	if time.Since(cut) < ttl+time.Second {
		t.Fatalf("the outage was too short to outlast the client key's TTL")
	}
	if s := r.client.CacheStats(); s.Stale == 0 {
		t.Fatalf("client key cache: %+v, want stale answers", s)
	}
	// What was invalidated before the outage is not answered from memory.
	unavailable(t, "bob, revoked before the outage", read(m, "bob"), "database_unavailable")
	if a := read(off, "alice"); a.status != http.StatusUnauthorized || a.code() != "invalid_client" {
		t.Fatalf("a client disabled before the outage: %d %s", a.status, a.body)
	}
	// Past the stale-if-error time: 503.
	for time.Since(filled) < ttl+stale+100*time.Millisecond {
		time.Sleep(50 * time.Millisecond)
	}
	unavailable(t, "alice past the stale-if-error time", read(m, "alice"), "database_unavailable")

	// The database back: fresh reads, the change made during the outage.
	proxy.Restore()
	deadline := time.Now().Add(15 * time.Second)
	for {
		a := read(m, "alice")
		if a.status == http.StatusOK && a.body != "" && strings.Contains(a.body, "at_after_the_outage") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice after the outage: %d %s", a.status, a.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	unavailableOr404 := read(m, "bob")
	if unavailableOr404.status != http.StatusNotFound {
		t.Fatalf("bob after the outage: %d %s", unavailableOr404.status, unavailableOr404.body)
	}
}

// withinASecondAt polls get until it answers status and code, failing after
// a second.
func withinASecondAt(t *testing.T, get func() answer, status int, code string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		a := get()
		if a.status == status && a.code() == code {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d %s a second later, want %d %s", a.status, a.body, status, code)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCachedReadsDoNotWaitOnAFrozenDatabase (issue 35): when the database
// hangs rather than refuses (a Postgres under SIGSTOP: TCP connects, nothing
// answers), the first read of an expired entry waits for its deadline and
// finds the database unreachable; from then on the replica's caches answer
// their stale entries at once, letting one read a second through to find
// the database back. Readers in a loop through a freeze longer than every
// TTL get every read answered, and nearly all of those answers are given
// without a read (StaleAtOnce) — before this, each of them waited out the
// acquire deadline. Once the database thaws, reads are fresh again.
func TestCachedReadsDoNotWaitOnAFrozenDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	e.connectFully(m, "alice", map[string]any{"provider": "fake"})

	const (
		keyTTL = 500 * time.Millisecond
		ttl    = time.Second
		stale  = time.Minute
	)
	proxy, url := pgtest.NewProxy(t, e.pool.Config().ConnString())
	pool := pgtest.NewPool(t, url)
	cfg := e.cfg
	cfg.Pool, cfg.Logger, cfg.Now = pool, slog.New(slog.NewJSONHandler(e.logs, nil)), nil
	cfg.Cache = server.CacheConfig{CredentialTTL: ttl, ConsentTTL: ttl, ClientKeyTTL: keyTTL, StaleIfError: stale}
	cfg.DB = db.Deadlines{Acquire: 500 * time.Millisecond, Query: time.Second}
	cfg.RateLimit = server.RateLimitConfig{}
	r := &replica{pool: pool}
	r.srv, r.url = e.replica(cfg)
	r.vault, r.client = r.srv.Vault(), r.srv.Clients()
	e.run(r.srv)
	waitCached(t, m, r)

	proxy.Freeze()
	frozen := time.Now()
	// A change the replica cannot hear of, made on another pool.
	alice := identity.User{Issuer: e.idps[0].Issuer(), Subject: "alice"}
	_, old, err := e.vault.Get(context.Background(), alice, "fake", "")
	if err != nil {
		t.Fatal(err)
	}
	cred := *old
	cred.AccessToken = "at_after_the_freeze"
	if _, err := e.vault.Put(context.Background(), alice, "fake", cred); err != nil {
		t.Fatal(err)
	}
	const readers = 4
	var mu sync.Mutex
	var reads int
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			for time.Since(frozen) < ttl+3*time.Second {
				a := e.get(r.url+"/v1/connections/fake/token", m.tokenHeaders("alice"))
				if a.status != http.StatusOK {
					t.Errorf("%s into the freeze: %d %s", time.Since(frozen).Round(time.Millisecond), a.status, a.body)
					return
				}
				mu.Lock()
				reads++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Every entry the read needs expired during the freeze; each was then
	// answered stale. Those answered only after a read waited its deadline
	// are at most: the first read of each cache and reader, and a probe a
	// second.
	var st, atOnce uint64
	for _, s := range []cache.Stats{r.client.CacheStats(), r.vault.CacheStats(), r.srv.Consents().CacheStats()} {
		st += s.Stale
		atOnce += s.StaleAtOnce
	}
	waited := st - atOnce
	if r.client.CacheStats().Stale == 0 || atOnce == 0 || waited > 3*readers+2*uint64(time.Since(frozen)/time.Second+1) {
		t.Fatalf("%d reads: %d stale answers, %d of them at once, %d after a wait: client key %+v, credential %+v, consent %+v",
			reads, st, atOnce, waited, r.client.CacheStats(), r.vault.CacheStats(), r.srv.Consents().CacheStats())
	}
	t.Logf("%d reads in the freeze: %d stale answers, %d at once", reads, st, atOnce)

	proxy.Restore()
	deadline := time.Now().Add(15 * time.Second)
	for {
		a := e.get(r.url+"/v1/connections/fake/token", m.tokenHeaders("alice"))
		if a.status == http.StatusOK && strings.Contains(a.body, "at_after_the_freeze") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the thaw: %d %s", a.status, a.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
