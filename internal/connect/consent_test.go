package connect_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/provider/providertest"
)

// tokenOf reads m's token for user and fails unless it is 200.
func tokenOf(t *testing.T, m *mcpServer, user string) map[string]any {
	t.Helper()
	st, out := m.call(http.MethodGet, "/v1/connections/fake/token", user, nil)
	if st != http.StatusOK {
		t.Fatalf("%s token: %d %v", m.client.Name, st, out)
	}
	return out
}

// scopesOf returns a token answer's scopes.
func scopesOf(out map[string]any) []string {
	var s []string
	for _, v := range out["scopes"].([]any) {
		s = append(s, v.(string))
	}
	slices.Sort(s)
	return s
}

// consentRequired checks a 403 consent_required and what it says needs
// approving.
func consentRequired(t *testing.T, st int, out map[string]any, unapproved []string, accountChanged bool) {
	t.Helper()
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	var got []string
	for _, v := range out["unapproved_scopes"].([]any) {
		got = append(got, v.(string))
	}
	slices.Sort(got)
	slices.Sort(unapproved)
	if !slices.Equal(got, unapproved) || out["account_changed"] != accountChanged {
		t.Fatalf("consent_required says unapproved %v, account_changed %v; want %v, %v", got,
			out["account_changed"], unapproved, accountChanged)
	}
}

// TestConsentBoundsTheCredential is the confused deputy across clients from
// the attack review (DESIGN invariant 6): two MCP servers share alice's
// connection; neither may receive more than alice approved for it, on a page
// that listed it all, for that provider account.
func TestConsentBoundsTheCredential(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")

	// Through A, alice connects with read write, then A steps up to admin.
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read", "write"}})
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"admin"}})
	if got := scopesOf(tokenOf(t, a, "alice")); !slices.Equal(got, []string{"admin", "read", "write"}) {
		t.Fatalf("A's token carries %v", got)
	}

	// B asks for read only. The credential cannot be narrowed, so the page
	// lists all three and marks the two B did not ask for.
	st, out := b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	u := b.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
	br := e.browser()
	page := e.openAs(br, u, "alice")
	for _, s := range []string{"write", "admin"} {
		if !strings.Contains(page.body, "<code>"+s+"</code> <span class=\"beyond\">") {
			t.Fatalf("consent page does not list %s as beyond what beta asked for: %s", s, page.body)
		}
	}
	if !strings.Contains(page.body, "<li><code>read</code>") {
		t.Fatalf("consent page does not list read as requested: %s", page.body)
	}
	if r := e.allow(br, u, page); r.status != http.StatusOK || !strings.Contains(r.body, "Connected") {
		t.Fatalf("consent-only Allow: %d %s", r.status, r.body)
	}
	if got := scopesOf(tokenOf(t, b, "alice")); !slices.Equal(got, []string{"admin", "read", "write"}) {
		t.Fatalf("B's token carries %v after approving all three", got)
	}

	// A steps up again: B must not silently gain delete.
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"delete"}})
	tokenOf(t, a, "alice")
	st, out = b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	consentRequired(t, st, out, []string{"delete"}, false)
	// write is in the connection: the answer is B's missing approval, not a
	// missing scope.
	st, out = b.call(http.MethodGet, "/v1/connections/fake/token?scopes=write", "alice", nil)
	consentRequired(t, st, out, []string{"delete"}, false)
	// A scope the connection lacks is insufficient_scope, for anyone.
	st, out = b.call(http.MethodGet, "/v1/connections/fake/token?scopes=nope", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "insufficient_scope")
	if ms := out["missing_scopes"].([]any); len(ms) != 1 || ms[0] != "nope" {
		t.Fatalf("missing_scopes %v", ms)
	}
	st, out = b.call(http.MethodGet, "/v1/connections", "alice", nil)
	if c := out["connections"].([]any); st != 200 || len(c) != 1 || c[0].(map[string]any)["consent_required"] != true {
		t.Fatalf("B's connection list: %d %v", st, out)
	}

	// Approving again is the consent page alone (no provider round trip).
	exchanges := e.fake.Counts().Exchange
	e.consentAgain(b, "alice")
	if got := scopesOf(tokenOf(t, b, "alice")); !slices.Equal(got, []string{"admin", "delete", "read", "write"}) {
		t.Fatalf("B's token carries %v after approving again", got)
	}
	if e.fake.Counts().Exchange != exchanges {
		t.Fatal("approving again went to the provider")
	}
	// A's consent-only flow that adds nothing leaves B as it was: nobody is
	// asked twice for the same thing.
	e.consentAgain(a, "alice")
	tokenOf(t, b, "alice")

	// A step-up the user cancels at the provider changes nothing for B.
	e.fake.SetQuirks(providertest.Quirks{AccessDenied: true})
	el := a.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"extra"}})
	ab := e.browser()
	au := el["url"].(string)
	if r := ab.get(e.authorize(e.allow(ab, au, e.openAs(ab, au, "alice")))); r.status != http.StatusOK ||
		!strings.Contains(r.body, "declined") {
		t.Fatalf("cancelled step-up: %d %s", r.status, r.body)
	}
	e.fake.SetQuirks(providertest.Quirks{})
	tokenOf(t, a, "alice")
	tokenOf(t, b, "alice")

	// A connects another provider account: a second connection. B's
	// approval is for the first one and it receives that one's token,
	// never the second's; A, approved for both, must say which.
	first := e.connID("alice")
	e.fake.SetSubject("user-2")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read", "other"}, "account": "new"})
	ids := e.connIDs("alice")
	if len(ids) != 2 {
		t.Fatalf("connections %v", ids)
	}
	second := ids[0]
	if second == first {
		second = ids[1]
	}
	st, out = a.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusConflict, "account_required")
	if got := tokenOf(t, b, "alice"); got["account"].(map[string]any)["id"] != first {
		t.Fatalf("B received %v", got["account"])
	}
	st, out = b.call(http.MethodGet, "/v1/connections/fake/token?account="+second, "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	tokenAt(t, a, "alice", second)

	// Unlink through B: its account goes for every client; the other stays.
	if st, out := b.call(http.MethodDelete, "/v1/connections/fake", "alice", nil); st != http.StatusOK {
		t.Fatalf("unlink: %d %v", st, out)
	}
	st, out = b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required") // alice's other account is there
	if got := tokenOf(t, a, "alice"); got["account"].(map[string]any)["id"] != second {
		t.Fatalf("A after B's unlink: %v", got["account"])
	}
	st, out = a.call(http.MethodGet, "/v1/connections/fake/token?account="+first, "alice", nil)
	expectError(t, st, out, http.StatusNotFound, "not_found")
}

