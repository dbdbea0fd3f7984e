package connect_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/web"
)

// TestMintBudgetPerClient: one MCP server that spends a user's mint budget
// does not lock the user's other MCP servers out; a ceiling per user still
// bounds all of them together.
func TestMintBudgetPerClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{mintLimit: web.Rate{Requests: 2, Window: time.Minute},
		mintUserLimit: web.Rate{Requests: 3, Window: time.Minute}})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	n := 0
	body := func() map[string]any { // a distinct request each time: each would mint a link of its own
		n++
		return map[string]any{"provider": "fake", "request_digest": fmt.Sprint("r", n)}
	}
	a.mint("carol", body())
	a.mint("carol", body())
	st, out := a.call(http.MethodPost, "/v1/elicitations", "carol", body())
	expectError(t, st, out, http.StatusTooManyRequests, "rate_limited")
	b.mint("carol", body()) // A's flood did not spend B's budget
	st, out = b.call(http.MethodPost, "/v1/elicitations", "carol", body())
	expectError(t, st, out, http.StatusTooManyRequests, "rate_limited") // the per-user ceiling (3)
	if e.count("elicitations") != 3 {
		t.Fatal("a refused mint stored an elicitation")
	}
	a.mint("dave", body()) // another user is not affected
}

// TestLongPollsCappedPerClient: one client key cannot hold more long-polls
// open than the cap; past it a poll is refused with 429 and Retry-After, and
// other clients are not affected.
func TestLongPollsCappedPerClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxWaiters: 2})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	id := a.mint("alice", map[string]any{"provider": "fake"})["elicitation_id"].(string)
	bid := b.mint("alice", map[string]any{"provider": "fake"})["elicitation_id"].(string)

	poll := func(ctx context.Context, m *mcpServer, id, wait string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/v1/elicitations/"+id+"?wait="+wait, nil)
		req.Header.Set("Authorization", "Bearer "+m.key)
		req.Header.Set(mcpauth.UserTokenHeader, m.token("alice"))
		resp, err := e.srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	// Two polls hold A's slots.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Until admitted: the probes below hold a slot for a moment too.
			for ctx.Err() == nil {
				resp, err := poll(ctx, a, id, "30s")
				if err != nil || resp.StatusCode != http.StatusTooManyRequests {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	refusedWithin := func(m *mcpServer, id string) *http.Response {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := poll(context.Background(), m, id, "1s")
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == http.StatusTooManyRequests || time.Now().After(deadline) {
				return resp
			}
		}
	}
	resp := refusedWithin(a, id)
	if resp.StatusCode != http.StatusTooManyRequests || len(resp.Header.Values("Retry-After")) != 1 {
		t.Fatalf("third long-poll: %d %v", resp.StatusCode, resp.Header)
	}
	// B has its own slots.
	if resp, err := poll(context.Background(), b, bid, "1s"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("B's long-poll: %v %v", resp, err)
	}
	// The slots come back when the polls end.
	cancel()
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := poll(context.Background(), a, id, "1s")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots not released: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
