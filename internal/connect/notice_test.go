package connect_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/notice"
)

// TestAccountNotices (issue 25): a notice that an administrator cut off a
// compromised application shows on its user's /account — naming the
// provider, the account, the date and the application — until that user
// dismisses it (a CSRF-protected POST). Another user never sees it and
// cannot dismiss it, even posting its id with their own valid form.
func TestAccountNotices(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	alice := identity.User{Issuer: e.idps[0].Issuer(), Subject: "alice"}
	if err := notice.Add(context.Background(), e.pool, notice.Notice{User: alice, Kind: notice.KindClientCutOff,
		Provider: "fake", ConnectionID: "cn_gone", Account: "alice@fake (work)", ClientID: "cli_bad",
		ClientName: "Shady Files"}); err != nil {
		t.Fatal(err)
	}
	ns, err := notice.List(context.Background(), e.pool, alice)
	if err != nil || len(ns) != 1 {
		t.Fatalf("notices: %v %v", ns, err)
	}
	id := strconv.FormatInt(ns[0].ID, 10)
	const says = "the administrator cut off the application <strong>Shady Files</strong> because it may have been compromised"

	ab, bb := e.browser(), e.browser()
	page := e.accountPage(ab, "alice")
	for _, want := range []string{says, "alice@fake (work)", "was disconnected", `name="notice" value="` + id + `"`} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("alice's page lacks %q: %s", want, page.body)
		}
	}
	bobs := e.accountPage(bb, "bob")
	if strings.Contains(bobs.body, "Shady Files") || strings.Contains(bobs.body, `name="notice"`) {
		t.Fatal("bob's page shows alice's notice")
	}

	for _, tc := range []struct {
		name   string
		b      *browser
		page   response
		form   url.Values
		status int
		gone   bool // alice's notice is gone after
	}{
		{"no CSRF token", ab, response{}, url.Values{"notice": {id}}, http.StatusForbidden, false},
		{"not an id", ab, page, url.Values{"notice": {"x1"}}, http.StatusBadRequest, false},
		{"bob posts alice's id", bb, bobs, url.Values{"notice": {id}}, http.StatusSeeOther, false},
		{"alice dismisses it", ab, page, url.Values{"notice": {id}}, http.StatusSeeOther, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.page.body != "" {
				tc.form.Set("csrf_token", csrfOf(t, tc.page.body))
			}
			r := tc.b.do(http.MethodPost, e.srv.URL+"/account/notices/dismiss", tc.form)
			if r.status != tc.status {
				t.Fatalf("dismiss: %d %s", r.status, r.body)
			}
			left, err := notice.List(context.Background(), e.pool, alice)
			if err != nil {
				t.Fatal(err)
			}
			if (len(left) == 0) != tc.gone {
				t.Fatalf("alice's notices after: %v", left)
			}
		})
	}
	if page := e.accountPage(ab, "alice"); strings.Contains(page.body, "Shady Files") {
		t.Fatal("a dismissed notice still shows")
	}
}

// TestRevocationsByOthersExplainThemselves (issue 38 item 3): an end of a
// user's connection by someone else leaves its notice on /account — an
// application's unlink names the application; an administrator's
// revocation (its notice written by package admin: TestRevokeThroughTheAPI)
// says an administrator did it. The user's own Disconnect leaves none.
func TestRevocationsByOthersExplainThemselves(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("alpha", "fake")
	e.connectFully(a, "alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	if st, out := a.call(http.MethodDelete, "/v1/connections/fake", "alice", nil); st != http.StatusOK {
		t.Fatalf("unlink: %d %v", st, out)
	}
	page := pageText(e.accountPage(e.browser(), "alice").body)
	if !strings.Contains(page, "the application alpha disconnected your") || !strings.Contains(page, "revoked at") {
		t.Fatalf("alice's page after alpha's unlink:\n%s", page)
	}
	alice := identity.User{Issuer: e.idps[0].Issuer(), Subject: "alice"}
	if err := notice.Add(context.Background(), e.pool, notice.Notice{User: alice, Kind: notice.KindAdminRevoked,
		Provider: "fake", ConnectionID: "cn_gone", Account: "alice@fake"}); err != nil {
		t.Fatal(err)
	}
	page = pageText(e.accountPage(e.browser(), "alice").body)
	if !strings.Contains(page, "an administrator disconnected your") || !strings.Contains(page, "alice@fake") {
		t.Fatalf("alice's page after an admin's revocation:\n%s", page)
	}
	// Her own Disconnect: no notice.
	b := e.newMCPServer("beta", "fake")
	e.connectFully(b, "bob", map[string]any{"provider": "fake", "scopes": []string{"read"}})
	before := e.count("user_notices")
	br := e.browser()
	acc := e.accountPage(br, "bob")
	if r := e.accountPost(br, acc, "/account/disconnect", url.Values{"provider": {"fake"}, "confirm": {"yes"}}); r.status != http.StatusSeeOther ||
		!strings.HasSuffix(r.location, "?done=disconnected") {
		t.Fatalf("bob's disconnect: %d %s", r.status, r.location)
	}
	if n := e.count("user_notices"); n != before {
		t.Fatalf("bob's own Disconnect left %d notices", n-before)
	}
}
