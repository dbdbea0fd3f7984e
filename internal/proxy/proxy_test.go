package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/pgtest"
	"github.com/connectd/connectd/internal/proxy"
	"github.com/connectd/connectd/internal/ratebudget"
	"github.com/connectd/connectd/internal/testkit"
)

// upstream is a provider API over real HTTP: it checks the bearer token and
// answers per path.
func upstream(t *testing.T, token *atomic.Value) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+token.Load().(string) {
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
				http.Error(w, "bad token", http.StatusUnauthorized)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("/api/echo", auth(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Set-Cookie", "session=provider-secret")
		w.Header().Set("X-Ratelimit-Remaining", "41")
		w.Header().Set("Strict-Transport-Security", "max-age=1")
		json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery,
			"header": r.Header, "body": string(b)})
	}))
	mux.HandleFunc("/api/stream", auth(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(150 * time.Millisecond)
		}
	}))
	mux.HandleFunc("/api/redirect", auth(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere.example/steal", http.StatusFound)
	}))
	mux.HandleFunc("/api/limited", auth(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	mux.HandleFunc("/api/bytes", auth(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 4096)))
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "outside the API: "+r.URL.Path, http.StatusTeapot)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// box holds an error in an atomic.Value (whose stores must share a type).
type box struct{ error }