// TestAllowApprovesWhatThePageListed: the connection widens between the
// consent page and the click on Allow (another client's step-up); Allow must
// not approve what the page did not list. The page is shown again with what
// Allow would give now.
func TestAllowApprovesWhatThePageListed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})

	u := b.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
	br := e.browser()
	page := e.openAs(br, u, "alice")
	if strings.Contains(page.body, "<code>admin</code>") {
		t.Fatal("admin listed before the step-up")
	}
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"admin"}})

	again := e.allow(br, u, page)
	if again.status != http.StatusConflict || !strings.Contains(again.body, "changed since this page was shown") ||
		!strings.Contains(again.body, "<code>admin</code>") {
		t.Fatalf("stale Allow: %d %s", again.status, again.body)
	}
	st, out := b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	if e.auditCount("consent.granted") != 2 { // A's two flows only
		t.Fatalf("a stale Allow recorded an approval")
	}
	// The page shown again is the one to decide on.
	if r := br.do(http.MethodPost, u, allowForm(t, again.body)); r.status != http.StatusOK || !strings.Contains(r.body, "Connected") {
		t.Fatalf("Allow on the new page: %d %s", r.status, r.body)
	}
	if got := scopesOf(tokenOf(t, b, "alice")); !slices.Equal(got, []string{"admin", "read"}) {
		t.Fatalf("B's token carries %v", got)
	}
}

// TestAPIKeyReplacedIsAnotherAccount: a key typed for the user's one
// connection (a request naming no account, or naming it) replaces its
// credential for every client, and the others are not handed the new key
// until the user approves them again — connectd cannot tell whose a key
// is; a key typed for another account (account "new") is a connection of
// its own.
func TestAPIKeyReplacedIsAnotherAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "keyed")
	b := e.newMCPServer("beta", "keyed")
	typeKey := func(m *mcpServer, account string) {
		t.Helper()
		body := map[string]any{"provider": "keyed"}
		if account != "" {
			body["account"] = account
		}
		u := m.mint("alice", body)["url"].(string)
		br := e.browser()
		form := e.allow(br, u, e.openAs(br, u, "alice"))
		r := br.do(http.MethodPost, u+"/key", url.Values{"csrf_token": {csrfOf(t, form.body)}, "decision": {"save"},
			"api_key": {goodAPIKey}})
		if r.status != http.StatusOK || !strings.Contains(r.body, "Connected") {
			t.Fatalf("key form: %d %s", r.status, r.body)
		}
	}
	token := func(m *mcpServer) (int, map[string]any) {
		return m.call(http.MethodGet, "/v1/connections/keyed/token", "alice", nil)
	}
	conns := func() []string {
		all, err := e.vault.List(context.Background(), identity.User{Issuer: e.idps[0].Issuer(), Subject: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range all {
			ids = append(ids, c.ID)
		}
		return ids
	}
	typeKey(a, "")
	first := conns()
	typeKey(b, "") // a new key for her one connection: it replaces the key
	if got := conns(); len(got) != 1 || got[0] != first[0] {
		t.Fatalf("a key typed for her one connection made %v", got)
	}
	if st, out := token(b); st != http.StatusOK {
		t.Fatalf("B: %d %v", st, out)
	}
	st, out := token(a)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	if out["account_changed"] != true {
		t.Fatalf("A after B replaced the key: %v", out)
	}
	typeKey(a, first[0]) // A's flow, for that connection: the key is replaced again
	st, out = token(b)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	if st, out := token(a); st != http.StatusOK {
		t.Fatalf("A: %d %v", st, out)
	}
	typeKey(b, "new") // another account: its own connection
	if got := conns(); len(got) != 2 {
		t.Fatalf("a key for another account made %v", got)
	}
	if st, out := token(a); st != http.StatusOK || accountOf(out) != first[0] {
		t.Fatalf("A after B's second account: %d %v", st, out)
	}
}

// TestStolenCallbackDoesNotBurnTheFlow: the callback URL (code and state)
// opened first in another browser is refused without using the state up, so
// the user's own browser still finishes.
func TestStolenCallbackDoesNotBurnTheFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	u := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
	alice := e.browser()
	callback := e.authorize(e.allow(alice, u, e.openAs(alice, u, "alice")))

	thief := e.browser() // no session at all
	e.refused(thief.get(callback), http.StatusBadRequest, "state_mismatch")
	bob := e.browser() // another user's session
	e.login(bob, "bob", "")
	e.refused(bob.get(callback), http.StatusBadRequest, "state_mismatch")
	if e.count("oauth_states") != 1 {
		t.Fatal("a refused callback used the state up")
	}
	if r := alice.get(callback); r.status != http.StatusOK || !strings.Contains(r.body, "Connected") {
		t.Fatalf("alice's own callback: %d %s", r.status, r.body)
	}
	e.refused(alice.get(callback), http.StatusBadRequest, "invalid_state") // and it is single-use
}

