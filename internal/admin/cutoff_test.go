package admin_test

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestCutOffClient (issue 25): one admin API call disables a compromised
// client — its key stops working at once — lists every connection whose
// credential it read since a time, and revokes those at the provider; a
// connection it never read is left alone; the action is audited.
func TestCutOffClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.Run(e.server) // the sampled audit writer
	bad := e.newMCPServer("compromised", "fake")
	good := e.newMCPServer("other", "fake")
	since := e.clock.Now().Add(-time.Minute)
	read := e.connectFully(bad, "alice")
	unread := e.connectFully(good, "bob")
	st, out := bad.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	if st != http.StatusOK {
		t.Fatalf("token: %d %v", st, out)
	}
	// The exposure names the account as the token read did: the fake names
	// it only by id (issue 33).
	name, _ := out["account"].(map[string]any)["display_name"].(string)
	if name == "" {
		t.Fatalf("the token read names no account: %v", out["account"])
	}
	// The read's sampled audit row is written off the request's path.
	deadline := time.Now().Add(5 * time.Second)
	for e.count(`SELECT count(*) FROM audit_events WHERE kind = 'token.read' AND target = $1`, read) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the token read was not recorded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, key := e.newAdminKey("incident")
	path := "/admin/api/clients/" + bad.client.ID + "/cut-off"
	if st, out := e.adminAPI(key, http.MethodPost, path, map[string]any{"since": since, "revoke": true}); st != http.StatusBadRequest {
		t.Fatalf("without confirmation: %d %v", st, out)
	}
	st, out = e.adminAPI(key, http.MethodPost, path, map[string]any{"confirm": bad.client.ID, "since": since, "revoke": true})
	if st != http.StatusOK || out["disabled"] != true {
		t.Fatalf("cut-off: %d %v", st, out)
	}
	exposed, _ := out["exposed"].([]any)
	if len(exposed) != 1 || exposed[0].(map[string]any)["connection_id"] != read || exposed[0].(map[string]any)["display_name"] != name {
		t.Fatalf("exposure: %v", out["exposed"])
	}
	if revoked, _ := out["revoked"].([]any); len(revoked) != 1 || revoked[0] != read {
		t.Fatalf("revoked: %v", out["revoked"])
	}
	if st, out := bad.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusUnauthorized {
		t.Fatalf("the cut-off client's key still works: %d %v", st, out)
	}
	if e.count(`SELECT count(*) FROM connections WHERE id = $1`, read) != 0 || e.count(`SELECT count(*) FROM connections WHERE id = $1`, unread) != 1 {
		t.Fatal("the wrong connections were revoked")
	}
	if len(e.fake.Revocations()) == 0 {
		t.Fatal("nothing was revoked at the provider")
	}
	if e.auditCount("client.cut_off") != 1 {
		t.Fatal("the cut-off was not audited")
	}
	if st, _ := e.adminAPI(key, http.MethodPost, "/admin/api/clients/cli_nope/cut-off", map[string]any{"confirm": "cli_nope", "since": since}); st != http.StatusNotFound {
		t.Fatalf("an unknown client: %d", st)
	}
}

// TestExposureCoversReadsStillCounted: a read after since whose period began
// before it is on record only by its period's first row (older than since)
// until the period ends; the exposure still lists that connection, as it
// looks back one sampling period.
func TestExposureCoversReadsStillCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.Run(e.server)
	m := e.newMCPServer("files", "fake")
	conn := e.connectFully(m, "alice")
	read := func() {
		t.Helper()
		if st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusOK {
			t.Fatalf("token: %d %v", st, out)
		}
	}
	read()
	eventually(t, "the first read's row", func() bool {
		return e.count(`SELECT count(*) FROM audit_events WHERE kind = 'token.read' AND target = $1`, conn) == 1
	})
	since := time.Now()
	read() // counted in memory: its row comes when the hour is over
	exposed, err := e.store.Exposure(context.Background(), m.client.ID, since)
	if err != nil {
		t.Fatal(err)
	}
	if len(exposed) != 1 || exposed[0].ConnectionID != conn {
		t.Fatalf("exposure since the second read's period began: %+v, want %s", exposed, conn)
	}
}
