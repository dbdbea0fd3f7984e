package connect_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
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
// read; the hot path writes no row at all, the writer or the sweep does.
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
	sweep := func() {
		t.Helper()
		if err := e.server.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	read(files, 5)
	read(notes, 2)
	if rows, _ := e.sampledCount("token.read", ""); rows != 0 {
		t.Fatalf("%d rows written by the token reads themselves", rows)
	}
	sweep() // writes the queued first reads (Run's writer would, within a second)
	byClient := ` AND client_id = $2 AND actor = 'client:' || $2 AND subject = 'alice' AND provider = 'fake'`
	if rows, n := e.sampledCount("token.read", byClient, files.client.ID); rows != 1 || n != 1 {
		t.Fatalf("files after 5 reads: %d rows for %d reads, want 1 row for the first", rows, n)
	}
	if rows, _ := e.sampledCount("token.read", byClient, notes.client.ID); rows != 1 {
		t.Fatalf("notes: %d rows, want its own", rows)
	}
	// The sweep writes no count before the hour is over ...
	sweep()
	if rows, _ := e.sampledCount("token.read", ""); rows != 2 {
		t.Fatalf("%d rows after an early sweep", rows)
	}
	// ... and the uncounted reads after it.
	e.clock.Advance(time.Hour + time.Second)
	sweep()
	if rows, n := e.sampledCount("token.read", byClient, files.client.ID); rows != 2 || n != 5 {
		t.Fatalf("files after the sweep: %d rows for %d reads, want 2 for 5", rows, n)
	}
	read(files, 3) // within the hour of that row: counted only
	e.clock.Advance(time.Hour + time.Second)
	read(files, 1) // a new hour: a row for the 3 and this one
	sweep()
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
	if err := e.server.Sweep(context.Background()); err != nil { // the queued first rows
		t.Fatal(err)
	}
	if rows, n := e.sampledCount("security.invalid_user_token", ` AND client_id = $2 AND detail->>'reason' = 'wrong_audience'`,
		files.client.ID); rows != 1 || n != 1 {
		t.Fatalf("wrong audience: %d rows for %d, want 1 row for the first", rows, n)
	}
	e.clock.Advance(time.Minute + time.Second)
	if err := e.server.Sweep(context.Background()); err != nil {
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

// metric is the value of the sample of e's /metrics whose name and labels
// are series (`connectd_audit_events_lost_total{kind="token.read"}`), 0 when
// there is none.
func (e *env) metric(series string) float64 {
	e.t.Helper()
	w := httptest.NewRecorder()
	e.server.Internal().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.SplitSeq(w.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				e.t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// exec runs q as connectd's own database role.
func (e *env) exec(q string) {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(), q); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

// eventually polls cond for up to 10 s (Run's writer retries after 1, 2,
// 4 s ... after failures), failing with what when it never holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
	}
}

// runUntil runs s's background work like e.run, and returns the function
// that stops it and waits for its end (the last write at shutdown included).
func (e *env) runUntil() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.server.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return stop
}

const aliceFiles = ` AND client_id = $2 AND subject = 'alice' AND provider = 'fake'`

// TestTokenReadNotHeldByTheAudit: a token read answers at once while the
// audit table is locked (before, the first read of the hour waited for its
// audit insert until the request's statement deadline, 5 s, and lost the
// row); the row is written once the lock is gone.
func TestTokenReadNotHeldByTheAudit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	files := e.newMCPServer("files", "fake")
	e.connectFully(files, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.run(e.server)

	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a second rollback is a no-op
	if _, err := tx.Exec(ctx, `LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 3 {
		if st, out := files.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusOK {
			t.Fatalf("token while the audit table is locked: %d %v", st, out)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("3 token reads took %s while the audit table was locked", d)
	}
	// The writer's insert waits for the lock (not the audit table itself:
	// reading it would wait too).
	eventually(t, "no insert waits for the lock on audit_events", func() bool {
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND relation = 'audit_events'::regclass`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first read's row was never written", func() bool {
		rows, n := e.sampledCount("token.read", aliceFiles, files.client.ID)
		return rows == 1 && n == 1
	})
	e.clock.Advance(time.Hour + time.Second)
	if err := e.server.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if rows, n := e.sampledCount("token.read", aliceFiles, files.client.ID); rows != 2 || n != 3 {
		t.Fatalf("after the hour: %d rows for %d reads, want 2 for 3", rows, n)
	}
}

