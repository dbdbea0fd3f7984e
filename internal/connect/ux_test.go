package connect_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/connectd/connectd/web/templates"
)

// uxEnv is an env whose pages carry everything issue 27 adds: the
// operator's brand, a provider with scope descriptions and a logo, and an
// MCP server with a display name, logo and homepage.
func uxEnv(t *testing.T, fakeEntry func(map[string]any)) (*env, *mcpServer) {
	t.Helper()
	e := newEnv(t, envOptions{
		brand: templates.Brand{Name: "Acme Connect", LogoURL: "https://cdn.acme.example/logo.svg", Accent: "#0f7b6c"},
		fakeEntry: func(entry map[string]any) {
			entry["display_name"] = "Demo Files"
			entry["logo_url"] = "https://logos.example/demo-files.svg"
			entry["scope_descriptions"] = map[string]string{"files.read": "Read your files", "files.write": "Change and delete your files"}
			if fakeEntry != nil {
				fakeEntry(entry)
			}
		}})
	c, key, err := e.clients.Create(context.Background(), "Files Assistant", []string{"https://files.mcp.example/"}, []string{"fake", "keyed"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.clients.SetDisplay(context.Background(), c.ID, "https://files.example/logo.png", "https://files.example/"); err != nil {
		t.Fatal(err)
	}
	return e, &mcpServer{e: e, client: c, key: key}
}

// TestPagesSayWhatHappens (issue 27): the consent page names the
// application (its logo and homepage), the provider (its logo) and each
// permission in words; the success page says who can now use which
// account and what to do next; a reused connection says which account is
// shared; every page carries the operator's brand, under a CSP whose
// img-src names exactly the logos' origins.
func TestPagesSayWhatHappens(t *testing.T) {
	t.Parallel()
	e, m := uxEnv(t, nil)
	el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"files.read", "files.write", "files.share"}})
	b := e.browser()
	u := el["url"].(string)
	consent := e.openAs(b, u, "alice")
	body := html.UnescapeString(consent.body)
	for _, want := range []string{
		"<title>Connect Demo Files · Acme Connect</title>", `<span class="wordmark">Acme Connect</span>`,
		`<img class="brand-logo" src="https://cdn.acme.example/logo.svg"`, `href="/static/brand.css"`,
		`<img src="https://files.example/logo.png"`, `<img src="https://logos.example/demo-files.svg"`,
		`href="https://files.example/"`,
		`<code>files.read</code> <span class="scope-text">Read your files</span>`,
		`<span class="scope-text">Change and delete your files</span>`,
		"<code>files.share</code> </li>", // not described: the token alone
		"A Demo Files account you choose at sign-in",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("consent page lacks %q", want)
		}
	}
	csp := consent.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "img-src 'self' https://cdn.acme.example https://files.example https://logos.example"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "style-src") || strings.Contains(csp, "unsafe") || strings.Contains(csp, "*") {
		t.Errorf("CSP widened beyond the logos: %q", csp)
	}
	if strings.Contains(body, " style=") || strings.Contains(body, "<style") || strings.Contains(body, "<script") {
		t.Error("a page carries inline style or script")
	}

	done := b.get(e.authorize(e.allow(b, u, consent)))
	text := html.UnescapeString(done.body)
	for _, want := range []string{`<strong>Files Assistant</strong> can now use your Demo Files account<strong class="nowrap"> user-1</strong>.`,
		"Go back to Files Assistant", `href="/account"`, `href="https://files.example/"`} {
		if done.status != http.StatusOK || !strings.Contains(text, want) {
			t.Errorf("success page lacks %q: %d", want, done.status)
		}
	}

	// A second application, the connection reused: which account is shared.
	other := e.newMCPServer("other", "fake")
	u2 := other.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"files.read"}})["url"].(string)
	b2 := e.browser()
	shared := html.UnescapeString(e.openAs(b2, u2, "alice").body)
	for _, want := range []string{"Your Demo Files account<strong> user-1</strong> will be shared with other.",
		"Demo Files account <strong>user-1</strong>", "No, it is already connected"} {
		if !strings.Contains(shared, want) {
			t.Errorf("consent-only page lacks %q:\n%s", want, shared)
		}
	}

	// The account page describes the permissions too.
	acct := html.UnescapeString(e.accountPage(b, "alice").body)
	if !strings.Contains(acct, `<span class="scope-text">Read your files</span>`) || !strings.Contains(acct, "Files Assistant") {
		t.Errorf("account page:\n%s", acct)
	}

	// The accent's stylesheet, same-origin.
	css := b.get(e.srv.URL + templates.BrandCSSPath)
	if css.status != http.StatusOK || !strings.Contains(css.body, "--accent: #0f7b6c") ||
		!strings.HasPrefix(css.header.Get("Content-Type"), "text/css") {
		t.Errorf("brand.css: %d %q", css.status, css.body)
	}
}

// TestUnbrandedPages: without branding, pages are connectd's own and the
// CSP is the base policy (no img-src of anyone's); a shipped monogram
// stands in for a provider's logo.
func TestUnbrandedPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("plain", "fake")
	u := m.mint("alice", map[string]any{"provider": "fake"})["url"].(string)
	page := e.openAs(e.browser(), u, "alice")
	if strings.Contains(page.body, "brand.css") || strings.Contains(page.body, "brand-logo") ||
		!strings.Contains(page.body, `<span class="wordmark">connectd</span>`) ||
		strings.Contains(page.header.Get("Content-Security-Policy"), "img-src") {
		t.Fatalf("unbranded consent page: %s\n%s", page.header.Get("Content-Security-Policy"), page.body)
	}
	if got := templates.ProviderMark("GitHub", "", "github"); got.LogoURL != "/static/providers/github.svg" {
		t.Errorf("github's mark: %+v", got)
	}
	if got := templates.ProviderMark("X", "", "nosuch"); got.LogoURL != "" {
		t.Errorf("a template without a monogram: %+v", got)
	}
}

// TestTrustDetails (issue 38 item 9): a proxy-only application's consent
// page does not say it will receive the permissions; the account page names
// the issuer's host, not its raw URL; a page that does not exist says so in
// words a user reads.
func TestTrustDetails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newProxyOnlyServer("alpha", "fake")
	u := a.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"read"}})["url"].(string)
	b := e.browser()
	consent := pageText(e.openAs(b, u, "alice").body)
	if strings.Contains(consent, "alpha will receive") || !strings.Contains(consent, "Permissions alpha may use through connectd") {
		t.Fatalf("a proxy-only application's consent page:\n%s", consent)
	}
	account := pageText(e.accountPage(b, "alice").body)
	if strings.Contains(account, "Signed in as alice "+e.idps[0].Issuer()) || !strings.Contains(account, "Signed in as alice at 127.0.0.1") {
		t.Fatalf("the account page names the issuer so:\n%s", account)
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/no-such-page", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if text := pageText(string(body)); resp.StatusCode != http.StatusNotFound || !strings.Contains(text, "There is no page at this address") ||
		strings.Contains(text, "no such resource") {
		t.Fatalf("the 404 page: %d\n%s", resp.StatusCode, text)
	}
}
