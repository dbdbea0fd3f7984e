package connect_test

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/provider/providertest"
)

// narrowing is the fake provider configured as one that narrows tokens on
// refresh (as the google and microsoft templates are).
func narrowing(entry map[string]any) { entry["narrow_on_refresh"] = true }

// scopedRefreshes counts the refresh requests that carried a scope.
func scopedRefreshes(e *env) int {
	n := 0
	for _, r := range e.fake.TokenRequests() {
		if r.GrantType == "refresh_token" && r.Scope != "" {
			n++
		}
	}
	return n
}

// secondReplica is another connectd on the same database (its own
// pool and vault store), behind its own TLS server.
func (e *env) secondReplica() string {
	e.t.Helper()
	cfg := e.cfg
	cfg.Pool, cfg.Logger = pgtest.NewPool(e.t, e.pool.Config().ConnString()), slog.New(slog.DiscardHandler)
	_, base := e.replica(cfg)
	return base
}

// TestNarrowedTokenPerClient (DESIGN invariant 6, issue 14 §1): at a provider
// that narrows tokens, a client approved for less than the connection grants
// receives a token limited to its approval, fetched once across replicas,
// without ever using a rotating refresh token twice; its consent page lists
// only what it will receive.
func TestNarrowedTokenPerClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{rotate: true, fakeEntry: narrowing})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read", "write", "admin"}})
	full := tokenOf(t, a, "alice")
	if got := scopesOf(full); !slices.Equal(got, []string{"admin", "read", "write"}) {
		t.Fatalf("A's token carries %v", got)
	}

	// B asks for read: the page lists read alone, says the token is limited
	// to it, and marks nothing as beyond.
	u := b.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
	br := e.browser()
	page := e.openAs(br, u, "alice")
	if strings.Contains(page.body, "<code>write</code>") || strings.Contains(page.body, "<code>admin</code>") ||
		strings.Contains(page.body, `class="beyond"`) || !strings.Contains(page.body, "<li><code>read</code>") ||
		!strings.Contains(page.body, "limited to these permissions") {
		t.Fatalf("consent page at a narrowing provider: %s", page.body)
	}
	if r := e.allow(br, u, page); r.status != http.StatusOK || !strings.Contains(r.body, "Connected") {
		t.Fatalf("consent-only Allow: %d %s", r.status, r.body)
	}

	// Many concurrent token calls for B on two replicas: one scoped refresh.
	other := e.secondReplica()
	const callers = 12
	answers := make([]map[string]any, callers)
	statuses := make([]int, callers)
	var wg sync.WaitGroup
	for i := range callers {
		base := e.srv.URL
		if i%2 == 1 {
			base = other
		}
		wg.Go(func() {
			statuses[i], answers[i] = b.callAt(base, http.MethodGet, "/v1/connections/fake/token", "alice")
		})
	}
	wg.Wait()
	for i, st := range statuses {
		if st != http.StatusOK || answers[i]["access_token"] != answers[0]["access_token"] {
			t.Fatalf("B's call %d: %d %v", i, st, answers[i])
		}
	}
	if n := scopedRefreshes(e); n != 1 {
		t.Fatalf("%d scoped refreshes reached the provider, want exactly 1", n)
	}
	narrow := answers[0]["access_token"].(string)
	if got, _ := e.fake.TokenScopes(narrow); narrow == full["access_token"] || !slices.Equal(got, []string{"read"}) ||
		!slices.Equal(scopesOf(answers[0]), []string{"read"}) {
		t.Fatalf("B's token carries %v at the provider, answer says %v", got, scopesOf(answers[0]))
	}
	if got := tokenOf(t, a, "alice"); got["access_token"] != full["access_token"] {
		t.Fatal("A no longer receives the connection's own token")
	}

	// The narrowing rotated the refresh token; the connection's own refresh
	// (A's, an hour later) uses the new one: no reuse, the grant lives.
	e.clock.Advance(2 * time.Hour)
	later := tokenOf(t, a, "alice")
	if later["access_token"] == full["access_token"] || !e.fake.Valid(later["access_token"].(string)) {
		t.Fatalf("A's refresh after B's narrowing: %v", later)
	}
	if again := tokenOf(t, b, "alice"); again["access_token"] == narrow || !e.fake.Valid(again["access_token"].(string)) {
		t.Fatalf("B's narrowed token an hour later: %v", again)
	}

	// What B may require: within its approval yes, beyond it
	// consent_required, beyond the connection insufficient_scope.
	if st, out := b.call(http.MethodGet, "/v1/connections/fake/token?scopes=read", "alice", nil); st != http.StatusOK {
		t.Fatalf("B requiring read: %d %v", st, out)
	}
	st, out := b.call(http.MethodGet, "/v1/connections/fake/token?scopes=write", "alice", nil)
	consentRequired(t, st, out, []string{"write"}, false)
	st, out = b.call(http.MethodGet, "/v1/connections/fake/token?scopes=nope", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "insufficient_scope")
	st, out = b.call(http.MethodGet, "/v1/connections", "alice", nil)
	if c := out["connections"].([]any); st != 200 || len(c) != 1 || c[0].(map[string]any)["consent_required"] != nil {
		t.Fatalf("B's connection list: %d %v", st, out)
	}

	// B steps up to write: the page lists read and write (its approval does
	// not shrink), and B then receives both.
	u = b.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"write"}})["url"].(string)
	br = e.browser()
	page = e.openAs(br, u, "alice")
	if !strings.Contains(page.body, "<li><code>read</code>") || !strings.Contains(page.body, "<li><code>write</code>") ||
		strings.Contains(page.body, "<code>admin</code>") {
		t.Fatalf("B's step-up page: %s", page.body)
	}
	if r := e.allow(br, u, page); r.status != http.StatusOK {
		t.Fatalf("B's step-up: %d %s", r.status, r.body)
	}
	if got := scopesOf(tokenOf(t, b, "alice")); !slices.Equal(got, []string{"read", "write"}) {
		t.Fatalf("B after its step-up: %v", got)
	}

	// Unlink: the narrowed tokens go with the connection.
	if e.count("narrowed_tokens") == 0 {
		t.Fatal("no narrowed token stored")
	}
	if st, out := b.call(http.MethodDelete, "/v1/connections/fake", "alice", nil); st != http.StatusOK {
		t.Fatalf("unlink: %d %v", st, out)
	}
	if n := e.count("narrowed_tokens"); n != 0 {
		t.Fatalf("%d narrowed tokens outlived the connection", n)
	}
}

