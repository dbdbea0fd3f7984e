package connect_test

import (
	"html"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var switchForm = regexp.MustCompile(`<form method="post" action="(/c/[^"]+/switch)"`)

// TestSignOutAndContinue (issue 27): a link opened by the wrong account is
// refused (identity_mismatch, nothing shared) but offers "Sign out and
// continue": with the page's CSRF token it ends that session everywhere and
// comes back to the same link, which asks to sign in; signed in as the
// right user, the consent page again offers "Not you?". Without the token
// nothing happens; the page leads nowhere but the link it came from.
func TestSignOutAndContinue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	u := m.mint("alice", map[string]any{"provider": "fake"})["url"].(string)
	id := u[strings.LastIndex(u, "/")+1:]

	br := e.browser()
	r := e.openAs(br, u, "bob")
	e.refused(r, http.StatusForbidden, "identity_mismatch")
	f := switchForm.FindStringSubmatch(r.body)
	if f == nil || f[1] != "/c/"+id+"/switch" || strings.Contains(r.body, "alice") {
		t.Fatalf("the refusal offers no way on (or names alice): %s", r.body)
	}
	// It says who is signed in and which application sent the link
	// (issue 38 item 4), still nothing of whom it is for.
	if text := pageText(r.body); !strings.Contains(text, "This link from files was created for another account") ||
		!strings.Contains(text, "You are signed in as bob") {
		t.Fatalf("the refusal does not say who is signed in and who sent the link:\n%s", text)
	}
	csrf := csrfOf(t, r.body)

	// Without the CSRF token (a cross-site post): refused, still signed in.
	if r := br.do(http.MethodPost, e.srv.URL+f[1], url.Values{}); r.status != http.StatusForbidden {
		t.Fatalf("switch without CSRF: %d %s", r.status, r.body)
	}
	if s := br.get(e.srv.URL + "/session"); !strings.Contains(s.body, "You are signed in") {
		t.Fatal("a switch without its CSRF token signed the browser out")
	}
	// Not a link id: 404, not a redirect somewhere.
	if r := br.do(http.MethodPost, e.srv.URL+"/c/..%2f..%2fevil/switch", url.Values{"csrf_token": {csrf}}); r.status/100 == 3 &&
		!strings.HasPrefix(r.location, e.srv.URL+"/") {
		t.Fatalf("a bad id redirected to %s", r.location)
	}

	old := maps.Clone(br.Cookies)
	r = br.do(http.MethodPost, e.srv.URL+f[1], url.Values{"csrf_token": {csrf}})
	// The page leads to the sign-in at the link's issuer, back to the
	// link, asking the issuer to let the user choose (issue 38 item 4: an
	// identity provider with its own session signed bob straight back in).
	cont := regexp.MustCompile(`href="(/login\?[^"]+)"`).FindStringSubmatch(r.body)
	if r.status != http.StatusOK || cont == nil || r.location != "" {
		t.Fatalf("switch: %d %q %s", r.status, r.location, r.body)
	}
	next, _ := url.Parse(html.UnescapeString(cont[1]))
	if q := next.Query(); q.Get("return_to") != "/c/"+id || q.Get("switch") != "1" || q.Get("issuer") == "" {
		t.Fatalf("the page continues to %s", next)
	}
	login := br.get(e.srv.URL + next.String())
	authorize, err := url.Parse(login.location)
	if login.status != http.StatusFound || err != nil || authorize.Query().Get("prompt") != "login" {
		t.Fatalf("the sign-in after a switch: %d %s, want the issuer asked prompt=login", login.status, login.location)
	}
	// An ordinary sign-in asks no prompt.
	if plain := e.browser().get(u); plain.status == http.StatusFound {
		if first := e.browser().get(e.srv.URL + strings.TrimPrefix(plain.location, e.srv.URL)); strings.Contains(first.location, "prompt=") {
			t.Fatalf("an ordinary sign-in asks a prompt: %s", first.location)
		}
	}
	// The session is over on the server: its old cookie no longer signs in.
	stale := e.browser()
	stale.Cookies = old
	if s := stale.get(e.srv.URL + "/session"); !strings.Contains(s.body, "Not signed in") {
		t.Fatal("the old session still works after the switch")
	}
	// Back at the link: sign in as alice, the consent page, with "Not you?".
	page := e.openAs(br, u, "alice")
	if page.status != http.StatusOK || !strings.Contains(page.body, "Allow") || !strings.Contains(page.body, "Not you?") ||
		switchForm.FindStringSubmatch(page.body) == nil {
		t.Fatalf("after the switch: %d %s", page.status, page.body)
	}
	if r := e.allow(br, u, page); r.status != http.StatusSeeOther {
		t.Fatalf("allow after the switch: %d %s", r.status, r.body)
	}
}
