package connect_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/connectd/connectd/internal/browsertest"
)

// TestRealBrowserApproval (issue 36): in Chromium, alice approves one POST
// on the approval page — which lays out at 390 and 1280 px and runs
// nothing of the body it shows, however hostile — and the retried POST
// reaches the fake API exactly once.
func TestRealBrowserApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := e.newMCPServer("issues", "fake")
	e.askingClient(a)
	body := `{"title":"<img src=x onerror=\"window.__ran=1\">","body":"<script>window.__ran=2</script>` +
		strings.Repeat("very long text ", 40) + `","labels":["bug"]}`
	ap := a.asked(e.srv.URL, http.MethodPost, "echo/issues", "alice", body)
	echoes := e.fake.Counts().Echo

	browser := browsertest.New(t)
	ctx := browsertest.Tab(t, browser)
	browsertest.Do(t, ctx, chromedp.Navigate(ap["url"].(string)), chromedp.WaitVisible(chromedp.CSS(`button[value="alice"]`)),
		chromedp.Click(chromedp.CSS(`button[value="alice"]`)), chromedp.WaitVisible(chromedp.CSS(`button[value="once"]`)))
	got := browsertest.Eval[string](t, ctx, "document.body.innerText")
	for _, want := range []string{"issues asks to open issues in your repositories", "POST", "/api/echo/issues",
		`<img src=x onerror=`, `<script>window.__ran=2</script>`, "more characters", "Allow this request",
		"Allow such requests for 1 hour", "Deny", "Signed in as alice"} {
		if !strings.Contains(got, want) {
			t.Errorf("the approval page does not show %q:\n%s", want, got)
		}
	}
	if browsertest.Eval[bool](t, ctx, `window.__ran !== undefined || document.querySelector("main img, main script") !== null`) {
		t.Fatal("the body shown on the page became markup")
	}
	browsertest.Shoot(t, ctx, "ux-20-approval")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[value="once"]`)), chromedp.WaitVisible(chromedp.CSS(".outcome.success")))
	browsertest.Shoot(t, ctx, "ux-21-approved")

	if st, doc := a.call(http.MethodGet, "/v1/elicitations/"+ap["elicitation_id"].(string), "alice", nil); st != http.StatusOK ||
		doc["status"] != "completed" {
		t.Fatalf("status: %d %v", st, doc)
	}
	if st, raw := a.proxiedTo(e.srv.URL, http.MethodPost, "echo/issues", "alice", body); st != http.StatusOK {
		t.Fatalf("the approved POST: %d %s", st, raw)
	}
	a.asked(e.srv.URL, http.MethodPost, "echo/issues", "alice", body) // once is once
	if n := e.fake.Counts().Echo - echoes; n != 1 {
		t.Fatalf("the approved POST reached the fake API %d times", n)
	}
}
