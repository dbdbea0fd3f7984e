package connect_test

import (
	"context"
	"net/http"
	"testing"

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

// TestAccountChangeAtProviderThatNamesNone (issue 23 N1, DESIGN invariant
// 15): A connects alice to a github-shaped provider whose token answer names
// no account; B is approved; the connection needs reauthorization and A
// connects it again — alice signs in at the provider as another user. B
// must not receive that account's token. Before, an account nobody named
// counted as the same account and B got it with 200; the same at a
// provider that narrows tokens.
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

			e.needsReauth("alice")
			e.fake.SetSubject("user-2") // alice signs in at the provider as someone else
			e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
			tokenOf(t, a, "alice")
			st, out := b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
			expectError(t, st, out, http.StatusForbidden, "consent_required")
			if out["account_changed"] != true {
				t.Fatalf("consent_required without account_changed: %v", out)
			}
		})
	}
}

// TestAccountNamedByWhoAmI: at a github-shaped provider with a "who am I"
// endpoint (GitHub's GET /user), the account is what the provider says: a
// reconnect with the same provider user keeps B's approval, one with
// another user does not.
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

	e.needsReauth("alice")
	e.fake.SetSubject("user-2")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	st, out := b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	if out["account_changed"] != true {
		t.Fatalf("consent_required without account_changed: %v", out)
	}
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

	e.needsReauth("alice")
	e.fake.SetSubject("user-2")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": scopes})
	st, out := b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	if out["account_changed"] != true {
		t.Fatalf("consent_required without account_changed: %v", out)
	}
}
