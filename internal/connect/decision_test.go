package connect_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/provider/providertest"
)

// TestPayloadCarriesOnlyWhatTheClientMaySee (issue 23 N5): A widens alice's
// connection to read mail.send admin; B is approved for read only. B's
// connection.scopes_changed names read and nothing else, in scopes and in
// old_scopes; A's names the whole grant. Before, every client's payload
// carried the whole grant.
func TestPayloadCarriesOnlyWhatTheClientMaySee(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.run(e.server)
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	ra, rb := e.newReceiver(a, "connection.scopes_changed"), e.newReceiver(b, "connection.scopes_changed")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.consentAgainWith(b, "alice", []string{"read"})
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"mail.send", "admin"}})
	ev := rb.wait("connection.scopes_changed")
	if !strings.Contains(ev.raw, `"scopes":["read"]`) || strings.Contains(ev.raw, "mail.send") || strings.Contains(ev.raw, "admin") {
		t.Fatalf("B's payload: %s", ev.raw)
	}
	evA := ra.wait("connection.scopes_changed")
	if !strings.Contains(evA.raw, "mail.send") || !strings.Contains(evA.raw, "admin") {
		t.Fatalf("A's payload: %s", evA.raw)
	}
}

// TestUnlinkNeedsTheCurrentAccount (issue 23 N6): B's approval is for the
// account alice connected first; A reauthorizes that connection at a
// provider that cannot name accounts, so it now holds another account's
// credential. B may not unlink (and revoke at the provider) what it has no
// say over: 403 consent_required, the connection untouched. Before, B's
// stale approval unlinked it. At a provider that names accounts, another
// account is another connection, and B's unlink ends only its own.
func TestUnlinkNeedsTheCurrentAccount(t *testing.T) {
	t.Parallel()
	t.Run("replaced in place", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{quirks: providertest.Quirks{FormEncoded: true}})
		a := e.newMCPServer("alpha", "fake")
		b := e.newMCPServer("beta", "fake")
		e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
		e.consentAgain(b, "alice")
		id := e.connID("alice")
		e.needsReauth("alice")
		e.fake.SetSubject("user-2")
		e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}, "account": id})
		for _, q := range []string{"", "?account=" + id, "?account=all"} {
			st, out := b.call(http.MethodDelete, "/v1/connections/fake"+q, "alice", nil)
			expectError(t, st, out, http.StatusForbidden, "consent_required")
			if out["account_changed"] != true {
				t.Fatalf("unlink%s refusal: %v", q, out)
			}
		}
		tokenOf(t, a, "alice") // still connected
		if n := len(e.fake.Revocations()); n != 0 {
			t.Fatalf("%d revocations at the provider", n)
		}
	})
	t.Run("another connection", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		a := e.newMCPServer("alpha", "fake")
		b := e.newMCPServer("beta", "fake")
		e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
		e.consentAgain(b, "alice")
		first := e.connID("alice")
		e.fake.SetSubject("user-2")
		e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}, "account": "new"})
		st, out := b.call(http.MethodDelete, "/v1/connections/fake?account=all", "alice", nil)
		if st != http.StatusOK || len(out["connections"].([]any)) != 1 ||
			out["connections"].([]any)[0].(map[string]any)["id"] != first {
			t.Fatalf("B's unlink: %d %v", st, out)
		}
		if ids := e.connIDs("alice"); len(ids) != 1 || ids[0] == first {
			t.Fatalf("left %v", ids)
		}
		tokenOf(t, a, "alice") // the other account, A's only one now
	})
}

// TestProviderNotAllowedBeforeAnyLookup (issue 23 N7): a client registered
// without a provider cannot learn whether a user has a connection there:
// the token read and unlink answer provider_not_allowed whether she has one
// or not. Before, consent_required and not_connected told them apart.
func TestProviderNotAllowedBeforeAnyLookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	other := e.newMCPServer("other", "keyed") // not allowed "fake"
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	for _, user := range []string{"alice", "bob"} { // alice has a connection, bob none
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			path := "/v1/connections/fake"
			if m == http.MethodGet {
				path += "/token"
			}
			st, out := other.call(m, path, user, nil)
			expectError(t, st, out, http.StatusForbidden, "provider_not_allowed")
		}
	}
	tokenOf(t, a, "alice")
}

// TestAccountPageSaysWhatEachClientReceives (issue 23 N8): at a provider
// that narrows tokens, B approved for less than the connection grants reads
// a narrowed token; the account page says so instead of "receives nothing
// until you allow it again".
func TestAccountPageSaysWhatEachClientReceives(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{rotate: true, fakeEntry: narrowing})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read", "write"}})
	e.consentAgainWith(b, "alice", []string{"read"})
	if got := scopesOf(tokenOf(t, b, "alice")); len(got) != 1 || got[0] != "read" {
		t.Fatalf("B's token: %v", got)
	}
	page := e.accountPage(e.browser(), "alice")
	if strings.Contains(page.body, "it receives nothing until you allow it again") ||
		!strings.Contains(page.body, "beta receives a token limited to what you allowed: read") {
		t.Fatalf("account page: %s", page.body)
	}
	_ = context.Background()
}

// TestEveryEndOfAConnectionHasOneShape (issue 23 §3): unlink by an MCP
// server, Disconnect by the user and an admin's revocation all go through
// package lifecycle: the connection.revoked row and one consent.withdrawn
// row per client that lost its approval are written in the deleting
// transaction (one xmin), then connection.provider_revocation. Before,
// unlink wrote one connection.unlinked row after the commit and no
// consent.withdrawn rows.
func TestEveryEndOfAConnectionHasOneShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.consentAgain(b, "alice")
	if st, out := b.call(http.MethodDelete, "/v1/connections/fake", "alice", nil); st != http.StatusOK {
		t.Fatalf("unlink: %d %v", st, out)
	}
	var rows, xmins int
	var by, actor string
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT xmin::text),
		max(detail->>'by') FILTER (WHERE kind = 'connection.revoked'), max(actor)
		FROM audit_events WHERE subject = 'alice' AND kind IN ('connection.revoked', 'consent.withdrawn')`).
		Scan(&rows, &xmins, &by, &actor); err != nil {
		t.Fatal(err)
	}
	if rows != 3 || xmins != 1 || by != "client" || actor != "client:"+b.client.ID {
		t.Fatalf("unlink audit: %d rows in %d transactions, by %q, actor %q", rows, xmins, by, actor)
	}
	if n := e.auditCount("connection.provider_revocation"); n != 1 {
		t.Fatalf("%d provider_revocation rows", n)
	}
}
