package connect_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/db"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/pgtest"
)

// TestLongPollsOnASmallPool (issue 35): 300 long-polls sent at once to a
// replica whose pool has 10 connections are all held (none answered, every
// one's checks done, no pooled connection held) — a long-poll waits
// without a pooled connection, only its checks take one, briefly, and the
// burst of those checks waits for the pool within its deadline instead of
// being refused past a count of waiters (233 of 300 were answered 503 in
// under 0.1 s so before).
func TestLongPollsOnASmallPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	_, url := pgtest.NewProxy(t, e.pool.Config().ConnString())
	pool := pgtest.NewPoolWith(t, url, func(pc *pgxpool.Config) { pc.MaxConns = 10 })
	cfg := e.cfg
	cfg.Pool, cfg.Logger = pool, slog.New(slog.NewJSONHandler(e.logs, nil))
	// This replica is not Run: its caches never go live, so each poll's
	// checks are four or five reads (client key, elicitation, the client
	// again) — 1,500 statements for the burst on a pool of 10, on shared
	// cores and under -race with the package's other tests: a longer
	// acquire deadline than the default 2 s, the waiter cap derived from it
	// (7,500).
	cfg.DB = db.Deadlines{Acquire: 30 * time.Second}
	cfg.RateLimit.MaxWaiters = 1000
	_, base := e.replica(cfg)
	id := m.mint("alice", map[string]any{"provider": "fake"})["elicitation_id"].(string)
	h := http.Header{"Authorization": {"Bearer " + m.key}, mcpauth.UserTokenHeader: {m.token("alice")}}

	const polls = 300
	type result struct {
		status int
		body   string
	}
	results := make(chan result, polls)
	start := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range polls {
		wg.Go(func() {
			<-start
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/elicitations/"+id+"?wait=60s", nil)
			req.Header = h.Clone()
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				results <- result{0, err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- result{resp.StatusCode, string(b)}
		})
	}
	close(start)
	// Held: every poll's checks are done (nothing answered yet), and no
	// pooled connection is held by the waiting polls.
	for {
		select {
		case r := <-results:
			t.Fatalf("a long-poll was answered before its elicitation changed: %d %s", r.status, r.body)
		default:
		}
		if s := pool.Stat(); db.Waiting(pool) == 0 && s.AcquiredConns() == 0 && s.AcquireCount() >= 2*polls {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// All 300 held: the test hangs up (the replica is not Run, so nothing
	// would wake them before their minute).
	cancel()
	wg.Wait()
}
