package connect_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/connectd/connectd/internal/browsertest"
	"github.com/connectd/connectd/web/templates"
)

// logoSVG is a 48×48 image, served by the logo hosts of the test.
const logoSVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 48 48" width="48" height="48"><rect width="48" height="48" rx="10" fill="%s"/></svg>`

// TestRealBrowserPages (issue 27) walks the pages an end user sees, with
// the operator's branding, a provider whose scopes are described and an
// MCP server with a logo and homepage, in Chromium at 390 and 1280 px
// (screenshots ux-*): the logos load under the CSP (which still blocks an
// image from any other origin), the accent colour applies, permissions
// read in words, the success page says who can use which account and what
// next, a reused connection says which account, and Disconnect asks first
// and then disconnects.
func TestRealBrowserPages(t *testing.T) {
	t.Parallel()
	logos := elsewhere(t, "127.0.0.4", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		colour := map[string]string{"/brand.svg": "#0f7b6c", "/client.svg": "#7c3aed", "/provider.svg": "#ea580c"}[r.URL.Path]
		if colour == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
		fmt.Fprintf(w, logoSVG, colour)
	}))
	other := elsewhere(t, "127.0.0.5", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		fmt.Fprintf(w, logoSVG, "#000000")
	}))
	front := newProviderFront(t)
	e := newEnv(t, envOptions{
		brand: templates.Brand{Name: "Acme Connect", LogoURL: logos.URL + "/brand.svg", Accent: "#0f7b6c"},
		fakeEntry: func(entry map[string]any) {
			entry["authorize_url"] = front.srv.URL + "/authorize"
			entry["display_name"] = "Demo Files"
			entry["logo_url"] = logos.URL + "/provider.svg"
			entry["scope_descriptions"] = map[string]string{"files.read": "Read your files",
				"files.write": "Create, change and delete your files"}
		}})
	front.fake = func() (string, *http.Client) { return e.fake.AuthorizeURL(), e.fake.Client() }
	ctx0 := context.Background()
	client, key, err := e.clients.Create(ctx0, "Files Assistant", []string{"https://files.mcp.example/"}, []string{"fake"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.clients.SetDisplay(ctx0, client.ID, logos.URL+"/client.svg", "https://files.example/"); err != nil {
		t.Fatal(err)
	}
	m := &mcpServer{e: e, client: client, key: key}
	browser := browsertest.New(t)

	login := func(t *testing.T, ctx context.Context, connectURL, user string) {
		t.Helper()
		browsertest.Do(t, ctx, chromedp.Navigate(connectURL), chromedp.WaitVisible(chromedp.CSS(`button[value="`+user+`"]`)),
			chromedp.Click(chromedp.CSS(`button[value="`+user+`"]`)))
	}
	text := func(t *testing.T, ctx context.Context) string {
		t.Helper()
		return browsertest.Eval[string](t, ctx, "document.body.innerText")
	}
	wants := func(t *testing.T, page, got string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s does not show %q:\n%s", page, w, got)
			}
		}
	}
	// loaded: every <img> on the page has loaded (the CSP let it).
	loaded := func(t *testing.T, ctx context.Context, page string, atLeast int) {
		t.Helper()
		browsertest.WaitUntil(t, ctx, "[...document.images].every(i => i.complete)")
		n := browsertest.Eval[int](t, ctx, "[...document.images].filter(i => i.naturalWidth > 0).length")
		all := browsertest.Eval[int](t, ctx, "document.images.length")
		if n != all || n < atLeast {
			t.Errorf("%s: %d of %d images loaded, want all and at least %d", page, n, all, atLeast)
		}
	}
	accent := func(t *testing.T, ctx context.Context, page, selector string) {
		t.Helper()
		if got := browsertest.Eval[string](t, ctx, "getComputedStyle(document.querySelector("+fmt.Sprintf("%q", selector)+")).backgroundColor"); got != "rgb(15, 123, 108)" {
			t.Errorf("%s: %s's background is %s, not the brand's accent", page, selector, got)
		}
	}

	t.Run("home and error pages carry the brand", func(t *testing.T) {
		ctx := browsertest.Tab(t, browser)
		browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("a.button.primary")))
		loaded(t, ctx, "home", 1)
		wants(t, "home", text(t, ctx), "Acme Connect")
		accent(t, ctx, "home", "a.button.primary")
		browsertest.Shoot(t, ctx, "ux-00-home")
		browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/c/"+strings.Repeat("A", 32)))
		browsertest.WaitUntil(t, ctx, browsertest.OnPage("not valid"))
		loaded(t, ctx, "error page", 1)
		browsertest.Shoot(t, ctx, "ux-09-error")
	})

	t.Run("consent, success, account, disconnect", func(t *testing.T) {
		ctx := browsertest.Tab(t, browser)
		el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"files.read", "files.write", "files.share"}})
		login(t, ctx, el["url"].(string), "alice")
		browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`button[value="allow"]`)))
		loaded(t, ctx, "consent page", 3) // brand, client, provider
		wants(t, "consent page", text(t, ctx), "Acme Connect", "Files Assistant", "files.example", "Demo Files",
			"files.read", "Read your files", "Create, change and delete your files", "files.share")
		if got := browsertest.Eval[string](t, ctx, `document.querySelector(".scopes li:last-child").innerText.trim()`); got != "files.share" {
			t.Errorf("an undescribed scope reads %q, want the token alone", got)
		}
		accent(t, ctx, "consent page", `button[value="allow"]`)
		// The CSP names the logos' origins only: an image from another
		// origin is blocked (and reported).
		browsertest.Eval[bool](t, ctx, `(() => { window.__blocked = [];
			document.addEventListener("securitypolicyviolation", e => window.__blocked.push(e.effectiveDirective));
			const i = new Image(); i.id = "stranger"; i.alt = ""; i.src = `+fmt.Sprintf("%q", other.URL+"/x.svg")+`; document.body.appendChild(i); return true; })()`)
		browsertest.WaitUntil(t, ctx, `window.__blocked.includes("img-src")`)
		if browsertest.Eval[int](t, ctx, `document.querySelector("#stranger").naturalWidth`) != 0 {
			t.Error("an image of an origin the CSP does not name loaded")
		}
		browsertest.Eval[bool](t, ctx, `(document.querySelector("#stranger").remove(), true)`)
		browsertest.Shoot(t, ctx, "ux-01-consent")

		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[value="allow"]`)), chromedp.WaitVisible(chromedp.CSS(".outcome.success")))
		loaded(t, ctx, "success page", 3)
		wants(t, "success page", text(t, ctx), "Files Assistant can now use your Demo Files account user-1.",
			"Go back to Files Assistant", "Open Files Assistant", "Your connected accounts")
		browsertest.Shoot(t, ctx, "ux-02-connected")

		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`.outcome .actions a[href="/account"]`)), chromedp.WaitVisible(chromedp.CSS("section.connection")))
		loaded(t, ctx, "account page", 2)
		wants(t, "account page", text(t, ctx), "Demo Files", "user-1", "Read your files", "Files Assistant")
		browsertest.Shoot(t, ctx, "ux-03-account")

		// Disconnect asks first: the confirmation names the account and who
		// loses it; Cancel changes nothing.
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`div.disconnect a.button`)), chromedp.WaitVisible(chromedp.CSS(`button.danger`)))
		wants(t, "confirmation", text(t, ctx), "Disconnect your Demo Files account user-1?", "These applications lose access", "Files Assistant")
		browsertest.Shoot(t, ctx, "ux-05-disconnect-confirm")
		if st, _ := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusOK {
			t.Fatalf("the confirmation page disconnected already: token %d", st)
		}
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`.actions a.button[href="/account"]`)), chromedp.WaitVisible(chromedp.CSS("section.connection")))
		if st, _ := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusOK {
			t.Fatalf("Cancel disconnected: token %d", st)
		}
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`div.disconnect a.button`)), chromedp.WaitVisible(chromedp.CSS(`button.danger`)),
			chromedp.Click(chromedp.CSS(`button.danger`)), chromedp.WaitVisible(chromedp.CSS(".notice")))
		wants(t, "account page after disconnecting", text(t, ctx), "Disconnected", "You have not connected any account")
		browsertest.Shoot(t, ctx, "ux-06-disconnected")
		if st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusNotFound {
			t.Fatalf("token after Disconnect: %d %v", st, out)
		}
	})

	t.Run("a reused connection says which account", func(t *testing.T) {
		ctx := browsertest.Tab(t, browser)
		first := m.mint("bob", map[string]any{"provider": "fake", "scopes": []string{"files.read"}})
		login(t, ctx, first["url"].(string), "bob")
		browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`button[value="allow"]`)),
			chromedp.Click(chromedp.CSS(`button[value="allow"]`)), chromedp.WaitVisible(chromedp.CSS(".outcome.success")))
		second, skey, err := e.clients.Create(ctx0, "Notes Helper", []string{"https://notes.mcp.example/"}, []string{"fake"})
		if err != nil {
			t.Fatal(err)
		}
		sm := &mcpServer{e: e, client: second, key: skey}
		el := sm.mint("bob", map[string]any{"provider": "fake", "scopes": []string{"files.read"}})
		browsertest.Do(t, ctx, chromedp.Navigate(el["url"].(string)), chromedp.WaitVisible(chromedp.CSS(`button[value="allow"]`)))
		got := text(t, ctx)
		wants(t, "consent-only page", got, "will be shared with Notes Helper", "No, it is already connected", "Read your files")
		if !strings.Contains(got, "Your Demo Files account ") || strings.Contains(got, "connection Demo Files account") {
			t.Errorf("the shared account is not named:\n%s", got)
		}
		loaded(t, ctx, "consent-only page", 2)
		browsertest.Shoot(t, ctx, "ux-04-consent-shared")
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[value="allow"]`)), chromedp.WaitVisible(chromedp.CSS(".outcome.success")))
		wants(t, "success page", text(t, ctx), "Notes Helper can now use your Demo Files account")
		browsertest.Shoot(t, ctx, "ux-07-connected-shared")
	})

	// Dark mode (issue 38): the pages follow prefers-color-scheme, and every
	// check of the pages — contrast included — holds in it too.
	t.Run("dark mode", func(t *testing.T) {
		ctx := browsertest.Tab(t, browser)
		browsertest.Do(t, ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
			return err
		}))
		login(t, ctx, e.srv.URL+"/account", "alice") // this tab's own sign-in
		browsertest.WaitUntil(t, ctx, `location.pathname === "/account" && document.readyState === "complete"`)
		for _, pg := range []struct{ path, wait, name string }{
			{"/", "a.button.primary", "ux-20-dark-home"},
			{"/account", "main.card h1", "ux-21-dark-account"},
			{"/c/" + strings.Repeat("A", 32), ".outcome", "ux-22-dark-error"},
			{strings.TrimPrefix(m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"files.read", "files.share"}})["url"].(string), e.srv.URL),
				`button[value="allow"]`, "ux-23-dark-consent"},
		} {
			browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+pg.path), chromedp.WaitVisible(chromedp.CSS(pg.wait)))
			if bg := browsertest.Eval[string](t, ctx, "getComputedStyle(document.body).backgroundColor"); bg != "rgb(15, 20, 27)" {
				t.Errorf("%s in dark mode: the page's background is %s", pg.path, bg)
			}
			browsertest.Shoot(t, ctx, pg.name) // checks contrast at both widths
		}
	})

	// A logo that does not load (issue 38 item 9) shows the initial on the
	// accent, not the broken-image icon: the avatar's top middle, away from
	// the glyph, is the brand's accent colour, where a missing image left
	// the white of the logo frame.
	t.Run("a logo that does not load", func(t *testing.T) {
		broken, bkey, err := e.clients.Create(ctx0, "Broken Logo", []string{"https://broken.mcp.example/"}, []string{"fake"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.clients.SetDisplay(ctx0, broken.ID, logos.URL+"/gone.svg", ""); err != nil {
			t.Fatal(err)
		}
		bm := &mcpServer{e: e, client: broken, key: bkey}
		ctx := browsertest.Tab(t, browser)
		el := bm.mint("bob", map[string]any{"provider": "fake", "scopes": []string{"files.read"}})
		login(t, ctx, el["url"].(string), "bob")
		browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`button[value="allow"]`)))
		browsertest.WaitUntil(t, ctx, "[...document.images].every(i => i.complete)")
		if n := browsertest.Eval[int](t, ctx, `document.querySelector(".parties .avatar img").naturalWidth`); n != 0 {
			t.Fatalf("the broken logo loaded (%d px)", n)
		}
		shot, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(".parties .avatar")))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatal(err)
		}
		b := img.Bounds()
		r, g, bl, _ := img.At(b.Min.X+b.Dx()/2, b.Min.Y+b.Dy()/8).RGBA()
		if d := absDiff(r>>8, 15) + absDiff(g>>8, 123) + absDiff(bl>>8, 108); d > 30 {
			t.Errorf("the broken logo's avatar is rgb(%d, %d, %d) at its top, not the accent's rgb(15, 123, 108)", r>>8, g>>8, bl>>8)
		}
		browsertest.Shoot(t, ctx, "ux-10-broken-logo")
	})

	// Korean (issue 38): the footer's 한국어 switches the pages, and the
	// whole flow — consent, success, the account page — reads in Korean,
	// laid out at both widths with every check of the pages holding; the
	// footer's English switches back. (Last: the choice is the browser's.)
	t.Run("in Korean", func(t *testing.T) {
		ctx := browsertest.Tab(t, browser)
		browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`a[hreflang="ko"]`)),
			chromedp.Click(chromedp.CSS(`a[hreflang="ko"]`)))
		browsertest.WaitUntil(t, ctx, `document.documentElement.lang === "ko" && location.pathname === "/"`)
		browsertest.Shoot(t, ctx, "ux-30-ko-home")
		el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"files.read", "files.share"}})
		login(t, ctx, el["url"].(string), "alice")
		browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`button[value="allow"]`)))
		browsertest.WaitUntil(t, ctx, `document.documentElement.lang === "ko"`)
		wants(t, "Korean consent page", text(t, ctx), "연결 요청", "계정을 사용하려고 합니다", "허용", "거부", "Files Assistant", "Read your files")
		browsertest.Shoot(t, ctx, "ux-31-ko-consent")
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[value="allow"]`)), chromedp.WaitVisible(chromedp.CSS(".outcome.success")))
		wants(t, "Korean success page", text(t, ctx), "연결되었습니다", "다음 단계", "Files Assistant 열기")
		browsertest.Shoot(t, ctx, "ux-32-ko-connected")
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`.outcome .actions a[href="/account"]`)), chromedp.WaitVisible(chromedp.CSS("section.connection")))
		browsertest.WaitUntil(t, ctx, `document.documentElement.lang === "ko"`)
		wants(t, "Korean account page", text(t, ctx), "연결된 계정", "Demo Files", "Files Assistant")
		browsertest.Shoot(t, ctx, "ux-33-ko-account")
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`a[hreflang="en"]`)))
		browsertest.WaitUntil(t, ctx, `document.documentElement.lang === "en" && location.pathname === "/account"`)
	})
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
