package admin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/vault"
)

// put stores a connection for subject at provider directly in the vault.
func (e *env) put(st *vault.Store, subject, provider string) string {
	e.t.Helper()
	c, err := st.Put(context.Background(), e.user(subject), provider, vault.Credential{AccessToken: "at-" + subject})
	if err != nil {
		e.t.Error(err)
		return ""
	}
	return c.ID
}

// TestPaginationWhileInserting pages through the listing (over the API) while
// another writer keeps inserting connections — many with exactly the created_at
// of existing rows, the case that breaks OFFSET paging — and checks that every
// row present at the start is returned exactly once and no row twice.
func TestPaginationWhileInserting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noAdminLogin: true})
	_, key := e.newAdminKey("scripts")
	t0 := e.clock.Now()

	before := map[string]bool{}
	for i := range 45 { // three instants, fifteen rows each: ties on created_at, ordered by id
		if i%15 == 0 && i > 0 {
			e.clock.Advance(time.Second)
		}
		before[e.put(e.vault, fmt.Sprintf("user-%02d", i), "fake")] = true
	}
	// The concurrent writer: another replica whose clock sits on the middle instant.
	other, err := vault.New(vault.Config{Pool: e.pool, Keyring: e.vault.Keyring(), Now: func() time.Time { return t0.Add(time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second) // rows by e.vault from now on are newer than every row above
	var inserted atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopWriter := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWriter()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			st := e.vault // and every other row a newer one
			if i%2 == 0 {
				st = other
			}
			if e.put(st, fmt.Sprintf("late-%03d", i), "fake") != "" {
				inserted.Add(1)
			}
		}
	}()

	seen := map[string]int{}
	after, pages := "", 0
	for {
		q := url.Values{"limit": {"7"}}
		if after != "" {
			q.Set("after", after)
		}
		st, out := e.adminAPI(key, http.MethodGet, "/admin/api/connections?"+q.Encode(), nil)
		if st != http.StatusOK {
			t.Fatalf("page %d: %d %v", pages, st, out)
		}
		for _, c := range out["connections"].([]any) {
			seen[c.(map[string]any)["id"].(string)]++
		}
		pages++
		next, _ := out["next"].(string)
		if next == "" {
			break
		}
		after = next
		// Let the writer insert between every two pages.
		for n, deadline := inserted.Load(), time.Now().Add(10*time.Second); inserted.Load() < n+2; {
			if time.Now().After(deadline) {
				t.Fatal("the concurrent writer stopped inserting")
			}
			time.Sleep(time.Millisecond)
		}
	}
	stopWriter()

	for id := range before {
		if seen[id] != 1 {
			t.Errorf("row %s returned %d times", id, seen[id])
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("row %s returned %d times", id, n)
		}
	}
	if pages < 7 || inserted.Load() < 12 {
		t.Fatalf("%d pages, %d rows inserted meanwhile: the test did not interleave", pages, inserted.Load())
	}
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noAdminLogin: true})
	ctx := context.Background()
	m := e.newMCPServer("files", "fake")
	aliceFake := e.connectFully(m, "alice", "files.read") // with m's consent
	e.clock.Advance(time.Second)
	aliceOther := e.put(e.vault, "alice", "other")
	e.clock.Advance(time.Second)
	bobFake := e.put(e.vault, "bob", "fake")
	if _, err := e.pool.Exec(ctx, `UPDATE connections SET status = 'reauthorization_required' WHERE id = $1`, bobFake); err != nil {
		t.Fatal(err)
	}
	iss := e.idp.Issuer()

	tests := []struct {
		name string
		f    admin.Filter
		want []string // newest first
	}{
		{"all", admin.Filter{}, []string{bobFake, aliceOther, aliceFake}},
		{"user", admin.Filter{Subject: "alice"}, []string{aliceOther, aliceFake}},
		{"user and issuer", admin.Filter{Subject: "alice", Issuer: iss}, []string{aliceOther, aliceFake}},
		{"another issuer", admin.Filter{Subject: "alice", Issuer: "https://elsewhere.example"}, nil},
		{"provider", admin.Filter{Provider: "fake"}, []string{bobFake, aliceFake}},
		{"status", admin.Filter{Status: "reauthorization_required"}, []string{bobFake}},
		{"active", admin.Filter{Status: "active"}, []string{aliceOther, aliceFake}},
		{"client", admin.Filter{Client: m.client.ID}, []string{aliceFake}},
		{"client and provider", admin.Filter{Client: m.client.ID, Provider: "other"}, nil},
	}
	for _, tt := range tests {
		p, err := e.store.Connections(ctx, tt.f, nil, 0)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var got []string
		for _, c := range p.Connections {
			got = append(got, c.ID)
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") || p.Next != nil {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	p, _ := e.store.Connections(ctx, admin.Filter{Client: m.client.ID}, nil, 0)
	if len(p.Connections) != 1 || p.Connections[0].Consents != 1 || p.Connections[0].Scopes[0] != "files.read" {
		t.Fatalf("row: %+v", p.Connections)
	}

	_, key := e.newAdminKey("scripts")
	for _, q := range []string{"status=bogus", "provider=Bad!", "client=nope", "after=garbage", "limit=0", "limit=100000",
		"user=" + url.QueryEscape("a\x00b")} {
		st, out := e.adminAPI(key, http.MethodGet, "/admin/api/connections?"+q, nil)
		if st != http.StatusBadRequest || out["error"] != "invalid_request" {
			t.Errorf("?%s: %d %v, want 400 invalid_request", q, st, out)
		}
	}
	if _, err := e.store.Connections(ctx, admin.Filter{Status: "bogus"}, nil, 0); !errors.Is(err, admin.ErrInvalid) {
		t.Fatalf("bad filter: %v", err)
	}
	// Revoked ones are deleted (issue 38 item 8): the page offers no filter
	// that never finds a row, and asked for them it says where they are.
	if slices.Contains(admin.Statuses(), "revoked") {
		t.Fatal("the listing offers a revoked filter, which never finds a row")
	}
	pe := newEnv(t, envOptions{}) // with the admin sign-in
	page := pe.adminBrowser().get(pe.srv.URL + "/admin/connections?status=revoked")
	if page.status != http.StatusOK || !strings.Contains(page.body, "A revoked linked account is deleted") ||
		!strings.Contains(page.body, `href="/admin/events?kind=connection.revoked&amp;window=30d"`) ||
		strings.Contains(page.body, `<option value="revoked"`) {
		t.Fatalf("the listing asked for revoked ones: %d\n%s", page.status, page.body)
	}
}

// TestListFiltersAreByteExact: the listing's user and issuer match byte for
// byte (docs/identity.md): "alice " and " alice" are other users than alice,
// each filter selects exactly its own, and a value no identity can be is
// ErrInvalid rather than cleaned up into one.
func TestListFiltersAreByteExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noAdminLogin: true})
	ctx := context.Background()
	ids := map[string]string{}
	for _, sub := range []string{"alice", "alice ", " alice", "alice\u00a0"} {
		ids[sub] = e.put(e.vault, sub, "fake")
	}
	for sub, id := range ids {
		for _, f := range []admin.Filter{{Subject: sub}, {Subject: sub, Issuer: e.idp.Issuer()}} {
			p, err := e.store.Connections(ctx, f, nil, 0)
			if err != nil || len(p.Connections) != 1 || p.Connections[0].ID != id || p.Connections[0].User.Subject != sub {
				t.Errorf("filter %+q: %+v %v, want only %s", f, p.Connections, err, id)
			}
		}
	}
	for _, f := range []admin.Filter{{Subject: "alice\t"}, {Subject: "alice\n"}, {Subject: "alice\xff"},
		{Issuer: e.idp.Issuer() + "\n"}} {
		if _, err := e.store.Connections(ctx, f, nil, 0); !errors.Is(err, admin.ErrInvalid) {
			t.Errorf("filter %+q: %v, want ErrInvalid", f, err)
		}
	}
}

