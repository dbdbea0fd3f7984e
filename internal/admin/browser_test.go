package admin_test

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/connectd/connectd/internal/browsertest"
)

// TestAdminPagesInABrowser walks an admin through the pages in Chromium —
// sign in at the IdP, the connections list, one connection with its audit
// trail, the revocation and its confirmation, the events and the clients —
// checking each page at a phone's and a desktop's width (no horizontal
// scrolling, one heading, labelled inputs, named buttons, contrast) and
// keeping the screenshots (test-output/screenshots/2x-admin-*).
func TestAdminPagesInABrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("files", "fake")
	id := e.connectFully(m, "bob", "read")
	ctx := browsertest.Tab(t, browsertest.New(t))

	browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/admin/connections"), chromedp.WaitVisible(chromedp.CSS("a.button")))
	browsertest.Shoot(t, ctx, "20-admin-sign-in")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS("a.button")), chromedp.WaitVisible(chromedp.CSS(`button[value="alice"]`)))
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[value="alice"]`)))
	browsertest.WaitUntil(t, ctx, `document.querySelector('a[href="/admin/connections/`+id+`"]')`)
	browsertest.Shoot(t, ctx, "21-admin-connections")

	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`a[href="/admin/connections/`+id+`"]`)))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("consent.granted"))
	browsertest.Shoot(t, ctx, "22-admin-connection")

	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`a[href="/admin/connections/`+id+`/revoke"]`)),
		chromedp.WaitVisible(chromedp.CSS("button.danger")))
	browsertest.Shoot(t, ctx, "23-admin-revoke-confirm")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS("button.danger")))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("are deleted"))
	browsertest.Shoot(t, ctx, "24-admin-revoked")
	if st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "bob", nil); st != http.StatusNotFound {
		t.Fatalf("token after the revocation: %d %v", st, out)
	}

	browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/admin/events"))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("Recent events"))
	browsertest.Shoot(t, ctx, "25-admin-events")
	browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/admin/clients"))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("files.mcp.example"))
	browsertest.Shoot(t, ctx, "26-admin-clients")
}
