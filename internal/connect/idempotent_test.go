package connect_test

import (
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/pgtest"
)

// TestIdempotentMint: minting the same request (client, user, provider,
// scope set, digest) while it is pending answers that elicitation again —
// same id, URL and expiry, a fresh request_state, 200 — so a retrying or
// looping MCP client shows the user the link they may already have opened.
// Any other request, or one whose pending elicitation is near its expiry,
// gets a new link.
func TestIdempotentMint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	other := e.newMCPServer("other", "fake")
	body := func(digest string, scopes ...string) map[string]any {
		return map[string]any{"provider": "fake", "scopes": scopes, "request_digest": digest}
	}
	mint := func(srv *mcpServer, user string, b map[string]any, want int) map[string]any {
		t.Helper()
		st, out := srv.call(http.MethodPost, "/v1/elicitations", user, b)
		if st != want {
			t.Fatalf("mint %v: %d, want %d: %v", b, st, want, out)
		}
		return out
	}

	first := mint(m, "alice", body("d1", "read", "write"), http.StatusCreated)
	again := mint(m, "alice", body("d1", "write", "read"), http.StatusOK) // the same set, in another order
	for _, k := range []string{"elicitation_id", "url", "expires_at"} {
		if again[k] != first[k] {
			t.Fatalf("%s: %v, then %v", k, first[k], again[k])
		}
	}
	if again["request_state"] == first["request_state"] || again["request_state"] == "" {
		t.Fatal("the answer again carries no fresh request_state")
	}
	if e.count("elicitations") != 1 || e.auditCount("elicitation.minted") != 1 {
		t.Fatalf("%d elicitations, %d minted events", e.count("elicitations"), e.auditCount("elicitation.minted"))
	}
	// Both request_states resolve to it.
	for _, rs := range []any{first["request_state"], again["request_state"]} {
		st, out := m.call(http.MethodPost, "/v1/elicitations/resolve", "alice", map[string]any{"request_state": rs, "request_digest": "d1"})
		if st != http.StatusOK || out["elicitation_id"] != first["elicitation_id"] {
			t.Fatalf("resolve: %d %v", st, out)
		}
	}

	// Anything else is another request.
	for name, other := range map[string]map[string]any{
		"another digest":   mint(m, "alice", body("d2", "read", "write"), http.StatusCreated),
		"other scopes":     mint(m, "alice", body("d1", "read"), http.StatusCreated),
		"another user":     mint(m, "bob", body("d1", "read", "write"), http.StatusCreated),
		"another client":   mint(other, "alice", body("d1", "read", "write"), http.StatusCreated),
		"no digest at all": mint(m, "alice", body("", "read", "write"), http.StatusCreated),
	} {
		if other["elicitation_id"] == first["elicitation_id"] {
			t.Errorf("%s: answered with the first elicitation", name)
		}
	}

	// Near its expiry (a third of its 15 minutes left), the link is not
	// handed out again: a fresh one is minted, and the old one stays usable.
	e.clock.Advance(10*time.Minute + time.Second)
	fresh := mint(m, "alice", body("d1", "read", "write"), http.StatusCreated)
	if fresh["elicitation_id"] == first["elicitation_id"] {
		t.Fatal("a link near its expiry was handed out again")
	}
	st, out := m.call(http.MethodGet, "/v1/elicitations/"+first["elicitation_id"].(string), "alice", nil)
	if st != http.StatusOK || out["status"] != "pending" {
		t.Fatalf("the old link: %d %v", st, out)
	}
	if again := mint(m, "alice", body("d1", "read", "write"), http.StatusOK); again["elicitation_id"] != fresh["elicitation_id"] {
		t.Fatalf("the fresh link is the one answered again: %v", again["elicitation_id"])
	}
}

// TestIdempotentMintConcurrent: the same request minted at once, many times
// and on two replicas of one database, yields one elicitation.
func TestIdempotentMintConcurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	cfg := e.cfg
	cfg.Pool, cfg.Logger = pgtest.NewPool(t, e.pool.Config().ConnString()), slog.New(slog.DiscardHandler)
	_, replicaB := e.replica(cfg)
	bases := []string{e.srv.URL, replicaB}

	const n = 12
	var wg sync.WaitGroup
	ids := make([]any, n)
	statuses := make([]int, n)
	tok := m.token("alice")
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, out, _ := m.send(bases[i%2], http.MethodPost, "/v1/elicitations", tok,
				map[string]any{"provider": "fake", "scopes": []string{"read"}, "request_digest": "same"})
			statuses[i], ids[i] = st, out["elicitation_id"]
		}()
	}
	wg.Wait()
	created := 0
	for i := range n {
		if statuses[i] == http.StatusCreated {
			created++
		} else if statuses[i] != http.StatusOK {
			t.Fatalf("mint %d: %d", i, statuses[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("mint %d answered %v, mint 0 %v", i, ids[i], ids[0])
		}
	}
	if created != 1 || e.count("elicitations") != 1 {
		t.Fatalf("%d answers said created, %d elicitations stored; want 1 and 1", created, e.count("elicitations"))
	}
}
