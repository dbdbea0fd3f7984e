package connect_test

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/mcpauth"
)

// Issue 35, "Provider rate limits kept for the caller": connectd's proxy
// keeps the provider's limits across replicas, answering 429
// provider_rate_limited with Retry-After itself, without calling the
// provider, per (provider app, connection) and per app.

// limitedEntry gives the fake provider the rate_limits rules.
func limitedEntry(rules ...map[string]any) func(map[string]any) {
	return func(m map[string]any) { m["rate_limits"] = rules }
}

// reached counts the calls that reached the fake provider's API.
func reached(e *env) int { return len(e.fake.APIRequests()) }

// proxyAnswer is a proxied call's answer.
type proxyAnswer struct {
	status           int
	body, retryAfter string
}

// get is a proxied GET of path as m for user on the replica at base.
func (m *mcpServer) get(base, path, user string) proxyAnswer {
	m.e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/proxy/fake/"+path, nil)
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, m.token(user))
	resp, err := m.e.srv.Client().Transport.RoundTrip(req)
	if err != nil {
		m.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return proxyAnswer{resp.StatusCode, string(raw), resp.Header.Get("Retry-After")}
}

// TestProxyProviderHoldSharedAcrossReplicas: a provider's 429 with
// Retry-After on one replica holds the connection's calls on the other
// too (no call reaches the provider inside the window), and not another
// user's; the hold ends with the window (the settable clock).
func TestProxyProviderHoldSharedAcrossReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.connectFully(a, "bob", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	if st, body := a.proxiedAt(e.srv.URL, "limited?after=30", "alice"); st != http.StatusTooManyRequests {
		t.Fatalf("the provider's 429: %d %s", st, body)
	}
	other := e.secondReplica()
	before := reached(e)
	for _, base := range []string{other, e.srv.URL} {
		resp := a.get(base, "echo", "alice")
		if resp.status != http.StatusTooManyRequests || !strings.Contains(resp.body, "provider_rate_limited") ||
			resp.retryAfter == "" {
			t.Fatalf("inside the window on %s: %d %s (Retry-After %q)", base, resp.status, resp.body, resp.retryAfter)
		}
	}
	if n := reached(e) - before; n != 0 {
		t.Fatalf("%d calls reached the provider inside its window", n)
	}
	if st, body := a.proxiedAt(other, "echo", "bob"); st != http.StatusOK {
		t.Fatalf("bob is not held by alice's window: %d %s", st, body)
	}
	e.clock.Advance(31 * time.Second)
	if st, body := a.proxiedAt(other, "echo", "alice"); st != http.StatusOK {
		t.Fatalf("after the window: %d %s", st, body)
	}
}

// TestProxyRateLimitHeaders: X-RateLimit-Remaining: 0 with its
// X-RateLimit-Reset (GitHub's), and the IETF draft's RateLimit field,
// hold the connection until the reset, on every replica.
func TestProxyRateLimitHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	other := e.secondReplica()
	for _, tc := range []struct{ name, query string }{
		{"X-RateLimit-*", "limited?remaining=0&reset=" + strconv.FormatInt(e.clock.Now().Add(60*time.Second).Unix(), 10)},
		{"RateLimit (draft)", "limited?ratelimit=" + url.QueryEscape(`"default";r=0;t=60`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if st, body := a.proxiedAt(e.srv.URL, "limited?remaining=5&reset=0", "alice"); st != http.StatusOK {
				t.Fatalf("remaining 5: %d %s", st, body) // something left: nothing held
			}
			if st, body := a.proxiedAt(e.srv.URL, tc.query, "alice"); st != http.StatusOK {
				t.Fatalf("the last call of the budget: %d %s", st, body)
			}
			before := reached(e)
			resp := a.get(other, "echo", "alice")
			if resp.status != http.StatusTooManyRequests || !strings.Contains(resp.body, "provider_rate_limited") {
				t.Fatalf("once spent: %d %s", resp.status, resp.body)
			}
			if ra, _ := strconv.Atoi(resp.retryAfter); ra < 55 || ra > 60 {
				t.Fatalf("Retry-After %q, want the reset's 60 s", resp.retryAfter)
			}
			if reached(e) != before {
				t.Fatal("a call reached the provider before its reset")
			}
			e.clock.Advance(61 * time.Second)
			if st, body := a.proxiedAt(other, "echo", "alice"); st != http.StatusOK {
				t.Fatalf("after the reset: %d %s", st, body)
			}
		})
	}
}

// TestProxyTemplateLimitSharedAcrossReplicas: a per-user limit of 4 an
// hour is one budget for both replicas: calls alternating between them
// get 4 through, then 429 on either without calling the provider, until
// the window ends.
func TestProxyTemplateLimitSharedAcrossReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{fakeEntry: limitedEntry(map[string]any{"scope": "user", "requests": 4, "per": "1h"})})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.clock.Advance(e.clock.Now().Truncate(time.Hour).Add(time.Hour).Sub(e.clock.Now())) // a window's start
	bases := []string{e.srv.URL, e.secondReplica()}
	before := reached(e)
	for i := range 4 {
		if st, body := a.proxiedAt(bases[i%2], "echo", "alice"); st != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, st, body)
		}
	}
	for _, base := range bases {
		resp := a.get(base, "echo", "alice")
		if resp.status != http.StatusTooManyRequests || !strings.Contains(resp.body, "provider_rate_limited") || resp.retryAfter == "" {
			t.Fatalf("the fifth call on %s: %d %s", base, resp.status, resp.body)
		}
	}
	if n := reached(e) - before; n != 4 {
		t.Fatalf("%d calls reached the provider, want 4", n)
	}
	e.clock.Advance(time.Hour)
	if st, body := a.proxiedAt(bases[1], "echo", "alice"); st != http.StatusOK {
		t.Fatalf("the next window: %d %s", st, body)
	}
}

// TestProxyQuietUserNotStarved: at a per-app limit (Notion's shape), a
// busy user spends at most her share of the app's budget, so a quiet user
// of the same app still gets through; at a per-user limit, another user's
// budget is his own.
func TestProxyQuietUserNotStarved(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rule map[string]any
		busy int // calls the busy user gets through
	}{
		{"per app", map[string]any{"scope": "app", "requests": 4, "per": "1h"}, 2},
		{"per user", map[string]any{"scope": "user", "requests": 3, "per": "1h"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{fakeEntry: limitedEntry(tc.rule)})
			a := e.newMCPServer("alpha", "fake")
			e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
			e.connectFully(a, "bob", map[string]any{"provider": "fake", "scopes": []string{"read"}})
			e.clock.Advance(e.clock.Now().Truncate(time.Hour).Add(time.Hour).Sub(e.clock.Now())) // a window's start
			ok := 0
			for range 10 {
				if st, _ := a.proxiedAt(e.srv.URL, "echo", "alice"); st == http.StatusOK {
					ok++
				} else if st != http.StatusTooManyRequests {
					t.Fatalf("busy alice: %d", st)
				}
			}
			if ok != tc.busy {
				t.Fatalf("busy alice got %d calls through, want %d", ok, tc.busy)
			}
			if st, body := a.proxiedAt(e.srv.URL, "echo", "bob"); st != http.StatusOK {
				t.Fatalf("quiet bob is starved: %d %s", st, body)
			}
		})
	}
}
