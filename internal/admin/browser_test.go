package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/browsertest"
)

// TestAdminPagesInABrowser walks an admin through the pages in Chromium —
// sign in at the IdP, the connections list, one connection with its audit
// trail, the revocation and its confirmation, the events and the clients,
// an MCP server's webhooks, adding an endpoint (its secret shown once), an
// endpoint's deliveries and one delivery with its attempts —
// checking each page at a phone's and a desktop's width (no horizontal
// scrolling, one heading, labelled inputs, named buttons, contrast) and
// keeping the screenshots (test-output/screenshots/2x-admin-*).
func TestAdminPagesInABrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.runJobs()
	m := e.newMCPServer("files", "fake")
	id := e.connectFully(m, "bob", "read")
	// An endpoint before the revocation, so the revocation is delivered.
	rc := newReceiver(t)
	ep, _, err := e.store.CreateWebhook(context.Background(), m.client.ID, rc.srv.URL+"/hooks", nil, admin.Actor{Name: "cli:test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := browsertest.Tab(t, browsertest.New(t))

	// Anonymous: straight to the admin sign-in at the identity provider.
	browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/admin/connections"), chromedp.WaitVisible(chromedp.CSS(`button[value="alice"]`)))
	browsertest.Shoot(t, ctx, "20-admin-sign-in")
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
	// Every kind, chosen in the form; the audit table at both widths: words
	// and ids whole at 1280 px, and scrolling in its box (not cut off) at 390.
	browsertest.Do(t, ctx, chromedp.SetValue(chromedp.CSS("#f-show"), "all"), chromedp.Click(chromedp.CSS("form.filters button")))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("All events"))
	browsertest.Shoot(t, ctx, "25-admin-events-all")
	checkAuditTable(t, ctx)
	browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/admin/connections/cn_nope"))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("Not found"))
	browsertest.Shoot(t, ctx, "25-admin-error")
	browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/admin/clients"))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("files.mcp.example"))
	browsertest.Shoot(t, ctx, "26-admin-clients")

	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`a[href="/admin/clients/`+m.client.ID+`"]`)))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("Add an endpoint"))
	browsertest.Shoot(t, ctx, "27-admin-client-webhooks")
	browsertest.Do(t, ctx, chromedp.SendKeys(chromedp.CSS("#wh-url"), rc.srv.URL+"/revocations"),
		chromedp.Click(chromedp.CSS(`input[value="connection.revoked"]`)),
		chromedp.Click(chromedp.CSS("button.primary")))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("shown only this once"))
	browsertest.Shoot(t, ctx, "28-admin-webhook-created")

	msgID := rc.wait(t, 1)[0].header.Get("webhook-id")
	eventually(t, "the revocation delivered", func() bool {
		d, err := e.server.Webhooks().Delivery(context.Background(), msgID)
		return err == nil && d.Status == "delivered"
	})
	browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/admin/webhooks/"+ep.ID))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("connection.revoked"))
	browsertest.Shoot(t, ctx, "29-admin-webhook-deliveries")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`a[href="/admin/deliveries/`+msgID+`"]`)))
	browsertest.WaitUntil(t, ctx, browsertest.OnPage("Redeliver"))
	browsertest.Shoot(t, ctx, "30-admin-webhook-delivery")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS("button.primary")))
	rc.wait(t, 2)
}

// checkAuditTable checks the events page's audit table at 1280 px and 390
// px: no id or kind is broken across lines, no date squeezed to a column
// of characters, and a table wider than its box scrolls inside it (at 390
// px it is), so nothing is cut off.
func checkAuditTable(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, w := range []int64{1280, 390} {
		browsertest.Do(t, ctx, chromedp.EmulateViewport(w, 844))
		browsertest.WaitUntil(t, ctx, fmt.Sprintf("window.innerWidth === %d", w))
		problems := browsertest.Eval[[]string](t, ctx, `(() => {
			const out = [];
			const box = document.querySelector(".scroll:has(table.events)");
			if (!box) return ["no audit table"];
			const table = box.querySelector("table");
			if (table.scrollWidth > box.clientWidth + 1 && getComputedStyle(box).overflowX !== "auto") out.push("the table is cut off");
			if (table.getBoundingClientRect().width > box.clientWidth + 1 && box.scrollWidth <= box.clientWidth) out.push("no scrolling");
			for (const c of table.querySelectorAll("td code")) {
				if (c.getClientRects().length > 1) out.push("id or kind broken: " + c.textContent);
			}
			for (const td of table.querySelectorAll("td.when")) {
				if (td.getBoundingClientRect().width < 60) out.push("date squeezed: " + td.textContent);
			}
			return out;
		})()`)
		if len(problems) > 0 {
			t.Errorf("audit table at %d px: %v", w, problems)
		}
	}
	browsertest.Do(t, ctx, chromedp.EmulateViewport(1280, 844))
}
