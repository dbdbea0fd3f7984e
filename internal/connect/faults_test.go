package connect_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider/providertest"
)

// faultyReplica is another connectd on e's database, reached through a
// proxy the test can freeze or cut, on a pool of two with short database
// deadlines. Its caches never go live (it is not Run), so every request
// needs the database.
func (e *env) faultyReplica() (*pgtest.Proxy, *pgxpool.Pool, string) {
	e.t.Helper()
	proxy, url := pgtest.NewProxy(e.t, e.pool.Config().ConnString())
	pool := pgtest.NewPoolWith(e.t, url, func(pc *pgxpool.Config) { pc.MaxConns = 2 })
	cfg := e.cfg
	cfg.Pool, cfg.Logger = pool, slog.New(slog.NewJSONHandler(e.logs, nil))
	cfg.DB = db.Deadlines{Acquire: 300 * time.Millisecond, Query: 700 * time.Millisecond, MaxWaiting: 4}
	_, base := e.replica(cfg)
	return proxy, pool, base
}

// answer is one response as a client sees it.
type answer struct {
	status int
	header http.Header
	body   string
	took   time.Duration
}

func (a answer) code() string {
	var env struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal([]byte(a.body), &env)
	return env.Error
}

// get sends a request with a client deadline far past connectd's database
// deadlines: a request that hangs fails the test instead of the suite.
func (e *env) get(u string, header http.Header) answer {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	start := time.Now()
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v (after %s: a hang)", u, err, time.Since(start))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b), took: time.Since(start)}
}

func (m *mcpServer) tokenHeaders(user string) http.Header {
	return http.Header{"Authorization": {"Bearer " + m.key}, mcpauth.UserTokenHeader: {m.token(user)}}
}

// unavailable checks a 503 database_unavailable with Retry-After, answered
// within the deadlines (not a hang, not a 500).
func unavailable(t *testing.T, what string, a answer, code string) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Fatalf("%s: %d %s (Retry-After %q), want 503 with Retry-After", what, a.status, a.body, a.header.Get("Retry-After"))
	}
	if code != "" && a.code() != code {
		t.Fatalf("%s: code %q, want %q: %s", what, a.code(), code, a.body)
	}
	if a.took > 10*time.Second {
		t.Fatalf("%s: answered after %s", what, a.took)
	}
}

// TestDatabaseFaultsAnswer503 (issue 22): a database that restarts, freezes
// or runs out of connections is a 503 database_unavailable with Retry-After
// on the API and a "temporarily unavailable" page in the browser, within the
// request's database deadlines — never a 500 or a hang — and service comes
// back by itself when the fault ends.
func TestDatabaseFaultsAnswer503(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	proxy, pool, base := e.faultyReplica()
	tokenURL := base + "/v1/connections/fake/token"
	// Before the faults the replica serves (its first requests also dial
	// its pool; on a loaded machine that may take longer than the short
	// deadlines this replica has, so it gets a few tries).
	for i := 0; ; i++ {
		r := e.get(tokenURL, a.tokenHeaders("alice"))
		if r.status == http.StatusOK {
			break
		}
		if i == 4 {
			t.Fatalf("token read before the faults: %d %s", r.status, r.body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	br := e.browser()
	e.login(br, "alice", "/account")
	page := func() answer {
		h := http.Header{"Accept": {"text/html"}}
		for name, v := range br.Cookies {
			h.Add("Cookie", name+"="+v)
		}
		return e.get(base+"/account", h)
	}
	if r := page(); r.status != http.StatusOK {
		t.Fatalf("account page before the faults: %d", r.status)
	}

	proxy.Freeze() // a Postgres under SIGSTOP
	unavailable(t, "token read, database frozen", e.get(tokenURL, a.tokenHeaders("alice")), "database_unavailable")
	p := page()
	unavailable(t, "page, database frozen", p, "")
	if !strings.Contains(p.header.Get("Content-Type"), "text/html") || !strings.Contains(p.body, "Temporarily unavailable") {
		t.Fatalf("page, database frozen: %s %s", p.header.Get("Content-Type"), p.body)
	}
	proxy.Restore()

	proxy.Cut() // a database that went away
	unavailable(t, "token read, database gone", e.get(tokenURL, a.tokenHeaders("alice")), "database_unavailable")
	proxy.Restore()

	// Every pooled connection taken: a request waits its acquire deadline.
	var held []*pgxpool.Conn
	for range 2 {
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	unavailable(t, "token read, pool exhausted", e.get(tokenURL, a.tokenHeaders("alice")), "database_unavailable")
	r := e.get(base+"/readyz", nil)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"pool_exhausted"`) {
		t.Fatalf("readiness with the pool exhausted: %d %s", r.status, r.body)
	}
	for _, c := range held {
		c.Release()
	}

	// Back by itself.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.get(tokenURL, a.tokenHeaders("alice"))
		if r.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("token read after the faults: %d %s", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := e.get(base+"/readyz", nil); r.status != http.StatusOK {
		t.Fatalf("readiness after the faults: %d %s", r.status, r.body)
	}
	if strings.Contains(e.logs.String(), `"internal_error"`) {
		t.Fatal("a fault was answered internal_error")
	}
}

// TestProviderGarbageIsUnavailable (issue 22): a provider answering a
// refresh with something that is not a token answer — not JSON, {}, 5 MB,
// a redirect — is 503 provider_unavailable with Retry-After, the stored
// credential kept, not a 500.
func TestProviderGarbageIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"garbage", "empty", "huge", "redirect"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			a := e.newMCPServer("alpha", "fake")
			e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
			e.clock.Advance(2 * time.Hour) // the access token has expired
			e.fake.SetQuirks(providertest.Quirks{RefreshAnswer: kind})
			r := e.get(e.srv.URL+"/v1/connections/fake/token", a.tokenHeaders("alice"))
			if r.status != http.StatusServiceUnavailable || r.code() != "provider_unavailable" || r.header.Get("Retry-After") == "" {
				t.Fatalf("refresh answered %s: %d %s", kind, r.status, r.body)
			}
			if strings.Contains(r.body, "secret") || strings.Contains(r.body, "elsewhere") {
				t.Fatalf("the answer repeats the provider's: %s", r.body)
			}
			st, out := a.call(http.MethodGet, "/v1/connections", "alice", nil)
			if st != http.StatusOK || !strings.Contains(jsonString(out), `"status":"active"`) {
				t.Fatalf("connection after the bad answer: %d %v", st, out)
			}
			e.fake.SetQuirks(providertest.Quirks{})
			if r := e.get(e.srv.URL+"/v1/connections/fake/token", a.tokenHeaders("alice")); r.status != http.StatusOK {
				t.Fatalf("token once the provider answers well: %d %s", r.status, r.body)
			}
		})
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
