package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/connectd/connectd/internal/admin"
)

// TestCutOffEndToEnd (issue 25): an MCP server reads the tokens of alice's
// and bob's connections; an admin cuts it off from its page, since before
// those reads, with revocation. The result page lists both connections as
// revoked; the fake provider received both revocations (RFC 7009); the
// server's webhook endpoint receives client.cut_off, signed (verified with
// the Standard Webhooks library), with counts and no credential; alice's
// /account says why her connection went; the server's key is refused and
// the long-poll it held ends. A proxy-only client, cut off the same way,
// exposed nothing and loses nothing of its users'.
func TestCutOffEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.runJobs()
	bad := e.newMCPServer("shady", "fake")
	rc := newReceiver(t)
	_, secret, err := e.store.CreateWebhook(context.Background(), bad.client.ID, rc.srv.URL+"/hooks",
		[]string{"client.cut_off"}, admin.Actor{Name: "cli:test"})
	if err != nil {
		t.Fatal(err)
	}
	conns := map[string]string{"alice": e.connectFully(bad, "alice"), "bob": e.connectFully(bad, "bob")}
	var tokens []string
	names := map[string]string{} // each account's display name, as the token read says it
	for user, conn := range conns {
		st, out := bad.call(http.MethodGet, "/v1/connections/fake/token", user, nil)
		if st != http.StatusOK {
			t.Fatalf("token of %s: %d %v", user, st, out)
		}
		tokens = append(tokens, out["access_token"].(string))
		// The fake names its accounts only by id (user.id): that is the name.
		if names[user], _ = out["account"].(map[string]any)["display_name"].(string); names[user] == "" {
			t.Fatalf("the token read of %s names no account: %v", user, out["account"])
		}
		eventually(t, "the token.read row of "+user, func() bool {
			return e.count(`SELECT count(*) FROM audit_events WHERE kind = 'token.read' AND target = $1`, conn) > 0
		})
	}
	// A long-poll it holds while it is cut off.
	st, el := bad.call(http.MethodPost, "/v1/elicitations", "alice", map[string]any{"provider": "fake", "scopes": []string{"more"}})
	if st != http.StatusCreated {
		t.Fatalf("mint: %d %v", st, el)
	}
	polled := make(chan int, 1)
	go func() {
		st, _ := bad.callAt(e.srv.URL, http.MethodGet, "/v1/elicitations/"+el["elicitation_id"].(string)+"?wait=30s", "alice")
		polled <- st
	}()

	// The admin: the MCP server's page, the confirmation, the cut-off.
	ab := e.adminBrowser()
	page := ab.get(e.srv.URL + "/admin/clients/" + bad.client.ID)
	cutOffURL := "/admin/clients/" + bad.client.ID + "/cut-off"
	if page.status != http.StatusOK || !strings.Contains(page.body, `href="`+cutOffURL+`"`) {
		t.Fatalf("client page: %d %s", page.status, page.body)
	}
	confirm := ab.get(e.srv.URL + cutOffURL)
	if confirm.status != http.StatusOK || !strings.Contains(confirm.body, `type="date" name="since"`) {
		t.Fatalf("confirmation page: %d %s", confirm.status, confirm.body)
	}
	since := time.Now().UTC().Add(-24 * time.Hour).Format("2006-01-02")
	// The confirmation lists what revocation would revoke before anything
	// is done, for the date asked, and nothing is ticked in advance (issue
	// 38 item 8).
	preview := ab.get(e.srv.URL + cutOffURL + "?since=" + since)
	for user, conn := range conns {
		if !strings.Contains(preview.body, conn) || !strings.Contains(preview.body, user+" (") {
			t.Fatalf("the confirmation does not list %s's exposed account %s:\n%s", user, conn, preview.body)
		}
	}
	if !strings.Contains(preview.body, "since "+since) || !strings.Contains(preview.body, ": 2</h2>") ||
		!strings.Contains(preview.body, `name="revoke" value="yes">`) || strings.Contains(preview.body, `value="yes" checked`) {
		t.Fatalf("the confirmation's revocation choice:\n%s", preview.body)
	}
	if r := ab.get(e.srv.URL + cutOffURL + "?since=tomorrow"); r.status != http.StatusBadRequest || e.code(r) != "invalid_request" {
		t.Fatalf("a bad since on the confirmation: %d %q", r.status, e.code(r))
	}
	if c, _ := e.clients.Get(context.Background(), bad.client.ID); c.Disabled || e.auditCount("client.cut_off") != 0 {
		t.Fatal("showing the confirmation cut the client off")
	}
	form := url.Values{"csrf_token": {csrfOf(t, confirm.body)}, "since": {since}, "revoke": {"yes"}}
	for _, tc := range []struct {
		name string
		form url.Values
		code string
	}{
		{"without the confirmation", form, "confirmation_required"},
		{"without the CSRF token", url.Values{"confirm": {bad.client.ID}, "since": {since}}, "csrf_failed"},
		{"a date in the future", url.Values{"csrf_token": form["csrf_token"], "confirm": {bad.client.ID},
			"since": {time.Now().Add(48 * time.Hour).Format("2006-01-02")}}, "invalid_request"},
	} {
		if r := ab.do(http.MethodPost, e.srv.URL+cutOffURL, tc.form); r.status < 400 || r.status > 499 || e.code(r) != tc.code {
			t.Fatalf("%s: %d %q, want %s", tc.name, r.status, e.code(r), tc.code)
		}
	}
	if c, _ := e.clients.Get(context.Background(), bad.client.ID); c.Disabled {
		t.Fatal("a refused form disabled the client")
	}
	form.Set("confirm", bad.client.ID)
	result := ab.do(http.MethodPost, e.srv.URL+cutOffURL, form)
	if result.status != http.StatusOK {
		t.Fatalf("cut-off: %d %s", result.status, result.body)
	}
	for user, conn := range conns {
		for _, want := range []string{conn, user + " (", names[user], "revoked (at the provider: revoked)"} {
			if !strings.Contains(result.body, want) {
				t.Fatalf("the result page lacks %q: %s", want, result.body)
			}
		}
	}

	// Exposure revoked at the provider.
	known := map[string]bool{}
	for _, r := range e.fake.Revocations() {
		if r.Known {
			known[r.Token] = true
		}
	}
	if len(known) < 2 || e.count(`SELECT count(*) FROM connections WHERE id = ANY($1)`, []string{conns["alice"], conns["bob"]}) != 0 {
		t.Fatalf("revoked at the provider: %v; connections left: want none", e.fake.Revocations())
	}

	// The key is refused, the long-poll ended with the same answer.
	if st, out := bad.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusUnauthorized || out["error"] != "invalid_client" {
		t.Fatalf("the cut-off client's key: %d %v", st, out)
	}
	select {
	case st := <-polled:
		if st != http.StatusUnauthorized {
			t.Fatalf("the long-poll answered %d", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long-poll still waits after the cut-off")
	}

	// The webhook: verified, counts only.
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	got := rc.wait(t, 1)[0]
	if err := wh.Verify(got.body, got.header); err != nil {
		t.Fatalf("the client.cut_off delivery does not verify: %v", err)
	}
	var ev struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(got.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "client.cut_off" || ev.Data["client_id"] != bad.client.ID || ev.Data["exposed"] != 2.0 ||
		ev.Data["revoked"] != 2.0 || ev.Data["failed"] != 0.0 || ev.Data["since"] != since+"T00:00:00Z" {
		t.Fatalf("event: %s", got.body)
	}
	for _, tok := range tokens {
		if strings.Contains(string(got.body), tok) {
			t.Fatal("the event carries a credential")
		}
	}

	// alice is told why, on /account, naming the provider and the account
	// as the token read did.
	ub := e.browser()
	e.userLogin(ub, "alice")
	acct := ub.get(e.srv.URL + "/account")
	if acct.status != http.StatusOK || !strings.Contains(acct.body, "cut off the application <strong>shady</strong>") ||
		!strings.Contains(acct.body, "may have been compromised") || !strings.Contains(acct.body, "Your Fake fake account") ||
		!strings.Contains(acct.body, "Account: <strong>"+names["alice"]+"</strong>") {
		t.Fatalf("alice's account page: %d %s", acct.status, acct.body)
	}
	if e.auditCount("client.cut_off") != 1 ||
		e.count(`SELECT count(*) FROM audit_events WHERE kind = 'client.cut_off' AND actor = 'admin:alice'`) != 1 {
		t.Fatal("the cut-off is not audited by the admin who did it")
	}

	// Revoke what is left: nothing is left.
	retry := ab.do(http.MethodPost, e.srv.URL+cutOffURL+"/revoke", url.Values{"csrf_token": {csrfOf(t, result.body)},
		"confirm": {bad.client.ID}, "since": {since}})
	if retry.status != http.StatusOK || !strings.Contains(retry.body, "No linked account") {
		t.Fatalf("revoke what is left: %d %s", retry.status, retry.body)
	}

	// Its page now says it is disabled and offers the way back (issue 38
	// item 8): enabling it again, audited; the key works again.
	page = ab.get(e.srv.URL + "/admin/clients/" + bad.client.ID)
	enableURL := "/admin/clients/" + bad.client.ID + "/enable"
	if !strings.Contains(page.body, "shady is disabled") || !strings.Contains(page.body, `action="`+enableURL+`"`) ||
		strings.Contains(page.body, "Cut off this client") {
		t.Fatalf("a cut-off client's page:\n%s", page.body)
	}
	if r := ab.do(http.MethodPost, e.srv.URL+enableURL, url.Values{"csrf_token": {csrfOf(t, page.body)}}); r.status != http.StatusBadRequest ||
		e.code(r) != "confirmation_required" {
		t.Fatalf("enable without the confirmation: %d %q", r.status, e.code(r))
	}
	if r := ab.do(http.MethodPost, e.srv.URL+enableURL, url.Values{"confirm": {bad.client.ID}}); r.status != http.StatusForbidden {
		t.Fatalf("enable without the CSRF token: %d", r.status)
	}
	if c, _ := e.clients.Get(context.Background(), bad.client.ID); !c.Disabled {
		t.Fatal("a refused form enabled the client")
	}
	if r := ab.do(http.MethodPost, e.srv.URL+enableURL, url.Values{"csrf_token": {csrfOf(t, page.body)},
		"confirm": {bad.client.ID}}); r.status != http.StatusSeeOther {
		t.Fatalf("enable: %d %s", r.status, r.body)
	}
	if st, out := bad.call(http.MethodGet, "/v1/connections", "alice", nil); st != http.StatusOK {
		t.Fatalf("the enabled client's key: %d %v", st, out)
	}
	if e.count(`SELECT count(*) FROM audit_events WHERE kind = 'client.enabled' AND actor = 'admin:alice'`) != 1 {
		t.Fatal("enabling it again is not audited by the admin who did it")
	}

	t.Run("a proxy-only client", func(t *testing.T) {
		po := e.newMCPServer("proxied", "fake")
		if err := e.clients.SetProxyOnly(context.Background(), po.client.ID, true); err != nil {
			t.Fatal(err)
		}
		conn := e.connectFully(po, "alice")
		if st, out := po.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusForbidden {
			t.Fatalf("a proxy-only token read: %d %v", st, out)
		}
		_, key := e.newAdminKey("incident")
		st, out := e.adminAPI(key, http.MethodPost, "/admin/api/clients/"+po.client.ID+"/cut-off",
			map[string]any{"confirm": po.client.ID, "since": time.Now().Add(-time.Hour), "revoke": true})
		if st != http.StatusOK || out["disabled"] != true {
			t.Fatalf("cut-off: %d %v", st, out)
		}
		if x, _ := out["exposed"].([]any); len(x) != 0 {
			t.Fatalf("a proxy-only client's exposure: %v", out["exposed"])
		}
		if e.count(`SELECT count(*) FROM connections WHERE id = $1`, conn) != 1 {
			t.Fatal("a proxy-only client's cut-off revoked its user's connection")
		}
	})
}
