package connect_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/cache"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/vault"
)

// replica is a connectd with every cache on (client keys, sealed
// credentials, consents), on a pool of its own, listening for notifications
// as in production.
type replica struct {
	url    string
	pool   *pgxpool.Pool
	srv    *server.Server
	vault  *vault.Store
	client *clientauth.Clients
}

func (e *env) cachingReplica() *replica {
	e.t.Helper()
	pool, err := pgxpool.New(context.Background(), e.pool.Config().ConnString())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	cfg := e.cfg
	cfg.Pool, cfg.Logger, cfg.Now = pool, slog.New(slog.DiscardHandler), nil
	cfg.Cache = server.CacheConfig{CredentialTTL: time.Hour, ConsentTTL: time.Hour, ClientKeyTTL: time.Hour}
	cfg.RateLimit = server.RateLimitConfig{}
	r := &replica{pool: pool}
	r.srv, r.url = e.replica(cfg)
	r.vault, r.client = r.srv.Vault(), r.srv.Clients()
	e.run(r.srv)
	return r
}

// callAt makes a /v1 request as m at the replica at base.
func (m *mcpServer) callAt(base, method, path, user string) (int, map[string]any) {
	m.e.t.Helper()
	st, out, raw := m.send(base, method, path, m.token(user), nil)
	if out == nil {
		m.e.t.Fatalf("%s %s: %d, body not JSON: %s", method, path, st, raw)
	}
	return st, out
}

// consentAgain runs a flow that stops at consent (the connection exists).
func (e *env) consentAgain(m *mcpServer, user string) {
	e.t.Helper()
	u := m.mint(user, map[string]any{"provider": "fake"})["url"].(string)
	b := e.browser()
	if r := e.allow(b, u, e.openAs(b, u, user)); r.status != http.StatusOK || !strings.Contains(r.body, "Connected") {
		e.t.Fatalf("consent-only flow: %d %s", r.status, r.body)
	}
}