// TestListFiltersAreByteExactOverHTTP: user= and issuer= on the listing,
// API and page, reach the Filter byte for byte: "alice " lists hers only,
// never alice's.
func TestListFiltersAreByteExactOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ids := map[string]string{}
	for _, sub := range []string{"alice", "alice ", " alice"} {
		ids[sub] = e.put(e.vault, sub, "fake")
	}
	_, key := e.newAdminKey("scripts")
	b := e.adminBrowser()
	for sub, id := range ids {
		q := "?" + url.Values{"user": {sub}, "issuer": {e.idp.Issuer()}}.Encode()
		st, out := e.adminAPI(key, http.MethodGet, "/admin/api/connections"+q, nil)
		list, _ := out["connections"].([]any)
		if st != http.StatusOK || len(list) != 1 || list[0].(map[string]any)["id"] != id {
			t.Errorf("API user=%q: %d %v, want only %s", sub, st, out, id)
		}
		page := b.get(e.srv.URL + "/admin/connections" + q)
		if page.status != http.StatusOK || !strings.Contains(page.body, id) {
			t.Errorf("page user=%q: %d, lacks %s", sub, page.status, id)
		}
		for other, otherID := range ids {
			if other != sub && strings.Contains(page.body, otherID) {
				t.Errorf("page user=%q lists the connection of %q", sub, other)
			}
		}
	}
}

