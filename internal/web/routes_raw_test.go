package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/connectd/connectd/internal/web"
)

// TestRawRoute (issue 33): a Raw route gets every request under its
// prefix as it arrived — a path ServeMux would clean and redirect
// ("..", ".", "//") included — and Lookup names it for the middleware
// (its kind and budget); other routes keep ServeMux's cleaning.
func TestRawRoute(t *testing.T) {
	t.Parallel()
	m := web.NewMux()
	var got string
	m.Handle(web.Route{Pattern: "/v1/raw/{rest...}", Kind: web.KindAPI, Class: web.ClassAPI, Raw: true,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.URL.EscapedPath() })})
	m.Handle(web.Route{Pattern: "GET /v1/other/{rest...}", Kind: web.KindAPI, Class: web.ClassAPI,
		Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("a path to clean reached the handler") })})
	for _, p := range []string{"/v1/raw/a/../../admin", "/v1/raw/./x", "/v1/raw//x", "/v1/raw/", "/v1/raw/a%2F..%2Fb"} {
		got = ""
		req := httptest.NewRequest(http.MethodTrace, "/", nil)
		d, err := url.PathUnescape(p)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Path, req.URL.RawPath = d, p
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, req)
		if got != p || rec.Code != http.StatusOK {
			t.Errorf("%s: the handler saw %q (%d)", p, got, rec.Code)
		}
		if rt := m.Lookup(req); rt.Pattern != "/v1/raw/{rest...}" || rt.Kind != web.KindAPI {
			t.Errorf("%s: Lookup = %+v", p, rt)
		}
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/other/a/../b", nil)
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, req)
	if rec.Code/100 != 3 {
		t.Errorf("a route that is not raw: %d, want ServeMux's redirect", rec.Code)
	}
}
