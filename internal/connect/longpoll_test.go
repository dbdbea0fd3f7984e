package connect_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestLongPollWokenByAnotherReplica runs two connect servers (separate pools,
// one database): a long-poll on A returns as soon as the flow completes on B,
// through Postgres LISTEN/NOTIFY, long before its wait runs out.
func TestLongPollWokenByAnotherReplica(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.run(e.server) // replica A (e.srv) listens for notifications

	// Replica B: its own pool and server on the same database.
	poolB, err := pgxpool.New(context.Background(), e.pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(poolB.Close)
	cfgB := e.cfg
	cfgB.Pool, cfgB.Logger = poolB, slog.New(slog.DiscardHandler)
	_, urlB := e.replica(cfgB)

	m := e.newMCPServer("files", "fake")
	el := m.mint("alice", map[string]any{"provider": "fake"})
	id := el["elicitation_id"].(string)

	type result struct {
		status  string
		elapsed time.Duration
	}
	res := make(chan result, 1)
	started := time.Now()
	go func() {
		_, out := m.call(http.MethodGet, "/v1/elicitations/"+id+"?wait=30s", "alice", nil)
		s, _ := out["status"].(string)
		res <- result{s, time.Since(started)}
	}()

	// The whole browser flow happens on replica B (same session keys).
	b := e.browser()
	uB := strings.Replace(el["url"].(string), e.srv.URL, urlB, 1)
	consent := e.openAs(b, el["url"].(string), "alice") // login on A
	if consent.status != http.StatusOK {
		t.Fatalf("consent on A: %d", consent.status)
	}
	redirect := b.do(http.MethodPost, uB, allowForm(t, consent.body))
	cb := strings.Replace(e.authorize(redirect), e.srv.URL, urlB, 1)
	completedAt := time.Now()
	if r := b.get(cb); r.status != http.StatusOK || !strings.Contains(r.body, "Connected") {
		t.Fatalf("callback on B: %d %s", r.status, r.body)
	}
	select {
	case r := <-res:
		if r.status != "completed" {
			t.Fatalf("long-poll answered %q", r.status)
		}
		// Woken by the notification, not by the 30 s wait running out.
		if wake := time.Since(completedAt); wake > 5*time.Second {
			t.Fatalf("long-poll took %s after completion", wake)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("long-poll on A was not woken by completion on B")
	}
}

// TestLongPollTimesOutPending: with nothing happening, a short wait answers
// pending.
func TestLongPollTimesOutPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	el := m.mint("alice", map[string]any{"provider": "fake"})
	st, out := m.call(http.MethodGet, "/v1/elicitations/"+el["elicitation_id"].(string)+"?wait=1s", "alice", nil)
	if st != 200 || out["status"] != "pending" {
		t.Fatalf("%d %v", st, out)
	}
}
