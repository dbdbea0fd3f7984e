package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/server"
)

// callAt makes a /v1 request as m for user at the connectd at base.
func (m *mcpServer) callAt(base, method, path, user string) (int, map[string]any) {
	m.e.t.Helper()
	req, _ := http.NewRequest(method, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set(mcpauth.UserTokenHeader, m.token(user))
	resp, err := m.e.srv.Client().Do(req)
	if err != nil {
		m.e.t.Error(err) // also from a poll's goroutine
		return 0, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// pollingReplica is a second connectd on the database, listening for
// notifications, with client keys cached for an hour (only a notification
// can tell it a client was disabled) and one long-poll per client key, so a
// test knows when a poll is held: the next one is refused.
func (e *env) pollingReplica() string {
	e.t.Helper()
	pool, err := pgxpool.New(context.Background(), e.pool.Config().ConnString())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	cfg := e.Config
	cfg.Pool, cfg.Logger = pool, slog.New(slog.DiscardHandler)
	cfg.Cache = server.CacheConfig{ClientKeyTTL: time.Hour}
	cfg.RateLimit = server.RateLimitConfig{MaxWaiters: 1}
	s, base := e.Replica(cfg)
	e.Run(s)
	return base
}

// TestDisablingEndsLongPollsEverywhere (issue 25): a client disabled on one
// replica — cut off by an admin, or disabled any other way — has the
// long-poll it holds on another replica answered at once with the error its
// key now gets (401 invalid_client), not when the wait runs out.
func TestDisablingEndsLongPollsEverywhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.Run(e.server)
	replica := e.pollingReplica()
	_, adminKey := e.newAdminKey("incident")
	for _, tc := range []struct {
		name, client string
		disable      func(m *mcpServer)
	}{
		{"cut off through the admin API of replica 1", "cutoff", func(m *mcpServer) {
			if st, out := e.adminAPI(adminKey, http.MethodPost, "/admin/api/clients/"+m.client.ID+"/cut-off",
				map[string]any{"confirm": m.client.ID, "since": time.Now().Add(-time.Hour)}); st != http.StatusOK {
				t.Fatalf("cut-off: %d %v", st, out)
			}
		}},
		{"disabled by the CLI", "disabled", func(m *mcpServer) {
			if err := e.clients.SetDisabled(context.Background(), m.client.ID, true); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := e.newMCPServer(tc.client, "fake")
			st, el := m.call(http.MethodPost, "/v1/elicitations", "alice", map[string]any{"provider": "fake"})
			if st != http.StatusCreated {
				t.Fatalf("mint: %d %v", st, el)
			}
			path := "/v1/elicitations/" + el["elicitation_id"].(string)
			type answer struct {
				status int
				body   map[string]any
			}
			done := make(chan answer, 1)
			go func() {
				for {
					st, out := m.callAt(replica, http.MethodGet, path+"?wait=30s", "alice")
					if st != http.StatusTooManyRequests { // else a probe held the one slot: again
						done <- answer{st, out}
						return
					}
				}
			}()
			// Held once the replica refuses a second poll of the key.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				st, out := m.callAt(replica, http.MethodGet, path+"?wait=1ms", "alice")
				if st == http.StatusTooManyRequests {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the long-poll was never held on replica 2: %d %v", st, out)
				}
			}
			tc.disable(m)
			disabled := time.Now()
			select {
			case a := <-done:
				if a.status != http.StatusUnauthorized || a.body["error"] != "invalid_client" {
					t.Fatalf("the long-poll answered %d %v, want 401 invalid_client", a.status, a.body)
				}
				if took := time.Since(disabled); took > time.Second {
					t.Fatalf("the long-poll ended %s after the client was disabled", took)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the long-poll on replica 2 still waits after the client was disabled")
			}
			// The same answer as any other request with the key.
			if st, out := m.callAt(replica, http.MethodGet, path, "alice"); st != http.StatusUnauthorized || out["error"] != "invalid_client" {
				t.Fatalf("a request after: %d %v", st, out)
			}
		})
	}
}
