package connect_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestDisplayNameOfAnAccountNamedByID (issue 33): at a provider that names
// an account only by its id — a JSON token answer's user.id without a label
// field, or an OpenID Connect ID token's sub — every answer that names the
// account says the same, non-empty name (vault.Credential.DisplayName): the
// listing, the token read, account_required's choices (what integration.md
// tells servers to offer the user) and /account. Before, the API said ""
// while the page said the id.
func TestDisplayNameOfAnAccountNamedByID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		entry  func(map[string]any)
		scopes []string
	}{
		{"user.id in the token answer", nil, []string{"read"}},
		{"an ID token's sub", func(entry map[string]any) { delete(entry, "account_id_field") }, []string{"openid", "read"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{fakeEntry: tc.entry})
			a := e.newMCPServer("alpha", "fake")
			e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": tc.scopes})
			first := e.connID("alice")
			e.fake.SetSubject("user-2")
			e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": tc.scopes, "account": "new"})
			ids := e.connIDs("alice")
			if len(ids) != 2 {
				t.Fatalf("connections %v", ids)
			}
			want := map[string]string{}
			for _, id := range ids {
				want[id] = "user-2"
			}
			want[first] = "user-1"
			check := func(what string, docs []any, key string) {
				t.Helper()
				if len(docs) != 2 {
					t.Fatalf("%s: %v", what, docs)
				}
				for _, d := range docs {
					d := d.(map[string]any)
					if id, _ := d[key].(string); d["display_name"] != want[id] {
						t.Fatalf("%s names %s %q, want %q", what, id, d["display_name"], want[id])
					}
				}
			}

			st, out := a.call(http.MethodGet, "/v1/connections", "alice", nil)
			if st != http.StatusOK {
				t.Fatalf("listing: %d %v", st, out)
			}
			conns, _ := out["connections"].([]any)
			check("the listing", conns, "id")
			var reads []any
			for _, id := range ids {
				reads = append(reads, tokenAt(t, a, "alice", id)["account"])
			}
			check("the token read", reads, "id")
			st, out = a.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
			expectError(t, st, out, http.StatusConflict, "account_required")
			accounts, _ := out["accounts"].([]any)
			check("account_required", accounts, "id")

			page := e.accountPage(e.browser(), "alice")
			for _, name := range want {
				if !strings.Contains(page.body, `<span class="account-name">`+name+`</span>`) {
					t.Fatalf("/account does not name %s: %s", name, page.body)
				}
			}
		})
	}
}
