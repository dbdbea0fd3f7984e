package web_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/connectd/connectd/internal/web"
)

func TestIsText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"", true},
		{"cn_abc", true},
		{"Grüße, 世界 🙂", true},
		{"alice\u202Egnp.exe", true}, // right-to-left override: a format character, printable
		{"a b", true},
		{"../", true},
		{"\x00", false},
		{"a\x00b", false},
		{"\x01", false},
		{"\t", false},
		{"\n", false},
		{"\x1f", false},
		{"\x7f", false},
		{"\u0085", false}, // C1
		{"\u009f", false},
		{"\xff", false},
		{"\xc3\x28", false},     // truncated
		{"\xc0\xaf", false},     // overlong "/"
		{"\xed\xb0\x80", false}, // a lone surrogate
		{"\xef\xbf\xbd", true},  // U+FFFD itself is text
	} {
		if got := web.IsText(tc.s); got != tc.want {
			t.Errorf("IsText(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

// TestTextOnly: behind web.Public, a path or query that is not text is
// refused with 400 invalid_request before the handler, as the JSON envelope
// on an API route and the error page for a browser on a page, with the
// security headers; text, printable Unicode included, reaches the handler.
func TestTextOnly(t *testing.T) {
	t.Parallel()
	discard := slog.New(slog.DiscardHandler)
	reached := func(w http.ResponseWriter, r *http.Request) error {
		_, err := io.WriteString(w, "reached "+r.PathValue("id"))
		return err
	}
	srv := publicServer(t, web.RateLimits{},
		web.APIRoute("GET /v1/things/{id}", web.ClassAPI, discard, reached),
		web.PageRoute("GET /c/{id}", web.ClassBrowser, discard, reached),
		web.Route{Pattern: "/", Kind: web.KindPage, Class: web.ClassBrowser, Handler: web.Fallback(discard)})
	html := map[string]string{"Accept": "text/html"}
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		status     int
		page       bool
	}{
		{"API, NUL", "/v1/things/%00", nil, 400, false},
		{"API, NUL, browser", "/v1/things/a%00", html, 400, false},
		{"API, invalid UTF-8", "/v1/things/%ff", nil, 400, false},
		{"API, overlong", "/v1/things/%c0%af", nil, 400, false},
		{"API, control", "/v1/things/%01", nil, 400, false},
		{"API, DEL", "/v1/things/%7f", nil, 400, false},
		{"API, C1", "/v1/things/%c2%85", nil, 400, false},
		{"API, query value", "/v1/things/a?x=%00", nil, 400, false},
		{"API, query key", "/v1/things/a?%ff=1", nil, 400, false},
		{"API, second query value", "/v1/things/a?x=1&x=%0a", nil, 400, false},
		{"page, NUL", "/c/%00", html, 400, true},
		{"page, query", "/c/a?state=%ed%b0%80", html, 400, true},
		{"page, JSON client", "/c/%ff", nil, 400, false},
		{"unrouted", "/nowhere/%00", html, 400, true},
		{"escaped slash", "/v1/things/a%2Fb", nil, 200, false},
		{"right-to-left override", "/v1/things/a%e2%80%aeb", nil, 200, false},
		{"query text", "/c/a?q=Gr%C3%BC%C3%9Fe+%F0%9F%99%82", html, 200, false},
		// A pair that does not decode is dropped, as r.URL.Query() drops it.
		{"undecodable pair", "/v1/things/a?x=%zz", nil, 200, false},
	} {
		a := send(t, http.MethodGet, srv.URL+tc.path, tc.hdr)
		if a.status != tc.status {
			t.Errorf("%s: %s: %d %s, want %d", tc.name, tc.path, a.status, a.body, tc.status)
			continue
		}
		if a.status == http.StatusOK {
			if !strings.HasPrefix(a.body, "reached ") {
				t.Errorf("%s: %s", tc.name, a.body)
			}
			continue
		}
		if a.header.Get("X-Frame-Options") != "DENY" || a.header.Get(web.RequestIDHeader) == "" {
			t.Errorf("%s: no security headers or request id: %v", tc.name, a.header)
		}
		isPage := strings.HasPrefix(a.header.Get("Content-Type"), "text/html")
		switch {
		case isPage != tc.page:
			t.Errorf("%s: Content-Type %q, want a page: %v", tc.name, a.header.Get("Content-Type"), tc.page)
		case tc.page && !strings.Contains(a.body, "the request path or query is not valid UTF-8 text"):
			t.Errorf("%s: page %s", tc.name, a.body)
		case !tc.page && a.code() != "invalid_request":
			t.Errorf("%s: %s, want invalid_request", tc.name, a.body)
		}
	}
}

// TestTextOnlyAlone: the internal listener's chain (request ids, then
// TextOnly) refuses as the public one does.
func TestTextOnlyAlone(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {})
	srv := httptest.NewServer(web.Chain(mux, web.RequestIDs, web.TextOnly(slog.New(slog.DiscardHandler))))
	t.Cleanup(srv.Close)
	if a := send(t, http.MethodGet, srv.URL+"/metrics?x=%00", nil); a.status != 400 || a.code() != "invalid_request" {
		t.Errorf("%d %s", a.status, a.body)
	}
	if a := send(t, http.MethodGet, srv.URL+"/metrics?x=1", nil); a.status != 200 {
		t.Errorf("%d %s", a.status, a.body)
	}
}

// TestStaticImpossibleNames: a file name no file can have is a 404, not the
// 500 http.FileServerFS gives it, even without TextOnly in front.
func TestStaticImpossibleNames(t *testing.T) {
	t.Parallel()
	h := http.StripPrefix("/static/", web.Static(fstest.MapFS{"style.css": {Data: []byte("body{}")}}))
	for _, p := range []string{"/static/%ff", "/static/%c0%af", "/static/a%00", "/static/%01", "/static/nope.css"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s: %d", p, rec.Code)
		}
	}
}

// TestRoutes: a Mux lists its routes by pattern, and so does the handler
// Public wraps it in.
func TestRoutes(t *testing.T) {
	t.Parallel()
	h := http.NotFoundHandler()
	mux := web.NewMux()
	for _, p := range []string{"GET /b", "/", "POST /a/{id}"} {
		mux.Handle(web.Route{Pattern: p, Kind: web.KindPage, Class: web.ClassBrowser, Handler: h})
	}
	patterns := func(rs []web.Route) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Pattern)
		}
		return out
	}
	want := []string{"/", "GET /b", "POST /a/{id}"}
	if got := patterns(mux.Routes()); !slices.Equal(got, want) {
		t.Errorf("Routes() = %q, want %q", got, want)
	}
	ph, err := web.Public(mux, web.PublicConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	lister, ok := ph.(interface{ Routes() []web.Route })
	if !ok {
		t.Fatal("web.Public's handler has no Routes method")
	}
	if got := patterns(lister.Routes()); !slices.Equal(got, want) {
		t.Errorf("Public(...).Routes() = %q, want %q", got, want)
	}
}