// TestFirstReadSurvivesAFailedAuditWrite: while the database refuses the audit
// insert, the first read of the hour is kept, the failure counted, and the
// row written by a later round; every read is still accounted for.
func TestFirstReadSurvivesAFailedAuditWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	files := e.newMCPServer("files", "fake")
	e.connectFully(files, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.run(e.server)

	e.exec(`REVOKE INSERT ON audit_events FROM CURRENT_USER`)
	for range 3 {
		if st, out := files.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusOK {
			t.Fatalf("token while audit inserts are refused: %d %v", st, out)
		}
	}
	eventually(t, "no failed audit write counted", func() bool {
		return e.metric("connectd_audit_write_errors_total") >= 1
	})
	if rows, _ := e.sampledCount("token.read", aliceFiles, files.client.ID); rows != 0 {
		t.Fatalf("%d rows written while inserts were refused", rows)
	}
	e.exec(`GRANT INSERT ON audit_events TO CURRENT_USER`)
	eventually(t, "the first read's row was never written", func() bool {
		rows, n := e.sampledCount("token.read", aliceFiles, files.client.ID)
		return rows == 1 && n == 1
	})
	e.clock.Advance(time.Hour + time.Second)
	if err := e.server.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rows, n := e.sampledCount("token.read", aliceFiles, files.client.ID); rows != 2 || n != 3 {
		t.Fatalf("after the hour: %d rows for %d reads, want 2 for 3", rows, n)
	}
	if lost := e.metric(`connectd_audit_events_lost_total{kind="token.read"}`); lost != 0 {
		t.Fatalf("%v rows counted lost", lost)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "sampled audit rows not written") {
		t.Fatal("the failed write was not logged")
	}
	for _, secret := range append(e.fakeTokens(), files.key, files.token("alice")) {
		if strings.Contains(logs, secret) {
			t.Fatal("a log line holds a secret")
		}
	}
}

// TestAuditRowsLostAtShutdownAreCounted: what the last write at shutdown
// cannot write is counted in connectd_audit_events_lost_total and logged
// once.
func TestAuditRowsLostAtShutdownAreCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	files := e.newMCPServer("files", "fake")
	notes := e.newMCPServer("notes", "fake")
	e.connectFully(files, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.consentAgain(notes, "alice")
	stop := e.runUntil()

	e.exec(`REVOKE INSERT ON audit_events FROM CURRENT_USER`)
	for _, m := range []*mcpServer{files, notes, files} {
		if st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusOK {
			t.Fatalf("token: %d %v", st, out)
		}
	}
	stop()
	if lost := e.metric(`connectd_audit_events_lost_total{kind="token.read"}`); lost != 3 {
		// files' first read, notes' first read, files' count of one more
		t.Fatalf("%v token.read rows counted lost, want 3", lost)
	}
	if n := strings.Count(e.logs.String(), "sampled audit rows lost"); n != 1 {
		t.Fatalf("the loss was logged %d times, want once", n)
	}
	e.exec(`GRANT INSERT ON audit_events TO CURRENT_USER`)
	if rows, _ := e.sampledCount("token.read", ""); rows != 0 {
		t.Fatalf("%d token.read rows written", rows)
	}
}

// TestTokenReadTrailNamesEveryConnection (issue 25): a cut-off's exposure is
// read from the token.read rows, so every (user, client, connection) whose
// credential a client received must be named in the trail — also when its
// reads are answered from the caches of a replica (client key, consent and
// credential all cached) and spread over several replicas, each of which
// writes its own first read of the period.
func TestTokenReadTrailNamesEveryConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.run(e.server)
	m := e.newMCPServer("files", "fake")
	e.connectFully(m, "alice", map[string]any{"provider": "fake"})
	e.connectFully(m, "bob", map[string]any{"provider": "fake"})
	conns := map[string]string{"alice": e.connID("alice"), "bob": e.connID("bob")}
	a, b := e.cachingReplica(), e.cachingReplica()
	for _, read := range []struct{ base, user string }{
		{a.url, "alice"}, {a.url, "alice"}, {a.url, "alice"}, // the later ones from a's caches
		{b.url, "bob"}, {b.url, "bob"},
		{e.srv.URL, "alice"},
	} {
		if st, out := m.callAt(read.base, http.MethodGet, "/v1/connections/fake/token", read.user); st != http.StatusOK {
			t.Fatalf("token of %s at %s: %d %v", read.user, read.base, st, out)
		}
	}
	// A replica caches once its listener is up (cache.Hub: nothing new is
	// cached while it is down); on a loaded machine that can be after the
	// reads above, so read on until a read is answered from the cache.
	eventually(t, "replica a answered no read from its credential cache: the test proves nothing about caches", func() bool {
		if st, out := m.callAt(a.url, http.MethodGet, "/v1/connections/fake/token", "alice"); st != http.StatusOK {
			t.Fatalf("token of alice at a: %d %v", st, out)
		}
		return a.vault.CacheStats().Hits > 0
	})
	for user, conn := range conns {
		named := ` AND client_id = $2 AND subject = $3 AND target = $4 AND actor = 'client:' || $2`
		eventually(t, "no token.read row names "+user+"'s connection", func() bool {
			rows, _ := e.sampledCount("token.read", named, m.client.ID, user, conn)
			return rows > 0
		})
	}
	// alice was first read on two replicas: each writes its own row.
	eventually(t, "alice's reads on two replicas are not two rows", func() bool {
		rows, _ := e.sampledCount("token.read", ` AND subject = 'alice'`)
		return rows == 2
	})
	if rows, _ := e.sampledCount("token.read", ` AND (target = '' OR detail ? 'untracked')`); rows != 0 {
		t.Fatalf("%d token.read rows name no connection", rows)
	}
}
