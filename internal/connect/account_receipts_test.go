package connect_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// pageText is a page's text as a reader sees it: tags removed, entities
// decoded, white space collapsed.
func pageText(body string) string {
	body = regexp.MustCompile(`(?s)<[^>]*>`).ReplaceAllString(body, " ")
	return strings.Join(strings.Fields(html.UnescapeString(body)), " ")
}

// receiptsOf is the part of an account page listing the receipts of its
// connections (after the first "Who used it" heading).
func receiptsOf(body string) string {
	_, rest, _ := strings.Cut(body, "Who used it, and for what")
	return rest
}

// accountUntil reloads user's /account in b until its text holds every
// want, for up to 5 s (the receipts' writer flushes every 300 ms), and
// returns the page and how long it took.
func (e *env) accountUntil(b *browser, user string, want ...string) (response, time.Duration) {
	e.t.Helper()
	start := time.Now()
	for {
		page := e.accountPage(b, user)
		text := pageText(page.body)
		missing := ""
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return page, time.Since(start)
		}
		if time.Since(start) > 5*time.Second {
			e.t.Fatalf("/account never said %q:\n%s", missing, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// download is user's GET /account/receipts[?query] in b, decoded.
func (e *env) download(b *browser, query string) (response, map[string]any) {
	e.t.Helper()
	r := b.get(e.srv.URL + "/account/receipts" + query)
	if r.status != http.StatusOK {
		e.t.Fatalf("/account/receipts%s: %d %s", query, r.status, r.body)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		e.t.Fatalf("the download is not JSON: %v\n%s", err, r.body)
	}
	return r, doc
}

// TestAccountReceiptsProxyOnly (issues 36 and 38 item 1): a proxy-only
// client's proxied calls appear on /account within a second — the client's
// name, the method and the path's template (ids as *), the status answered
// — and "Last used" is set for the connection and the client (it said "Not
// yet" forever: it was read from token reads only).
func TestAccountReceiptsProxyOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newProxyOnlyServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.run(e.server) // the receipts' writer, as in service

	alice := e.browser()
	before := pageText(e.accountPage(alice, "alice").body)
	if !strings.Contains(before, "Last used Not yet") || !strings.Contains(before, "No application has used this account yet") {
		t.Fatalf("before any use:\n%s", before)
	}
	if resp, raw := a.proxied(http.MethodGet, "files", "alice", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("proxied: %d %s", resp.StatusCode, raw)
	}
	if resp, _ := a.proxied(http.MethodGet, "missing/42?q=secret-looking", "alice", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("proxied to a missing path: %d", resp.StatusCode)
	}
	page, took := e.accountUntil(alice, "alice", "alpha called GET /files through connectd, answered 200",
		"alpha called GET /missing/* through connectd, answered 404")
	t.Logf("the proxied calls were on /account after %s", took)
	text := pageText(page.body)
	if strings.Contains(text, "Last used Not yet") || strings.Contains(text, "secret-looking") {
		t.Fatalf("after proxied calls:\n%s", text)
	}
	if !regexp.MustCompile(`Allowed [^·]+ · last used \d`).MatchString(text) {
		t.Fatalf("alpha's last use is not shown:\n%s", text)
	}
	if strings.Contains(text, "the credential left connectd") {
		t.Fatal("a proxied call is said to have let the credential out")
	}

	// One record a call: the sampled audit trail's proxy.call row (with the
	// call's method, template and status) is the receipt; the receipts'
	// own table holds no proxied call. Two more calls are counted into the
	// row written when the period ends.
	for range 2 {
		if resp, raw := a.proxied(http.MethodGet, "files", "alice", nil, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("proxied: %d %s", resp.StatusCode, raw)
		}
	}
	e.clock.Advance(2 * time.Hour)
	if err := e.server.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := func() (n float64) {
		_, doc := e.download(alice, "")
		for _, x := range doc["receipts"].([]any) {
			if m := x.(map[string]any); m["kind"] == "proxy" && m["template"] == "/files" && m["status"] == 200.0 &&
				m["method"] == "GET" {
				n += m["count"].(float64)
			}
		}
		return n
	}
	eventually(t, "the three calls to /files are not all counted", func() bool { return calls() == 3 })
	var own int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM receipts WHERE kind = 'proxy'`).Scan(&own); err != nil {
		t.Fatal(err)
	}
	if own != 0 {
		t.Fatalf("%d proxied calls recorded twice, in the receipts' own table too", own)
	}
}

// TestAccountReceiptsTokenRead: a token read appears as the credential
// leaving connectd, in those words, with the client's name.
func TestAccountReceiptsTokenRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.newMCPServer("beta", "fake")
	e.connectFully(b, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.run(e.server)
	for range 3 {
		tokenOf(t, b, "alice")
	}
	br := e.browser()
	e.accountPage(br, "alice")
	// Token reads are the sampled audit trail's (account_reads.go): the
	// first read of the period is on the page within about a second, the
	// count of the others once the period ends.
	reads := func() float64 {
		_, doc := e.download(br, "")
		n := 0.0
		for _, x := range doc["receipts"].([]any) {
			if x.(map[string]any)["kind"] == "token" {
				n += x.(map[string]any)["count"].(float64)
			}
		}
		return n
	}
	eventually(t, "the first read never reached the receipts", func() bool { return reads() >= 1 })
	page, _ := e.accountUntil(br, "alice", "beta read the credential itself: the credential left connectd",
		"beta received your", "access token and holds it: it can use it directly")
	e.clock.Advance(2 * time.Hour)
	if err := e.server.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the three reads are not all counted", func() bool { return reads() == 3 })
	for _, secret := range e.fakeTokens() {
		if strings.Contains(page.body, secret) {
			t.Fatal("the page holds the token")
		}
	}
}

// TestAccountReceiptsAreTheUsers (docs/security.md A15r): bob cannot read
// alice's receipts — not on his /account, not in his download, not by
// naming her connection, her client, her subject or issuer in any
// parameter, and no URL holds an id that reads them; the download is JSON
// of the signed-in user's rows only, an attachment, never cached; without
// a session it holds nothing.
func TestAccountReceiptsAreTheUsers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	e.connectFully(a, "bob", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	tokenOf(t, a, "alice")
	if resp, _ := a.proxied(http.MethodGet, "files", "alice", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("proxied: %d", resp.StatusCode)
	}
	if err := e.server.Sweep(context.Background()); err != nil { // writes the receipts now
		t.Fatal(err)
	}
	aliceConn := e.connID("alice")

	// Alice's download: her rows only, as an attachment.
	alice := e.browser()
	e.accountPage(alice, "alice")
	r, doc := e.download(alice, "")
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cd := r.header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") {
		t.Fatalf("Content-Disposition %q", cd)
	}
	if cc := r.header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
		t.Fatalf("Cache-Control %q", cc)
	}
	receipts, _ := doc["receipts"].([]any)
	if doc["subject"] != "alice" || len(receipts) != 2 {
		t.Fatalf("alice's download: %s", r.body)
	}
	kinds := map[string]bool{}
	for _, x := range receipts {
		rc := x.(map[string]any)
		if rc["connection_id"] != aliceConn || rc["client_id"] != a.client.ID || rc["client_name"] != "alpha" {
			t.Fatalf("a receipt of another connection or client in alice's download: %v", rc)
		}
		kinds[rc["kind"].(string)] = true
		if rc["kind"] == "token" && rc["credential_left_connectd"] != true {
			t.Fatalf("a token read not marked: %v", rc)
		}
	}
	if !kinds["token"] || !kinds["proxy"] {
		t.Fatalf("kinds %v", kinds)
	}

	// Bob, signed in, names alice's everything.
	bob := e.browser()
	bobPage := pageText(receiptsOf(e.accountPage(bob, "bob").body))
	if !strings.Contains(bobPage, "No application has used this account yet") || strings.Contains(bobPage, "alpha called") {
		t.Fatalf("bob's page:\n%s", bobPage)
	}
	q := url.Values{"connection": {aliceConn}, "connection_id": {aliceConn}, "client": {a.client.ID},
		"subject": {"alice"}, "sub": {"alice"}, "issuer": {e.idps[0].Issuer()}, "user": {"alice"}}
	for _, query := range []string{"", "?" + q.Encode(), "?connection=" + aliceConn} {
		r, doc := e.download(bob, query)
		if doc["subject"] != "bob" || len(doc["receipts"].([]any)) != 0 || strings.Contains(r.body, aliceConn) {
			t.Fatalf("bob's download%s: %s", query, r.body)
		}
		page := bob.get(e.srv.URL + "/account" + query)
		if page.status != http.StatusOK || strings.Contains(page.body, aliceConn) || strings.Contains(pageText(page.body), "alpha called") {
			t.Fatalf("bob's /account%s: %d\n%s", query, page.status, pageText(page.body))
		}
	}
	for _, path := range []string{"/account/receipts/" + aliceConn, "/account/receipts/alice", "/account/" + aliceConn + "/receipts"} {
		if r := bob.get(e.srv.URL + path); r.status != http.StatusNotFound || strings.Contains(r.body, a.client.ID) {
			t.Fatalf("bob's GET %s: %d %s", path, r.status, r.body)
		}
	}

	// Without a session: back to the account page (which signs in), nothing
	// of anyone's.
	anon := e.browser()
	if r := anon.get(e.srv.URL + "/account/receipts?" + q.Encode()); r.status != http.StatusSeeOther ||
		r.location != e.srv.URL+"/account" || strings.Contains(r.body, aliceConn) {
		t.Fatalf("anonymous download: %d %s %s", r.status, r.location, r.body)
	}
}

// TestAccountReceiptRevoke: a receipt line's Remove access takes the
// client's access away (consent_required), and the line then says it has
// none.
func TestAccountReceiptRevoke(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	tokenOf(t, a, "alice")
	if err := e.server.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	alice := e.browser()
	page := e.accountPage(alice, "alice")
	line := receiptsOf(page.body)
	if !strings.Contains(line, `action="/account/withdraw"`) {
		t.Fatalf("the receipt line offers no Remove access:\n%s", pageText(line))
	}
	_, form, _ := strings.Cut(line, `action="/account/withdraw"`)
	client := regexp.MustCompile(`name="client" value="([^"]+)"`).FindStringSubmatch(form)
	conn := regexp.MustCompile(`name="connection" value="([^"]+)"`).FindStringSubmatch(form)
	if client == nil || conn == nil || client[1] != a.client.ID || conn[1] != e.connID("alice") {
		t.Fatalf("the receipt line's form names %v %v", client, conn)
	}
	r := e.accountPost(alice, page, "/account/withdraw", url.Values{"confirm": {"yes"}, "provider": {"fake"}, "client": {client[1]},
		"connection": {conn[1]}})
	if r.status != http.StatusSeeOther || r.location != e.srv.URL+"/account?done=withdrawn" {
		t.Fatalf("withdraw from a receipt: %d %s", r.status, r.location)
	}
	st, out := a.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil)
	expectError(t, st, out, http.StatusForbidden, "consent_required")
	text := pageText(receiptsOf(e.accountPage(alice, "alice").body))
	if !strings.Contains(text, "it no longer has access") || strings.Contains(text, "Remove access") {
		t.Fatalf("after the withdrawal:\n%s", text)
	}
}