func TestListPagesInHTML(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	for i := range 5 {
		e.put(e.vault, "user-"+strconv.Itoa(i), "fake")
	}
	b := e.adminBrowser()
	u := e.srv.URL + "/admin/connections?provider=fake&limit=2"
	var rows int
	for pages := 0; u != ""; pages++ {
		r := b.get(u)
		if r.status != http.StatusOK || pages > 5 {
			t.Fatalf("page %d: %d", pages, r.status)
		}
		rows += strings.Count(r.body, `href="/admin/connections/cn_`)
		u = ""
		if i := strings.Index(r.body, `rel="next"`); i >= 0 {
			start := strings.LastIndex(r.body[:i], `href="`) + len(`href="`)
			u = e.srv.URL + strings.ReplaceAll(r.body[start:strings.Index(r.body[start:], `"`)+start], "&amp;", "&")
			if !strings.Contains(u, "provider=fake") || !strings.Contains(u, "limit=2") {
				t.Fatalf("next link loses the filter: %s", u)
			}
		}
	}
	if rows != 5 {
		t.Fatalf("%d rows over the pages, want 5", rows)
	}
}

func TestSecurityEventCounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	other := e.newMCPServer("other", "fake")

	// The phishing case: alice's link opened by bob.
	_, el := m.call(http.MethodPost, "/v1/elicitations", "alice", map[string]any{"provider": "fake"})
	bob := e.browser()
	e.userLogin(bob, "bob")
	if r := bob.get(el["url"].(string)); r.status != http.StatusForbidden {
		t.Fatalf("bob on alice's link: %d", r.status)
	}
	// A replayed (or never issued) provider state of the right shape.
	if r := bob.get(e.srv.URL + "/oauth/callback?code=x&state=" + strings.Repeat("A", 43)); r.status != http.StatusBadRequest {
		t.Fatalf("unknown state: %d", r.status)
	}
	// Ten calls with a token issued for another MCP server: one row now, the
	// rest counted and written by the sweep once the minute has passed.
	for range 10 {
		if st, _ := m.callWith(http.MethodGet, "/v1/connections", other.token("alice"), nil); st != http.StatusUnauthorized {
			t.Fatalf("wrong audience: %d", st)
		}
	}
	e.clock.Advance(2 * time.Minute)
	if err := e.server.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}

	_, key := e.newAdminKey("scripts")
	st, out := e.adminAPI(key, http.MethodGet, "/admin/api/events?window=1h", nil)
	if st != http.StatusOK {
		t.Fatalf("events: %d %v", st, out)
	}
	counts := map[string][2]float64{}
	for _, c := range out["counts"].([]any) {
		c := c.(map[string]any)
		counts[c["kind"].(string)] = [2]float64{c["events"].(float64), c["occurrences"].(float64)}
	}
	want := map[string][2]float64{
		"security.identity_mismatch":         {1, 1},
		"security.state_unknown_or_replayed": {1, 1},
		"security.invalid_user_token":        {2, 10},
	}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%s: events, occurrences = %v, want %v (all: %v)", k, counts[k], v, counts)
		}
	}
	for _, ev := range out["events"].([]any) {
		if !strings.HasPrefix(ev.(map[string]any)["kind"].(string), "security.") {
			t.Fatalf("a non-security event in the security events: %v", ev)
		}
	}

	b := e.adminBrowser()
	r := b.get(e.srv.URL + "/admin/events")
	for _, s := range []string{"security.identity_mismatch", "security.invalid_user_token", "wrong_audience", m.client.ID} {
		if r.status != http.StatusOK || !strings.Contains(r.body, s) {
			t.Fatalf("events page lacks %q: %d %s", s, r.status, r.body)
		}
	}
	if r := b.get(e.srv.URL + "/admin/events?window=forever"); r.status != http.StatusBadRequest {
		t.Fatalf("bad window: %d", r.status)
	}
	// Paging through one kind, one event per page.
	ids := map[float64]bool{}
	for q := "kind=security.invalid_user_token&limit=1"; q != ""; {
		st, out = e.adminAPI(key, http.MethodGet, "/admin/api/events?"+q, nil)
		if st != http.StatusOK || len(out["events"].([]any)) != 1 || len(ids) > 2 {
			t.Fatalf("events of one kind: %d %v", st, out)
		}
		ids[out["events"].([]any)[0].(map[string]any)["id"].(float64)] = true
		q = ""
		if next, ok := out["next_before"].(float64); ok {
			q = "kind=security.invalid_user_token&limit=1&before=" + strconv.FormatFloat(next, 'f', -1, 64)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("paged through %d events, want 2", len(ids))
	}
}
