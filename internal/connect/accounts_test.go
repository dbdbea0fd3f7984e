package connect_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/provider/providertest"
)

// needsReauth marks user's connection reauthorization_required, as a
// refused refresh does: the next mint goes to the provider again with the
// same scopes.
func (e *env) needsReauth(user string) {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(),
		`UPDATE connections SET status = 'reauthorization_required' WHERE subject = $1`, user); err != nil {
		e.t.Fatal(err)
	}
}

// connID is the id of user's one connection at the fake provider.
func (e *env) connID(user string) string {
	e.t.Helper()
	c, err := e.vault.Lookup(context.Background(), identity.User{Issuer: e.idps[0].Issuer(), Subject: user}, "fake", "")
	if err != nil {
		e.t.Fatal(err)
	}
	return c.ID
}

// connIDs are the ids of user's connections at the fake provider, oldest
// first.
func (e *env) connIDs(user string) []string {
	e.t.Helper()
	all, err := e.vault.List(context.Background(), identity.User{Issuer: e.idps[0].Issuer(), Subject: user})
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, c := range all {
		if c.Provider == "fake" {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// tokenAt is m's token read of user's connection id.
func tokenAt(t *testing.T, m *mcpServer, user, id string) map[string]any {
	t.Helper()
	st, out := m.call(http.MethodGet, "/v1/connections/fake/token?account="+id, user, nil)
	if st != http.StatusOK {
		t.Fatalf("%s token of %s: %d %v", m.client.Name, id, st, out)
	}
	return out
}

// TestAccountChangeAtProviderThatNamesNone (issue 23 N1, DESIGN invariant
// 15): A connects alice to a github-shaped provider whose token answer names
// no account; B is approved; the connection needs reauthorization and A
// connects it again (mint with account=<that connection>) — alice signs in
// at the provider as another user. B must not receive that account's token:
// a round trip whose account cannot be named replaces the connection as
// another account. The same at a provider that narrows tokens.
func TestAccountChangeAtProviderThatNamesNone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		entry func(map[string]any)
	}{
		{"whole token", nil},
		{"narrowing provider", narrowing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{quirks: providertest.Quirks{FormEncoded: true}, fakeEntry: tc.entry})
			a := e.newMCPServer("alpha", "fake")
			b := e.newMCPServer("beta", "fake")
			e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
			e.consentAgainWith(b, "alice", []string{"read"})
			tokenOf(t, b, "alice")

			id := e.connID("alice")
			e.needsReauth("alice")
			e.fake.SetSubject("user-2") // alice signs in at the provider as someone else
			e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}, "account": id})
			if ids := e.connIDs("alice"); len(ids) != 1 || ids[0] != id {
				t.Fatalf("the reauthorization made connections %v, want %s again", ids, id)
			}
			tokenOf(t, a, "alice")
			st, out := b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
			expectError(t, st, out, http.StatusForbidden, "consent_required")
			if out["account_changed"] != true {
				t.Fatalf("consent_required without account_changed: %v", out)
			}
		})
	}
}

// reconnectAsAnother: alice's connection needs reauthorization; A asks for
// it again (account=<it>) and she signs in at the provider as user-2. A
// request that names a connection ends on it or fails (release.Completes):
// at a provider that names its accounts, user-2 is another account, so
// nothing is stored or granted, the page says so, and the first stays as it
// was (reauthorization_required). Signing in as the right account then
// completes the same link.
func reconnectAsAnother(t *testing.T, e *env, a, b *mcpServer, scopes []string) {
	t.Helper()
	first := e.connID("alice")
	e.needsReauth("alice")
	e.fake.SetSubject("user-2")
	el := a.mint("alice", map[string]any{"provider": "fake", "scopes": scopes, "account": first})
	e.signedInAsAnother(el, "alice")
	if ids := e.connIDs("alice"); len(ids) != 1 || ids[0] != first {
		t.Fatalf("connections %v, want only %s", ids, first)
	}
	for _, m := range []*mcpServer{a, b} {
		st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
		expectError(t, st, out, http.StatusConflict, "reauthorization_required") // its own account, still to reauthorize
		if acct, _ := out["account"].(map[string]any); acct["id"] != first {
			t.Fatalf("reauthorization_required names %v, want %s (to mint with)", out["account"], first)
		}
	}
	e.fake.SetSubject("user-1")
	e.finishAgain(el, "alice")
	tokenAt(t, a, "alice", first)
	tokenOf(t, b, "alice")
}

// signedInAsAnother runs the flow of elicitation el as user in the
// browser, the provider signing in another account than the one el names,
// and checks the refusal: 409 account_mismatch with the page that says what
// happened and offers to try again, the elicitation still pending.
func (e *env) signedInAsAnother(el map[string]any, user string) {
	e.t.Helper()
	b := e.browser()
	u := el["url"].(string)
	page := e.openAs(b, u, user)
	if !strings.Contains(page.body, "Sign in to") || !strings.Contains(page.body, "nothing is stored") {
		e.t.Fatalf("the consent page of a step-up does not say which account to sign in as:\n%s", page.body)
	}
	done := b.get(e.authorize(e.allow(b, u, page)))
	if done.status != http.StatusConflict || !strings.Contains(done.body, "That was another") ||
		!strings.Contains(done.body, "Nothing was stored") || !strings.Contains(done.body, `href="`+strings.TrimPrefix(u, e.srv.URL)+`"`) {
		e.t.Fatalf("callback signed in as another account: %d %s", done.status, done.body)
	}
	var status string
	id := u[strings.LastIndex(u, "/")+1:]
	if err := e.pool.QueryRow(context.Background(), "SELECT status FROM elicitations WHERE id = $1", id).Scan(&status); err != nil {
		e.t.Fatal(err)
	}
	if status != "pending" {
		e.t.Fatalf("after the mismatch the elicitation is %s, want pending", status)
	}
}

// finishAgain completes elicitation el in a new browser as user (the link
// opened again after a refused round trip).
func (e *env) finishAgain(el map[string]any, user string) {
	e.t.Helper()
	b := e.browser()
	u := el["url"].(string)
	done := b.get(e.authorize(e.allow(b, u, e.openAs(b, u, user))))
	if done.status != http.StatusOK || !strings.Contains(done.body, "Connected") {
		e.t.Fatalf("callback: %d %s", done.status, done.body)
	}
}

// TestAccountNamedByWhoAmI: at a github-shaped provider with a "who am I"
// endpoint (GitHub's GET /user), the account is what the provider says: a
// reconnect with the same provider user keeps B's approval, one with
// another user is another connection B is not approved for.
func TestAccountNamedByWhoAmI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{quirks: providertest.Quirks{FormEncoded: true, WhoAmI: true}})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.consentAgain(b, "alice")

	e.needsReauth("alice")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	tokenOf(t, b, "alice") // the same provider account: still approved

	reconnectAsAnother(t, e, a, b, []string{"read"})
}

// TestAccountNamedByIDToken: at an OpenID Connect provider whose token
// answer carries an ID token (scope openid) and no other account field, the
// account is the ID token's sub (iss and aud checked).
func TestAccountNamedByIDToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{fakeEntry: func(entry map[string]any) { delete(entry, "account_id_field") }})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	scopes := []string{"openid", "read"}
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": scopes})
	e.consentAgain(b, "alice")

	e.needsReauth("alice")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": scopes})
	tokenOf(t, b, "alice")

	reconnectAsAnother(t, e, a, b, scopes)
}
