package connect_test

import (
	"net/http"
	"testing"
	"time"
)

// TestCancelElicitation: DELETE /v1/elicitations/{id} ends a pending
// elicitation declined (client_declined), wakes its long-poll, and frees the
// request: the next mint of it gets a new link at once. Only the client that
// minted it, for the same user, may; an ended one is answered as it is.
func TestCancelElicitation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.run(e.server) // long-poll wake-ups
	m := e.newMCPServer("files", "fake")
	other := e.newMCPServer("other", "fake")
	req := map[string]any{"provider": "fake", "scopes": []string{"read"}, "request_digest": "Zm9vYmFyZm9vYmFyZm9vYmFyZm9vYmFyZm9vYmFyMDA"}
	el := m.mint("alice", req)
	id := el["elicitation_id"].(string)

	polled := make(chan map[string]any, 1)
	go func() {
		_, out := m.call(http.MethodGet, "/v1/elicitations/"+id+"?wait=20s", "alice", nil)
		polled <- out
	}()
	time.Sleep(100 * time.Millisecond) // the long-poll is waiting

	// Nobody else may cancel it.
	st, out := other.call(http.MethodDelete, "/v1/elicitations/"+id, "alice", nil)
	expectError(t, st, out, http.StatusNotFound, "not_found")
	st, out = m.call(http.MethodDelete, "/v1/elicitations/"+id, "bob", nil)
	expectError(t, st, out, http.StatusNotFound, "not_found")
	st, out = m.call(http.MethodDelete, "/v1/elicitations/not-an-id", "alice", nil)
	expectError(t, st, out, http.StatusNotFound, "not_found")
	// A control character in the path is refused before routing (web.TextOnly).
	st, out = m.call(http.MethodDelete, "/v1/elicitations/not-an-id%0A", "alice", nil)
	expectError(t, st, out, http.StatusBadRequest, "invalid_request")

	st, out = m.call(http.MethodDelete, "/v1/elicitations/"+id, "alice", nil)
	if st != http.StatusOK || out["status"] != "declined" || out["reason"] != "client_declined" {
		t.Fatalf("cancel: %d %v", st, out)
	}
	select {
	case out := <-polled:
		if out["status"] != "declined" {
			t.Fatalf("the long-poll answered %v", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not wake")
	}
	// Again: answered as it is.
	if st, out = m.call(http.MethodDelete, "/v1/elicitations/"+id, "alice", nil); st != http.StatusOK || out["reason"] != "client_declined" {
		t.Fatalf("cancel again: %d %v", st, out)
	}
	// The same request now gets a new link, at once.
	st, again, _ := m.send(e.srv.URL, http.MethodPost, "/v1/elicitations", m.token("alice"), req)
	if st != http.StatusCreated || again["elicitation_id"] == id {
		t.Fatalf("mint after the cancel: %d %v", st, again)
	}
	if e.auditCount("elicitation.declined") != 1 {
		t.Fatal("the cancel was not audited once")
	}

	// A completed elicitation stays completed.
	done := e.connectFully(m, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	if st, out = m.call(http.MethodDelete, "/v1/elicitations/"+done["elicitation_id"].(string), "alice", nil); st != http.StatusOK || out["status"] != "completed" {
		t.Fatalf("cancel of a completed elicitation: %d %v", st, out)
	}
}
