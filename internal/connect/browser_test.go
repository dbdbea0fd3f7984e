package connect_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/connectd/connectd/internal/browsertest"
)

// The real-browser tests drive Debian's Chromium (headless, through chromedp)
// through connectd as users do, and check what only a browser enforces:
// cookie attributes, CSP (form-action on the consent redirect, no inline
// script), frame-ancestors, the Referer a third party receives, and that the
// pages lay out at a phone's and a desktop's width. Screenshots of every page
// go to test-output/screenshots/ (gitignored).
//
// The parties live on different hosts, as in production, so that cookies are
// not shared by accident (cookies ignore ports): connectd and the IdP on
// 127.0.0.1, the provider's authorize endpoint on 127.0.0.2 and the
// attacker's pages on 127.0.0.3. (Not [::1]: CSP source expressions cannot
// name an IPv6 literal, so a provider there could not be allowed as a form
// target.)

// elsewhere is a TLS server on host, a loopback address other than
// connectd's 127.0.0.1: its own cookies, its own site.
func elsewhere(t *testing.T, host string, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("the browser tests need the loopback address %s: %v", host, err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// seenRequest is what a third party received from the browser.
type seenRequest struct {
	path, referer, cookie, site string
}

// providerFront is the provider's authorize endpoint as browsers reach it: it
// records what the browser sends and relays to the fake provider, whose
// authorize endpoint approves at once.
type providerFront struct {
	mu   sync.Mutex
	seen []seenRequest
	srv  *httptest.Server
	fake func() (string, *http.Client) // the fake's authorize URL and client, once it exists
}

func newProviderFront(t *testing.T) *providerFront {
	p := &providerFront{}
	p.srv = elsewhere(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, seenRequest{r.URL.Path, r.Header.Get("Referer"), r.Header.Get("Cookie"), r.Header.Get("Sec-Fetch-Site")})
		p.mu.Unlock()
		authorize, client := p.fake()
		c := *client
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := c.Get(authorize + "?" + r.URL.RawQuery)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if loc := resp.Header.Get("Location"); loc != "" {
			w.Header().Set("Location", loc)
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	return p
}

func (p *providerFront) requests() []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seenRequest(nil), p.seen...)
}

// attackerSite serves pages of another origin (on 127.0.0.3: another site):
// one that frames a URL, one without any CSP, and forms whose CSP allows only
// some redirect targets.
func attackerSite(t *testing.T) *httptest.Server { return elsewhereAttacker(t, "127.0.0.3") }

func elsewhereAttacker(t *testing.T, host string) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /frame", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><html lang="en"><title>win a prize</title><h1>Click the button</h1>
<iframe id="victim" name="victim" src="%s" width="600" height="400"></iframe><iframe id="own" name="own" src="/plain" width="200" height="100"></iframe>`,
			html.EscapeString(r.URL.Query().Get("src")))
	})
	mux.HandleFunc("GET /plain", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!DOCTYPE html><html lang="en"><title>plain</title><h1>No CSP here</h1>`)
	})
	mux.HandleFunc("GET /form", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "form-action 'self' "+r.URL.Query().Get("allow"))
		fmt.Fprintf(w, `<!DOCTYPE html><html lang="en"><title>form</title><form method="post" action="/submit?to=%s">
<button id="go" type="submit">Go</button></form>`, url.QueryEscape(r.URL.Query().Get("to")))
	})
	mux.HandleFunc("POST /submit", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusSeeOther)
	})
	return elsewhere(t, host, mux)
}