// withinASecond polls the token endpoint at r until it answers status and
// code, failing after one second: a change on one replica must take effect
// on every replica within a second.
func withinASecond(t *testing.T, m *mcpServer, r *replica, status int, code string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		st, out := m.callAt(r.url, http.MethodGet, "/v1/connections/fake/token", "alice")
		if st == status && (code == "" || out["error"] == code) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica still answers %d %v a second later, want %d %s", st, out["error"], status, code)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitCached reads alice's token at r until r answers from its caches.
func waitCached(t *testing.T, m *mcpServer, r *replica) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		before := r.vault.CacheStats().Hits
		if st, out := m.callAt(r.url, http.MethodGet, "/v1/connections/fake/token", "alice"); st != http.StatusOK {
			t.Fatalf("token: %d %v", st, out)
		}
		if r.vault.CacheStats().Hits > before && r.srv.Consents().CacheStats().Entries > 0 && r.client.CacheStats().Entries > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica does not answer from its caches")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRevokeReachesEveryReplicaWithinASecond: two caching replicas on two
// pools; every change made on one replica, or by the admin, reaches the
// other's caches within a second, long before their one-hour TTL.
func TestRevokeReachesEveryReplicaWithinASecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	r1, r2 := e.cachingReplica(), e.cachingReplica()
	m := e.newMCPServer("files", "fake")
	ctx := context.Background()
	alice := identity.User{Issuer: e.idps[0].Issuer(), Subject: "alice"}

	t.Run("unlink through the API on one replica", func(t *testing.T) {
		e.connectFully(m, "alice", map[string]any{"provider": "fake"})
		waitCached(t, m, r1)
		waitCached(t, m, r2)
		if st, out := m.callAt(r1.url, http.MethodDelete, "/v1/connections/fake", "alice"); st != http.StatusOK {
			t.Fatalf("unlink on r1: %d %v", st, out)
		}
		withinASecond(t, m, r2, http.StatusNotFound, "not_connected")
	})
	t.Run("admin revocation", func(t *testing.T) {
		e.connectFully(m, "alice", map[string]any{"provider": "fake"})
		waitCached(t, m, r1)
		waitCached(t, m, r2)
		// As internal/admin revokes: the vault deletes, consents go in the
		// same transaction.
		if _, err := e.vault.DeleteWith(ctx, alice, "fake", "", func(ctx context.Context, tx pgx.Tx, gone vault.Connection) error {
			_, err := consent.Withdraw(ctx, tx, alice, "fake", gone.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		withinASecond(t, m, r1, http.StatusNotFound, "not_connected")
		withinASecond(t, m, r2, http.StatusNotFound, "not_connected")
	})
	t.Run("consent withdrawn, connection kept", func(t *testing.T) {
		e.connectFully(m, "alice", map[string]any{"provider": "fake"})
		waitCached(t, m, r2)
		conn, err := e.vault.Lookup(ctx, alice, "fake", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			_, err := consent.Withdraw(ctx, tx, alice, "fake", conn.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		withinASecond(t, m, r2, http.StatusForbidden, "consent_required")
	})
	t.Run("refresh on another replica", func(t *testing.T) {
		e.consentAgain(m, "alice") // the connection is still there: consent only
		waitCached(t, m, r2)
		_, before := m.callAt(r2.url, http.MethodGet, "/v1/connections/fake/token", "alice")
		// A Put on r1's store (as a refresh or reconnect writes) replaces the
		// credential; r2 must hand out the new one.
		// Same scopes and account: the approval still covers it.
		_, old, err := r1.vault.Get(ctx, alice, "fake", "")
		if err != nil {
			t.Fatal(err)
		}
		cred := vault.Credential{AccessToken: "at_replaced", TokenType: "Bearer", Expiry: time.Now().Add(time.Hour),
			AccountID: old.AccountID}
		if _, err := r1.vault.Put(ctx, alice, "fake", cred); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Second)
		for {
			_, out := m.callAt(r2.url, http.MethodGet, "/v1/connections/fake/token", "alice")
			if out["access_token"] == "at_replaced" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("r2 still hands out %v (was %v)", out["access_token"], before["access_token"])
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Run("client disabled", func(t *testing.T) {
		waitCached(t, m, r2)
		if err := e.clients.SetDisabled(ctx, m.client.ID, true); err != nil {
			t.Fatal(err)
		}
		withinASecond(t, m, r2, http.StatusUnauthorized, "invalid_client")
		if err := e.clients.SetDisabled(ctx, m.client.ID, false); err != nil {
			t.Fatal(err)
		}
		withinASecond(t, m, r2, http.StatusOK, "")
	})
	t.Run("listener connection lost: caches read again on reconnection, then resumed", func(t *testing.T) {
		waitCached(t, m, r2)
		// Kill every LISTENing backend of this database: both replicas lose
		// their feed.
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, cache.ListenerApplicationName).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("no listener connection found")
		}
		// While the feed is down r2 serves what it holds (until the TTL);
		// once its listener is back, no entry from before the drop is a hit
		// any more: the next read misses all three caches (their TTL is an
		// hour) and reads everything again (the first backoff, then a new
		// connection: generously bounded for a loaded machine).
		misses := func() [3]uint64 {
			return [3]uint64{r2.vault.CacheStats().Misses, r2.srv.Consents().CacheStats().Misses, r2.client.CacheStats().Misses}
		}
		// Each cache must miss once: not necessarily on one read, as a read
		// under way when the listener comes back may find one entry before
		// the reconnection and the next after it (read again by then).
		deadline := time.Now().Add(5 * time.Second)
		before := misses()
		for {
			if st, out := m.callAt(r2.url, http.MethodGet, "/v1/connections/fake/token", "alice"); st != http.StatusOK {
				t.Fatalf("token: %d %v", st, out)
			}
			after := misses()
			if after[0] > before[0] && after[1] > before[1] && after[2] > before[2] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("entries from before the drop still answered after the listener reconnected")
			}
			time.Sleep(5 * time.Millisecond)
		}
		waitCached(t, m, r2) // the listener reconnects and caching resumes
	})
}

// TestNoCacheWithoutListener: a store whose caches nobody keeps fresh (no
// Run) never caches, whatever its TTL.
func TestNoCacheWithoutListener(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	st, err := vault.New(vault.Config{Pool: e.pool, Keyring: e.keyring, CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	alice := identity.User{Issuer: "https://idp.example", Subject: "alice"}
	if _, err := st.Put(context.Background(), alice, "fake", vault.Credential{AccessToken: "at"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := st.Token(context.Background(), alice, "fake", "", nil); err != nil {
			t.Fatal(err)
		}
	}
	if s := st.CacheStats(); s.Entries != 0 || s.Hits != 0 {
		t.Fatalf("cached without a listener: %+v", s)
	}
}
