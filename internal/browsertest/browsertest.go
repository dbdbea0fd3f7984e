// Package browsertest drives Debian's Chromium (headless, through chromedp)
// for the real-browser tests of the packages that serve pages (connect,
// admin): start it, open tabs with their own cookie jars, run steps, wait for
// a page, and check and screenshot a page at a phone's and a desktop's width
// (test-output/screenshots/, gitignored). Tests only: it imports testing.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath finds the browser. It never skips: without Chromium the test
// fails and says how to get one (make test installs it).
func ChromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CONNECTD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: the real-browser tests need one. Run `make test` (scripts/ensure-chromium " +
		"installs Debian's chromium when run as root), or `sudo apt-get install -y chromium`, or set CONNECTD_CHROMIUM.")
	return ""
}

// New starts one headless Chromium for the test, stopped (and its
// profile removed) when the test ends.
func New(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(ChromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.IgnoreCertErrors, // httptest's certificate
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		// The closed network refuses Chromium's own connections; these keep
		// it from trying.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
	)
	bctx, bcancel := chromedp.NewContext(ctx)
	t.Cleanup(func() { bcancel(); cancel() })
	if err := chromedp.Do(bctx); err != nil { // start it now
		t.Fatalf("start Chromium: %v", err)
	}
	return bctx
}

// Tab opens a tab in a fresh browser context: its own cookie jar, like
// another person's browser.
func Tab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(tcancel)
	return tctx
}

func Do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
		t.Fatalf("%v (at %s: %.300s)", err, loc, body)
	}
}

// WaitUntil waits until the JavaScript condition holds on the page the tab
// shows, across navigations (whose torn-down documents fail to evaluate).
func WaitUntil(t *testing.T, ctx context.Context, cond string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ectx, cancel := context.WithTimeout(ctx, time.Second)
		ok, err := chromedp.Run(ectx, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("location.href + ': ' + (document.body ? document.body.innerText : '')"))
			t.Fatalf("waited in vain for %s (%v) at %.300s", cond, err, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// OnPage is a WaitUntil condition: the page's text contains s.
func OnPage(s string) string {
	return "document.body && document.body.innerText.includes(" + strconvQuote(s) + ")"
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

func Eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %q: %v", js, err)
	}
	return v
}

// ScreenshotDir is test-output/screenshots at the repository root.
func ScreenshotDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
	out := filepath.Join(dir, "test-output", "screenshots")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// PageCheckJS is what every connectd page must satisfy in the browser, at a
// phone's and a desktop's width: no horizontal scrolling, a language, one
// heading, every input labelled, every button named, readable contrast; and a
// screenshot of each width.
const PageCheckJS = `(() => {
	const problems = [];
	const de = document.documentElement;
	if (de.scrollWidth > window.innerWidth) problems.push("horizontal overflow: " + de.scrollWidth + " > " + window.innerWidth);
	if (!de.lang) problems.push("no lang attribute");
	if (document.querySelectorAll("h1").length !== 1) problems.push("not exactly one h1");
	for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
		if (!el.labels || el.labels.length === 0) problems.push("unlabelled " + el.outerHTML.slice(0, 80));
	}
	for (const el of document.querySelectorAll("button, a")) {
		if (!el.textContent.trim() && !el.getAttribute("aria-label")) problems.push("unnamed " + el.outerHTML.slice(0, 80));
	}
	const rgb = s => (s.match(/[\d.]+/g) || []).map(Number);
	const lum = c => { const v = c.slice(0, 3).map(x => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
		return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
	const bg = el => { for (let e = el; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c.length === 3 || c[3] > 0) return c; } return [255, 255, 255]; };
	for (const el of document.querySelectorAll("h1, h2, p, li, label, button, a, code, strong, dt, dd, .host")) {
		if (!el.textContent.trim() || el.offsetParent === null) continue;
		const fg = rgb(getComputedStyle(el).color), b = bg(el);
		const l1 = lum(fg), l2 = lum(b), ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
		if (ratio < 4.5) problems.push("contrast " + ratio.toFixed(2) + " of " + el.tagName + " '" + el.textContent.trim().slice(0, 30) + "'");
	}
	return problems;
})()`

// Shoot checks the current page at 390 px and 1280 px and saves both
// screenshots as NAME-390.png and NAME-1280.png.
func Shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := ScreenshotDir(t)
	for _, w := range []int64{390, 1280} {
		Do(t, ctx, chromedp.EmulateViewport(w, 844))
		// The new width is applied asynchronously: check once it is laid out.
		WaitUntil(t, ctx, fmt.Sprintf("window.innerWidth === %d && document.documentElement.clientWidth <= %d", w, w))
		if problems := Eval[[]string](t, ctx, PageCheckJS); len(problems) > 0 {
			t.Errorf("%s at %d px: %v", name, w, problems)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.png", name, w)), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Do(t, ctx, chromedp.EmulateViewport(1280, 844))
}