// TestListingFlagsAccountChange: GET /v1/connections marks a connection
// consent_required for a client approved for another provider account than
// the one connected now, as its token read answers.
func TestListingFlagsAccountChange(t *testing.T) {
	t.Parallel()
	// A provider that narrows tokens: beta's approval of read stays enough
	// when the connection grows, so only the account can make it short.
	// It names no accounts either: a reauthorization is then the same
	// connection with another account in it.
	e := newEnv(t, envOptions{fakeEntry: func(m map[string]any) { m["narrow_on_refresh"] = true },
		quirks: providertest.Quirks{FormEncoded: true}})
	a := e.newMCPServer("alpha", "fake")
	b := e.newMCPServer("beta", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.consentAgainWith(b, "alice", []string{"read"})
	tokenOf(t, b, "alice") // what the listing must agree with
	id := e.connID("alice")
	listed := func(m *mcpServer) map[string]any {
		t.Helper()
		st, out := m.call(http.MethodGet, "/v1/connections", "alice", nil)
		conns, _ := out["connections"].([]any)
		if st != http.StatusOK || len(conns) != 1 {
			t.Fatalf("%s's listing: %d %v", m.client.Name, st, out)
		}
		return conns[0].(map[string]any)
	}
	if c := listed(b); c["consent_required"] == true {
		t.Fatalf("before: %v", c)
	}
	// alpha reauthorizes alice's connection, asking for more (so the
	// provider is visited); she signs in as another user.
	e.fake.SetSubject("user-2")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read", "write"}, "account": id})
	if c := listed(b); c["consent_required"] != true || c["display_name"] != "" || c["label"] != nil {
		t.Fatalf("beta's listing after the account change (it must not name the new account): %v", c)
	}
	st, out := b.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	if out["account_changed"] != true {
		t.Fatalf("beta's token read: %v", out)
	}
	if c := listed(a); c["consent_required"] == true {
		t.Fatalf("alpha's listing: %v", c)
	}
}

// TestRefusedClientCausesNoRefresh (issue 33: the decision is made on the
// stored row, before the credential is opened or refreshed): alpha's
// approval no longer covers alice's connection (beta stepped it up to
// write at a provider that cannot narrow), and the access token is within
// the refresh skew. Alpha's token read is consent_required and costs the
// user nothing at the provider: no refresh, so a client the user did not
// approve cannot rotate her tokens. Beta's read then refreshes once.
func TestRefusedClientCausesNoRefresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	alpha := e.newMCPServer("alpha", "fake")
	beta := e.newMCPServer("beta", "fake")
	e.connectFully(alpha, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.connectFully(beta, "alice", map[string]any{"provider": "fake", "scopes": []string{"read", "write"}})
	before := tokenOf(t, beta, "alice")

	e.clock.Advance(59*time.Minute + 30*time.Second) // within the vault's refresh skew
	refreshes := e.fake.Counts().Refresh
	for range 3 {
		st, out := alpha.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
		consentRequired(t, st, out, []string{"write"}, false)
	}
	if n := e.fake.Counts().Refresh - refreshes; n != 0 {
		t.Fatalf("a client refused the credential caused %d refreshes at the provider", n)
	}
	if after := tokenOf(t, beta, "alice"); after["access_token"] == before["access_token"] || e.fake.Counts().Refresh != refreshes+1 {
		t.Fatalf("beta's read did not refresh once: %d refreshes", e.fake.Counts().Refresh-refreshes)
	}
}
