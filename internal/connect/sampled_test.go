package connect_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/mcpauth"
)

// sampledCount sums the occurrences the audit rows of kind stand for.
func (e *env) sampledCount(kind, extra string, args ...any) (rows, occurrences int) {
	e.t.Helper()
	q := `SELECT count(*), coalesce(sum((detail->>'count')::int), 0) FROM audit_events WHERE kind = $1` + extra
	if err := e.pool.QueryRow(context.Background(), q, append([]any{kind}, args...)...).Scan(&rows, &occurrences); err != nil {
		e.t.Fatal(err)
	}
	return rows, occurrences
}

// TestTokenReadsAreSampled: token reads are audited at most once per hour per
// (user, client, provider) and replica, and the rows still account for every
// read; the hot path writes no row for the others.
func TestTokenReadsAreSampled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	files := e.newMCPServer("files", "fake")
	notes := e.newMCPServer("notes", "fake")
	e.connectFully(files, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.connectFully(notes, "alice", map[string]any{"provider": "fake", "scopes": []string{"write"}})
	e.consentAgain(files, "alice") // notes widened the connection: files is approved for it again

	read := func(m *mcpServer, n int) {
		t.Helper()
		for range n {
			if st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusOK {
				t.Fatalf("token: %d %v", st, out)
			}
		}
	}
	read(files, 5)
	read(notes, 2)
	byClient := ` AND client_id = $2 AND actor = 'client:' || $2 AND subject = 'alice' AND provider = 'fake'`
	if rows, n := e.sampledCount("token.read", byClient, files.client.ID); rows != 1 || n != 1 {
		t.Fatalf("files after 5 reads: %d rows for %d reads, want 1 row for the first", rows, n)
	}
	if rows, _ := e.sampledCount("token.read", byClient, notes.client.ID); rows != 1 {
		t.Fatalf("notes: %d rows, want its own", rows)
	}
	// The sweep writes nothing before the hour is over ...
	if err := e.connect.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rows, _ := e.sampledCount("token.read", ""); rows != 2 {
		t.Fatalf("%d rows after an early sweep", rows)
	}
	// ... and the uncounted reads after it.
	e.clock.Advance(time.Hour + time.Second)
	if err := e.connect.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rows, n := e.sampledCount("token.read", byClient, files.client.ID); rows != 2 || n != 5 {
		t.Fatalf("files after the sweep: %d rows for %d reads, want 2 for 5", rows, n)
	}
	read(files, 3) // within the hour of that row: counted only
	e.clock.Advance(time.Hour + time.Second)
	read(files, 1) // a new hour: a row for the 3 and this one
	if rows, n := e.sampledCount("token.read", byClient, files.client.ID); rows != 3 || n != 9 {
		t.Fatalf("files at the end: %d rows for %d reads, want 3 for 9", rows, n)
	}
}

// TestRefusedCallsAreSampled: refused /v1 calls (bad user token, bad client
// key) are audited as security events, one row per client and reason per
// minute, counting every refusal.
func TestRefusedCallsAreSampled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	files := e.newMCPServer("files", "fake")
	notes := e.newMCPServer("notes", "fake")

	call := func(key, userToken string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/connections", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		if userToken != "" {
			req.Header.Set(mcpauth.UserTokenHeader, userToken)
		}
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 7 { // a token issued for another MCP server: passthrough refused
		if st := call(files.key, notes.token("alice")); st != http.StatusUnauthorized {
			t.Fatalf("wrong audience: %d", st)
		}
	}
	for range 3 {
		if st := call(files.key, "not.a.jwt"); st != http.StatusUnauthorized {
			t.Fatalf("malformed token: %d", st)
		}
	}
	for range 4 {
		if st := call("cks_"+strings.Repeat("A", 43), notes.token("alice")); st != http.StatusUnauthorized {
			t.Fatalf("bad client key: %d", st)
		}
	}
	if rows, n := e.sampledCount("security.invalid_user_token", ` AND client_id = $2 AND detail->>'reason' = 'wrong_audience'`,
		files.client.ID); rows != 1 || n != 1 {
		t.Fatalf("wrong audience: %d rows for %d, want 1 row at once", rows, n)
	}
	e.clock.Advance(time.Minute + time.Second)
	if err := e.connect.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		kind, reason, client string
		want                 int
	}{
		{"security.invalid_user_token", "wrong_audience", files.client.ID, 7},
		{"security.invalid_user_token", "invalid_token", files.client.ID, 3},
		{"security.invalid_client_key", "invalid_client", "", 4},
	} {
		rows, n := e.sampledCount(tt.kind, ` AND client_id = $2 AND detail->>'reason' = $3`, tt.client, tt.reason)
		if rows != 2 && tt.want > 1 || n != tt.want {
			t.Errorf("%s %s: %d rows for %d, want 2 rows for %d", tt.kind, tt.reason, rows, n, tt.want)
		}
	}
}