// TestRealBrowser runs the connect flow and its attacks in Chromium.
func TestRealBrowser(t *testing.T) {
	t.Parallel()
	front := newProviderFront(t)
	e := newEnv(t, envOptions{fakeEntry: func(entry map[string]any) {
		entry["authorize_url"] = front.srv.URL + "/authorize"
		entry["display_name"] = "Example Cloud"
	}})
	front.fake = func() (string, *http.Client) { return e.fake.AuthorizeURL(), e.fake.Client() }
	client, key, err := e.clients.Create(context.Background(), "Acme Files", []string{"https://files.mcp.example/"}, []string{"fake", "keyed"})
	if err != nil {
		t.Fatal(err)
	}
	m := &mcpServer{e: e, client: client, key: key}
	evil := attackerSite(t)
	browser := browsertest.New(t)
	connectd, _ := url.Parse(e.srv.URL)

	// login follows a connect URL through the dev IdP's picker as user.
	login := func(t *testing.T, ctx context.Context, connectURL, user string, shot string) {
		t.Helper()
		browsertest.Do(t, ctx, chromedp.Navigate(connectURL), chromedp.WaitVisible(chromedp.CSS(`button[value="`+user+`"]`)))
		if shot != "" {
			browsertest.Shoot(t, ctx, shot)
		}
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[value="`+user+`"]`)))
	}
	status := func(id string) string {
		_, out := m.call(http.MethodGet, "/v1/elicitations/"+id, "alice", nil)
		return fmt.Sprint(out["status"])
	}

	t.Run("alice connects: login, consent, provider, done", func(t *testing.T) {
		ctx := browsertest.Tab(t, browser)
		el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"files.read", "files.write"}})
		login(t, ctx, el["url"].(string), "alice", "01-idp-picker")
		browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`button[value="allow"]`)))
		text := browsertest.Eval[string](t, ctx, "document.body.innerText")
		for _, want := range []string{"Acme Files", "Example Cloud", "files.read", strings.TrimPrefix(front.srv.URL, "https://")} {
			if !strings.Contains(text, want) {
				t.Errorf("consent page does not show %q:\n%s", want, text)
			}
		}
		browsertest.Shoot(t, ctx, "02-consent")

		// The cookies as the browser stored them.
		cookies, err := chromedp.Run(ctx, func(ctx context.Context, tt *chromedp.Target) ([]*network.Cookie, error) {
			r, err := cdp.Call(ctx, tt, network.GetCookies, network.GetCookiesParams{URLs: []string{e.srv.URL + "/"}})
			return r.Cookies, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(cookies) == 0 {
			t.Fatal("no cookies stored for connectd")
		}
		for _, c := range cookies {
			if !strings.HasPrefix(c.Name, "__Host-") || !c.Secure || !c.HTTPOnly || c.SameSite != network.CookieSameSiteLax ||
				c.Path != "/" || c.Domain != connectd.Hostname() {
				t.Errorf("cookie %s: secure %v httponly %v samesite %q path %q domain %q", c.Name, c.Secure, c.HTTPOnly, c.SameSite, c.Path, c.Domain)
			}
		}
		if js := browsertest.Eval[string](t, ctx, "document.cookie"); js != "" {
			t.Errorf("script can read cookies: %q", js)
		}

		// Keyboard: Tab reaches the Allow button and shows where focus is.
		browsertest.Do(t, ctx, chromedp.Evaluate[chromedp.Void]("document.activeElement && document.activeElement.blur()", chromedp.EvalIgnoreExceptions))
		for i := 0; i < 6 && browsertest.Eval[string](t, ctx, "document.activeElement.value || ''") != "allow"; i++ {
			browsertest.Do(t, ctx, chromedp.KeyEvent(kb.Tab))
		}
		if browsertest.Eval[string](t, ctx, "document.activeElement.value || ''") != "allow" ||
			browsertest.Eval[string](t, ctx, "getComputedStyle(document.activeElement).outlineStyle") == "none" {
			t.Error("the Allow button cannot be reached with Tab, or shows no focus ring")
		}

		// Allow: POST, 303 to the provider (allowed by this page's form-action
		// only), its approval, the callback, the success page.
		before := len(front.requests())
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[value="allow"]`)), chromedp.WaitVisible(chromedp.CSS(".outcome.success")))
		browsertest.Shoot(t, ctx, "03-connected")
		if got := status(el["elicitation_id"].(string)); got != "completed" {
			t.Fatalf("status %s", got)
		}
		seen := front.requests()[before:]
		if len(seen) != 1 {
			t.Fatalf("the provider saw %d requests", len(seen))
		}
		if seen[0].referer != "" || seen[0].cookie != "" {
			t.Errorf("the provider received Referer %q and Cookie %q", seen[0].referer, seen[0].cookie)
		}
		if st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != 200 || !e.fake.Valid(out["access_token"].(string)) {
			t.Fatalf("token: %d %v", st, out)
		}

		// The account page, from the link on the "Connected" page: the
		// connection, Acme Files allowed to use it; Remove access takes it
		// back without JavaScript (a form post and a redirect).
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`a[href="/account"]`)), chromedp.WaitVisible(chromedp.CSS("section.connection")))
		text = browsertest.Eval[string](t, ctx, "document.body.innerText")
		for _, want := range []string{"Connected accounts", "Example Cloud", "Acme Files", "files.read", "Working"} {
			if !strings.Contains(text, want) {
				t.Errorf("account page does not show %q:\n%s", want, text)
			}
		}
		browsertest.Shoot(t, ctx, "12-account")
		// It asks first (issue 38 item 8), then acts.
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`.server-head button`)),
			chromedp.WaitVisible(chromedp.CSS(`form[action="/account/withdraw"] button.danger`)))
		browsertest.Shoot(t, ctx, "12b-remove-access-confirm")
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`form[action="/account/withdraw"] button.danger`)),
			chromedp.WaitVisible(chromedp.CSS(".notice")))
		browsertest.Shoot(t, ctx, "13-account-access-removed")
		if st, out := m.call(http.MethodGet, "/v1/connections/fake/token", "alice", nil); st != http.StatusForbidden {
			t.Fatalf("token after Remove access: %d %v", st, out)
		}

		// The signed-in session page, then sign out.
		browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/session"), chromedp.WaitVisible(chromedp.CSS("form button")))
		browsertest.Shoot(t, ctx, "04-session")
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS("form button")))
		browsertest.WaitUntil(t, ctx, browsertest.OnPage("signed out"))
		browsertest.Shoot(t, ctx, "05-signed-out")
	})

	t.Run("an API key, typed into connectd's own form", func(t *testing.T) {
		ctx := browsertest.Tab(t, browser)
		el := m.mint("alice", map[string]any{"provider": "keyed"})
		login(t, ctx, el["url"].(string), "alice", "")
		browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`button[value="allow"]`)))
		browsertest.Shoot(t, ctx, "06-consent-api-key")
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[value="allow"]`)), chromedp.WaitVisible(chromedp.CSS(`#api_key`)))
		if typ := browsertest.Eval[string](t, ctx, "document.querySelector('#api_key').type"); typ != "password" {
			t.Errorf("the key input is %q, not masked", typ)
		}
		browsertest.Do(t, ctx, chromedp.SendKeys(chromedp.CSS(`#api_key`), "sk-wrong"), chromedp.Click(chromedp.CSS(`button[value="save"]`)),
			chromedp.WaitVisible(chromedp.CSS(`.error`)))
		browsertest.Shoot(t, ctx, "07-api-key-form-error")
		browsertest.Do(t, ctx, chromedp.SendKeys(chromedp.CSS(`#api_key`), goodAPIKey), chromedp.Click(chromedp.CSS(`button[value="save"]`)),
			chromedp.WaitVisible(chromedp.CSS(".outcome.success")))
		if strings.Contains(browsertest.Eval[string](t, ctx, "document.documentElement.outerHTML"), goodAPIKey) {
			t.Error("the page shows the API key")
		}
	})

	t.Run("deny", func(t *testing.T) {
		ctx := browsertest.Tab(t, browser)
		before := len(front.requests())
		el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"admin"}})
		login(t, ctx, el["url"].(string), "alice", "")
		browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`button[value="deny"]`)),
			chromedp.Click(chromedp.CSS(`button[value="deny"]`)), chromedp.WaitVisible(chromedp.CSS(".outcome.declined")))
		browsertest.Shoot(t, ctx, "08-declined")
		if got := status(el["elicitation_id"].(string)); got != "declined" {
			t.Fatalf("status %s", got)
		}
		if n := len(front.requests()) - before; n != 0 {
			t.Fatalf("the provider was contacted after Deny (%d requests)", n)
		}
	})

	t.Run("bob opens alice's link", func(t *testing.T) {
		ctx := browsertest.Tab(t, browser)
		el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"files.read"}})
		login(t, ctx, el["url"].(string), "bob", "")
		browsertest.WaitUntil(t, ctx, browsertest.OnPage("another account"))
		text := browsertest.Eval[string](t, ctx, "document.body.innerText")
		if !strings.Contains(text, "created for another account") || strings.Contains(text, "alice") ||
			browsertest.Eval[int](t, ctx, `document.querySelectorAll('button[value="allow"]').length`) != 0 {
			t.Fatalf("bob sees:\n%s", text)
		}
		browsertest.Shoot(t, ctx, "09-another-account")
		if got := status(el["elicitation_id"].(string)); got != "pending" {
			t.Fatalf("status %s", got)
		}
		// "Sign out and continue" (issue 27): back at the same link, signed
		// out, so the IdP's picker asks again; as alice, the consent page,
		// which offers "Not you?" too.
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`form[action$="/switch"] button`)),
			chromedp.WaitVisible(chromedp.CSS(`a.button.primary`)))
		browsertest.Shoot(t, ctx, "09a-signed-out")
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`a.button.primary`)),
			chromedp.WaitVisible(chromedp.CSS(`button[value="alice"]`)))
		browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[value="alice"]`)),
			chromedp.WaitVisible(chromedp.CSS(`button[value="allow"]`)))
		if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('form[action$="/switch"] button').length`); n != 1 {
			t.Fatalf("the consent page offers %d Not-you forms", n)
		}
		browsertest.Shoot(t, ctx, "09b-consent-after-switch")
	})

	t.Run("error pages", func(t *testing.T) {
		ctx := browsertest.Tab(t, browser)
		browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/c/"+strings.Repeat("A", 32)))
		browsertest.WaitUntil(t, ctx, browsertest.OnPage("not valid"))
		browsertest.Shoot(t, ctx, "10-unknown-link")
		browsertest.Do(t, ctx, chromedp.Navigate(e.srv.URL+"/session"))
		browsertest.WaitUntil(t, ctx, browsertest.OnPage("Not signed in"))
		browsertest.Shoot(t, ctx, "11-not-signed-in")
	})

	t.Run("the consent page does not render in another origin's frame", func(t *testing.T) {
		// The attacker is on a sibling origin of the same site (127.0.0.1,
		// another port): the strongest case, since SameSite=Lax cookies go
		// along in its frames and connectd answers with the consent page
		// itself. (A cross-site frame gets no session cookie, so only a login.)
		sibling := elsewhereAttacker(t, "127.0.0.1")
		ctx := browsertest.Tab(t, browser)
		el := m.mint("alice", map[string]any{"provider": "fake", "scopes": []string{"framed"}})
		login(t, ctx, el["url"].(string), "alice", "")
		browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`button[value="allow"]`))) // signed in: the page would render
		if _, err := chromedp.Run(ctx, func(ctx context.Context, tt *chromedp.Target) (cdp.Empty, error) {
			return cdp.Call(ctx, tt, log.Enable, cdp.Empty{})
		}); err != nil {
			t.Fatal(err)
		}
		entries := chromedp.Events(ctx, log.EntryAdded)
		browsertest.Do(t, ctx, chromedp.Navigate(sibling.URL+"/frame?src="+url.QueryEscape(el["url"].(string))))
		// The browser says why, in the framing page's console ...
		for ev, err := range entries {
			if err != nil {
				t.Fatalf("no CSP report in the console: %v", err)
			}
			if strings.Contains(ev.Entry.Text, "frame-ancestors 'none'") && strings.Contains(ev.Entry.Text, e.srv.URL) {
				break
			}
		}
		// ... and the frame holds Chromium's error page, not the consent page;
		// the control frame of the attacker's own origin rendered. A frame of
		// the same site is in the page's frame tree; one of another site runs
		// in its own process, as a target of its own.
		framed := 0
		var tree *page.FrameTree
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			tree, err = chromedp.Run(ctx, func(ctx context.Context, tt *chromedp.Target) (*page.FrameTree, error) {
				r, err := cdp.Call(ctx, tt, page.GetFrameTree, cdp.Empty{})
				return r.FrameTree, err
			})
			if err != nil {
				t.Fatal(err)
			}
			settled := true // no frame still on its initial empty document
			for _, c := range tree.ChildFrames {
				settled = settled && c.Frame.URL != "" && c.Frame.URL != "about:blank"
			}
			if settled || time.Now().After(deadline) {
				break
			}
		}
		for _, c := range tree.ChildFrames {
			if c.Frame.Name == "victim" {
				framed++
				if !strings.HasPrefix(c.Frame.URL, "chrome-error:") {
					t.Fatalf("the framed consent page rendered: %s", c.Frame.URL)
				}
			}
		}
		targets, err := cdp.Call(ctx, chromedp.FromContext(ctx).Browser, target.GetTargets, target.GetTargetsParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range targets.TargetInfos {
			if ti.Type != "iframe" || !strings.HasPrefix(ti.URL, e.srv.URL) {
				continue
			}
			framed++
			fctx, fcancel := chromedp.NewContext(ctx, chromedp.WithTargetID(ti.TargetID))
			inside, err := chromedp.Run(fctx, chromedp.Evaluate[string]("location.href + ' ' + document.body.innerText"))
			fcancel()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(inside, "chrome-error:") || strings.Contains(inside, "Allow") {
				t.Fatalf("the framed consent page rendered: %.200s", inside)
			}
		}
		if framed != 1 {
			t.Fatalf("%d frames of connectd found", framed)
		}
		if browsertest.Eval[string](t, ctx, `document.querySelector("#own").contentDocument.querySelector("h1").textContent`) != "No CSP here" {
			t.Fatal("control: the attacker's own frame did not render")
		}
		if got := status(el["elicitation_id"].(string)); got != "pending" {
			t.Fatalf("status %s", got)
		}
	})

	t.Run("injected inline script does not run", func(t *testing.T) {
		ctx := browsertest.Tab(t, browser)
		// A client whose name is markup, and a script injected into the DOM.
		xc, xkey, err := e.clients.Create(context.Background(), `<script>window.__xss=1</script><img src=x onerror="window.__xss=1">`,
			[]string{"https://xss.mcp.example/"}, []string{"fake"})
		if err != nil {
			t.Fatal(err)
		}
		xm := &mcpServer{e: e, client: xc, key: xkey}
		el := xm.mint("alice", map[string]any{"provider": "fake"})
		login(t, ctx, el["url"].(string), "alice", "")
		browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`button[value="allow"]`)))
		if !strings.Contains(browsertest.Eval[string](t, ctx, "document.body.innerText"), "<script>window.__xss=1</script>") {
			t.Error("the client name is not shown as text")
		}
		const inject = `(() => {
			window.__ran = false; window.__violations = [];
			document.addEventListener("securitypolicyviolation", e => window.__violations.push(e.effectiveDirective));
			const s = document.createElement("script"); s.textContent = "window.__ran = true"; document.body.appendChild(s);
			const d = document.createElement("div"); d.setAttribute("onclick", "window.__ran = true"); document.body.appendChild(d); d.click();
			return true; })()`
		browsertest.Eval[bool](t, ctx, inject)
		// Both insertions are reported as CSP violations (events queued
		// after the fact), and neither ran.
		browsertest.WaitUntil(t, ctx, "window.__violations.length >= 2")
		if browsertest.Eval[bool](t, ctx, "window.__ran === true || window.__xss === 1") {
			t.Fatal("injected script ran on connectd's page")
		}
		// The same injection runs on a page without connectd's CSP.
		browsertest.Do(t, ctx, chromedp.Navigate(evil.URL+"/plain"))
		browsertest.Eval[bool](t, ctx, inject)
		if !browsertest.Eval[bool](t, ctx, "window.__ran === true") {
			t.Fatal("control: the injection does not run even without CSP")
		}
	})

	t.Run("Chromium holds a form's redirect to form-action", func(t *testing.T) {
		// Why the consent page names the provider's origin in form-action:
		// without it, the redirect after a form post is blocked.
		ctx := browsertest.Tab(t, browser)
		target := e.srv.URL + "/healthz"
		if _, err := chromedp.Run(ctx, func(ctx context.Context, tt *chromedp.Target) (cdp.Empty, error) {
			return cdp.Call(ctx, tt, log.Enable, cdp.Empty{})
		}); err != nil {
			t.Fatal(err)
		}
		entries := chromedp.Events(ctx, log.EntryAdded)
		browsertest.Do(t, ctx, chromedp.Navigate(evil.URL+"/form?to="+url.QueryEscape(target)), chromedp.Click(chromedp.CSS("#go")))
		for ev, err := range entries {
			if err != nil {
				t.Fatalf("Chromium did not report the blocked redirect: %v", err)
			}
			if strings.Contains(ev.Entry.Text, "form-action") {
				break
			}
		}
		if loc := browsertest.Eval[string](t, ctx, "location.href"); strings.HasPrefix(loc, target) {
			t.Fatalf("redirect to an origin form-action does not list was followed: %s", loc)
		}
		browsertest.Do(t, ctx, chromedp.Navigate(evil.URL+"/form?to="+url.QueryEscape(target)+"&allow="+url.QueryEscape(e.srv.URL)),
			chromedp.Click(chromedp.CSS("#go")))
		browsertest.WaitUntil(t, ctx, "location.href.startsWith("+fmt.Sprintf("%q", target)+")")
	})
}