// front is connectd's side: a handler that forwards every request below
// /p/ as call says.
func front(t *testing.T, f *proxy.Forwarder, call func(r *http.Request) *proxy.Call) (*httptest.Server, *atomic.Value) {
	t.Helper()
	var last atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := f.Forward(w, r, call(r))
		if err != nil {
			last.Store(box{err})
			w.WriteHeader(599)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &last
}

func TestForward(t *testing.T) {
	t.Parallel()
	var token, refreshTo atomic.Value
	token.Store("at-1")
	refreshTo.Store("at-2")
	up := upstream(t, &token)
	base, _ := url.Parse(up.URL + "/api")
	var refreshes atomic.Int32
	f := proxy.New(proxy.Config{MaxRequestBytes: 1 << 10, MaxResponseBytes: 2048})
	srv, last := front(t, f, func(r *http.Request) *proxy.Call {
		return &proxy.Call{Base: base, Path: strings.TrimPrefix(r.URL.Path, "/p/"), Header: "Authorization",
			Value: "Bearer at-1", Drop: []string{"X-User-Token"},
			Refresh: func(context.Context) (string, error) {
				refreshes.Add(1)
				return "Bearer " + refreshTo.Load().(string), nil
			}}
	})
	do := func(method, path string, body io.Reader, h http.Header) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, body)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	t.Run("headers both ways", func(t *testing.T) {
		resp, body := do(http.MethodPost, "/p/echo?q=1&key=abc", strings.NewReader(`{"a":1}`), http.Header{
			"Authorization": {"Bearer cks_the-clients-connectd-key"}, "X-User-Token": {"the-user-token"},
			"Cookie": {"connectd_session=x"}, "X-Forwarded-For": {"10.0.0.1"}, "Forwarded": {"for=10.0.0.1"},
			"Accept": {"application/vnd.github+json"}, "Content-Type": {"application/json"}, "X-Custom": {"kept"},
			"Connection": {"X-Hop"}, "X-Hop": {"dropped"}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		var got struct {
			Method, Path, Query, Body string
			Header                    http.Header
		}
		json.Unmarshal([]byte(body), &got)
		if got.Method != "POST" || got.Path != "/api/echo" || got.Query != "q=1&key=abc" || got.Body != `{"a":1}` {
			t.Fatalf("forwarded %+v", got)
		}
		if got.Header.Get("Authorization") != "Bearer at-1" || got.Header.Get("Accept") != "application/vnd.github+json" ||
			got.Header.Get("X-Custom") != "kept" {
			t.Fatalf("forwarded headers %v", got.Header)
		}
		for _, h := range []string{"X-User-Token", "Cookie", "X-Forwarded-For", "Forwarded", "X-Hop"} {
			if got.Header.Get(h) != "" {
				t.Errorf("%s crossed to the provider: %q", h, got.Header.Get(h))
			}
		}
		if strings.Contains(body, "cks_the-clients") || strings.Contains(body, "the-user-token") {
			t.Fatal("the caller's credentials reached the provider")
		}
		if resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("Strict-Transport-Security") != "" {
			t.Fatalf("provider headers crossed back: %v", resp.Header)
		}
		if resp.Header.Get("X-Ratelimit-Remaining") != "41" || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("kept headers missing: %v", resp.Header)
		}
	})
	t.Run("paths stay below the API base", func(t *testing.T) {
		for _, p := range []string{"../echo", "a/../../x", "./echo", "echo//x", "%2e%2e/x", "a/%2E/b", "a%5c..", "%00x", "a/%zz", "echo/..%2f..%2ftoken", "a%2F%2Fb", "x%2f."} {
			c := &proxy.Call{Base: base, Path: p}
			if _, err := c.Target(); !errors.Is(err, proxy.ErrPath) {
				t.Errorf("%q: %v", p, err)
			}
		}
		c := &proxy.Call{Base: base, Path: "projects/g%2Fp/issues"} // an escaped slash stays one
		if u, err := c.Target(); err != nil || u.EscapedPath() != "/api/projects/g%2Fp/issues" || u.Host != base.Host {
			t.Errorf("escaped slash: %v %v", u, err)
		}
	})
	t.Run("streamed", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/p/stream", nil)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		line, err := rd.ReadString('\n')
		if err != nil || line != "data: 0\n" {
			t.Fatalf("first event: %q %v", line, err)
		}
		// The first event arrived while the provider was still writing
		// (it takes 300 ms more): read the rest.
		rest, _ := io.ReadAll(rd)
		if !strings.Contains(string(rest), "data: 2") {
			t.Fatalf("rest %q", rest)
		}
	})
	t.Run("redirect answered, not followed", func(t *testing.T) {
		resp, _ := do(http.MethodGet, "/p/redirect", nil, nil)
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://elsewhere.example/steal" {
			t.Fatalf("%d %v", resp.StatusCode, resp.Header)
		}
	})
	t.Run("401: refreshed once and sent again", func(t *testing.T) {
		token.Store("at-2") // the provider no longer takes at-1
		resp, body := do(http.MethodPut, "/p/echo", strings.NewReader("again"), nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"body":"again"`) || refreshes.Load() != 1 {
			t.Fatalf("%d %s, %d refreshes", resp.StatusCode, body, refreshes.Load())
		}
		token.Store("at-never")
		refreshed := refreshes.Load()
		if resp, _ := do(http.MethodGet, "/p/echo", nil, nil); resp.StatusCode != 599 || !errors.Is(last.Load().(box).error, proxy.ErrRefused) {
			t.Fatalf("a 401 after the refresh: %d %v", resp.StatusCode, last.Load())
		}
		if refreshes.Load() != refreshed+1 {
			t.Fatal("not exactly one refresh")
		}
		token.Store("at-2")
	})
}

// TestForwardHeldByTheBudget: a provider's 429 or 503 with Retry-After
// comes back as it is, then holds that connection on every replica — two
// Forwarders, each with its own ratebudget.Store on one database, as two
// connectd replicas — without a provider call inside the window; another
// connection is not held, and the window ends. The Budget is the one owner
// of the hold: a call without one is never held.
func TestForwardHeldByTheBudget(t *testing.T) {
	t.Parallel()
	var token atomic.Value
	token.Store("at-1")
	var calls atomic.Int32
	api := upstream(t, &token)
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		switch r.URL.Path {
		case "/api/busy":
			w.Header().Set("Retry-After", "30")
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		api.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(counting.Close)
	base, _ := url.Parse(counting.URL + "/api")
	clock := testkit.NewClock(time.Now())
	dbURL := pgtest.URL(t)
	var fronts []*httptest.Server
	var lasts []*atomic.Value
	for range 2 {
		pool := pgtest.NewPool(t, dbURL)
		budgets := ratebudget.New(ratebudget.Config{Pool: pool, Now: clock.Now, Logger: slog.New(slog.DiscardHandler)})
		pgtest.Listen(t, pool, budgets.CacheSubscriber())
		srv, last := front(t, proxy.New(proxy.Config{Now: clock.Now}), func(r *http.Request) *proxy.Call {
			conn := r.URL.Query().Get("conn")
			c := &proxy.Call{Base: base, Path: strings.TrimPrefix(r.URL.Path, "/p/"), Header: "Authorization",
				Value: "Bearer at-1", Provider: "fake", App: "app1"}
			if conn != "none" {
				c.Budget = budgets.For("fake", "app1", conn, c.Path, nil)
			}
			return c
		})
		fronts, lasts = append(fronts, srv), append(lasts, last)
	}
	get := func(replica int, path string) (*http.Response, error) {
		t.Helper()
		resp, err := http.Get(fronts[replica].URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var e error
		if resp.StatusCode == 599 {
			e = lasts[replica].Load().(box).error
		}
		return resp, e
	}
	for _, tc := range []struct{ name, path, conn string }{
		{"429", "/p/limited", "cn_1"},
		{"503", "/p/busy", "cn_2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := get(0, tc.path+"?conn="+tc.conn)
			if err != nil || resp.Header.Get("Retry-After") != "30" || resp.StatusCode < 429 {
				t.Fatalf("the provider's answer: %d %v %v", resp.StatusCode, resp.Header, err)
			}
			before := calls.Load()
			for replica := range 2 {
				deadline := time.Now().Add(10 * time.Second)
				for {
					_, err := get(replica, "/p/echo?conn="+tc.conn)
					var held *proxy.HeldError
					if errors.As(err, &held) {
						if left := held.Left; left < 25*time.Second || left > 30*time.Second {
							t.Fatalf("replica %d: held for %v, want the provider's 30 s", replica, left)
						}
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("replica %d: the connection is not held (%v)", replica, err)
					}
					before = calls.Load() // a call the notice had not reached yet
					time.Sleep(10 * time.Millisecond)
				}
			}
			if n := calls.Load() - before; n != 0 {
				t.Fatalf("%d provider calls inside the window", n)
			}
			if resp, err := get(1, "/p/echo?conn=other"); resp.StatusCode != http.StatusOK {
				t.Fatalf("another connection is held: %d %v", resp.StatusCode, err)
			}
		})
	}
	if resp, err := get(1, "/p/limited?conn=none"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a call without a budget: %d %v", resp.StatusCode, err)
	}
	if resp, err := get(1, "/p/echo?conn=none"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a call without a budget is held: %d %v", resp.StatusCode, err)
	}
	clock.Advance(31 * time.Second)
	for replica := range 2 {
		if resp, err := get(replica, "/p/echo?conn=cn_1"); resp.StatusCode != http.StatusOK {
			t.Fatalf("replica %d: held after the window: %d %v", replica, resp.StatusCode, err)
		}
	}
}

func TestForwardCaps(t *testing.T) {
	t.Parallel()
	var token atomic.Value
	token.Store("at-1")
	up := upstream(t, &token)
	base, _ := url.Parse(up.URL + "/api")
	f := proxy.New(proxy.Config{MaxRequestBytes: 1 << 10, MaxResponseBytes: 2048})
	srv, last := front(t, f, func(r *http.Request) *proxy.Call {
		return &proxy.Call{Base: base, Path: strings.TrimPrefix(r.URL.Path, "/p/"), Header: "Authorization", Value: "Bearer at-1"}
	})
	resp, err := http.Post(srv.URL+"/p/echo", "text/plain", strings.NewReader(strings.Repeat("y", 2048)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 599 || !errors.Is(last.Load().(box).error, proxy.ErrTooLarge) {
		t.Fatalf("a body over the cap: %d %v", resp.StatusCode, last.Load())
	}
	resp, err = http.Get(srv.URL + "/p/bytes")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(b) > 2048+32<<10 || (resp.StatusCode == http.StatusOK && len(b) == 4096) {
		t.Fatalf("an answer over the cap arrived whole: %d bytes, %d", len(b), resp.StatusCode)
	}
}

// TestForwardFailureNamesNoQuery: a provider that cannot be reached is
// ErrUnavailable, and the error (which connectd logs) does not quote the
// call's query, where a caller may have put a key.
func TestForwardFailureNamesNoQuery(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	base, _ := url.Parse(down.URL + "/api")
	down.Close()
	f := proxy.New(proxy.Config{})
	srv, last := front(t, f, func(r *http.Request) *proxy.Call {
		return &proxy.Call{Base: base, Path: "x", Header: "Authorization", Value: "Bearer at-SECRET"}
	})
	resp, err := http.Get(srv.URL + "/p/x?api_key=SECRET-KEY")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := last.Load().(box).error
	if !errors.Is(got, proxy.ErrUnavailable) || strings.Contains(got.Error(), "SECRET") {
		t.Fatalf("%v", got)
	}
}

// TestForwardBulkhead: a provider that hangs holds at most MaxInFlight
// calls; the next one is ErrBusy at once, and another provider's calls go
// on.
func TestForwardBulkhead(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	var arrived atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-hang
	}))
	t.Cleanup(slow.Close)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	t.Cleanup(fast.Close)
	slowBase, _ := url.Parse(slow.URL)
	fastBase, _ := url.Parse(fast.URL)
	f := proxy.New(proxy.Config{MaxInFlight: 2})
	srv, last := front(t, f, func(r *http.Request) *proxy.Call {
		if strings.HasPrefix(r.URL.Path, "/p/slow") {
			return &proxy.Call{Base: slowBase, Path: "x", Header: "Authorization", Value: "Bearer a", Provider: "slow"}
		}
		return &proxy.Call{Base: fastBase, Path: "x", Header: "Authorization", Value: "Bearer a", Provider: "fast"}
	})
	t.Cleanup(func() { close(hang) }) // first of the cleanups: the held calls end before the servers close
	held := &http.Client{Timeout: 30 * time.Second}
	for range 2 {
		go held.Get(srv.URL + "/p/slow") //nolint:errcheck // held until the test ends
	}
	for deadline := time.Now().Add(5 * time.Second); arrived.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the two calls did not reach the hanging provider")
		}
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(srv.URL + "/p/slow")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 599 || !errors.Is(last.Load().(box).error, proxy.ErrBusy) {
		t.Fatalf("the third call to the hanging provider: %d %v", resp.StatusCode, last.Load())
	}
	resp, err = http.Get(srv.URL + "/p/fast")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("another provider: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestForwardBulkheadPerApp (issue 34: "bulkheads are per (organization,
// provider app)"): one organization's app holding all its places at a
// provider that hangs takes none of another app's at the same provider —
// the other organization's own app, or the deployment's shared one ("") —
// while a second call with the held app is ErrBusy.
func TestForwardBulkheadPerApp(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	var arrived atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer acme" {
			arrived.Add(1)
			<-hang
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(api.Close)
	base, _ := url.Parse(api.URL)
	f := proxy.New(proxy.Config{MaxInFlight: 2})
	srv, last := front(t, f, func(r *http.Request) *proxy.Call {
		app := strings.TrimPrefix(r.URL.Path, "/p/") // "app_acme", "app_globex", "" (the deployment's)
		token := map[string]string{"app_acme": "acme"}[app]
		return &proxy.Call{Base: base, Path: "x", Header: "Authorization", Value: "Bearer " + token, Provider: "github", App: app}
	})
	t.Cleanup(func() { close(hang) })
	held := &http.Client{Timeout: 30 * time.Second}
	for range 2 {
		go held.Get(srv.URL + "/p/app_acme") //nolint:errcheck // held until the test ends
	}
	for deadline := time.Now().Add(5 * time.Second); arrived.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("acme's two calls did not reach the hanging provider")
		}
	}
	for _, tt := range []struct {
		app  string
		want int
	}{{"app_acme", 599}, {"app_globex", http.StatusOK}, {"", http.StatusOK}} {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(srv.URL + "/p/" + tt.app)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want || tt.want == 599 && !errors.Is(last.Load().(box).error, proxy.ErrBusy) {
			t.Errorf("a call with app %q while acme's app holds its places: %d %v, want %d", tt.app, resp.StatusCode,
				last.Load(), tt.want)
		}
	}
}

// TestTargetStaysOnTheBase (issue 25): whatever path a caller sends, a
// call goes to the provider's API base — its scheme, host (a per-customer
// one included) and path prefix — or is refused: never to a host the path
// names, never above the prefix.
func TestTargetStaysOnTheBase(t *testing.T) {
	t.Parallel()
	bases := []string{"https://acme.zendesk.com/api/v2", "https://gitlab.example.com:8443/gitlab/api/v4", "https://api.github.com"}
	paths := []string{"@evil.example/x", "%40evil.example/x", "//evil.example/x", "%2F%2Fevil.example/x", ".evil.example/x",
		":443@evil.example/x", "%3A443%40evil.example", "\\evil.example/x", "%5Cevil.example", "..%2F..%2Fx", "x/..%2F..%2F..%2Fy",
		"x%2F..%2F..%2F..", "%2e%2e/x", "x/%2e%2e/%2e%2e/y", "http://evil.example/x", "https:%2F%2Fevil.example%2Fx",
		"x%00y", "x%0d%0aHost:%20evil.example", "x?y=1#z", "x%23frag", "%252e%252e/x", "\u2215evil.example", "x/./y", ""}
	for _, base := range bases {
		b, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			c := &proxy.Call{Base: b, Path: p}
			u, err := c.Target()
			if err != nil {
				if !errors.Is(err, proxy.ErrPath) {
					t.Errorf("%s + %q: %v", base, p, err)
				}
				continue
			}
			if u.Scheme != b.Scheme || u.Host != b.Host || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
				!strings.HasPrefix(u.EscapedPath(), b.EscapedPath()+"/") {
				t.Errorf("%s + %q went to %s", base, p, u)
			}
			// What the transport would send: the request line's target and Host.
			req := &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}
			if got := req.URL.Host; got != b.Host {
				t.Errorf("%s + %q: Host %q", base, p, got)
			}
			if ru := req.URL.RequestURI(); !strings.HasPrefix(ru, b.EscapedPath()+"/") || strings.Contains(ru, "..") {
				t.Errorf("%s + %q: request target %q", base, p, ru)
			}
		}
	}
}

// TestClean (issue 33): the path rule, and the one form a path is matched
// and sent in.
func TestClean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"repos/octo/hello/issues", "repos/octo/hello/issues"},
		{"fil%65s", "files"},
		{"a%2fb/c", "a%2Fb/c"},
		{"projects/group%2Fsub%2fproj/issues", "projects/group%2Fsub%2Fproj/issues"},
		{"x%7e%41%2d", "x~A-"},
		{"a%20b", "a%20b"},
		{"users/%40me", "users/%40me"},
		{"v1.2/a..b/.hidden/x.", "v1.2/a..b/.hidden/x."},
		{"sheets/A1:B2,C3/'x'(y)*+=!$&@", "sheets/A1:B2,C3/'x'(y)*+=!$&@"},
		{"100%25", "100%25"},
	} {
		if got, err := proxy.Clean(tc.in); err != nil || got != tc.want {
			t.Errorf("Clean(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "/x", "x/", "x//y", ".", "..", "x/./y", "x/../y", "%2e", "%2E%2e", ".%2E", "x/%2e%2e/y",
		"..;", "x/..;/y", ".;", "x;y", "x/y;jsessionid=1", "x%3by", "x%3By", "%2e%2e%3b", "a%2F..%2Fb", "a%2f%2fb", "a%2F",
		"%2Fa", "a%2F.%2Fb", "a%5Cb", "a\\b", "a%00b", "a%0d%0ab", "a%7fb", "a%zzb", "a%2", "a%", "x?y", "x#y", "x y",
		"a%252e%252e", "a%252Fb", "a%255cb", "a%253bb", "a%2500", "\u2215x", "x[1]"} {
		if got, err := proxy.Clean(bad); !errors.Is(err, proxy.ErrPath) {
			t.Errorf("Clean(%q) = %q, %v; want ErrPath", bad, got, err)
		}
	}
}

// TestCheck (issue 33): the methods forwarded, and the overrides refused.
func TestCheck(t *testing.T) {
	t.Parallel()
	req := func(method, target string, h http.Header) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		for k, v := range h {
			r.Header[k] = v
		}
		return r
	}
	for _, m := range proxy.Methods {
		if err := proxy.Check(req(m, "/x?method=artist.getinfo&methodical=1", http.Header{"X-Custom": {"1"}})); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
	for _, m := range []string{"TRACE", "TRACK", "CONNECT", "OPTIONS", "PROPFIND", "get", "Post", "X"} {
		if err := proxy.Check(req(m, "/x", nil)); !errors.Is(err, proxy.ErrMethod) {
			t.Errorf("%s: %v", m, err)
		}
	}
	for _, h := range []string{"X-HTTP-Method-Override", "x-http-method-override", "X-Method-Override", "X-HTTP-Method",
		"X-Original-Method", "X-Forwarded-Method", "X-Original-URL", "X-Original-Uri", "X-Rewrite-URL", "X-Override-URL",
		"X-Envoy-Original-Path", "Access-Control-Request-Method",
		// CGI-style servers read "_" as "-": HTTP_X_ORIGINAL_URL either way.
		"X_Original_URL", "X_original_url", "X_Rewrite_URL", "X-Original_Url", "X_Override_URL",
		"X_Envoy_Original_Path", "X_HTTP_Method_Override"} {
		if err := proxy.Check(req("GET", "/x", http.Header{h: {"DELETE"}})); !errors.Is(err, proxy.ErrOverride) {
			t.Errorf("header %s: %v", h, err)
		}
	}
	for _, q := range []string{"_method=DELETE", "a=1&_method=PUT", "a=1;_method=PUT", "%5Fmethod=DELETE", "_METHOD=x",
		"__method=x", "$method=x", "x-http-method-override=DELETE", "X-HTTP-Method=PUT", "http_method_override=1", "_method"} {
		if err := proxy.Check(req("POST", "/x?"+q, nil)); !errors.Is(err, proxy.ErrOverride) {
			t.Errorf("query %s: %v", q, err)
		}
	}
}

// TestForwardRefusesFormOverrides: a form body's _method is refused before
// the call; one of unknown length cannot be read first and is refused too.
func TestForwardRefusesFormOverrides(t *testing.T) {
	t.Parallel()
	var token atomic.Value
	token.Store("t0")
	api := upstream(t, &token)
	base, _ := url.Parse(api.URL + "/api")
	f := proxy.New(proxy.Config{})
	srv, last := front(t, f, func(r *http.Request) *proxy.Call {
		return &proxy.Call{Base: base, Path: "echo", Header: "Authorization", Value: "Bearer t0"}
	})
	post := func(body io.Reader, ct string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/p/echo", body)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	form := "application/x-www-form-urlencoded; charset=utf-8"
	mp := `multipart/form-data; boundary="b0"`
	part := func(disposition, value string) string {
		return "--b0\r\nContent-Disposition: " + disposition + "\r\n\r\n" + value + "\r\n"
	}
	plainMultipart := part(`form-data; name="title"`, "hi") + part(`form-data; name="file"; filename="_method.txt"`,
		"_method=DELETE") + "--b0--\r\n"
	for _, tc := range []struct{ name, body, ct string }{
		{"a plain form", "a=1&b=2", form},
		{"JSON (not read)", `{"_method":"DELETE"}`, "application/json"},
		{"no Content-Type", "a=1&methodical=1", ""},
		{"a plain multipart", plainMultipart, mp},
	} {
		if st := post(strings.NewReader(tc.body), tc.ct); st != http.StatusOK {
			t.Errorf("%s: %d %v", tc.name, st, last.Load())
		}
	}
	for _, tc := range []struct {
		name string
		body io.Reader
		ct   string
		want error
	}{
		{"form _method", strings.NewReader("a=1&_method=DELETE"), form, proxy.ErrOverride},
		{"form %5Fmethod after ;", strings.NewReader("a=1;%5Fmethod=DELETE"), form, proxy.ErrOverride},
		{"chunked form", io.MultiReader(strings.NewReader("a=1")), form, proxy.ErrTooLarge},
		// Rack reads a body without a Content-Type as a form.
		{"no Content-Type _method", strings.NewReader("title=hi&_method=DELETE"), "", proxy.ErrOverride},
		{"no Content-Type, chunked", io.MultiReader(strings.NewReader("a=1")), "", proxy.ErrTooLarge},
		// Rack, and PHP's $_POST (Laravel, Symfony), read multipart fields.
		{"multipart _method", strings.NewReader(part(`form-data; name="title"`, "hi") +
			part(`form-data; name="_method"`, "DELETE") + "--b0--\r\n"), mp, proxy.ErrOverride},
		{"multipart _METHOD unquoted", strings.NewReader(part(`form-data; name=_METHOD`, "DELETE") + "--b0--\r\n"),
			"multipart/form-data; boundary=b0", proxy.ErrOverride},
		{"multipart X-HTTP-Method-Override in an RFC 2231 name", strings.NewReader(
			part(`form-data; name*=UTF-8''X-HTTP-Method-Override`, "DELETE") + "--b0--\r\n"), mp, proxy.ErrOverride},
		{"multipart _method as an attachment", strings.NewReader(part(`attachment; name="_method"`, "PUT") +
			"--b0--\r\n"), mp, proxy.ErrOverride},
		{"multipart without a boundary", strings.NewReader(part(`form-data; name="a"`, "1") + "--b0--\r\n"),
			"multipart/form-data", proxy.ErrOverride},
		{"multipart, a part without a Content-Disposition", strings.NewReader("--b0\r\nX: y\r\n\r\nz\r\n--b0--\r\n"),
			mp, proxy.ErrOverride},
		{"multipart without its closing boundary", strings.NewReader(part(`form-data; name="a"`, "1")), mp,
			proxy.ErrOverride},
		{"chunked multipart", io.MultiReader(strings.NewReader(plainMultipart)), mp, proxy.ErrTooLarge},
	} {
		if st := post(tc.body, tc.ct); st != 599 || !errors.Is(last.Load().(box).error, tc.want) {
			t.Errorf("%s: %d %v, want %v", tc.name, st, last.Load(), tc.want)
		}
	}
}

// TestForwardDropsUnderscoreHeaders: a header dropped by name or family is
// dropped in its "_" spelling too (CGI-style servers read X_Forwarded_For
// as X-Forwarded-For); other headers with "_" cross.
func TestForwardDropsUnderscoreHeaders(t *testing.T) {
	t.Parallel()
	var token atomic.Value
	token.Store("t0")
	api := upstream(t, &token)
	base, _ := url.Parse(api.URL + "/api")
	srv, last := front(t, proxy.New(proxy.Config{}), func(r *http.Request) *proxy.Call {
		return &proxy.Call{Base: base, Path: "echo", Header: "Authorization", Value: "Bearer t0",
			Drop: []string{"X-User-Token", "DPoP"}}
	})
	dropped := []string{"X_User_Token", "Dpop", "X_Forwarded_For", "X_forwarded_host", "X-Forwarded_Proto", "Cf_Connecting_Ip", "X_Real_IP",
		"True_Client_IP", "Client_Ip", "Fastly_Client_IP", "X_Envoy_External_Address", "X_Amzn_Trace_Id",
		"Connectd_Account", "Proxy_Authorization", "X_Request_Id", "X_Remote_Addr"}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/p/echo", nil)
	for _, k := range dropped {
		req.Header[k] = []string{"203.0.113.7"}
	}
	req.Header["X_Custom"] = []string{"kept"}
	resp, err := http.DefaultTransport.RoundTrip(req) // the header names as written
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Header http.Header }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v %v", resp.StatusCode, err, last.Load())
	}
	for k, v := range got.Header {
		for _, d := range dropped {
			if strings.EqualFold(k, d) {
				t.Errorf("%s reached the provider as %s: %q", d, k, v)
			}
		}
	}
	if got.Header.Get("X_custom") != "kept" {
		t.Errorf("X_Custom did not cross: %v", got.Header)
	}
}

// TestForwardDeadline (issue 35: "a hanging provider API holds every
// proxied caller for the full 30 s"): a provider that accepts calls and
// never answers gets each caller ErrTimeout at the answer's deadline — the
// Forwarder's, or the caller's shorter one — with its place in the
// bulkhead given back, while another provider's calls pass meanwhile; a
// provider that answers in time streams past the deadline.
func TestForwardDeadline(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	var arrived atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		if r.URL.Path == "/late-body" { // headers at once, the body after the deadline
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			time.Sleep(400 * time.Millisecond)
			w.Write([]byte("late but fine"))
			return
		}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	t.Cleanup(fast.Close)
	t.Cleanup(func() { close(hang) })
	slowBase, _ := url.Parse(slow.URL)
	fastBase, _ := url.Parse(fast.URL)
	f := proxy.New(proxy.Config{HeaderTimeout: 300 * time.Millisecond, MaxInFlight: 1})
	srv, last := front(t, f, func(r *http.Request) *proxy.Call {
		c := &proxy.Call{Base: slowBase, Path: strings.TrimPrefix(r.URL.Path, "/p/"), Header: "Authorization",
			Value: "Bearer a", Provider: "slow"}
		if r.URL.Path == "/p/fast" {
			c.Base, c.Provider = fastBase, "fast"
		}
		if v := r.Header.Get("Wait"); v != "" {
			c.HeaderTimeout, _ = time.ParseDuration(v)
		}
		return c
	})
	get := func(path, wait string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if wait != "" {
			req.Header.Set("Wait", wait)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e error
		if resp.StatusCode == 599 {
			e = last.Load().(box).error
		}
		return resp.StatusCode, string(b), e
	}
	// The hanging provider, with the Forwarder's deadline and with a
	// caller's shorter one (a longer one does not extend it), while the
	// other provider answers: its calls pass during the wait.
	done := make(chan error, 3)
	for _, wait := range []string{"", "50ms", "1h"} {
		go func() {
			_, _, err := get("/p/hang", wait)
			done <- err
		}()
		for deadline := time.Now().Add(5 * time.Second); arrived.Load() == 0; time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the call did not reach the hanging provider")
			}
		}
		if code, body, _ := get("/p/fast", ""); code != http.StatusOK || body != "ok" {
			t.Errorf("the other provider while one hangs: %d %q", code, body)
		}
		if err := <-done; !errors.Is(err, proxy.ErrTimeout) {
			t.Errorf("the hanging provider, caller's deadline %q: %v, want ErrTimeout", wait, err)
		}
		arrived.Store(0)
	}
	// The place in the bulkhead (one) is free again, and an answer whose
	// headers came in time streams to its end past the deadline.
	if code, body, err := get("/p/late-body", ""); code != http.StatusOK || body != "late but fine" {
		t.Errorf("an answer whose body comes after the deadline: %d %q %v", code, body, err)
	}
	if _, err := proxy.ParseTimeout("5s"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "5", "-1s", "0s", "soon", "2h"} {
		if _, err := proxy.ParseTimeout(bad); !errors.Is(err, proxy.ErrBadTimeout) {
			t.Errorf("ParseTimeout(%q): %v", bad, err)
		}
	}
}

// TestForwardDeadlineStreamedBody: with a streamed request body the
// answer's deadline counts from the last piece the provider took: an upload
// longer than the deadline that keeps going passes, a provider that stops
// taking the body is ErrTimeout (not the whole call's 5 minutes).
func TestForwardDeadlineStreamedBody(t *testing.T) {
	t.Parallel()
	stalled := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stall" {
			<-stalled // never reads the body, never answers (until the test ends)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n)
	}))
	t.Cleanup(api.Close)
	t.Cleanup(func() { close(stalled) }) // before api.Close
	base, _ := url.Parse(api.URL)
	f := proxy.New(proxy.Config{HeaderTimeout: 300 * time.Millisecond, MaxRequestBytes: 256 << 20})
	srv, last := front(t, f, func(r *http.Request) *proxy.Call {
		return &proxy.Call{Base: base, Path: strings.TrimPrefix(r.URL.Path, "/p/"), Header: "Authorization", Value: "Bearer a"}
	})
	post := func(path string, pieces int, gap time.Duration) (int, string) {
		pr, pw := io.Pipe()
		go func() {
			piece := make([]byte, 1<<20)
			for range pieces {
				if _, err := pw.Write(piece); err != nil {
					return
				}
				time.Sleep(gap)
			}
			pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, pr) // unknown length: streamed
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("/p/upload", 8, 100*time.Millisecond); code != http.StatusOK || body != strconv.Itoa(8<<20) {
		t.Errorf("an upload that goes on past the deadline: %d %q", code, body)
	}
	if code, _ := post("/p/stall", 128, 0); code != 599 || !errors.Is(last.Load().(box).error, proxy.ErrTimeout) {
		t.Errorf("a provider that stops taking the body: %d %v, want ErrTimeout", code, last.Load())
	}
}