// TestNarrowingStepUpAtTheProvider: a client of a narrowing provider that
// needs a scope the connection lacks goes to the provider, which is asked
// for the whole connection (incremental authorization), while the approval
// is only for what the page listed.
func TestNarrowingStepUpAtTheProvider(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{fakeEntry: narrowing})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read", "admin"}})
	e.connectFully(b, "alice", map[string]any{"provider": "fake", "scopes": []string{"write"}})
	if got := scopesOf(tokenOf(t, a, "alice")); !slices.Equal(got, []string{"admin", "read"}) {
		t.Fatalf("A after B's step-up: %v (A's approval does not cover write)", got)
	}
	if got := scopesOf(tokenOf(t, b, "alice")); !slices.Equal(got, []string{"write"}) {
		t.Fatalf("B's token: %v", got)
	}
	var conn []string
	if err := e.pool.QueryRow(context.Background(), `SELECT scopes FROM connections`).Scan(&conn); err != nil {
		t.Fatal(err)
	}
	if slices.Sort(conn); !slices.Equal(conn, []string{"admin", "read", "write"}) {
		t.Fatalf("the step-up lost the connection's earlier scopes: %v", conn)
	}
}

// TestNarrowingNeedsTheProvider: a provider not configured to narrow (the
// default, also for discovered providers) keeps the full-list consent; one
// configured to narrow that ignores scope never hands a client the whole
// grant.
func TestNarrowingNeedsTheProvider(t *testing.T) {
	t.Parallel()
	t.Run("discovered without the flag", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{fakeEntry: func(m map[string]any) {
			for _, k := range []string{"authorize_url", "token_url", "revocation_url"} {
				delete(m, k)
			}
			m["discovery"] = true
		}})
		if p, err := e.catalog.Get("fake"); err != nil || p.Info().NarrowOnRefresh {
			t.Fatal("a discovered provider narrows without the flag")
		}
		a := e.newMCPServer("alpha", "fake")
		b := e.newMCPServer("beta", "fake")
		e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read", "write"}})
		st, out := b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
		expectError(t, st, out, http.StatusForbidden, "consent_required")
		u := b.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
		br := e.browser()
		if page := e.openAs(br, u, "alice"); !strings.Contains(page.body, "<code>write</code> <span class=\"beyond\">") {
			t.Fatalf("the page does not list write as beyond: %s", page.body)
		}
		if scopedRefreshes(e) != 0 {
			t.Fatal("a scoped refresh reached a provider that does not narrow")
		}
	})
	t.Run("configured but ignoring scope", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{fakeEntry: narrowing, quirks: providertest.Quirks{IgnoreRefreshScope: true}})
		a := e.newMCPServer("alpha", "fake")
		b := e.newMCPServer("beta", "fake")
		e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read", "write"}})
		e.consentAgainWith(b, "alice", []string{"read"})
		st, out := b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
		consentRequired(t, st, out, []string{"write"}, false)
		if scopedRefreshes(e) != 1 || e.count("narrowed_tokens") != 0 {
			t.Fatal("a token wider than the approval was kept")
		}
	})
}

// consentAgainWith runs a consent-only flow for scopes.
func (e *env) consentAgainWith(m *mcpServer, user string, scopes []string) {
	e.t.Helper()
	u := m.mint(user, map[string]any{"provider": "fake", "scopes": scopes})["url"].(string)
	b := e.browser()
	if r := e.allow(b, u, e.openAs(b, u, user)); r.status != http.StatusOK || !strings.Contains(r.body, "Connected") {
		e.t.Fatalf("consent-only flow: %d %s", r.status, r.body)
	}
}
